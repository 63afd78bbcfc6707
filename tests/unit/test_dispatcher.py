"""Outbox + dispatcher tests: a real database migrated to head (SQLite; PostgreSQL in the ``postgres``
variants), a real HTTP receiver on loopback
(tests/http_receiver.py) and a fake clock stepped by the test (nothing sleeps on the fake clock).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.lifecycle import AlertEvent, EventKind, RuleTiming, step_all
from monitor.alerts.routing import Route
from monitor.alerts.silences import Silence, parse_matcher
from monitor.model import Engine, Finding, JobRef, Severity
from monitor.notify.dispatcher import DispatchReport, RetryPolicy, dispatch_due
from monitor.notify.webhook import WebhookNotifier
from monitor.reports.scheduled import build_report
from monitor.store.alert_repo import add_silence, apply_transitions, enqueue_report, load_alerts
from monitor.store.alert_tables import AlertRow, NotificationLogRow, OutboxRow
from monitor.store.database import make_engine, make_session_factory
from monitor.store.migrate import upgrade
from tests.alerting import (
    migrated_sessions,
    sessions_on_both_databases,  # noqa: F401 (the `sessions` fixture)
    tick,
)
from tests.http_receiver import Receiver, running_receiver

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB_A = JobRef(Engine.SPARK, "q-clicks", "run-1", "clicks")
JOB_B = JobRef(Engine.FLINK, "f-orders", None, "orders")
A1 = Finding("watermark_stall", Severity.CRITICAL, JOB_A, "watermark flat for 14 min", T0)
A2 = Finding("late_rows_dropped", Severity.WARNING, JOB_A, "1200 rows dropped as late", T0)
B1 = Finding("idle_source", Severity.WARNING, JOB_B, "subtask 2 idle for 30 min", T0)
SECRET = "test-secret"
FAST = RetryPolicy(initial_backoff=timedelta(seconds=10), max_backoff=timedelta(minutes=2))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as r:
        yield r


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client() as c:
        yield c


def seen(receiver: Receiver) -> list[tuple[str, str]]:
    """(fingerprint, status) of every alert the receiver processed, in order."""
    return [(a["fingerprint"], a["status"]) for r in receiver.processed for a in r.json()["alerts"]]


def outbox_states(sessions: sessionmaker[Session]) -> dict[str, int]:
    with sessions() as session:
        rows = session.execute(select(OutboxRow.state, func.count()).group_by(OutboxRow.state))
        return {state: count for state, count in rows}


def test_transition_and_outbox_commit_together_or_not_at_all(sessions: sessionmaker[Session]) -> None:
    routes = [Route("hook")]
    with pytest.raises(RuntimeError), sessions.begin() as session:
        changed, events = step_all({}, [A1], lambda _r: RuleTiming(), T0)
        assert apply_transitions(session, changed.values(), events, routes, T0) == 1
        raise RuntimeError("crash before commit")
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(AlertRow)) == 0
        assert session.scalar(select(func.count()).select_from(OutboxRow)) == 0
    tick(sessions, [A1], T0, routes)
    with sessions.begin() as session:  # the same transition applied twice queues nothing new
        alert = load_alerts(session)[A1.fingerprint()]
        again = apply_transitions(session, [alert], [AlertEvent(EventKind.FIRING, alert.fingerprint, T0)], routes, T0)
        assert again == 0
    assert outbox_states(sessions) == {"pending": 1}


def test_restart_neither_refires_nor_forgets(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    timing = RuleTiming(for_duration=timedelta(minutes=5))
    kinds: list[tuple[int, EventKind]] = []
    for minute in (0, 3, 5, 6, 7):  # a fresh engine (a "restarted process") for every tick
        engine = make_engine(url)
        events = tick(make_session_factory(engine), [A1], T0 + timedelta(minutes=minute), [Route("hook")], timing)
        kinds.extend((minute, e.kind) for e in events)
        engine.dispose()
    # pending at 0; `for` counted from the stored active_at, so firing at 5 (not 5 min after a restart);
    # no second FIRING after later restarts.
    assert kinds == [(0, EventKind.PENDING), (5, EventKind.FIRING)]
    engine = make_engine(url)
    assert outbox_states(make_session_factory(engine)) == {"pending": 1}
    engine.dispose()


def test_receiver_down_for_five_minutes_gets_everything_once_afterwards(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    routes = [Route("hook")]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    rng = random.Random(4)
    outage_end = T0 + timedelta(minutes=5)
    requests_during_outage = 0
    reports: list[DispatchReport] = []
    now = T0
    while now <= T0 + timedelta(minutes=10):
        receiver.fail_status = 503 if now < outage_end else None
        # A2 clears at 2 min: its resolved notification queues behind its undelivered firing one.
        findings = [A1, A2, B1] if now < T0 + timedelta(minutes=2) else [A1, B1]
        tick(sessions, findings, now, routes)
        reports.append(dispatch_due(sessions, [hook], client, now, routes=routes, policy=FAST, rng=rng))
        if now < outage_end:
            requests_during_outage = len(receiver.requests)
        now += timedelta(seconds=10)

    assert requests_during_outage >= 4  # it kept retrying during the outage...
    assert sum(r.retried for r in reports) >= 4
    expected = {
        (A1.fingerprint(), "firing"),
        (A2.fingerprint(), "firing"),
        (A2.fingerprint(), "resolved"),
        (B1.fingerprint(), "firing"),
    }
    got = seen(receiver)
    assert sorted(got) == sorted(expected)  # ...and afterwards everything arrived exactly once,
    assert got.index((A2.fingerprint(), "firing")) < got.index((A2.fingerprint(), "resolved"))  # in order
    for request in receiver.processed:  # grouped per job
        assert len({a["labels"]["job_id"] for a in request.json()["alerts"]}) == 1
    keys = [r.headers["idempotency-key"] for r in receiver.processed]
    assert len(keys) == len(set(keys))
    assert outbox_states(sessions) == {"delivered": 4}
    assert sum(r.gave_up for r in reports) == 0


def test_client_timeout_after_the_receiver_did_the_work_is_deduplicated(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    routes = [Route("hook")]
    hook = WebhookNotifier("hook", receiver.url, SECRET, timeout_seconds=0.3)
    tick(sessions, [A1], T0, routes)
    receiver.delay_seconds = 1.5  # processes, then answers too late: the client times out
    first = dispatch_due(sessions, [hook], client, T0, policy=FAST, rng=random.Random(1))
    assert first.retried == 1 and "timed out" in first.errors[0]
    receiver.delay_seconds = 0.0
    second = dispatch_due(sessions, [hook], client, T0 + timedelta(minutes=1), policy=FAST, rng=random.Random(1))
    assert second.delivered == 1
    assert len(receiver.requests) == 2
    assert receiver.requests[0].headers["idempotency-key"] == receiver.requests[1].headers["idempotency-key"]
    assert len(receiver.processed) == 1  # the receiver honoured the key: the alert was handled once
    assert outbox_states(sessions) == {"delivered": 1}


def test_non_retryable_4xx_gives_up_and_records(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    routes = [Route("hook", repeat_interval=timedelta(hours=1))]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    receiver.fail_status, receiver.fail_body = 400, "unknown field"
    tick(sessions, [A1], T0, routes)
    report = dispatch_due(sessions, [hook], client, T0, routes=routes, policy=FAST)
    assert (report.gave_up, report.retried) == (1, 0)
    for minutes in range(1, 30):  # no retry; the repeat only comes after repeat_interval
        dispatch_due(sessions, [hook], client, T0 + timedelta(minutes=minutes), routes=routes, policy=FAST)
    assert len(receiver.requests) == 1
    with sessions() as session:
        row = session.scalars(select(OutboxRow)).one()
        assert (row.state, row.attempts, row.gave_up_at) == ("gave_up", 1, T0)
        assert row.last_error == "receiver 'hook': HTTP 400: unknown field"
        log = session.scalars(select(NotificationLogRow)).one()
        assert (log.outcome, log.status) == ("gave_up", "firing")


def test_max_age_gives_up(sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client) -> None:
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    policy = RetryPolicy(timedelta(seconds=10), timedelta(minutes=2), max_age=timedelta(minutes=30))
    receiver.fail_status = 503
    tick(sessions, [A1], T0, [Route("hook")])
    now, gave_up_at = T0, None
    while now <= T0 + timedelta(minutes=40):
        if dispatch_due(sessions, [hook], client, now, policy=policy, rng=random.Random(2)).gave_up:
            gave_up_at = now
        now += timedelta(seconds=10)
    # Given up at the first tick after 30 min (strictly older than max_age) when the row was due;
    # the last retry delay is at most max_backoff = 2 min.
    assert gave_up_at is not None and T0 + timedelta(minutes=30) < gave_up_at <= T0 + timedelta(minutes=32, seconds=10)
    with sessions() as session:
        row = session.scalars(select(OutboxRow)).one()
        assert row.state == "gave_up" and row.last_error is not None and "max_age" in row.last_error
    requests = len(receiver.requests)
    dispatch_due(sessions, [hook], client, T0 + timedelta(hours=1), policy=policy)
    assert len(receiver.requests) == requests


def test_silence_suppresses_then_notifies_after_it_ends(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    routes = [Route("hook")]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    with sessions.begin() as session:
        add_silence(
            session,
            Silence("s1", (parse_matcher("job_id=q-clicks"),), starts_at=T0, ends_at=T0 + timedelta(minutes=10)),
            T0,
        )
    now = T0
    while now <= T0 + timedelta(minutes=12):
        tick(sessions, [A1, B1], now, routes)
        dispatch_due(sessions, [hook], client, now, routes=routes, policy=FAST)
        now += timedelta(minutes=1)
    # B1 (other job) at once; A1 only when the silence ended at 10 min (its firing row was suppressed).
    sent = [(r.json()["sent_at"], a["fingerprint"]) for r in receiver.processed for a in r.json()["alerts"]]
    assert sent == [
        ("2026-11-29T12:00:00.000000Z", B1.fingerprint()),
        ("2026-11-29T12:10:00.000000Z", A1.fingerprint()),
    ]
    assert outbox_states(sessions) == {"delivered": 2, "suppressed": 1}


def test_alert_silenced_for_its_whole_episode_sends_neither_firing_nor_resolved(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    routes = [Route("hook")]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    with sessions.begin() as session:
        add_silence(
            session,
            Silence("s1", (parse_matcher("alertname=watermark_stall"),), T0, T0 + timedelta(minutes=10)),
            T0,
        )
    # Fires at 0, resolves at 5, silence ends at 10: the resolved row is not silenced any more at 10,
    # but the receiver never heard of the firing, so it is suppressed too.
    for minute, findings in ((0, [A1]), (5, []), (10, []), (11, [])):
        now = T0 + timedelta(minutes=minute)
        tick(sessions, findings, now, routes)
        if minute == 5:
            continue  # the dispatcher only runs again after the silence ended
        dispatch_due(sessions, [hook], client, now, routes=routes, policy=FAST)
    assert receiver.requests == []
    assert outbox_states(sessions) == {"suppressed": 2}
    with sessions() as session:
        errors = sorted(str(e) for e in session.scalars(select(OutboxRow.last_error)))
    assert errors == ["firing was not delivered", "silenced"]


def test_repeat_interval(sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client) -> None:
    routes = [Route("hook", repeat_interval=timedelta(hours=1))]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    now = T0
    while now <= T0 + timedelta(hours=2, minutes=10):
        tick(sessions, [A1], now, routes)
        dispatch_due(sessions, [hook], client, now, routes=routes, policy=FAST)
        now += timedelta(minutes=10)
    sent = [r.json()["sent_at"] for r in receiver.processed]
    # First at 12:00, then one repeat per hour while it keeps firing.
    assert sent == ["2026-11-29T12:00:00.000000Z", "2026-11-29T13:00:00.000000Z", "2026-11-29T14:00:00.000000Z"]
    assert len({r.headers["idempotency-key"] for r in receiver.processed}) == 3


def test_resolved_only_where_send_resolved(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    routes = [Route("hook", send_resolved=False)]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    for minutes, findings in ((0, [A1]), (1, [])):
        now = T0 + timedelta(minutes=minutes)
        tick(sessions, findings, now, routes)
        dispatch_due(sessions, [hook], client, now, policy=FAST)
    assert seen(receiver) == [(A1.fingerprint(), "firing")]


def test_unknown_receiver_and_connection_refused(sessions: sessionmaker[Session], client: httpx.Client) -> None:
    routes = [Route("hook"), Route("gone")]
    tick(sessions, [A1], T0, routes)
    closed = WebhookNotifier("hook", "http://127.0.0.1:9/hook", SECRET)  # discard port: nothing listens
    report = dispatch_due(sessions, [closed], client, T0, policy=FAST)
    assert (report.gave_up, report.retried) == (1, 1)  # "gone" has no notifier; "hook" is refused
    assert "connection failed" in report.errors[0]


class _MaxRandom(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return b


def test_backoff_is_full_jitter_capped() -> None:
    policy = RetryPolicy(timedelta(seconds=10), timedelta(minutes=5))
    ceilings = [policy.backoff(n, _MaxRandom()).total_seconds() for n in range(1, 8)]
    assert ceilings == [10, 20, 40, 80, 160, 300, 300]  # 10 * 2**(n-1), capped at 300 s
    draws = {policy.backoff(3, random.Random(seed)).total_seconds() for seed in range(50)}
    assert min(draws) >= 0 and max(draws) <= 40 and len(draws) == 50  # spread over [0, 40]
    with pytest.raises(ValueError):
        RetryPolicy(timedelta(minutes=10), timedelta(minutes=5))


def test_firing_on_a_data_clock_ahead_of_the_wall_clock_is_queued_once(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    """Issue 16's duplicate page: a job's alert fires at its batch's own time (the data's clock), which may
    be seconds ahead of the daemon's wall clock; the dispatcher's repeat check compared the delivery time
    (wall clock) with ``fired_at`` (data clock), took the delivered firing for an earlier episode's and
    queued the same firing again at the next tick under a key made from that tick's time."""
    routes = [Route("hook", repeat_interval=timedelta(hours=4))]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    fired_at = T0 + timedelta(seconds=10)  # the batch's trigger time, ahead of the tick's wall clock
    with sessions.begin() as session:
        changed, events = step_all({}, [A1], lambda _r: RuleTiming(), fired_at)
        apply_transitions(session, changed.values(), events, routes, T0)
    for seconds in (0, 4, 8, 12, 16):
        dispatch_due(sessions, [hook], client, T0 + timedelta(seconds=seconds), routes=routes, policy=FAST)
    assert seen(receiver) == [(A1.fingerprint(), "firing")]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(OutboxRow)) == 1


