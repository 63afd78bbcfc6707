"""The demo's simulated kafka_exporter: its text has the families, help texts, label sets and line shapes
of the recorded kafka_exporter exposition (tests/fixtures/kafka/prometheus/kafka_exporter_readme_*.prom),
and tidegauge's exporter collector, scraping it on loopback, gives samples whose lag climbs after the
``group_lag`` fault, which the ``consumer_lag`` rule (Burrow's evaluator) reports for the lagging group
only. Fixed fake clock."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.kafka.exporter_scrape import ExporterScrapeCollector
from collectors.kafka.exporters import parse_exporter_text
from monitor.daemon.web import HttpService
from monitor.demo.exporter import create_exporter_app
from monitor.demo.kafkasim import KafkaSim, SimGroup
from monitor.model import Sample
from rules.consumer_lag import LagParams, evaluate_lag
from tests.rule_samples import history

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "kafka" / "prometheus"
START = datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
FAULT_MS = START_MS + 60_000


@pytest.fixture(scope="module")
def sim() -> KafkaSim:
    kafka = KafkaSim([SimGroup("ledger-writer", fault_at_ms=FAULT_MS), SimGroup("audit-archiver", members=1)])
    kafka.prepare(START_MS, 10 * 60_000, np.random.default_rng(5))
    return kafka


def _recorded_text() -> str:
    return "\n".join(p.read_text() for p in sorted(RECORDED.glob("kafka_exporter_*.prom")))


def _shape(line: str) -> str:
    return re.sub(r" -?\d+$", " N", re.sub(r'"[^"]*"', '""', line))


def test_families_help_labels_and_line_shapes_are_the_recorded_ones(sim: KafkaSim) -> None:
    ours = sim.exposition(START_MS + 30_000)
    recorded = {f.name: f for f in text_string_to_metric_families(_recorded_text())}
    families = list(text_string_to_metric_families(ours))
    assert {f.name for f in families} <= set(recorded)
    assert {"kafka_consumergroup_lag", "kafka_consumergroup_current_offset", "kafka_topic_partition_current_offset"} <= {
        f.name for f in families}
    for fam in families:
        rec = recorded[fam.name]
        assert (fam.documentation, fam.type) == (rec.documentation, rec.type), fam.name
        assert {tuple(sorted(s.labels)) for s in fam.samples} == {tuple(sorted(s.labels)) for s in rec.samples}
    recorded_shapes = {_shape(line) for line in _recorded_text().splitlines()}
    assert {_shape(line) for line in ours.splitlines()} <= recorded_shapes


def _scrape(collector: ExporterScrapeCollector, clock: list[datetime], at: datetime) -> list[Sample]:
    clock[0] = at
    result = collector.poll(at)
    assert result.errors == ()
    return list(result.samples)


@pytest.fixture(scope="module")
def scraped(sim: KafkaSim) -> Iterator[list[list[Sample]]]:
    clock = [START]
    service = HttpService(create_exporter_app(sim, lambda: clock[0]), "127.0.0.1", 0)
    service.start()
    try:
        with httpx.Client(timeout=5) as client:
            collector = ExporterScrapeCollector(f"http://127.0.0.1:{service.port}/metrics", client, "demo-kafka")
            yield [_scrape(collector, clock, START + timedelta(seconds=s)) for s in range(20, 101, 2)]
    finally:
        service.stop(5.0)


def test_the_served_text_parses_as_kafka_exporter_with_lag_end_minus_committed(sim: KafkaSim) -> None:
    at = START_MS + 45_500
    groups = {g.lag.group: g for g in parse_exporter_text(sim.exposition(at), "demo")}
    assert set(groups) == {"ledger-writer", "audit-archiver"}
    assert {g.exporter for g in groups.values()} == {"kafka_exporter"}
    ends = sim.log_end(at)
    for name, g in groups.items():
        committed = sim.committed(sim.group(name), at)
        assert [(p.partition, p.lag) for p in g.lag.partitions] == [
            (i, ends[i] - committed[i]) for i in range(3)
        ]


def _partition_lags(rounds: list[list[Sample]], job_id: str) -> list[int]:
    return [s.lag_offsets or 0 for r in rounds for s in r
            if s.job.job_id == job_id and s.scope.partition == 0]


def test_lag_climbs_after_the_fault_and_consumer_lag_reports_that_group_only(scraped: list[list[Sample]]) -> None:
    params = LagParams(window_samples=6, allowed_lag=150)  # the demo's rule parameters
    before = [r for r in scraped if r[0].observed_at < START + timedelta(milliseconds=FAULT_MS - START_MS)]
    after = [r for r in scraped if r[0].observed_at >= START + timedelta(seconds=70)]
    assert max(_partition_lags(before, "demo-kafka/ledger-writer")) <= 150  # keeping up: under a second's worth
    lags = _partition_lags(after, "demo-kafka/ledger-writer")
    assert lags == sorted(lags) and lags[-1] - lags[0] > 500  # climbing, in offsets
    assert max(_partition_lags(scraped, "demo-kafka/audit-archiver")) <= 150

    def findings(rounds: list[list[Sample]], job_id: str) -> list[str]:
        samples = [s for r in rounds for s in r if s.job.job_id == job_id]
        return [f"{f.scope.partition}:{f.details['status']}" for f in evaluate_lag(params, history(samples),
                                                                                     rounds[-1][0].observed_at)]

    assert findings(before, "demo-kafka/ledger-writer") == []
    assert sorted(findings(scraped, "demo-kafka/ledger-writer")) == ["0:WARN", "1:WARN", "2:WARN"]
    assert findings(scraped, "demo-kafka/audit-archiver") == []
