"""The built daemon in process (build + start + stop, environment passed in): a Spark PrometheusServlet
target served from a recorded scrape on a loopback port, and the listener ingest endpoint mounted beside
/metrics, both ending up on /metrics.

Expected values read off prometheus_streaming_gauges_namespace_appname.txt by hand (query ``wm_metrics``):
eventTime_watermark 1704111000000 ms, inputRate_total 1.5, states_rowsTotal 4, states_usedBytes 2096.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.config import parse_config
from monitor.daemon import build, wall_clock
from monitor.store import upgrade
from tests.daemon_process import free_port, metric_values, wait_for
from tests.live_eventlog import RECORDED_QUERY_ID, recorded_events

TOKEN = "ingest-token-for-tests-0123456789"


@pytest.fixture
def driver(spark_fixtures: Path) -> Iterator[str]:
    body = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics/prometheus"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


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
