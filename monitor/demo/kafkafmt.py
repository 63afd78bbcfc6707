"""kafka_exporter's Prometheus text exposition, shaped like the recorded one (pure: no I/O, no clock).

The metric families, their ``# HELP`` texts and label sets follow danielqsj/kafka_exporter as recorded in
``tests/fixtures/kafka/prometheus/kafka_exporter_readme_*.prom``: broker and topic families
(``kafka_brokers``, ``kafka_topic_partition_current_offset{partition,topic}`` = the log-end offset,
``kafka_topic_partition_oldest_offset``, replica gauges) and consumer-group families
(``kafka_consumergroup_current_offset{consumergroup,partition,topic}`` = the committed offset,
``kafka_consumergroup_lag``, their ``_sum`` per topic, ``kafka_consumergroup_members``). Labels are sorted
by name and values printed as integers, as the Go client writes them; families are separated by a blank
line, as in the recording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["GroupOffsets", "TopicOffsets", "exposition"]

_HELP = {
    "kafka_brokers": "Number of Brokers in the Kafka Cluster.",
    "kafka_broker_info": "Information about the Kafka Broker.",
    "kafka_topic_partitions": "Number of partitions for this Topic",
    "kafka_topic_partition_current_offset": "Current Offset of a Broker at Topic/Partition",
    "kafka_topic_partition_oldest_offset": "Oldest Offset of a Broker at Topic/Partition",
    "kafka_topic_partition_in_sync_replica": "Number of In-Sync Replicas for this Topic/Partition",
    "kafka_topic_partition_leader": "Leader Broker ID of this Topic/Partition",
    "kafka_topic_partition_leader_is_preferred": "1 if Topic/Partition is using the Preferred Broker",
    "kafka_topic_partition_replicas": "Number of Replicas for this Topic/Partition",
    "kafka_topic_partition_under_replicated_partition": "1 if Topic/Partition is under Replicated",
    "kafka_consumergroup_current_offset": "Current Offset of a ConsumerGroup at Topic/Partition",
    "kafka_consumergroup_current_offset_sum": "Current Offset of a ConsumerGroup at Topic for all partitions",
    "kafka_consumergroup_lag": "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
    "kafka_consumergroup_lag_sum": "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
    "kafka_consumergroup_members": "Amount of members in a consumer group",
}


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    """One topic: per partition the oldest (log-start) and current (log-end) offsets."""

    topic: str
    oldest: Sequence[int]
    current: Sequence[int]


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    """One consumer group on one topic: per partition its committed offset (``-1``: none), its members."""

    group: str
    topic: str
    committed: Sequence[int]
    members: int


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(name: str, labels: Mapping[str, str], value: int) -> str:
    if not labels:
        return f"{name} {value}"
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}} {value}"


def _family(name: str, rows: Iterable[tuple[Mapping[str, str], int]]) -> str:
    body = "\n".join(_line(name, labels, value) for labels, value in rows)
    return f"# HELP {name} {_HELP[name]}\n# TYPE {name} gauge\n{body}\n"


def exposition(topics: Sequence[TopicOffsets], groups: Sequence[GroupOffsets], broker: str = "127.0.0.1:9092") -> str:
    """The text kafka_exporter serves on ``/metrics`` for one broker, ``topics`` and ``groups``.

    A group's lag is ``current - committed`` (the log-end offset the exporter read minus the committed
    one, kafka_exporter's "approximate lag"); with no commit (``-1``) kafka_exporter prints the offset
    ``-1`` and a lag of its own, here ``current``.
    """
    ends = {t.topic: t.current for t in topics}
    families = [
        _family("kafka_brokers", [({}, 1)]),
        _family("kafka_broker_info", [({"address": broker, "id": "1"}, 1)]),
        _family("kafka_topic_partitions", [({"topic": t.topic}, len(t.current)) for t in topics]),
    ]

    def per_partition(value: Callable[[TopicOffsets, int], int]) -> list[tuple[Mapping[str, str], int]]:
        return [({"partition": str(p), "topic": t.topic}, value(t, p)) for t in topics for p in range(len(t.current))]

    families += [
        _family("kafka_topic_partition_current_offset", per_partition(lambda t, p: t.current[p])),
        _family("kafka_topic_partition_oldest_offset", per_partition(lambda t, p: t.oldest[p])),
        _family("kafka_topic_partition_in_sync_replica", per_partition(lambda t, p: 1)),
        _family("kafka_topic_partition_leader", per_partition(lambda t, p: 1)),
        _family("kafka_topic_partition_leader_is_preferred", per_partition(lambda t, p: 1)),
        _family("kafka_topic_partition_replicas", per_partition(lambda t, p: 1)),
        _family("kafka_topic_partition_under_replicated_partition", per_partition(lambda t, p: 0)),
    ]
    offsets, offset_sums, lags, lag_sums, members = [], [], [], [], []
    for g in groups:
        end = ends[g.topic]
        lag = [end[p] - c if c >= 0 else end[p] for p, c in enumerate(g.committed)]
        for p, c in enumerate(g.committed):
            labels = {"consumergroup": g.group, "partition": str(p), "topic": g.topic}
            offsets.append((labels, c))
            lags.append((labels, lag[p]))
        topic_labels = {"consumergroup": g.group, "topic": g.topic}
        offset_sums.append((topic_labels, sum(c for c in g.committed if c >= 0) if any(c >= 0 for c in g.committed) else -1))
        lag_sums.append((topic_labels, sum(lag)))
        members.append(({"consumergroup": g.group}, g.members))
    if groups:
        families += [
            _family("kafka_consumergroup_current_offset", offsets),
            _family("kafka_consumergroup_current_offset_sum", offset_sums),
            _family("kafka_consumergroup_lag", lags),
            _family("kafka_consumergroup_lag_sum", lag_sums),
            _family("kafka_consumergroup_members", members),
        ]
    return "\n".join(families)
