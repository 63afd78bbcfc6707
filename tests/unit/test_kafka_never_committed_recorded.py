"""The real broker's answers for a member that never commits a partition it owns while records wait
(tests/fixtures/kafka/never-committed: Kafka 4.4.0, recorded by tests/kafka_never_committed.py), parsed by
the real :class:`collectors.kafka.admin.KafkaAdminSource` (the client's own result classes rebuilt from the
recording) into the collector, its samples and the ``consumer_lag`` finding."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.kafka import KafkaLagCollector, KafkaOptions, group_samples
from monitor.model import Severity
from rules.consumer_lag import LagParams, evaluate_lag
from rules.history import job_history
from tests.kafka_never_committed import RecordedSource

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "kafka" / "never-committed" / "admin-answers.json"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def recording() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(RECORDING.read_text())
    return doc


def test_what_the_admin_client_answers_for_a_partition_never_committed() -> None:
    doc = recording()
    first = doc["polls"][0]
    # OffsetFetch for all the group's partitions leaves the never-committed one out; asked by name, the
    # broker's -1 comes back from confluent-kafka as -1001 (librdkafka's OFFSET_INVALID)
    assert [(r["partition"], r["offset"]) for r in first["list_consumer_group_offsets_all"]] == [(0, 4)]
    assert [(r["partition"], r["offset"]) for r in first["list_consumer_group_offsets_named"]] == [(0, 4), (1, -1001)]
    d = first["describe_consumer_groups"]
    assert (d["state"], len(d["members"])) == ("STABLE", 1)
    assert sorted(t["partition"] for t in d["members"][0]["assignment"]) == [0, 1]
    assert [(r["partition"], r["offset"]) for r in first["list_offsets"]["latest"]] == [(0, 4), (1, 12)]
    assert [(r["partition"], r["offset"]) for r in doc["polls"][1]["list_offsets"]["latest"]] == [(0, 4), (1, 19)]


@pytest.mark.parametrize("offsets", ["all", "named"])
def test_the_collector_and_the_rule_on_the_recording(offsets: str) -> None:
    doc = recording()
    opts = KafkaOptions("prod", "127.0.0.1:9092", groups=(doc["group"],), lag_seconds="exact")
    source = RecordedSource(opts, doc["polls"], offsets)
    c = KafkaLagCollector(opts, source=source)
    g1 = c.snapshot(T0).groups[0]
    samples = list(group_samples("prod", g1, T0))
    source.next_poll()
    later = T0 + timedelta(minutes=6)
    g2 = c.snapshot(later).groups[0]
    samples += list(group_samples("prod", g2, later))
    p0, p1 = g2.partitions
    assert (g2.state, g2.members, g2.lag, p0.lag, p1.committed, p1.lag) == ("Stable", 1, 0, 0, None, None)
    assert p1.uncommitted is not None
    assert (p1.uncommitted.if_earliest, p1.uncommitted.if_latest, p1.uncommitted.oldest_record_ms) == (
        19, 7, 1_795_950_000_000,
    )
    h = job_history(samples)
    assert h is not None
    [f] = evaluate_lag(LagParams(), h, later)
    assert (f.severity, f.details["waiting_if_earliest"], f.details["waiting_if_latest"]) == (Severity.WARNING, 19, 7)
    assert "if the group's auto.offset.reset is earliest, 19 record(s) wait from the log start (the oldest written " \
        "2026-11-29T11:00Z); if latest, 7 record(s) produced since it was first seen owned and uncommitted at " \
        "2026-11-29T12:00Z wait" in f.message
