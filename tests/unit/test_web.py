"""The daemon's HTTP app served by uvicorn on a loopback port: /metrics, /healthz (200/503), the listener
ingest endpoint mounted beside them, and the HttpService start/stop contract."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from monitor.config import parse_config
from monitor.daemon.ingest import COLLECTOR_NAME, create_ingest_app
from monitor.daemon.runtime import Runtime
from monitor.daemon.web import HttpService, create_app
from monitor.errors import StartupError
from monitor.metrics.exporter import TidegaugeCollector
from monitor.metrics.latest import LatestSamples
from monitor.model import PollResult
from monitor.store import Store, load_samples
from tests.daemon_process import metric_values
from tests.live_eventlog import RECORDED_QUERY_ID, recorded_events

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TOKEN = "a-token-of-at-least-16-chars"
# 2099-01-01T00:10:00Z (the recorded batch 11's watermark) in Unix seconds: 4070908800 + 600
WATERMARK_S = 4070909400.0


@pytest.fixture
def served(store: Store) -> Iterator[tuple[str, Runtime, dict[str, Any]]]:
    runtime = Runtime(sessions=store.sessions, targets=[], latest=LatestSamples(), rules_config=parse_config({}).rules)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TidegaugeCollector(runtime.latest, lambda: NOW, alerts=runtime.alert_counts))
    state: dict[str, Any] = {"healthy": True}

    def health() -> tuple[bool, dict[str, Any]]:
        ok, body = runtime.health()
        return ok and state["healthy"], body

    def sink(result: PollResult) -> None:
        runtime.ingest(result, COLLECTOR_NAME)

    ingest = create_ingest_app(token=TOKEN, sink=sink, clock=lambda: NOW)
    service = HttpService(create_app(registry, health, ingest), "127.0.0.1", 0)
    service.start()
    try:
        yield f"http://127.0.0.1:{service.port}", runtime, state
    finally:
        service.stop(5.0)
        service.stop(5.0)  # idempotent


def test_metrics_healthz_and_ingest(served: tuple[str, Runtime, dict[str, Any]], store: Store, spark_fixtures: Path) -> None:
    base, _, state = served
    metrics = httpx.get(f"{base}/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    openmetrics = httpx.get(f"{base}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.endswith("# EOF\n")
    assert metric_values(metrics.text, "tidegauge_watermark_timestamp_seconds") == []

    health = httpx.get(f"{base}/healthz")
    assert (health.status_code, health.json()["status"], health.json()["store"]) == (200, "ok", "ok")
    state["healthy"] = False
    health = httpx.get(f"{base}/healthz")
    assert (health.status_code, health.json()["status"]) == (503, "unavailable")

    # the recorded progress of batch 11 pushed as the listener would: stored, and on /metrics at once
    [last] = [e for e in recorded_events(spark_fixtures) if e.get("progress", {}).get("batchId") == 11]
    refused = httpx.post(f"{base}/api/v1/spark/events", json=last)
    assert refused.status_code == 401
    accepted = httpx.post(f"{base}/api/v1/spark/events", json=last, headers={"Authorization": f"Bearer {TOKEN}"})
    assert accepted.status_code == 202, accepted.text
    text = httpx.get(f"{base}/metrics").text
    job = [v for labels, v in metric_values(text, "tidegauge_watermark_timestamp_seconds") if labels["job_id"] == RECORDED_QUERY_ID]
    assert job == [WATERMARK_S]
    with store.sessions() as s:
        stored = load_samples(s, job_id=RECORDED_QUERY_ID)
    assert {x.batch_id for x in stored} == {11}
    assert all(x.collector == COLLECTOR_NAME for x in stored)


def test_a_taken_port_fails_start(served: tuple[str, Runtime, dict[str, Any]]) -> None:
    base, _, _ = served
    port = int(base.rsplit(":", 1)[1])
    app = create_app(CollectorRegistry(), lambda: (True, {}))
    other = HttpService(app, "127.0.0.1", port, start_timeout_s=5.0)
    with pytest.raises(StartupError, match=f"cannot listen on 127.0.0.1:{port}: address already in use"):
        other.start()
    other.stop(1.0)


def test_port_zero_reports_the_bound_port() -> None:
    service = HttpService(create_app(CollectorRegistry(), lambda: (True, {})), "127.0.0.1", 0)
    service.start()
    try:
        assert service.port > 0
        with socket.create_connection(("127.0.0.1", service.port), timeout=2.0):
            pass
    finally:
        service.stop(5.0)


def test_a_client_dribbling_its_headers_is_disconnected() -> None:
    import time

    service = HttpService(create_app(CollectorRegistry(), lambda: (True, {})), "127.0.0.1", 0, header_timeout_s=0.5)
    service.start()
    try:
        with socket.create_connection(("127.0.0.1", service.port), timeout=10.0) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            started = time.monotonic()
            assert sock.recv(1024) == b""  # closed by the server
            assert time.monotonic() - started < 5.0
        # a prompt client on another connection is served, and its keep-alive request too
        with httpx.Client(base_url=f"http://127.0.0.1:{service.port}") as client:
            assert client.get("/healthz").status_code == 200
            time.sleep(0.7)  # longer than the header deadline, shorter than keep-alive
            assert client.get("/healthz").status_code == 200
    finally:
        service.stop(5.0)


def test_healthz_is_degraded_but_200_when_the_probe_names_a_degraded_part() -> None:
    body = {"degraded": ["receiver ops: 3 consecutive failed deliveries"]}
    service = HttpService(create_app(CollectorRegistry(), lambda: (True, dict(body))), "127.0.0.1", 0)
    service.start()
    try:
        response = httpx.get(f"http://127.0.0.1:{service.port}/healthz")
    finally:
        service.stop(5.0)
    assert response.status_code == 200
    assert response.json() == {"status": "degraded", **body}
