"""End to end: a real PySpark query reads the test broker through Spark's Kafka source
(``spark-sql-kafka-0-10`` from Maven Central, tests/spark_kafka_jars.py), throttled to ~50 records/s, while
a producer writes ~120 records/s; then the producer stops and the query catches up.

tidegauge watches it as a user's deployment would: every second it reads the query's newest progress
(``query.lastProgress`` as JSON lines, written by the driver ``spark_kafka_app.py``), compares the Kafka
source's ``endOffset`` with the broker's log-end offsets (:meth:`KafkaLagCollector.checkpoint_lag`: Spark
keeps its offsets in the checkpoint, not in a consumer group), and runs the lag rules
(``consumer_lag`` and ``consumer_lag_seconds`` with a 2 s threshold) through ``rules.registry`` and the
alert lifecycle. Asserted: while the producer runs the lag grows in offsets and in seconds, both from the
broker and from Spark's own ``maxOffsetsBehindLatest``, and an alert fires; once the query has caught up
the lag is 0 and every alert is resolved.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from collectors.kafka import KafkaLagCollector, KafkaOptions, group_samples
from collectors.kafka.spark import source_offsets
from monitor.alerts.lifecycle import Alert, EventKind, step_all
from monitor.model import Sample
from rules.config import RulesConfig
from rules.registry import evaluate, rule_timing
from tests.kafka_broker import KafkaBroker, quiet_logger
from tests.kafka_clients import create_topic, produce, unique
from tests.spark_kafka_query import spark_kafka_query

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

RULES = RulesConfig.model_validate({"consumer_lag": {}, "consumer_lag_seconds": {"threshold": "2s"}})


def _newest_progress(out: Path) -> dict[str, Any] | None:
    path = out / "progress.jsonl"
    if not path.is_file():
        return None
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


class _Producer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, per_second: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.per_second = bootstrap, topic, per_second
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "logger": quiet_logger()})
        while not self.stop.is_set():
            started = time.monotonic()
            for i in range(self.per_second // 10):
                p.produce(self.topic, value=b"x", partition=(self.sent + i) % 2)
            self.sent += self.per_second // 10
            p.poll(0)
            time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        p.flush(30)


@pytest.fixture
def spark_query(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    topic = unique("spark-in")
    create_topic(kafka_broker.bootstrap, topic, 2)
    for p in (0, 1):
        produce(kafka_broker.bootstrap, topic, 10, partition=p)  # batch 0 runs on these, before the test
    with spark_kafka_query(kafka_broker.bootstrap, topic, tmp_path) as version:
        yield topic, tmp_path, version


def test_spark_query_falls_behind_then_catches_up(kafka_broker: KafkaBroker, spark_query: tuple[str, Path, str]) -> None:
    topic, out, version = spark_query
    collector = KafkaLagCollector(KafkaOptions("local", kafka_broker.bootstrap, lag_seconds="exact"))
    history: dict[str, list[Sample]] = {}
    alerts: dict[str, Alert] = {}
    timing = rule_timing(RULES)
    fired: set[str] = set()
    resolved: set[str] = set()
    seen: list[dict[str, Any]] = []

    def tick() -> dict[str, Any] | None:
        progress = _newest_progress(out)
        if progress is None:
            return None
        now = datetime.now(UTC)
        (source,) = source_offsets(progress, "progress.jsonl")
        lag = collector.checkpoint_lag(f"spark:{progress['name']}", source.end_offsets, now)
        history.setdefault(lag.group, []).extend(group_samples("local", lag, now))
        findings = evaluate(RULES, history, now)
        changed, events = step_all(alerts, findings, timing, now)
        alerts.update(changed)
        fired.update(alerts[e.fingerprint].rule for e in events if e.kind is EventKind.FIRING)
        resolved.update(alerts[e.fingerprint].rule for e in events if e.kind is EventKind.RESOLVED)
        row = {"batch": progress["batchId"], "lag": lag.lag, "lag_seconds": lag.lag_seconds,
               "spark_max_behind": source.metrics.get("maxOffsetsBehindLatest"),
               "firing": sorted(a.rule for a in alerts.values() if a.state.value == "firing")}
        seen.append(row)
        return row

    deadline = time.monotonic() + 240
    while _newest_progress(out) is None:  # the query warmed up on the seed records (JIT, first plan)
        assert time.monotonic() < deadline, "no progress from the query"
        time.sleep(0.5)
    producer = _Producer(kafka_broker.bootstrap, topic, per_second=120)
    producer.start()
    try:
        # produce until the query has reported 8 batches while behind (about 10 s on an idle machine;
        # a loaded one runs fewer, longer batches), at most 90 s
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len({r["batch"] for r in seen if r["lag"]}) < 8:
            tick()
            time.sleep(1.0)
    finally:
        producer.stop.set()
        producer.join(30)
    behind = [r for r in seen if r["lag"] is not None]
    assert len(behind) >= 5, seen
    # falling behind: the lag in offsets grows (from the broker) ...
    assert behind[-1]["lag"] > behind[len(behind) // 3]["lag"] > 0, seen
    # ... and so does the lag in seconds, and Spark's own view of it
    secs = [r["lag_seconds"] for r in behind if r["lag_seconds"] is not None]
    assert secs and max(secs) > 2.0, seen
    assert max(r["spark_max_behind"] or 0 for r in behind) > 25, seen
    assert "consumer_lag_seconds" in fired or "consumer_lag" in fired, seen

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        row = tick()
        if row and row["lag"] == 0 and not row["firing"]:
            break
        time.sleep(1.0)
    assert seen[-1]["lag"] == 0 and seen[-1]["firing"] == [], seen[-8:]
    assert fired <= resolved, (fired, resolved)
    print(f"\nspark-sql-kafka {version}; produced {producer.sent}; ticks: {json.dumps(seen)}")
