"""The daemon locates the record behind a Flink source subtask's future-timestamp jump when it evaluates,
and stores it with the finding: the recorded real polls of a Flink 2.3.0 job reading Kafka
(tests/fixtures/flink/real-2.3.0/kafka_culprit: its reader's ``currentOffset`` went 29 -> 59 around the jump,
offset 30 dated 2099) are stored as the REST collector stores them, the same topic is written to the real
broker (offsets 0-59, offset 30 with the 2099 timestamp), and the runtime's evaluation (config
``targets.kafka[].locate_event_time``) stores the source subtask's ``future_timestamp`` episode with offset
30 in its details and message, found by ListOffsets maxTimestamp inside [30, 60)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer

from monitor.alerts.routing import Route
from monitor.config import parse_config
from monitor.daemon.compose import build_culprits
from monitor.daemon.runtime import Runtime
from monitor.metrics.latest import LatestSamples
from monitor.store import load_episodes, save_poll
from tests.alerting import migrated_sessions, sqlite_url
from tests.flink_replay import replay_polls
from tests.kafka_broker import KafkaBroker, quiet_logger
from tests.kafka_clients import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

TOPIC = "orders-flink-e3cf7aa8"  # the recording's topic
BAD_OFFSET = 30


def _write_topic(bootstrap: str) -> None:
    """Offsets 0-59 as recorded: the recording's clock as timestamps, offset 30 at 2099-01-01."""
    create_topic(bootstrap, TOPIC, 1, **{"message.timestamp.after.max.ms": str(2**63 - 1)})
    t0 = datetime(2026, 12, 2, 0, 35, 7, tzinfo=UTC)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    for i in range(60):
        at = datetime(2099, 1, 1, tzinfo=UTC) if i == BAD_OFFSET else t0 + timedelta(milliseconds=10 * i)
        p.produce(TOPIC, key=f"order-{i}".encode(), value=b"{}", partition=0, timestamp=int(at.timestamp() * 1000))
    assert p.flush(30) == 0


def test_the_stored_flink_finding_names_the_record(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    _write_topic(kafka_broker.bootstrap)
    config = parse_config({"targets": {"kafka": [{
        "name": "local", "bootstrap_servers": kafka_broker.bootstrap,
        "locate_event_time": {"jobs": ["tg-kafka-culprit"], "timeout": "5s"},
    }]}})  # fmt: skip
    culprits = build_culprits(config, {})
    assert culprits is not None
    polls = replay_polls(range(9))
    with migrated_sessions(sqlite_url(tmp_path)) as sessions:
        with sessions.begin() as session:
            for result in polls:
                save_poll(session, result, collector="flink-rest")
        runtime = Runtime(
            sessions=sessions, targets=[], latest=LatestSamples(), rules_config=config.rules,
            routes=[Route("ops")], culprits=culprits,
        )  # fmt: skip
        last = max(s.observed_at for r in polls for s in r.samples)
        runtime.evaluate(last + timedelta(seconds=1))
        with sessions() as session:
            episodes = [e for e in load_episodes(session) if e.rule == "future_timestamp" and e.scope.subtask == 0]
    (episode,) = [e for e in episodes if "culprit" in e.details]
    culprit = episode.details["culprit"]
    assert culprit["errors"] == [] and culprit["method"] == "max_timestamp", culprit
    assert culprit["ranges"] == [{"topic": TOPIC, "partition": 0, "start": 30, "end": 60}]
    record = culprit["record"]
    assert (record["topic"], record["partition"], record["offset"], record["key"]) == (TOPIC, 0, BAD_OFFSET, "order-30")
    assert record["event_time"].startswith("2099-01-01")
    assert f"The record: topic {TOPIC} partition 0 offset 30, key 'order-30'" in episode.message
