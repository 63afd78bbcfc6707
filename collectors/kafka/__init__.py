"""Kafka consumer lag: a collector polling a cluster through confluent-kafka's AdminClient
(:mod:`.collector`), the lag arithmetic (:mod:`.lag`), lag in seconds (:mod:`.interpolation`, exact record
timestamps in :mod:`.admin`) and readers of other exporters' outputs (:mod:`.exporters`)."""

from collectors.kafka.collector import COLLECTOR_NAME, KafkaLagCollector, Snapshot, group_samples
from collectors.kafka.interpolation import Estimate, OffsetTimeTable
from collectors.kafka.lag import GroupLag, PartitionLag, group_lag, partition_lag
from collectors.kafka.options import KafkaOptions

__all__ = [
    "COLLECTOR_NAME",
    "Estimate",
    "GroupLag",
    "KafkaLagCollector",
    "KafkaOptions",
    "OffsetTimeTable",
    "PartitionLag",
    "Snapshot",
    "group_lag",
    "group_samples",
    "partition_lag",
]
