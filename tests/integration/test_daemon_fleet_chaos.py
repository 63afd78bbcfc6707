"""Chaos in a fleet: three real ``tidegauge run`` instances on one real PostgreSQL, each job's "live" event
log its own target (so the jobs spread over the instances), a loopback webhook receiver failing for
stretches (503), and seeded random ``kill -9`` of one instance at a time (restarted at once under its
name). Every notification is delivered exactly once per receiver by idempotency key: none lost, none
processed twice, none under two keys (issue 16's duplicate page), though the instance holding a job's
target, or the receiver, dies and another takes it over after ``lease_ttl``.

Alerts as in tests/integration/test_daemon_chaos.py: each of ``JOBS`` queries stalls (recorded batch 4
four times, ``watermark_stall`` with ``for: 0s``) and later resolves (recorded batch 5).
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.store import upgrade
from tests.daemon_process import DaemonProcess, free_port, outbox_states, wait_for
from tests.http_receiver import keys_by_notification, processed_alerts, running_receiver
from tests.live_eventlog import LiveEventLog
from tests.rule_samples import only_rules

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.slow]

SEED = 20261201
JOBS = 6
KILLS = 4
STALL = "watermark_stall"
NAMES = ("a", "b", "c")


def _config(tmp_path: Path, webhook_url: str, db_url: str) -> dict[str, Any]:
    return {
        "database": db_url,
        "rules": only_rules(**{STALL: {"for": "0s"}}),
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {
            "spark_event_logs": [
                {"name": f"job-{i}", "path": str(tmp_path / "events" / str(i)), "poll_interval": "500ms"}
                for i in range(JOBS)
            ]
        },
        "evaluation_interval": "500ms",
        "delivery": {"interval": "500ms", "initial_backoff": "200ms", "max_backoff": "1s"},
        "receivers": [{"name": "ops", "type": "webhook", "url": webhook_url, "secret": {"env": "TG_WEBHOOK_SECRET"}}],
    }


def test_kills_in_a_fleet_with_a_flaky_receiver_deliver_every_notification_once_by_key(
    tmp_path: Path, spark_fixtures: Path, postgres_url: str
) -> None:
    rng = random.Random(SEED)
    upgrade(postgres_url)
    with running_receiver() as webhook_rx:
        webhook_rx.delay_seconds = 0.15  # a kill may land after the work and before it was recorded
        env = {"TG_WEBHOOK_SECRET": "fleet-chaos-secret"}
        daemons = {}
        for name in NAMES:
            workdir = tmp_path / name
            workdir.mkdir()
            daemons[name] = DaemonProcess(
                _config(tmp_path, webhook_rx.url, postgres_url), postgres_url, workdir, env, instance=name
            )
        start = datetime.now(UTC) - timedelta(minutes=2)
        logs = [
            LiveEventLog(
                tmp_path / "events" / str(i) / f"app-{i}.inprogress", spark_fixtures, start + timedelta(seconds=10 * i),
                query_id=str(uuid.UUID(int=rng.getrandbits(128))),
            )
            for i in range(JOBS)
        ]  # fmt: skip
        kills = 0

        def chaos_step(kill: bool) -> None:
            nonlocal kills
            if rng.random() < 0.5:
                webhook_rx.fail_status = None if webhook_rx.fail_status else 503
            time.sleep(rng.uniform(0.2, 1.5))
            if kill:
                victim = daemons[rng.choice(NAMES)]
                victim.kill9()
                kills += 1
                victim.start()

        kill_at = set(rng.sample(range(2 * JOBS), KILLS))
        try:
            for daemon in daemons.values():
                daemon.start()
            step = 0
            for i, log in enumerate(logs):
                log.batches(4, 4, 4, 4)  # job i stalls
                chaos_step(step in kill_at)
                step += 1
                if i >= 1:
                    logs[i - 1].batches(5)  # job i-1 resolves
                    chaos_step(step in kill_at)
                    step += 1
            logs[-1].batches(5)
            chaos_step(step in kill_at)
            webhook_rx.fail_status = None
            expected = sorted((log.query_id, status) for log in logs for status in ("firing", "resolved"))
            wait_for(
                "every notification at the webhook",
                lambda: sorted(processed_alerts(webhook_rx)) == expected or None,
                240.0,
                0.5,
            )
            wait_for("the outbox to drain", lambda: set(outbox_states(postgres_url)) == {"delivered"}, 60.0, 0.5)
            for daemon in daemons.values():
                assert daemon.terminate() == 0
        finally:
            for daemon in daemons.values():
                daemon.close()
        logs_by_instance = {name: d.log() for name, d in daemons.items()}

    assert kills == KILLS
    assert sorted(processed_alerts(webhook_rx)) == expected
    by_notification = keys_by_notification(webhook_rx)
    assert len(by_notification) == len(expected)
    assert {n: keys for n, keys in by_notification.items() if len(keys) != 1} == {}
    assert sorted(outbox_states(postgres_url)) == ["delivered"] * len(expected)
    # the work was shared: several instances evaluated jobs, and targets changed hands after the kills
    evaluators = [n for n, text in logs_by_instance.items() if f"alert {STALL} firing for spark job " in text]
    assert len(evaluators) >= 2, evaluators
    assert all("took target job-" in text for text in logs_by_instance.values())
    assert sum(text.count("took target job-") for text in logs_by_instance.values()) > JOBS
