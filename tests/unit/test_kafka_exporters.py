"""collectors.kafka.exporters on the recorded exporter outputs in tests/fixtures/kafka (provenance:
tests/fixtures/public-PROVENANCE.md). Expected values are read off the files by hand; each comment says where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.kafka.exporters import parse_burrow_response, parse_exporter_text
from monitor.errors import InputError


def prom(recorded_fixtures: Path, name: str) -> str:
    return (recorded_fixtures / "kafka" / "prometheus" / name).read_text()


def burrow(recorded_fixtures: Path, name: str) -> dict[str, object]:
    return json.loads((recorded_fixtures / "kafka" / "burrow" / name).read_text())  # type: ignore[no-any-return]


def test_kafka_exporter_minus_one_offset_is_unknown_lag_not_one(recorded_fixtures: Path) -> None:
    (g,) = parse_exporter_text(prom(recorded_fixtures, "kafka_exporter_readme_consumergroup.prom"))
    assert g.exporter == "kafka_exporter" and g.lag.group == "KMOffsetCache-kafka-manager-3806276532-ml44w"
    assert g.lag.members == 1  # kafka_consumergroup_members ... 1
    (p,) = g.lag.partitions
    # current_offset -1 (no commit) printed next to lag 1: the lag is unknown, and the total says so
    assert (p.topic, p.partition, p.committed, p.lag, p.note) == ("__consumer_offsets", 0, None, None,
                                                                  "no committed offset")
    assert g.lag.lag is None and g.lag.unknown_partitions == 1 and "unknown lag" in g.lag.notes[0]


def test_kminion_partition_lag_with_watermarks_and_state(recorded_fixtures: Path) -> None:
    (g,) = parse_exporter_text(prom(recorded_fixtures, "kminion_docs_metrics_topic_and_group.prom"))
    assert (g.exporter, g.lag.group, g.lag.state, g.lag.members) == ("kminion", "bigquery-sink", "Stable", 2)
    (p,) = g.lag.partitions
    # ..._topic_partition_lag{group_id="bigquery-sink",partition_id="10",topic_name="shop-activity"} 147481
    assert (p.topic, p.partition, p.lag, p.committed) == ("shop-activity", 10, 147481, None)
    assert g.lag.lag == 147481


def test_kafka_lag_exporter_trailing_comma_and_group_max_lag(recorded_fixtures: Path) -> None:
    (g,) = parse_exporter_text(prom(recorded_fixtures, "kafka_lag_exporter_readme_max_lag.prom"))
    # {cluster_name="pipelines-strimzi",group="variable-throughput-runtime.f3-merge.in01",} 52.0
    assert (g.exporter, g.lag.group, g.max_lag, g.lag.partitions) == (
        "kafka-lag-exporter", "variable-throughput-runtime.f3-merge.in01", 52.0, []
    )


def test_burrow_prometheus_numbers_are_kept_as_reported(recorded_fixtures: Path) -> None:
    (g,) = parse_exporter_text(prom(recorded_fixtures, "burrow_prometheus_test_expected.prom"))
    assert (g.exporter, g.lag.group, g.status, g.reported_lag) == ("burrow", "testgroup", "OK", 2345.0)
    rows = {(p.topic, p.partition): (p.committed, p.log_end, p.lag) for p in g.lag.partitions}
    # testtopic/0: committed 22663 above the topic offset 6556, Burrow says lag 100: kept, not "fixed"
    assert rows[("testtopic", 0)] == (22663, 6556, 100)
    assert rows[("testtopic", 1)] == (2488, 5566, 10)
    assert rows[("incomplete", 0)] == (None, None, 0)  # partition_lag 0, no offsets printed
    assert g.lag.lag == 170  # 100 + 10 + 50 + 0 + 10: the sum of the partitions, not lag_total 2345


def test_burrow_v2_status_complete_is_a_bool(recorded_fixtures: Path) -> None:
    g = parse_burrow_response(burrow(recorded_fixtures, "telegraf_v2_kafka_clustername1_consumer_group1_status.json"))
    assert (g.lag.group, g.status, g.complete) == ("group1", "WARN", True)
    (p,) = g.lag.partitions
    # end: {offset 824743, lag 25}
    assert (p.topic, p.partition, p.committed, p.lag) == ("topicA", 0, 824743, 25)
    assert g.partition_status == {("topicA", 0): "WARN"}
    # group2: the group WARN while its partition is OK (Burrow's data, kept)
    g2 = parse_burrow_response(burrow(recorded_fixtures, "telegraf_v2_kafka_clustername1_consumer_group2_status.json"))
    assert g2.status == "WARN" and set(g2.partition_status.values()) == {"OK"}


def test_burrow_v3_lag_complete_is_a_number_and_owner_means_assigned(recorded_fixtures: Path) -> None:
    g = parse_burrow_response(burrow(recorded_fixtures, "telegraf_v3_kafka_clustername1_consumer_group1_lag.json"))
    assert (g.lag.group, g.status, g.complete, g.reported_lag) == ("group1", "OK", True, 0.0)
    assert [(p.partition, p.committed, p.lag, p.assigned) for p in g.lag.partitions] == [
        (0, 431323195, 0, True), (1, 431322962, 0, True), (2, 428636563, 0, True),
    ]


def test_bad_inputs_name_the_input() -> None:
    with pytest.raises(InputError, match=r"^burrow:9000: Burrow answered an error: cluster not found"):
        parse_burrow_response({"error": True, "message": "cluster not found"}, "burrow:9000")
    with pytest.raises(InputError, match=r"field status.partitions: missing"):
        parse_burrow_response({"error": False, "consumers": ["g"]}, "x.json")
    with pytest.raises(InputError, match=r"^exporter: not Prometheus text"):
        parse_exporter_text("<html>502 Bad Gateway</html>{", "exporter")
