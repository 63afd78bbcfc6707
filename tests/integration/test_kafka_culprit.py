"""Locating the culprit record of a future-timestamp jump (collectors.kafka.culprit) against the real broker
(tests/kafka_broker.py): ListOffsets maxTimestamp (KIP-734) when the record timestamp is the event time and
the topic uses CreateTime, a bounded read of the batch's offsets otherwise. Every record, key and timestamp
is written by the test's producer; the expected offsets are the ones the test produced at."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer

from collectors.kafka import KafkaOptions
from collectors.kafka.culprit import OffsetRange, locate_culprit
from monitor.model import datetime_to_ms
from tests.kafka_broker import SASL_PASSWORD, SASL_USER, KafkaBroker, quiet_logger
from tests.kafka_clients import create_topic, unique

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FUTURE = datetime(2099, 1, 1, 0, 0, tzinfo=UTC)
#: the mis-dated record's offset in partition 0
BAD = 30
#: Kafka 4 brokers reject record timestamps more than 1 h ahead of their clock
#: (``log.message.timestamp.after.max.ms``, KIP-937); the topics of a 2099 CreateTime record allow them
ANY_TIMESTAMP = {"message.timestamp.after.max.ms": str(2**63 - 1)}


def _fill(bootstrap: str, topic: str, *, future_in_value: bool, future_in_timestamp: bool) -> None:
    """Partition 0: 40 records ``k0``..``k39`` one second apart from T0, record 30 dated 2099 (in its
    JSON ``ts`` and/or its record timestamp); partition 1: 20 correctly dated records."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for part, count in ((0, 40), (1, 20)):
        for i in range(count):
            at = T0 + timedelta(seconds=i)
            bad = part == 0 and i == BAD
            ts = FUTURE if bad and future_in_value else at
            stamp = FUTURE if bad and future_in_timestamp else at
            value = json.dumps({"id": i, "ts": ts.strftime("%Y-%m-%dT%H:%M:%S")}).encode()
            p.produce(topic, key=f"k{i}".encode(), value=value, partition=part, timestamp=datetime_to_ms(stamp),
                      on_delivery=delivered)
    assert p.flush(30) == 0 and failed == [], failed


def _options(broker: KafkaBroker, **kw: object) -> KafkaOptions:
    return KafkaOptions("test", broker.bootstrap, request_timeout_s=10.0, **kw)  # type: ignore[arg-type]


def test_max_timestamp_names_the_record_inside_the_batch(kafka_broker: KafkaBroker) -> None:
    topic = unique("culprit")
    create_topic(kafka_broker.bootstrap, topic, 2, **ANY_TIMESTAMP)
    _fill(kafka_broker.bootstrap, topic, future_in_value=False, future_in_timestamp=True)
    ranges = (OffsetRange(topic, 0, 25, 40), OffsetRange(topic, 1, 10, 20))
    found = locate_culprit(_options(kafka_broker), ranges)
    assert found.errors == [] and found.method == "max_timestamp", found
    rec = found.record
    assert rec is not None
    assert (rec.topic, rec.partition, rec.offset, rec.key) == (topic, 0, BAD, "k30")
    assert rec.timestamp == FUTURE and rec.event_time == FUTURE and rec.timestamp_type == "CreateTime"
    assert found.scanned == 0  # only the one record was fetched, for its key


def test_record_outside_the_batch_makes_it_read_the_range(kafka_broker: KafkaBroker) -> None:
    # the partition's latest-dated record (offset 30) lies after the batch [0, 25): ListOffsets cannot say
    # which record inside the batch is the latest, so the range is read; offset 24 (T0 + 24 s) is latest
    topic = unique("culprit")
    create_topic(kafka_broker.bootstrap, topic, 2, **ANY_TIMESTAMP)
    _fill(kafka_broker.bootstrap, topic, future_in_value=False, future_in_timestamp=True)
    found = locate_culprit(_options(kafka_broker), (OffsetRange(topic, 0, 0, 25),))
    assert found.method == "fetch" and found.complete and found.scanned == 25, found
    assert found.record is not None and (found.record.offset, found.record.key) == (24, "k24")
    assert found.record.event_time == T0 + timedelta(seconds=24)
    assert "outside the batch's offsets" in found.notes[0], found.notes


