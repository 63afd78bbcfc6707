"""End to end: ``tidegauge run`` tails a live Spark event log, raises, delivers and resolves a
watermark-stall and a future-timestamp alert to a webhook receiver, a Slack-format receiver and a real
Alertmanager; and survives ``kill -9`` between transition and delivery without losing or duplicating a
notification.

The event log is written by the test from the recorded real Spark lines (tests/live_eventlog.py: ids and
trigger times rewritten), so the daemon sees a running query. The two loopback receivers
(tests/http_receiver.py) honour ``Idempotency-Key`` and record what they processed. Alertmanager is the
real ``prometheus-alertmanager`` binary, started by the fixture of tests/integration/test_alertmanager.py
(whose own webhook receiver, ``hook``, shows what Alertmanager notified).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from monitor.store import make_engine, make_session_factory, upgrade
from monitor.store.alert_tables import OutboxRow
from tests.daemon_process import DaemonProcess, free_port, wait_for
from tests.http_receiver import Receiver, running_receiver
from tests.integration.test_alertmanager import alertmanager, hook  # noqa: F401 - fixtures
from tests.live_eventlog import LiveEventLog
from tests.rule_samples import only_rules

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STALL, FUTURE = "watermark_stall", "future_timestamp"
SECRETS = {"TG_WEBHOOK_SECRET": "webhook-secret-for-tests", "TG_SLACK_URL": ""}


@pytest.fixture
def webhook_rx() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


@pytest.fixture
def slack_rx() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


def _rules() -> dict[str, Any]:
    """Only the two rules under test (see ``only_rules``); ``for: 0s``: the replayed batches are half a
    second apart, so a stall is judged on batches, not on minutes."""
    return only_rules(**{STALL: {"for": "0s"}, FUTURE: {}})


def _config(tmp_path: Path, receivers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rules": _rules(),
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {"spark_event_logs": [{"name": "live", "path": str(tmp_path / "events"), "poll_interval": "300ms"}]},
        "evaluation_interval": "300ms",
        "delivery": {"interval": "300ms", "initial_backoff": "300ms", "max_backoff": "1s"},
        "receivers": receivers,
    }


def _webhook(url: str, timeout: str = "10s") -> dict[str, Any]:
    return {"name": "ops", "type": "webhook", "url": url, "secret": {"env": "TG_WEBHOOK_SECRET"}, "timeout": timeout}


SLACK = {"name": "chat", "type": "slack", "url": {"env": "TG_SLACK_URL"}}


def webhook_events(rx: Receiver) -> list[tuple[str, str]]:
    """(rule, status) of every alert in the requests the webhook receiver processed, in order."""
    with rx.lock:
        return [(a["rule"], a["status"]) for r in rx.processed for a in r.json()["alerts"]]


def slack_events(rx: Receiver) -> list[tuple[str, str]]:
    """(rule, status) from the Slack message text ``[FIRING] <job>: 1 firing (<rules>)``."""
    out = []
    with rx.lock:
        for r in rx.processed:
            text = r.json()["text"]
            status = text[1 : text.index("]")].lower()
            rules = text[text.rindex("(") + 1 : text.rindex(")")].split(", ")
            out.extend((rule, status) for rule in rules)
    return out


def am_notified(am_hook: Receiver) -> list[tuple[str, str]]:
    """(alertname, status) of what Alertmanager sent to its own webhook."""
    with am_hook.lock:
        return [(a["labels"]["alertname"], a["status"]) for r in am_hook.processed for a in r.json()["alerts"]]


def _has(events: list[tuple[str, str]], *wanted: tuple[str, str]) -> bool:
    return all(w in events for w in wanted)


def test_stall_and_future_alerts_reach_webhook_slack_and_alertmanager(
    tmp_path: Path,
    spark_fixtures: Path,
    webhook_rx: Receiver,
    slack_rx: Receiver,
    alertmanager: str,  # noqa: F811 - fixture
    hook: Receiver,  # noqa: F811 - fixture: Alertmanager's own webhook receiver
) -> None:
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    receivers = [_webhook(webhook_rx.url), SLACK, {"name": "am", "type": "alertmanager", "url": alertmanager}]
    daemon = DaemonProcess(_config(tmp_path, receivers), db_url, tmp_path, {**SECRETS, "TG_SLACK_URL": slack_rx.url})
    live = LiveEventLog(tmp_path / "events" / "local-1795951957158.inprogress", spark_fixtures, datetime.now(UTC) - timedelta(minutes=10))
    try:
        daemon.start()
        # 1. four batches that all run with watermark 2024-01-01T12:05 while three of them bring 6 rows
        live.batches(4, 4, 4, 4)
        wait_for("the stall to reach the webhook", lambda: _has(webhook_events(webhook_rx), (STALL, "firing")))
        wait_for("the stall to reach Slack", lambda: _has(slack_events(slack_rx), (STALL, "firing")))
        wait_for("the stall to reach Alertmanager's receiver", lambda: _has(am_notified(hook), (STALL, "firing")))
        active = httpx.get(f"{alertmanager}/api/v2/alerts", timeout=5.0).json()
        assert [a["labels"]["alertname"] for a in active] == [STALL]
        assert active[0]["labels"]["job_id"] == live.query_id

        # 2. the watermark moves (recorded batch 5): the stall is resolved everywhere
        live.batches(5)
        wait_for("the stall's resolution at the webhook", lambda: _has(webhook_events(webhook_rx), (STALL, "resolved")))
        wait_for("the stall's resolution at Slack", lambda: _has(slack_events(slack_rx), (STALL, "resolved")))
        wait_for("Alertmanager to resolve the stall", lambda: _has(am_notified(hook), (STALL, "resolved")), 40.0)

        # 3. a row dated 2099 (recorded batch 6), then the watermark in 2098 (batch 7): future timestamps
        live.batches(6, 7)
        wait_for("the future jump at the webhook", lambda: _has(webhook_events(webhook_rx), (FUTURE, "firing")))
        wait_for("the future jump at Slack", lambda: _has(slack_events(slack_rx), (FUTURE, "firing")))
        wait_for("the future jump at Alertmanager", lambda: _has(am_notified(hook), (FUTURE, "firing")))

        # 4. the query restarts from a checkpoint taken before the jump (recorded batch 2 in a new run)
        live.start_run()
        live.batches(2)
        wait_for("the jump's resolution at the webhook", lambda: _has(webhook_events(webhook_rx), (FUTURE, "resolved")))
        wait_for("the jump's resolution at Slack", lambda: _has(slack_events(slack_rx), (FUTURE, "resolved")))
        wait_for("Alertmanager to resolve the jump", lambda: _has(am_notified(hook), (FUTURE, "resolved")), 40.0)

        assert daemon.terminate() == 0
    finally:
        daemon.close()
    expected = [(STALL, "firing"), (STALL, "resolved"), (FUTURE, "firing"), (FUTURE, "resolved")]
    assert webhook_events(webhook_rx) == expected
    assert slack_events(slack_rx) == expected
    # the log names rule, job and receiver of each transition and delivery
    log = daemon.log()
    assert f"alert {STALL} firing for spark job {live.query_id}" in log
    assert f"alert {FUTURE} resolved for spark job {live.query_id}" in log
    assert f"delivered 1 notification(s) to receiver 'ops': firing {STALL} for " in log
    assert f"delivered 1 notification(s) to receiver 'chat': resolved {FUTURE} for " in log
    # every webhook request carried its own idempotency key and a signature
    keys = [r.headers["idempotency-key"] for r in webhook_rx.processed]
    assert len(keys) == len(set(keys)) == 4
    assert all(r.headers["x-tidegauge-signature"].startswith("t=") for r in webhook_rx.processed)


def _outbox(db_url: str) -> list[tuple[str, str, str]]:
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            return [(o.receiver, o.status, o.state) for o in s.scalars(select(OutboxRow).order_by(OutboxRow.id))]
    finally:
        engine.dispose()


def test_kill_9_between_transition_and_delivery_loses_and_duplicates_nothing(
    tmp_path: Path, spark_fixtures: Path, webhook_rx: Receiver, slack_rx: Receiver
) -> None:
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    # the webhook receiver processes the request, then takes 60 s to answer (the daemon waits up to 2 min):
    # the daemon is killed after the receiver did the work and before the daemon recorded the delivery.
    # The Slack-format receiver fails with 503 until the restart: its row stays pending in the outbox.
    webhook_rx.delay_seconds = 60.0
    slack_rx.fail_status = 503
    # Slack first: the dispatcher sends one batch after the other in outbox order, so the Slack row is
    # tried (and refused) before the webhook request that hangs
    receivers = [SLACK, _webhook(webhook_rx.url, timeout="2m")]
    daemon = DaemonProcess(_config(tmp_path, receivers), db_url, tmp_path, {**SECRETS, "TG_SLACK_URL": slack_rx.url})
    live = LiveEventLog(tmp_path / "events" / "local-1795951957158.inprogress", spark_fixtures, datetime.now(UTC) - timedelta(minutes=10))
    try:
        daemon.start()
        live.batches(4, 4, 4, 4)
        wait_for("the webhook to process the firing notification", lambda: len(webhook_rx.processed) == 1)
        wait_for("Slack to refuse a delivery", lambda: len(slack_rx.requests) >= 1)
        daemon.kill9()
        assert sorted(_outbox(db_url)) == [("chat", "firing", "pending"), ("ops", "firing", "pending")]

        webhook_rx.delay_seconds = 0.0
        slack_rx.fail_status = None
        daemon.start()
        wait_for("Slack to get the firing notification", lambda: len(slack_rx.processed) == 1)
        wait_for("the webhook to be sent the batch again", lambda: len(webhook_rx.requests) >= 2)
        wait_for("every outbox row to be delivered", lambda: all(s == "delivered" for *_, s in _outbox(db_url)))

        live.batches(5)  # the stall ends: one resolved notification each
        wait_for("the resolution at the webhook", lambda: _has(webhook_events(webhook_rx), (STALL, "resolved")))
        wait_for("the resolution at Slack", lambda: _has(slack_events(slack_rx), (STALL, "resolved")))
        wait_for("every outbox row to be delivered", lambda: all(s == "delivered" for *_, s in _outbox(db_url)))
        assert daemon.terminate() == 0
    finally:
        daemon.close()

    # nothing lost, nothing processed twice
    assert webhook_events(webhook_rx) == [(STALL, "firing"), (STALL, "resolved")]
    assert slack_events(slack_rx) == [(STALL, "firing"), (STALL, "resolved")]
    # the firing batch reached the webhook twice (before the kill and after the restart) with one key
    firing_key = webhook_rx.processed[0].headers["idempotency-key"]
    assert [r.headers["idempotency-key"] for r in webhook_rx.requests].count(firing_key) >= 2
    # the restart neither re-fired nor re-queued: one firing and one resolved row per receiver
    assert sorted(_outbox(db_url)) == [
        ("chat", "firing", "delivered"),
        ("chat", "resolved", "delivered"),
        ("ops", "firing", "delivered"),
        ("ops", "resolved", "delivered"),
    ]


def test_sigint_lets_an_in_flight_delivery_finish(tmp_path: Path, spark_fixtures: Path, webhook_rx: Receiver) -> None:
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    webhook_rx.delay_seconds = 3.0  # processes at once, answers after 3 s
    daemon = DaemonProcess(_config(tmp_path, [_webhook(webhook_rx.url)]), db_url, tmp_path, SECRETS)
    live = LiveEventLog(tmp_path / "events" / "local-1795951957158.inprogress", spark_fixtures, datetime.now(UTC) - timedelta(minutes=10))
    try:
        daemon.start()
        live.batches(4, 4, 4, 4)
        wait_for("the webhook to receive the firing notification", lambda: len(webhook_rx.requests) == 1)
        # stop while the request is in flight: the daemon waits for the answer and records the delivery
        assert daemon.terminate(timeout_s=20.0, sig=signal.SIGINT) == 0
    finally:
        daemon.close()
    assert "SIGINT received: stopping" in daemon.log()
    assert _outbox(db_url) == [("ops", "firing", "delivered")]
    assert len(webhook_rx.requests) == 1
