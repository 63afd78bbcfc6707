"""The built daemon in process (build + start + stop, environment passed in): a Spark PrometheusServlet
target served from a recorded scrape on a loopback port, and the listener ingest endpoint mounted beside
/metrics, both ending up on /metrics.

Expected values read off prometheus_streaming_gauges_namespace_appname.txt by hand (query ``wm_metrics``):
eventTime_watermark 1704111000000 ms, inputRate_total 1.5, states_rowsTotal 4, states_usedBytes 2096.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from monitor.config import parse_config
from monitor.daemon.compose import build, wall_clock
from monitor.store import upgrade
from tests.daemon_process import free_port, metric_values, wait_for
from tests.live_eventlog import RECORDED_QUERY_ID, recorded_events
from tests.servers import static_pages

TOKEN = "ingest-token-for-tests-0123456789"


@pytest.fixture
def driver(spark_fixtures: Path) -> Iterator[str]:
    body = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_bytes()
    with static_pages({"/metrics/prometheus": body}) as base:
        yield f"{base}/metrics/prometheus"


def _job(text: str, name: str, job_id: str) -> list[float]:
    return [v for labels, v in metric_values(text, name) if labels.get("job_id") == job_id]


def test_prometheus_target_and_ingest_reach_metrics(tmp_path: Path, driver: str, spark_fixtures: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    port = free_port()
    config = parse_config(
        {
            "server": {"host": "127.0.0.1", "port": port, "ingest_token": {"env": "TG_INGEST"}},
            "targets": {"spark_prometheus": [{"name": "driver", "url": driver, "poll_interval": "200ms"}]},
            "evaluation_interval": "200ms",
        }
    )
    daemon = build(config, db_url=url, environ={"TG_INGEST": TOKEN}, clock=wall_clock)
    daemon.start()
    base = f"http://127.0.0.1:{port}"
    try:

        def scraped() -> str | None:
            text = httpx.get(f"{base}/metrics").text
            return text if _job(text, "tidegauge_watermark_timestamp_seconds", "wm_metrics") else None

        text = wait_for("the scraped gauges on /metrics", scraped, 20.0)
        assert _job(text, "tidegauge_watermark_timestamp_seconds", "wm_metrics") == [1704111000.0]
        assert _job(text, "tidegauge_input_rows_per_second", "wm_metrics") == [1.5]
        assert _job(text, "tidegauge_state_rows", "wm_metrics") == [4.0]
        assert _job(text, "tidegauge_state_memory_bytes", "wm_metrics") == [2096.0]
        assert ({"collector": "spark-prometheus", "target": "driver"}, 1.0) in metric_values(text, "tidegauge_target_up")

        [last] = [e for e in recorded_events(spark_fixtures) if e.get("progress", {}).get("batchId") == 11]
        answer = httpx.post(f"{base}/api/v1/spark/events", json=last, headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 202, answer.text
        text = httpx.get(f"{base}/metrics").text
        # 2099-01-01T00:10:00Z = 4070908800 + 600 s
        assert _job(text, "tidegauge_watermark_timestamp_seconds", RECORDED_QUERY_ID) == [4070909400.0]
        health = httpx.get(f"{base}/healthz").json()
        assert (health["status"], health["scheduler"]) == ("ok", "running")
    finally:
        daemon.stop(10.0)
    daemon.stop(10.0)  # idempotent
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{base}/healthz", timeout=2.0)


def test_a_failing_receiver_degrades_healthz_and_counts_on_metrics(tmp_path: Path) -> None:
    # Reproducer: with a webhook answering 503, /healthz said "ok" and /metrics had no notification counters.
    from datetime import UTC, datetime

    from monitor.alerts.routing import Route
    from monitor.model import Engine, Finding, JobRef, Severity
    from tests.alerting import migrated_sessions, tick
    from tests.http_receiver import running_receiver

    url = f"sqlite:///{tmp_path / 'tg.db'}"
    now = datetime.now(UTC)
    with migrated_sessions(url) as sessions:  # one firing alert waiting in the outbox
        job = JobRef(Engine.SPARK, "q-1", "run-1", "clicks")
        tick(sessions, [Finding("watermark_stall", Severity.CRITICAL, job, "flat", now)], now, [Route("ops")])
    port = free_port()
    with running_receiver() as rx:
        rx.fail_status = 503
        config = parse_config(
            {
                "server": {"host": "127.0.0.1", "port": port},
                "receivers": [{"name": "ops", "type": "webhook", "url": rx.url, "secret": {"env": "TG_HOOK"}}],
                "delivery": {"interval": "100ms", "initial_backoff": "50ms", "max_backoff": "100ms"},
            }
        )
        daemon = build(config, db_url=url, environ={"TG_HOOK": "hook-secret"}, clock=wall_clock)
        daemon.start()
        base = f"http://127.0.0.1:{port}"
        try:
            degraded = wait_for(
                "/healthz to say degraded",
                lambda: (lambda b: b if b["status"] == "degraded" else None)(httpx.get(f"{base}/healthz").json()),
                20.0,
            )
            text = httpx.get(f"{base}/metrics").text
            rx.fail_status = None
            wait_for(
                "/healthz to recover after a delivery",
                lambda: httpx.get(f"{base}/healthz").json()["status"] == "ok",
                20.0,
            )
            sent = metric_values(httpx.get(f"{base}/metrics").text, "tidegauge_notifications_sent_total")
        finally:
            daemon.stop(10.0)
    assert degraded["degraded"][0].startswith("receiver ops: ")
    assert "HTTP 503" in degraded["degraded"][0]
    [(failed_labels, failed)] = metric_values(text, "tidegauge_notifications_failed_total")
    assert failed_labels == {"receiver": "ops"} and failed >= 3
    [(depth_labels, depth)] = metric_values(text, "tidegauge_outbox_depth")
    assert depth_labels == {"receiver": "ops"} and depth >= 1  # the firing (and perhaps its resolution) wait
    # the firing notification, and (no samples hold the condition any more) perhaps its resolution
    assert sent in ([({"receiver": "ops"}, 1.0)], [({"receiver": "ops"}, 2.0)])
