"""``tidegauge run`` as a real process over the recorded real Spark event log: /metrics carries the
recorded query's last batch, /healthz answers, SIGTERM stops it cleanly, a restart shows the stored state
at once and does not read the log again.

Expected values are read off the recorded file by hand (events_1_local-1795951957158.zstd, query
``wm_gt`` = be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8). Its last progress is batch 11 at
2026-11-29T11:32:50.792Z: ``eventTime`` has only ``watermark`` 2099-01-01T00:10:00.000Z (no max: the batch
had no rows); stateOperators[0]: numRowsTotal 1, memoryUsedBytes 1456; batchDuration 428 ms; its one
source reports inputRowsPerSecond 0.0. Rows over all batches: 5 + 6 + 6 + 3 + 3 + 1 = 24 (batches 0, 2, 4,
6, 8, 10); dropped by watermark: 1 + 2 + 2 = 5 (batches 2, 4, 8).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from monitor.store import upgrade
from tests.daemon_process import DaemonProcess, free_port, metric_values, wait_for
from tests.live_eventlog import RECORDED_DIR

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUERY = "be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8"
# 2099-01-01T00:00Z is 4070908800 s after the epoch (129 years of 365 days + 32 leap days since 1970:
# (129 * 365 + 32) * 86400 = 4070908800); the watermark is 10 minutes later.
WATERMARK_S = 4070908800 + 600
LAST_BATCH_S = datetime(2026, 11, 29, 11, 32, 50, 792000, tzinfo=UTC).timestamp()


@pytest.fixture
def daemon(tmp_path: Path, spark_fixtures: Path) -> Iterator[DaemonProcess]:
    logs = tmp_path / "logs"
    shutil.copytree(spark_fixtures / RECORDED_DIR.parent, logs)
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    config = {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {"spark_event_logs": [{"name": "recorded", "path": str(logs), "poll_interval": "500ms"}]},
        "evaluation_interval": "500ms",
    }
    process = DaemonProcess(config, db_url, tmp_path)
    try:
        yield process
    finally:
        process.close()


def _job(text: str, name: str, **extra: str) -> list[float]:
    return [
        v
        for labels, v in metric_values(text, name)
        if labels.get("job_id") == QUERY and all(labels.get(k, "") == x for k, x in {"source": "", **extra}.items())
    ]


def test_metrics_health_and_clean_stop(daemon: DaemonProcess) -> None:
    daemon.start()

    def scraped() -> str | None:
        text = daemon.metrics()
        return text if _job(text, "tidegauge_watermark_timestamp_seconds") else None

    text = wait_for("the recorded query's watermark on /metrics", scraped)
    assert _job(text, "tidegauge_watermark_timestamp_seconds") == [WATERMARK_S]
    [lag] = _job(text, "tidegauge_watermark_lag_seconds")
    assert lag < 0  # a watermark in 2099 is ahead of any scrape time today
    assert _job(text, "tidegauge_event_time_max_timestamp_seconds") == []  # unknown, not zero
    assert _job(text, "tidegauge_state_rows") == [1.0]
    assert _job(text, "tidegauge_state_memory_bytes") == [1456.0]
    assert _job(text, "tidegauge_batch_duration_seconds") == [0.428]
    assert _job(text, "tidegauge_input_rows_total") == [24.0]
    assert _job(text, "tidegauge_dropped_by_watermark_rows_total") == [5.0]
    assert _job(text, "tidegauge_last_sample_timestamp_seconds") == [pytest.approx(LAST_BATCH_S)]
    rates = [v for labels, v in metric_values(text, "tidegauge_input_rows_per_second") if labels["job_id"] == QUERY]
    assert rates == [0.0]
    assert metric_values(text, "tidegauge_target_up") == [({"collector": "spark-eventlog", "target": "recorded"}, 1.0)]
    assert metric_values(text, "tidegauge_collector_errors_total") == [
        ({"collector": "spark-eventlog", "target": "recorded"}, 0.0)
    ]

    # the daemon replays every recorded batch at its own time: the future-timestamp alert is raised at
    # batch 6 and resolved when the query terminated (its last run stops cleanly), all of it history older
    # than the horizon (stored and shown, never paged)
    def future_resolved() -> bool:
        alerts = metric_values(daemon.metrics(), "tidegauge_alerts")
        return ({"rule": "future_timestamp", "severity": "critical", "state": "resolved"}, 1.0) in alerts

    wait_for("the future-timestamp alert raised from history and resolved at termination", future_resolved)

    health = httpx.get(f"{daemon.base}/healthz", timeout=5.0)
    assert health.status_code == 200
    body = health.json()
    assert (body["status"], body["store"], body["scheduler"]) == ("ok", "ok", "running")
    assert [(t["name"], t["up"]) for t in body["targets"]] == [("recorded", True)]

    assert daemon.terminate(timeout_s=10.0) == 0
    log = daemon.log()
    assert "SIGTERM received: stopping" in log
    assert log.index("stopped scheduler") < log.index("stopped http") < log.index("stopped store")

    # restart on the same database: the stored samples are on /metrics before any new poll, and the
    # cursor keeps the collector from reading (and counting) the log again
    daemon.start()
    text = daemon.metrics()
    assert _job(text, "tidegauge_watermark_timestamp_seconds") == [WATERMARK_S]
    wait_for(
        "a poll after the restart",
        lambda: httpx.get(f"{daemon.base}/healthz", timeout=5.0).json()["targets"][0]["polls"] >= 2,
    )
    assert _job(daemon.metrics(), "tidegauge_input_rows_total") == [24.0]
    assert daemon.terminate(timeout_s=10.0) == 0


def test_outdated_schema_is_refused(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    config = {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {"spark_event_logs": [{"name": "x", "path": str(tmp_path / "logs")}]},
    }
    process = DaemonProcess(config, f"sqlite:///{tmp_path / 'empty.db'}", tmp_path)
    with pytest.raises(AssertionError, match="daemon exited with 2"):
        process.start(ready_timeout_s=20.0)
    assert "tidegauge db upgrade" in process.log()
