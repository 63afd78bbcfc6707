"""Failures are visible (issue 11): with a webhook answering 503, ``/metrics`` counts notifications
failed/retried/given up with the outbox depth and oldest age per receiver, ``/healthz`` is degraded naming
the receiver, and deliveries are logged naming rule, job and receiver. A real SQLite store, a real loopback
receiver, the runtime driven with a stepped fake clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from monitor.alerts.routing import Route
from monitor.config import parse_config
from monitor.daemon.runtime import RECEIVER_DEGRADED_AFTER, Runtime
from monitor.metrics.exporter import TidegaugeCollector
from monitor.metrics.latest import LatestSamples
from monitor.model import Engine, Finding, JobRef, Severity
from monitor.notify.dispatcher import RetryPolicy
from monitor.notify.webhook import WebhookNotifier
from tests.alerting import migrated_sessions, sqlite_url, tick
from tests.daemon_process import metric_values
from tests.http_receiver import Receiver, running_receiver

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB = JobRef(Engine.SPARK, "q-clicks", "run-1", "clicks")
STALL = Finding("watermark_stall", Severity.CRITICAL, JOB, "watermark flat for 14 min", T0)
POLICY = RetryPolicy(initial_backoff=timedelta(seconds=1), max_backoff=timedelta(seconds=2))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as r:
        yield r


def _metric(registry: CollectorRegistry, name: str) -> float:
    [(labels, value)] = metric_values(generate_latest(registry).decode(), name)
    assert labels == {"receiver": "ops"}
    return value


def test_a_failing_receiver_shows_on_metrics_healthz_and_logs(
    tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with migrated_sessions(sqlite_url(tmp_path)) as sessions, httpx.Client() as client:
        runtime = Runtime(
            sessions=sessions, targets=[], latest=LatestSamples(), rules_config=parse_config({}).rules,
            notifiers=[WebhookNotifier("ops", receiver.url, "secret")], routes=[Route("ops")],
            http_client=client, retry_policy=POLICY,
        )  # fmt: skip
        registry = CollectorRegistry(auto_describe=False)
        now = {"t": T0}
        registry.register(TidegaugeCollector(runtime.latest, lambda: now["t"], deliveries=runtime.delivery_stats))
        tick(sessions, [STALL], T0, [Route("ops")])
        runtime.refresh_outbox_backlog()
        now["t"] = T0 + timedelta(seconds=30)
        assert _metric(registry, "tidegauge_outbox_depth") == 1
        assert _metric(registry, "tidegauge_outbox_oldest_age_seconds") == 30.0

        receiver.fail_status = 503
        for attempt in range(RECEIVER_DEGRADED_AFTER):
            ok, body = runtime.health()
            assert ok and "degraded" not in body  # not yet: one failure is not "keeps failing"
            runtime.dispatch(T0 + timedelta(seconds=10 * attempt))
        ok, body = runtime.health()
        assert ok  # monitoring works; delivery does not
        assert body["degraded"] == [
            f"receiver ops: {RECEIVER_DEGRADED_AFTER} failed sends in a row (receiver 'ops': HTTP 503)"
        ]
        assert body["failing_receivers"]["ops"]["consecutive_failures"] == RECEIVER_DEGRADED_AFTER
        assert _metric(registry, "tidegauge_notifications_failed_total") == RECEIVER_DEGRADED_AFTER
        assert _metric(registry, "tidegauge_notifications_retried_total") == RECEIVER_DEGRADED_AFTER
        assert _metric(registry, "tidegauge_notifications_sent_total") == 0
        assert _metric(registry, "tidegauge_receiver_consecutive_failures") == RECEIVER_DEGRADED_AFTER
        assert _metric(registry, "tidegauge_outbox_depth") == 1
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(
            "to receiver 'ops': firing watermark_stall for clicks (spark q-clicks)" in w and "HTTP 503" in w
            for w in warnings
        ), warnings

        receiver.fail_status = None
        runtime.dispatch(T0 + timedelta(minutes=5))
        ok, body = runtime.health()
        assert ok and "degraded" not in body
        assert _metric(registry, "tidegauge_notifications_sent_total") == 1
        assert _metric(registry, "tidegauge_outbox_depth") == 0
        assert _metric(registry, "tidegauge_outbox_oldest_age_seconds") == 0
        infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert any(
            m.startswith("delivered 1 notification(s) to receiver 'ops': firing watermark_stall for clicks (spark q-clicks)")
            for m in infos
        ), infos


def test_a_non_retryable_failure_counts_as_given_up(tmp_path: Path, receiver: Receiver) -> None:
    with migrated_sessions(sqlite_url(tmp_path)) as sessions, httpx.Client() as client:
        runtime = Runtime(
            sessions=sessions, targets=[], latest=LatestSamples(), rules_config=parse_config({}).rules,
            notifiers=[WebhookNotifier("ops", receiver.url, "secret")], routes=[Route("ops")],
            http_client=client, retry_policy=POLICY,
        )  # fmt: skip
        tick(sessions, [STALL], T0, [Route("ops")])
        receiver.fail_status = 410
        runtime.dispatch(T0)
        [stat] = runtime.delivery_stats()
    assert (stat.sent, stat.failed, stat.retried, stat.given_up, stat.depth) == (0, 1, 0, 1, 0)


def test_an_attempt_is_recorded_before_the_send(tmp_path: Path, receiver: Receiver) -> None:
    # What a crash during the send leaves: the row says an attempt started and is due only after the
    # backoff (so only that one message is sent again, and not in a tight loop).
    from sqlalchemy import select

    from monitor.notify.dispatcher import IN_FLIGHT
    from monitor.store.alert_tables import OutboxRow

    seen: list[tuple[int, str | None, datetime]] = []
    with migrated_sessions(sqlite_url(tmp_path)) as sessions, httpx.Client() as client:
        tick(sessions, [STALL], T0, [Route("ops")])

        class Peeking(WebhookNotifier):
            def send(self, batch, client):  # type: ignore[no-untyped-def]
                with sessions() as s:
                    row = s.scalars(select(OutboxRow)).one()
                    seen.append((row.attempts, row.last_error, row.next_attempt_at))
                super().send(batch, client)

        runtime = Runtime(
            sessions=sessions, targets=[], latest=LatestSamples(), rules_config=parse_config({}).rules,
            notifiers=[Peeking("ops", receiver.url, "secret")], routes=[Route("ops")],
            http_client=client, retry_policy=POLICY,
        )  # fmt: skip
        runtime.dispatch(T0)
        with sessions() as s:
            row = s.scalars(select(OutboxRow)).one()
    [(attempts, error, next_at)] = seen
    assert attempts == 1 and error is not None and error.startswith(IN_FLIGHT)
    assert next_at > T0
    assert (row.state, row.attempts) == ("delivered", 1)
