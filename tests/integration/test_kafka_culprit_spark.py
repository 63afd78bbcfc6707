"""End to end: a real PySpark query reads the test broker (``spark_kafka_app.py`` with an event-time field:
``from_json`` of the record value, a 10 s watermark, a windowed count) 25 records per batch, and one record,
at offset 30, is dated 2099. The rules find the future-timestamp jump in the query's progress, and
``tidegauge check kafka --locate-event-time`` names that record: offset 30, its key and its event time, by
reading the JSON field of batch 1's offsets [25, 50), and by ListOffsets maxTimestamp (KIP-734) where the
event time is the record timestamp (the 2099 record's CreateTime is 2099 too; the topic allows it)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.kafka_broker import KafkaBroker
from tests.kafka_clients import FUTURE_OFFSET, create_topic, produce_orders_with_future, unique
from tests.spark_kafka_query import spark_kafka_query

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

BAD = FUTURE_OFFSET
#: topics of a 2099 record allow timestamps ahead of the broker's clock (Kafka 4 rejects > 1 h by default)
ANY_TIMESTAMP = {"message.timestamp.after.max.ms": str(2**63 - 1)}


def _batches(progress: Path) -> list[dict[str, object]]:
    if not progress.is_file():
        return []
    return [json.loads(line) for line in progress.read_text().splitlines() if line.strip()]


def test_check_kafka_names_the_offset_of_the_2099_record(
    kafka_broker: KafkaBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = unique("orders-future")
    create_topic(kafka_broker.bootstrap, topic, 1, **ANY_TIMESTAMP)
    produce_orders_with_future(kafka_broker.bootstrap, topic)
    progress = tmp_path / "progress.jsonl"
    with spark_kafka_query(kafka_broker.bootstrap, topic, tmp_path, "ts"):
        deadline = time.monotonic() + 240
        # 25 records per batch: batch 0 [0, 25), batch 1 [25, 50) with the 2099 row, batch 2 [50, 60)
        while sum(1 for b in _batches(progress) if b.get("numInputRows")) < 3:
            assert time.monotonic() < deadline, (tmp_path / "driver.log").read_text()[-3000:]
            time.sleep(0.5)
    batches = _batches(progress)
    carrier = next(b for b in batches if b["batchId"] == 1)
    (source,) = carrier["sources"]  # type: ignore[misc]
    offsets = [source[k] for k in ("startOffset", "endOffset")]
    offsets = [json.loads(o) if isinstance(o, str) else o for o in offsets]
    assert offsets == [{topic: {"0": 25}}, {topic: {"0": 50}}], offsets  # the range Spark says batch 1 read
    assert carrier["eventTime"]["max"].startswith("2099-01-01")  # type: ignore[index]

    code, out, err = run_cli(
        ["check", "kafka", kafka_broker.bootstrap, "--spark-progress", str(progress), "--locate-event-time",
         "--event-time-field", "ts", "--format", "json"], capsys,
    )  # fmt: skip
    assert code == 0, (out, err)
    doc = json.loads(out)
    (found,) = doc["located"]
    assert found["batch_id"] == 1 and found["finding"]["rule"] == "future_timestamp", found
    record = found["culprit"]["record"]
    assert (record["topic"], record["partition"], record["offset"], record["key"]) == (topic, 0, BAD, "order-30")
    assert record["event_time_raw"] == "2099-01-01T00:00:00" and record["event_time"].startswith("2099-01-01")
    assert found["culprit"]["method"] == "fetch" and found["culprit"]["scanned"] == 25
    assert found["culprit"]["ranges"] == [{"topic": topic, "partition": 0, "start": 25, "end": 50}]
    assert f"topic {topic} partition 0 offset 30, key 'order-30'" in found["finding"]["message"]
    assert found["finding"]["details"]["culprit"] == found["culprit"]

    code, out, err = run_cli(
        ["check", "kafka", kafka_broker.bootstrap, "--spark-progress", str(progress), "--locate-event-time"], capsys
    )
    assert code == 0, (out, err)
    print(out)
    assert f"topic {topic} partition 0 offset 30, key 'order-30', event time 2099-01-01" in out
    assert "found by ListOffsets maxTimestamp" in out
