"""Chaos: ``kill -9`` of a real ``tidegauge run`` process at seeded random points while a loopback webhook
receiver fails for stretches (503), and notifications keep being raised: every notification is delivered,
none under two idempotency keys, and the Slack-format receiver (no idempotency key) sees each at least
once and at most one extra copy per kill.

Alerts come from "live" event logs written from the recorded real Spark lines (tests/live_eventlog.py):
each of ``JOBS`` queries stalls (recorded batch 4 four times: watermark flat while rows arrive; the
``watermark_stall`` rule with ``for: 0s``) and later resolves (recorded batch 5: the watermark moves), so
2 x ``JOBS`` notifications go to each receiver. The kill points and the receiver's failing stretches are
drawn from ``random.Random(SEED)``; the timing of the daemon's ticks around them is real, so each run
kills at different moments of its work (a send in flight, a transition being committed, a poll).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.store import upgrade
from tests.daemon_process import DaemonProcess, free_port, outbox_states, wait_for
from tests.http_receiver import Receiver, keys_by_notification, processed_alerts, running_receiver
from tests.live_eventlog import LiveEventLog
from tests.rule_samples import only_rules

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 20261129
JOBS = 6
STALL = "watermark_stall"


@pytest.fixture
def webhook_rx() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


@pytest.fixture
def slack_rx() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


def _config(tmp_path: Path, webhook_url: str) -> dict[str, Any]:
    return {
        "rules": only_rules(**{STALL: {"for": "0s"}}),
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {"spark_event_logs": [{"name": "live", "path": str(tmp_path / "events"), "poll_interval": "200ms"}]},
        "evaluation_interval": "200ms",
        "delivery": {"interval": "200ms", "initial_backoff": "200ms", "max_backoff": "600ms"},
        "receivers": [
            {"name": "ops", "type": "webhook", "url": webhook_url, "secret": {"env": "TG_WEBHOOK_SECRET"}},
            {"name": "chat", "type": "slack", "url": {"env": "TG_SLACK_URL"}},
        ],
    }


def _slack_seen(rx: Receiver, names: dict[str, str]) -> list[tuple[str, str]]:
    """(job id, status) of every Slack message processed (text ``[FIRING] <name> (spark <id>): ...``)."""
    out = []
    with rx.lock:
        for r in rx.processed:
            text = r.json()["text"]
            status = text[1 : text.index("]")].lower()
            job = next(job_id for job_id in names if job_id in text)
            out.append((job, status))
    return out


def test_kill_9_at_random_points_with_a_flaky_receiver_delivers_everything_once(
    tmp_path: Path, spark_fixtures: Path, webhook_rx: Receiver, slack_rx: Receiver
) -> None:
    rng = random.Random(SEED)
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    # both receivers do the work, then answer after a moment: a kill then lands after the work and
    # before the daemon recorded it (the case idempotency keys are for)
    webhook_rx.delay_seconds = slack_rx.delay_seconds = 0.15
    env = {"TG_WEBHOOK_SECRET": "chaos-secret", "TG_SLACK_URL": slack_rx.url}
    daemon = DaemonProcess(_config(tmp_path, webhook_rx.url), db_url, tmp_path, env)
    # recent trigger times: batches older than the rules' history horizon when first seen notify nobody
    start = datetime.now(UTC) - timedelta(minutes=2)
    logs = [
        LiveEventLog(
            tmp_path / "events" / f"app-{i}.inprogress", spark_fixtures, start + timedelta(seconds=10 * i),
            query_id=str(uuid.UUID(int=rng.getrandbits(128))),
        )
        for i in range(JOBS)
    ]  # fmt: skip
    names = {log.query_id: log.query_id for log in logs}
    kills = 0

    def chaos_step() -> None:
        """Maybe flip the receivers' failing stretch; maybe kill -9 after a random delay and restart."""
        nonlocal kills
        if rng.random() < 0.5:
            failing = None if webhook_rx.fail_status else 503
            webhook_rx.fail_status = slack_rx.fail_status = failing
        if rng.random() < 0.6:
            time.sleep(rng.uniform(0.0, 1.5))
            daemon.kill9()
            kills += 1
            daemon.start()
        else:
            time.sleep(rng.uniform(0.2, 1.0))

    try:
        daemon.start()
        for i, log in enumerate(logs):
            log.batches(4, 4, 4, 4)  # job i stalls
            chaos_step()
            if i >= 1:
                logs[i - 1].batches(5)  # job i-1 resolves
                chaos_step()
        logs[-1].batches(5)
        chaos_step()
        webhook_rx.fail_status = slack_rx.fail_status = None
        expected = sorted((log.query_id, status) for log in logs for status in ("firing", "resolved"))
        wait_for("every notification at the webhook", lambda: sorted(processed_alerts(webhook_rx)) == expected, 90.0)
        wait_for(
            "every notification at Slack",
            lambda: set(_slack_seen(slack_rx, names)) == set(expected) or None,
            90.0,
        )
        wait_for("the outbox to drain", lambda: set(outbox_states(db_url)) == {"delivered"}, 30.0)
        assert daemon.terminate() == 0
    finally:
        daemon.close()

    assert kills >= 3, "the seed must kill the daemon a few times"
    # every notification delivered, each processed once, and none under two idempotency keys
    assert sorted(processed_alerts(webhook_rx)) == expected
    by_notification = keys_by_notification(webhook_rx)
    assert len(by_notification) == len(expected)
    assert {n: keys for n, keys in by_notification.items() if len(keys) != 1} == {}
    # Slack has no key: a kill during a send may show that one message twice, never more
    slack = _slack_seen(slack_rx, names)
    assert set(slack) == set(expected)
    assert len(slack) - len(expected) <= kills
    assert sorted(outbox_states(db_url)) == ["delivered"] * (2 * len(expected))
    # log lines name rule, job and receiver (a kill between a commit and its log line may drop one line,
    # so not every job is required here; tests/integration/test_daemon_alerts.py checks each without kills)
    lines = daemon.log().splitlines()
    ids = {job.query_id for job in logs}
    transitions = [line for line in lines if f"alert {STALL} firing for spark job " in line]
    deliveries = [line for line in lines if f"to receiver 'ops': firing {STALL} for " in line]
    assert transitions and deliveries
    assert all(any(i in line for i in ids) for line in transitions + deliveries)