def test_resolved_after_a_firing_on_a_data_clock_ahead_is_sent(
    sessions: sessionmaker[Session], receiver: Receiver, client: httpx.Client
) -> None:
    """The resolved message follows the firing the receiver got, whatever the data's clock says."""
    routes = [Route("hook")]
    hook = WebhookNotifier("hook", receiver.url, SECRET)
    ahead = timedelta(seconds=30)
    for seconds, findings in ((0, [A1]), (4, []), (8, [])):
        now = T0 + timedelta(seconds=seconds)
        with sessions.begin() as session:
            changed, events = step_all(load_alerts(session), findings, lambda _r: RuleTiming(), now + ahead)
            apply_transitions(session, changed.values(), events, routes, now)
        dispatch_due(sessions, [hook], client, now, routes=routes, policy=FAST)
    assert seen(receiver) == [(A1.fingerprint(), "firing"), (A1.fingerprint(), "resolved")]


@pytest.mark.integration
@pytest.mark.postgres
def test_two_instances_queueing_the_same_notification_keep_one_row(postgres_url: str) -> None:
    """Two instances of a fleet run the same scheduled report at once: the second transaction waits for
    the first's uncommitted row on the unique (receiver, idempotency key) and then inserts nothing (ON
    CONFLICT DO NOTHING), instead of failing with a unique violation or queueing a second row."""
    report = build_report("daily", T0, {}, [])
    with migrated_sessions(postgres_url) as factory:
        queued: list[bool] = []
        errors: list[BaseException] = []
        first = factory.begin()
        assert enqueue_report(first.__enter__(), "hook", report, T0)

        def second() -> None:
            try:
                with factory.begin() as session_b:
                    queued.append(enqueue_report(session_b, "hook", report, T0 + timedelta(seconds=3)))
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=second)
        worker.start()
        worker.join(timeout=1.0)  # it blocks on the first transaction's uncommitted row
        first.__exit__(None, None, None)
        worker.join()
        assert errors == []
        assert queued == [False]
        assert outbox_states(factory) == {"pending": 1}
