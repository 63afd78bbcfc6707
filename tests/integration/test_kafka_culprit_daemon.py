"""The daemon locates the record behind a Spark future-timestamp jump when it evaluates, and stores it with
the finding: a recorded real Spark run (tests/fixtures/kafka/spark-future-2099: batch 1 read offsets
[25, 50) of ``orders-future-rec``, one of them dated 2099) is stored as its collector stores it (samples
and raw progress documents), the same records are written to the real broker, and the runtime's
evaluation (config ``targets.kafka[].locate_event_time``) stores a ``future_timestamp`` episode whose
details and message name offset 30, and whose notification carries it. A cluster that does not answer
stores the error with the finding, and the evaluation goes on."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from collectors.kafka import KafkaOptions
from collectors.spark.progress_files import read_progress_file
from monitor.alerts.routing import Route
from monitor.config import parse_config
from monitor.daemon.compose import build_culprits
from monitor.daemon.culprits import CulpritLocator, CulpritTarget
from monitor.daemon.runtime import Runtime
from monitor.metrics.latest import LatestSamples
from monitor.model import PollResult
from monitor.store import load_episodes, save_poll
from monitor.store.alert_tables import OutboxRow
from tests.alerting import migrated_sessions, sqlite_url
from tests.conftest import REPO_ROOT
from tests.kafka_broker import KafkaBroker
from tests.kafka_clients import FUTURE_OFFSET, create_topic, produce_orders_with_future

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

RECORDED = REPO_ROOT / "tests" / "fixtures" / "kafka" / "spark-future-2099" / "progress.jsonl"
TOPIC = "orders-future-rec"  # the recording's topic


@pytest.fixture(scope="module")
def recorded_topic(kafka_broker: KafkaBroker) -> str:
    create_topic(kafka_broker.bootstrap, TOPIC, 1, **{"message.timestamp.after.max.ms": str(2**63 - 1)})
    produce_orders_with_future(kafka_broker.bootstrap, TOPIC)
    return TOPIC


def _evaluate(tmp_path: Path, culprits: CulpritLocator | None) -> tuple[list[object], list[str]]:
    """Store the recording, evaluate once after its last batch; the future_timestamp episodes and the
    descriptions of the notifications queued."""
    read = read_progress_file(RECORDED)
    with migrated_sessions(sqlite_url(tmp_path)) as sessions:
        with sessions.begin() as session:
            save_poll(session, PollResult(tuple(read.samples), raw=tuple(read.raw)), collector="spark-progress")
        runtime = Runtime(
            sessions=sessions, targets=[], latest=LatestSamples(), rules_config=parse_config({}).rules,
            routes=[Route("ops")], culprits=culprits,
        )  # fmt: skip
        runtime.evaluate(max(s.observed_at for s in read.samples) + timedelta(seconds=1))
        with sessions() as session:
            episodes = [e for e in load_episodes(session) if e.rule == "future_timestamp"]
            outbox = [str(r.payload) for r in session.scalars(select(OutboxRow))]
    return list(episodes), outbox


def test_the_stored_finding_names_the_record(tmp_path: Path, kafka_broker: KafkaBroker, recorded_topic: str) -> None:
    config = parse_config({"targets": {"kafka": [{
        "name": "local", "bootstrap_servers": kafka_broker.bootstrap,
        "locate_event_time": {"event_time_field": "ts", "max_bytes": 65536, "timeout": "5s"},
    }]}})  # fmt: skip
    culprits = build_culprits(config, {})
    assert culprits is not None
    episodes, outbox = _evaluate(tmp_path, culprits)
    (episode,) = [e for e in episodes if e.scope.is_job()]  # type: ignore[attr-defined]
    culprit = episode.details["culprit"]  # type: ignore[attr-defined]
    assert culprit["errors"] == [] and culprit["method"] == "fetch" and culprit["scanned"] == 25, culprit
    assert culprit["ranges"] == [{"topic": recorded_topic, "partition": 0, "start": 25, "end": 50}]
    record = culprit["record"]
    assert (record["topic"], record["partition"], record["offset"], record["key"]) == (
        recorded_topic, 0, FUTURE_OFFSET, "order-30"
    )
    assert record["event_time_raw"] == "2099-01-01T00:00:00"
    sentence = f"The record: topic {recorded_topic} partition 0 offset 30, key 'order-30'"
    assert sentence in episode.message  # type: ignore[attr-defined]
    assert any(sentence in p for p in outbox), outbox  # the notification carries it
    assert any(f"'culprit': 'topic {recorded_topic} partition 0 offset 30'" in p for p in outbox), outbox


def test_a_cluster_that_does_not_answer_is_stored_as_the_error(tmp_path: Path) -> None:
    nobody = KafkaOptions("down", "127.0.0.1:9", request_timeout_s=1.0)
    episodes, _outbox = _evaluate(tmp_path, CulpritLocator([CulpritTarget(nobody, event_time_field="ts")]))
    (episode,) = [e for e in episodes if e.scope.is_job()]  # type: ignore[attr-defined]
    culprit = episode.details["culprit"]  # type: ignore[attr-defined]
    assert culprit["record"] is None and culprit["errors"], culprit
    assert "The record could not be located: " in episode.message  # type: ignore[attr-defined]
