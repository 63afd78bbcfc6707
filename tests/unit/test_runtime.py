"""The daemon's ticks in process: one injected ``now`` per tick, poll -> store -> evaluate -> outbox ->
dispatch over a real SQLite store, a real event-log collector reading rewritten recorded Spark lines, and a
real loopback webhook receiver. The clock is stepped by the test; nothing sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from apscheduler.schedulers.base import STATE_STOPPED
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from collectors.spark.eventlog import COLLECTOR_NAME, EventLogCollector
from monitor.alerts.routing import Route
from monitor.config import parse_config
from monitor.daemon.compose import ScheduledJob, SchedulerService
from monitor.daemon.runtime import Runtime, StoreCursors, Target
from monitor.metrics.latest import LatestSamples
from monitor.model import AlertState, Engine, JobRef, PollResult, Sample
from monitor.notify.webhook import WebhookNotifier
from monitor.store import Store, open_store, save_poll, upgrade
from monitor.store.alert_repo import load_alerts
from monitor.store.alert_tables import OutboxRow
from monitor.store.tables import CollectorCursorRow
from tests.http_receiver import Receiver, running_receiver
from tests.live_eventlog import LiveEventLog
from tests.rule_samples import only_rules

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class RecordingSource:
    """Wraps a collector and records every ``now`` it is polled with."""

    def __init__(self, inner: EventLogCollector) -> None:
        self.inner = inner
        self.name = inner.name
        self.nows: list[datetime] = []

    def iter_poll(self, now: datetime) -> Iterator[PollResult]:
        self.nows.append(now)
        yield from self.inner.iter_poll(now)

    def poll(self, now: datetime) -> PollResult:  # pragma: no cover - iter_poll is preferred
        raise AssertionError("Runtime.poll must use iter_poll when the collector has it")


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


def _runtime(store: Store, tmp_path: Path, receiver_url: str, client: httpx.Client) -> tuple[Runtime, Target]:
    cursors = StoreCursors(store.sessions, COLLECTOR_NAME)
    source = RecordingSource(EventLogCollector([tmp_path / "events"], cursors))
    target = Target("live", source, timedelta(seconds=1), cursors)
    runtime = Runtime(
        sessions=store.sessions,
        targets=[target],
        latest=LatestSamples(),
        rules_config=parse_config({"rules": only_rules(watermark_stall={"for": "0s"})}).rules,
        notifiers=[WebhookNotifier("ops", receiver_url, "s3cret-for-tests", timeout_seconds=5.0)],
        routes=[Route("ops")],
        http_client=client,
    )
    return runtime, target


def test_each_tick_passes_its_one_now_down(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    log.batches(4, 4, 4, 4)  # three batches with rows, none moving the watermark: a stall at the newest batch
    with httpx.Client() as client:
        runtime, target = _runtime(store, tmp_path, hook.url, client)
        poll_now = T0 + timedelta(minutes=5)
        result = runtime.poll(target, poll_now)
        assert len([s for s in result.samples if s.batch_id is not None and s.scope.is_job()]) == 4
        assert isinstance(target.source, RecordingSource)
        assert target.source.nows == [poll_now]
        with store.sessions() as s:
            cursor = s.scalars(select(CollectorCursorRow)).one()
        assert (
            cursor.updated_at == poll_now
        )  # the cursor moved in the poll's transaction, stamped with its now
        [stat] = runtime.collector_stats()
        assert (stat.target, stat.up, stat.errors_total) == ("live", True, 0)

        eval_now = poll_now + timedelta(seconds=7)
        events = runtime.evaluate(eval_now)
        assert [e.kind.value for e in events] == ["pending", "firing"]
        # the lifecycle steps at the batch's own time (the data's clock): the fourth batch, the first
        # at which three batches with rows had not moved the watermark
        stalled_at = max(s.observed_at for s in result.samples)
        assert {e.at for e in events} == {stalled_at} and stalled_at < eval_now
        with store.sessions() as s:
            [alert] = load_alerts(s).values()
            outbox = s.scalars(select(OutboxRow)).all()
        assert (alert.rule, alert.state, alert.active_at, alert.fired_at) == (
            "watermark_stall",
            AlertState.FIRING,
            stalled_at,
            stalled_at,
        )
        assert [(o.status, o.created_at) for o in outbox] == [("firing", eval_now)]
        assert [(a.rule, a.state, a.count) for a in runtime.alert_counts()] == [
            ("watermark_stall", "firing", 1)
        ]

        report = runtime.dispatch(eval_now + timedelta(seconds=1))
        assert (report.delivered, report.retried) == (1, 0)
        assert [r.json()["alerts"][0]["status"] for r in hook.processed] == ["firing"]

        # the watermark moves (recorded batch 5): the stall no longer reaches the newest batch -> resolved
        log.batches(5)
        runtime.poll(target, eval_now + timedelta(seconds=10))
        events = runtime.evaluate(eval_now + timedelta(seconds=11))
        assert [e.kind.value for e in events] == ["resolved"]
        runtime.dispatch(eval_now + timedelta(seconds=12))
        assert [r.json()["alerts"][0]["status"] for r in hook.processed] == ["firing", "resolved"]
        keys = [r.headers["idempotency-key"] for r in hook.processed]
        assert len(set(keys)) == 2


def test_a_failed_save_advances_nothing(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    log.batches(4, 4)
    with httpx.Client() as client:
        runtime, target = _runtime(store, tmp_path, hook.url, client)
        assert isinstance(target.source, RecordingSource)
        real = target.source.inner

        class BreaksAfterReading:
            """Yields what the real collector read, then the database fails (as SQLite does when locked)."""

            name = real.name

            def iter_poll(self, now: datetime) -> Iterator[PollResult]:
                yield from real.iter_poll(now)
                raise OperationalError("INSERT INTO samples ...", {}, Exception("database is locked"))

        target.source = BreaksAfterReading()  # type: ignore[assignment]
        result = runtime.poll(target, T0)
        assert result.samples == ()
        [stat] = runtime.collector_stats()
        assert (stat.up, stat.errors_total, stat.errors_by_kind) == (False, 1, {"store": 1})
        assert "database is locked" in (runtime.health()[1]["targets"][0]["last_error"] or "")
        assert runtime.latest.snapshot() == []
        with store.sessions() as s:
            assert s.scalars(select(CollectorCursorRow)).all() == []  # the cursor did not move
        # the next poll (healthy) reads the same two batches again
        target.source = real
        again = runtime.poll(target, T0 + timedelta(seconds=1))
        assert sorted({s.batch_id for s in again.samples if s.batch_id is not None}) == [0, 1]
        assert runtime.collector_stats()[0].up is True


def test_a_piece_the_store_refuses_is_quarantined_and_the_rest_stored(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    # a raw document the store cannot hold (here a naive time, which the store refuses as data) is one
    # "unstorable" error: the samples read with it are stored, the cursor moves, the target stays up
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    log.batches(4, 4)
    with httpx.Client() as client:
        runtime, target = _runtime(store, tmp_path, hook.url, client)
        assert isinstance(target.source, RecordingSource)
        real = target.source.inner

        class OneBadPiece:
            name = real.name

            def iter_poll(self, now: datetime) -> Iterator[PollResult]:
                for piece in real.iter_poll(now):
                    yield piece.merged(
                        PollResult(raw=((JobRef(Engine.SPARK, "q"), datetime(2026, 1, 1), "progress", {}),))
                    )

        target.source = OneBadPiece()  # type: ignore[assignment]
        result = runtime.poll(target, T0)
        assert sorted({s.batch_id for s in result.samples if s.batch_id is not None}) == [0, 1]
        [stat] = runtime.collector_stats()
        assert (stat.up, stat.errors_by_kind) == (True, {"unstorable": 1})
        with store.sessions() as s:
            assert len(s.scalars(select(CollectorCursorRow)).all()) == 1  # moved past it
        target.source = real
        assert runtime.poll(target, T0 + timedelta(seconds=1)).samples == ()  # nothing read twice


def test_health_reports_the_store_and_targets(tmp_path: Path, store: Store, hook: Receiver) -> None:
    with httpx.Client() as client:
        runtime, _ = _runtime(store, tmp_path, hook.url, client)
        ok, body = runtime.health()
        assert ok is True
        assert body["store"] == "ok"
        assert [t["name"] for t in body["targets"]] == ["live"]


def test_health_is_unavailable_when_the_store_is_unreachable(tmp_path: Path, hook: Receiver) -> None:
    url = f"sqlite:///{tmp_path / 'gone' / 'tg.db'}"
    upgrade(url)
    store = open_store(url)
    with httpx.Client() as client:
        runtime, _ = _runtime(store, tmp_path, hook.url, client)
        store.engine.dispose()
        (tmp_path / "gone" / "tg.db").unlink()
        (tmp_path / "gone").rmdir()
        ok, body = runtime.health()
    store.dispose()
    assert ok is False
    assert body["store"] == "unreachable"


def test_scheduler_reads_the_clock_once_per_run_and_passes_it_down() -> None:
    calls: list[datetime] = []
    lock = threading.Lock()

    def clock() -> datetime:
        with lock:
            calls.append(T0 + timedelta(seconds=len(calls)))
            return calls[-1]

    seen: list[datetime] = []
    done = threading.Event()

    def tick(now: datetime) -> None:
        seen.append(now)
        if len(seen) >= 3:
            done.set()

    scheduler = SchedulerService([ScheduledJob("t", timedelta(milliseconds=50), tick)], clock)
    scheduler.start()
    apscheduler = scheduler._scheduler
    assert apscheduler is not None and apscheduler.running
    try:
        assert done.wait(10.0), "the job did not run three times within 10 s"
    finally:
        scheduler.stop(5.0)
    scheduler.stop(5.0)  # idempotent
    assert scheduler.running is False
    # stop() shut APScheduler down and waited for the running job: no run can start or finish afterwards,
    # so the lists below are final
    assert apscheduler.state == STATE_STOPPED
    # start() places the runs on APScheduler's own clock and reads none of ours; every run read exactly one
    # value and passed that same value to its job. The clock hands out T0, T0+1s, T0+2s, ...: a run reading
    # it twice would pass T0+1s to its job first, or leave more reads than runs.
    assert seen[:3] == [T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)]
    assert seen == calls


def test_scheduler_reports_jobs_whose_latest_run_failed() -> None:
    # A job failing is logged and retried at its next time; /healthz must be able to see it (a user
    # trial found rule evaluation failing on every tick while /healthz said "ok").
    runs: list[datetime] = []
    fourth_started, release = threading.Event(), threading.Event()

    def tick(now: datetime) -> None:
        runs.append(now)
        if len(runs) <= 3:
            raise RuntimeError("database is locked\nsecond line")
        fourth_started.set()
        release.wait(10.0)  # the 4th run succeeds, once the test has looked

    scheduler = SchedulerService([ScheduledJob("evaluate", timedelta(milliseconds=20), tick)], lambda: T0)
    scheduler.start()
    try:
        assert fourth_started.wait(10.0)
        assert scheduler.failing() == {
            "evaluate": {
                "consecutive_failures": 3,
                "last_failure_at": T0.isoformat(),
                "error": "RuntimeError: database is locked",
            }
        }
        release.set()
        deadline = time.monotonic() + 5
        while scheduler.failing() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert scheduler.failing() == {}  # a successful run clears it
    finally:
        release.set()
        scheduler.stop(5.0)


def test_recent_history_loads_only_new_rows_and_keeps_the_window(store: Store) -> None:

    job = JobRef(Engine.SPARK, "q", "r1")

    def sample(minutes: int, batch: int) -> Sample:
        return Sample(job, T0 + timedelta(minutes=minutes), collector="test", batch_id=batch)

    def save(*samples: Sample) -> None:
        with store.sessions.begin() as s:
            save_poll(s, PollResult(samples=samples))

    runtime = Runtime(
        sessions=store.sessions,
        targets=[],
        latest=LatestSamples(),
        rules_config=parse_config({}).rules,
        lookback=timedelta(minutes=30),
    )
    save(sample(0, 0), sample(10, 1))
    assert [s.batch_id for s in runtime.recent_history()[(Engine.SPARK, "q")]] == [0, 1]
    # a late row observed at 5 min and a new one at 20 min: merged in time order
    save(sample(5, 9), sample(20, 2))
    assert [s.batch_id for s in runtime.recent_history()[(Engine.SPARK, "q")]] == [0, 9, 1, 2]
    # newest at 40 min: the window (30 min, inclusive) starts at 10 min -> batches 0 and 9 fall out
    save(sample(40, 3))
    assert [s.batch_id for s in runtime.recent_history()[(Engine.SPARK, "q")]] == [1, 2, 3]
    # a fresh runtime (a restart) reads the same window from the store
    again = Runtime(
        sessions=store.sessions,
        targets=[],
        latest=LatestSamples(),
        rules_config=parse_config({}).rules,
        lookback=timedelta(minutes=30),
    )
    assert again.recent_history() == runtime.recent_history()


def _outbox(store: Store) -> list[tuple[str, dict[str, str]]]:
    with store.sessions() as s:
        rows = s.scalars(select(OutboxRow).order_by(OutboxRow.id)).all()
    return [(o.status, o.payload.get("annotations", {}) if isinstance(o.payload, dict) else {}) for o in rows]


def test_stall_that_began_and_ended_while_the_daemon_was_stopped_fires_and_resolves(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    with httpx.Client() as client:
        runtime, target = _runtime(store, tmp_path, hook.url, client)
        runtime.poll(target, T0)
        assert runtime.evaluate(T0) == []  # nothing written yet
        # stopped; meanwhile four stalled batches (three with rows not moving the watermark) and the
        # recovering one (recorded batch 5: the watermark moved) are written
        log.batches(4, 4, 4, 4, 5)
        restarted, target = _runtime(store, tmp_path, hook.url, client)
        now = T0 + timedelta(minutes=1)
        restarted.poll(target, now)
        events = restarted.evaluate(now)
        # fired at the fourth batch's time, resolved at the fifth's: both notified
        assert [(e.kind.value, e.at) for e in events] == [
            ("pending", log.times[3]), ("firing", log.times[3]), ("resolved", log.times[4])
        ]
        assert [status for status, _ in _outbox(store)] == ["firing", "resolved"]
        assert restarted.evaluate(now + timedelta(seconds=15)) == []  # evaluated once, not again


def test_history_older_than_the_horizon_is_stored_but_notifies_nobody(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    # a daemon pointed at an old log: the same stall, two hours before the daemon first sees it (the
    # default horizon is the longest rule window, 30 min): the alert is stored and shown, nobody paged
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    log.batches(4, 4, 4, 4, 5, 4, 4, 4, 4)
    with httpx.Client() as client:
        runtime, target = _runtime(store, tmp_path, hook.url, client)
        now = T0 + timedelta(hours=2)
        runtime.poll(target, now)
        events = runtime.evaluate(now)
        assert [e.kind.value for e in events] == ["pending", "firing", "resolved", "pending", "firing"]
        assert _outbox(store) == []
        with store.sessions() as s:
            [alert] = load_alerts(s).values()
        assert alert.state is AlertState.FIRING and "not notified" in alert.annotations["history"]
        # the stall ends live, now: still that history episode, so its resolution is not notified either
        log.clock = now
        log.batches(5)
        runtime.poll(target, now + timedelta(seconds=5))
        assert [e.kind.value for e in runtime.evaluate(now + timedelta(seconds=5))] == ["resolved"]
        assert _outbox(store) == []
        # a new stall live: notified
        log.batches(4, 4, 4, 4)
        runtime.poll(target, now + timedelta(seconds=10))
        assert [e.kind.value for e in runtime.evaluate(now + timedelta(seconds=10))] == ["pending", "firing"]
        assert [status for status, _ in _outbox(store)] == ["firing"]


def test_terminated_query_resolves_its_alerts_with_the_reason(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    log.batches(4, 4, 4, 4)
    log.terminate()  # a clean stop (no exception) right after the stalled batch
    with httpx.Client() as client:
        runtime, target = _runtime(store, tmp_path, hook.url, client)
        now = T0 + timedelta(minutes=1)
        runtime.poll(target, now)
        assert [e.kind.value for e in runtime.evaluate(now)] == ["pending", "firing", "resolved"]
        (_, fired), (_, resolved) = _outbox(store)
        assert resolved.get("resolved_reason") == "terminated" and "resolved_reason" not in fired


def _runtime_all_rules(store: Store, tmp_path: Path, receiver_url: str, client: httpx.Client) -> tuple[Runtime, Target]:
    cursors = StoreCursors(store.sessions, COLLECTOR_NAME)
    target = Target("logs", EventLogCollector([tmp_path / "events"], cursors), timedelta(seconds=1), cursors)
    runtime = Runtime(
        sessions=store.sessions,
        targets=[target],
        latest=LatestSamples(),
        rules_config=parse_config({}).rules,  # every rule, defaults
        notifiers=[WebhookNotifier("ops", receiver_url, "s3cret-for-tests", timeout_seconds=5.0)],
        routes=[Route("ops")],
        http_client=client,
    )
    return runtime, target


def test_history_only_log_directory_raises_no_notification(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    # a recorded-style log that ended two hours before the daemon first sees it, with the 2099 row
    # (future_timestamp, late drops) and no termination: findings are stored, nobody is paged, and
    # the two hours of silence since are not a no_progress page either
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    log.batches(4, 4, 4, 4, 5, 6, 7, 4)
    with httpx.Client() as client:
        runtime, target = _runtime_all_rules(store, tmp_path, hook.url, client)
        now = T0 + timedelta(hours=2)
        runtime.poll(target, now)
        events = runtime.evaluate(now)
        assert {e.kind.value for e in events} >= {"pending", "firing"}
        with store.sessions() as s:
            rules = {a.rule for a in load_alerts(s).values()}
        assert "future_timestamp" in rules and "no_progress" not in rules
        assert _outbox(store) == []
    # a restarted daemon (seeding /metrics from the store first, as `tidegauge run` does) still sees the
    # two-hour-old job as history: its silence is no page
    with httpx.Client() as client:
        restarted, _ = _runtime_all_rules(store, tmp_path, hook.url, client)
        restarted.seed_latest()
        restarted.evaluate(now + timedelta(minutes=1))
        assert _outbox(store) == []


def test_live_query_that_stops_reporting_is_a_no_progress_page(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0, step=timedelta(minutes=1))
    log.batches(5, 5, 5)  # no-data batches a minute apart: nothing wrong
    with httpx.Client() as client:
        runtime, target = _runtime_all_rules(store, tmp_path, hook.url, client)
        runtime.poll(target, T0 + timedelta(minutes=3))
        runtime.evaluate(T0 + timedelta(minutes=3))
        assert _outbox(store) == []
        # the last batch at 12:03; silent (no batch, no idle event, no termination) for 11 min at 12:14,
        # more than 10 trigger intervals of 1 min
        quiet = T0 + timedelta(minutes=14)
        runtime.poll(target, quiet)
        runtime.evaluate(quiet)
        [(status, _)] = _outbox(store)
        with store.sessions() as s:
            [alert] = [a for a in load_alerts(s).values() if a.rule == "no_progress"]
        assert status == "firing" and alert.message.startswith("no progress for 11 min; last batch 2")


def test_termination_read_after_its_last_batch_still_resolves(
    tmp_path: Path, spark_fixtures: Path, store: Store, hook: Receiver
) -> None:
    # Spark logs QueryTerminatedEvent without a time (it takes its last batch's): read by a later poll
    # than that batch, it is still a new instant at the same time, after the one already evaluated
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0)
    log.batches(4, 4, 4, 4)
    with httpx.Client() as client:
        runtime, target = _runtime(store, tmp_path, hook.url, client)
        now = T0 + timedelta(minutes=1)
        runtime.poll(target, now)
        assert [e.kind.value for e in runtime.evaluate(now)] == ["pending", "firing"]
        log.terminate()
        runtime.poll(target, now + timedelta(seconds=15))
        events = runtime.evaluate(now + timedelta(seconds=15))
        assert [(e.kind.value, e.at) for e in events] == [("resolved", log.times[3])]
        assert _outbox(store)[-1][1].get("resolved_reason") == "terminated"
