"""The start/stop contract: ServiceGroup starts in order, stops in reverse, stops idempotently, rolls back
a failed start; CallbackService runs its stop once."""

from __future__ import annotations

import pytest

from monitor.daemon.service import CallbackService, Service, ServiceGroup


class Recorder:
    """A service that appends ``start:<name>`` / ``stop:<name>`` to a shared log."""

    def __init__(self, name: str, log: list[str], *, fail_start: bool = False, fail_stop: bool = False) -> None:
        self._name = name
        self.log = log
        self.fail_start = fail_start
        self.fail_stop = fail_stop
        self.timeouts: list[float] = []

    @property
    def name(self) -> str:
        return self._name

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self._name} cannot start")
        self.log.append(f"start:{self._name}")

    def stop(self, timeout_s: float) -> None:
        self.timeouts.append(timeout_s)
        self.log.append(f"stop:{self._name}")
        if self.fail_stop:
            raise RuntimeError(f"{self._name} cannot stop")


def test_recorder_and_callback_service_follow_the_protocol() -> None:
    assert isinstance(Recorder("x", []), Service)
    assert isinstance(CallbackService("x"), Service)
    assert isinstance(ServiceGroup([]), Service)


def test_group_starts_in_order_and_stops_in_reverse_once() -> None:
    log: list[str] = []
    group = ServiceGroup([Recorder("store", log), Recorder("http", log), Recorder("scheduler", log)])
    group.start()
    assert group.started == ["store", "http", "scheduler"]
    group.stop(5.0)
    group.stop(5.0)  # idempotent: nothing is stopped twice
    assert log == [
        "start:store",
        "start:http",
        "start:scheduler",
        "stop:scheduler",
        "stop:http",
        "stop:store",
    ]
    assert group.started == []


def test_stop_before_start_does_nothing() -> None:
    log: list[str] = []
    ServiceGroup([Recorder("a", log)]).stop(1.0)
    assert log == []


def test_failed_start_stops_what_was_started_in_reverse_and_raises() -> None:
    log: list[str] = []
    never = Recorder("never", log)
    group = ServiceGroup([Recorder("a", log), Recorder("b", log), Recorder("c", log, fail_start=True), never])
    with pytest.raises(RuntimeError, match="c cannot start"):
        group.start()
    # c never started, so it is not stopped; the service after it is never touched
    assert log == ["start:a", "start:b", "stop:b", "stop:a"]
    assert never.timeouts == []
    group.stop(1.0)
    assert log == ["start:a", "start:b", "stop:b", "stop:a"]


def test_a_failing_stop_does_not_keep_the_others_running() -> None:
    log: list[str] = []
    group = ServiceGroup([Recorder("a", log), Recorder("b", log, fail_stop=True), Recorder("c", log)])
    group.start()
    with pytest.raises(RuntimeError, match="b cannot stop"):
        group.stop(1.0)
    assert log[-3:] == ["stop:c", "stop:b", "stop:a"]


def test_services_share_the_stop_timeout() -> None:
    log: list[str] = []
    a, b = Recorder("a", log), Recorder("b", log)
    group = ServiceGroup([a, b])
    group.start()
    group.stop(4.0)
    # b stops first with (almost) the whole budget; a gets what is left, never more than the total
    assert 0 < b.timeouts[0] <= 4.0
    assert 0 < a.timeouts[0] <= b.timeouts[0]


def test_callback_service_stops_once_and_only_after_start() -> None:
    calls: list[str] = []
    service = CallbackService("engine", start=lambda: calls.append("start"), stop=lambda: calls.append("dispose"))
    service.stop(1.0)
    assert calls == []
    service.start()
    service.start()
    service.stop(1.0)
    service.stop(1.0)
    assert calls == ["start", "dispose"]