def test_json_field_read_from_the_batch(kafka_broker: KafkaBroker) -> None:
    # the 2099 is only in the value's ts: the record timestamps are honest, the field is read
    topic = unique("culprit")
    create_topic(kafka_broker.bootstrap, topic, 2)
    _fill(kafka_broker.bootstrap, topic, future_in_value=True, future_in_timestamp=False)
    ranges = (OffsetRange(topic, 0, 25, 40), OffsetRange(topic, 1, 10, 20))
    found = locate_culprit(_options(kafka_broker), ranges, event_time_field="$.ts")
    assert found.errors == [] and found.method == "fetch" and found.complete, found
    assert found.scanned == 25  # 15 + 10 records, nothing beyond the ranges
    rec = found.record
    assert rec is not None
    assert (rec.partition, rec.offset, rec.key, rec.event_time_raw) == (0, BAD, "k30", "2099-01-01T00:00:00")
    assert rec.event_time == FUTURE and rec.timestamp == T0 + timedelta(seconds=BAD)


def test_log_append_time_topic_is_read_not_trusted(kafka_broker: KafkaBroker) -> None:
    topic = unique("culprit")
    create_topic(kafka_broker.bootstrap, topic, 2, **{"message.timestamp.type": "LogAppendTime"})
    _fill(kafka_broker.bootstrap, topic, future_in_value=True, future_in_timestamp=True)
    found = locate_culprit(_options(kafka_broker), (OffsetRange(topic, 0, 25, 40),))
    # the broker stamped every record at append: the producer's 2099 is gone, no record is dated 2099
    assert found.method == "fetch" and "LogAppendTime" in found.notes[0], found.notes
    assert found.record is not None and found.record.timestamp_type == "LogAppendTime"
    assert found.record.event_time.year < 2099
    by_field = locate_culprit(_options(kafka_broker), (OffsetRange(topic, 0, 25, 40),), event_time_field="ts")
    assert by_field.record is not None and by_field.record.offset == BAD


def test_byte_bound_cuts_the_read_and_says_so(kafka_broker: KafkaBroker) -> None:
    topic = unique("culprit")
    create_topic(kafka_broker.bootstrap, topic, 2)
    _fill(kafka_broker.bootstrap, topic, future_in_value=True, future_in_timestamp=False)
    found = locate_culprit(_options(kafka_broker), (OffsetRange(topic, 0, 0, 40),), event_time_field="ts", max_bytes=200)
    assert not found.complete and 0 < found.scanned < 40, found
    assert "not read to the end within the 200 bytes bound" in found.errors[0]


def test_over_sasl_with_the_lag_collectors_security_options(kafka_broker: KafkaBroker) -> None:
    topic = unique("culprit")
    create_topic(kafka_broker.bootstrap, topic, 2, **ANY_TIMESTAMP)
    _fill(kafka_broker.bootstrap, topic, future_in_value=False, future_in_timestamp=True)
    options = KafkaOptions(
        "sasl", kafka_broker.sasl_bootstrap,
        security={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": SASL_USER},
        secrets={"sasl.password": SASL_PASSWORD},
    )  # fmt: skip
    found = locate_culprit(options, (OffsetRange(topic, 0, 25, 40),))
    assert found.record is not None and found.record.offset == BAD, found
    wrong = KafkaOptions(
        "sasl", kafka_broker.sasl_bootstrap, request_timeout_s=3.0,
        security={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": SASL_USER},
        secrets={"sasl.password": "wrong"},
    )  # fmt: skip
    failed = locate_culprit(wrong, (OffsetRange(topic, 0, 25, 40),), timeout_s=3.0)
    assert failed.record is None and failed.errors, failed
    assert "wrong" not in json.dumps(failed.to_details())
