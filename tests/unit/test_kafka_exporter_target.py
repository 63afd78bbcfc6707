"""`targets.kafka_exporters`: the built daemon (in process) scrapes a loopback endpoint serving the recorded
KMinion metrics (tests/fixtures/kafka/prometheus/kminion_docs_metrics_topic_and_group.prom) and serves
the lag on /metrics; a page that is not Prometheus text is one error entry. Expected value read off the
file: kminion_kafka_consumer_group_topic_partition_lag{group_id="bigquery-sink",partition_id="10",
topic_name="shop-activity"} 147481."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from collectors.kafka.exporter_scrape import ExporterScrapeCollector
from monitor.config import parse_config
from monitor.daemon.compose import build, wall_clock
from monitor.store import upgrade
from tests.daemon_process import free_port, metric_values, wait_for
from tests.servers import static_pages


@pytest.fixture
def exporter(recorded_fixtures: Path) -> Iterator[str]:
    pages = {
        "/metrics": (recorded_fixtures / "kafka/prometheus/kminion_docs_metrics_topic_and_group.prom").read_bytes(),
        "/broken": b"<html><body>502 Bad Gateway</body></html>{",
    }

    with static_pages(pages) as base:
        yield base


def test_daemon_scrapes_an_exporter_and_serves_the_lag(exporter: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    port = free_port()
    config = parse_config({
        "server": {"host": "127.0.0.1", "port": port},
        "targets": {"kafka_exporters": [{"name": "kminion", "url": f"{exporter}/metrics", "poll_interval": "200ms"}]},
        "evaluation_interval": "200ms",
    })
    daemon = build(config, db_url=url, environ={}, clock=wall_clock)
    daemon.start()
    try:
        def lag() -> list[float] | None:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            got = [v for lv, v in metric_values(text, "tidegauge_consumer_lag_offsets")
                   if lv.get("job_id") == "kminion/bigquery-sink" and lv.get("partition") == "10"]
            return got or None

        assert wait_for("the exporter's lag on /metrics", lag, 20.0) == [147481.0]
    finally:
        daemon.stop()


def test_a_page_that_is_not_prometheus_text_is_one_error(exporter: str) -> None:
    with httpx.Client() as client:
        result = ExporterScrapeCollector(f"{exporter}/broken", client, "x").poll(datetime(2026, 11, 29, tzinfo=UTC))
    (err,) = result.errors
    assert result.samples == () and "not Prometheus text exposition format" in err.message
    assert err.collector == "kafka-exporter" and not err.retryable
