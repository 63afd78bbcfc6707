"""The culprit record without a broker: the event-time field path and values, the batch's offset ranges and
the carrier batch from a recorded real Spark run (tests/fixtures/kafka/spark-future-2099), the sentence a
finding gains, the config section, and ``check kafka --locate-event-time``'s usage errors. The broker side
is in tests/integration/test_kafka_culprit*.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from collectors.kafka.culprit import batch_ranges, event_time_of, parse_field_path
from collectors.kafka.spark import source_offsets
from collectors.spark.progress_files import read_progress_file
from monitor.config import parse_config
from monitor.errors import ConfigError
from rules.config import RulesConfig
from rules.future import CARRIER, CULPRIT, culprit_sentence, with_culprit
from rules.registry import evaluate
from tests.cli import run_cli
from tests.conftest import REPO_ROOT

RECORDED = REPO_ROOT / "tests" / "fixtures" / "kafka" / "spark-future-2099" / "progress.jsonl"
TOPIC = "orders-future-rec"
#: what the real-broker daemon test stored for the recording (tests/integration/test_kafka_culprit_daemon.py)
LOCATED: dict[str, Any] = {
    "record": {
        "topic": TOPIC, "partition": 0, "offset": 30, "key": "order-30",
        "timestamp": "2099-01-01T00:00:00+00:00", "timestamp_type": "CreateTime",
        "event_time": "2099-01-01T00:00:00+00:00", "event_time_raw": "2099-01-01T00:00:00",
    },
    "method": "fetch", "event_time_field": "ts",
    "ranges": [{"topic": TOPIC, "partition": 0, "start": 25, "end": 50}],
    "scanned": 25, "complete": True, "notes": [], "errors": [],
}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "keys"),
    [
        ("ts", ("ts",)),
        ("$.ts", ("ts",)),
        ("payload.ts", ("payload", "ts")),
        ("$.payload.event.ts", ("payload", "event", "ts")),
    ],
)
def test_field_paths(path: str, keys: tuple[str, ...]) -> None:
    assert parse_field_path(path) == keys


@pytest.mark.parametrize("path", ["", "$", "a..b", ".ts", "ts."])
def test_bad_field_paths_are_named(path: str) -> None:
    with pytest.raises(ValueError, match=r"expected object keys separated by dots"):
        parse_field_path(path)


@pytest.mark.parametrize(
    ("value", "keys", "expected"),
    [
        # 1. ISO-8601 without a zone: UTC, as Spark with spark.sql.session.timeZone=UTC reads it
        (b'{"ts": "2099-01-01T00:00:00"}', ("ts",), (datetime(2099, 1, 1, tzinfo=UTC), "2099-01-01T00:00:00")),
        # 2. with an offset: converted to UTC
        (b'{"ts": "2099-01-01T02:00:00+02:00"}', ("ts",), (datetime(2099, 1, 1, tzinfo=UTC), "2099-01-01T02:00:00+02:00")),
        # 3. epoch milliseconds (>= 1e11): 4070908800000 ms is 2099-01-01
        (b'{"p": {"ts": 4070908800000}}', ("p", "ts"), (datetime(2099, 1, 1, tzinfo=UTC), "4070908800000")),
        # 4. epoch seconds (< 1e11)
        (b'{"ts": 4070908800}', ("ts",), (datetime(2099, 1, 1, tzinfo=UTC), "4070908800")),
        # 5. the field absent, or the value not JSON: nothing
        (b'{"other": 1}', ("ts",), (None, None)),
        (b"not json", ("ts",), (None, None)),
        (None, ("ts",), (None, None)),
        # 6. there but not a time: the raw value kept, no instant
        (b'{"ts": "soon"}', ("ts",), (None, "soon")),
        (b'{"ts": true}', ("ts",), (None, "true")),
    ],
)
def test_event_time_values(value: bytes | None, keys: tuple[str, ...], expected: tuple[datetime | None, str | None]) -> None:
    assert event_time_of(value, keys) == expected


def _recorded() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip()]


def test_batch_ranges_of_the_recorded_batches() -> None:
    ranges = []
    for progress in _recorded():
        (src,) = source_offsets(progress)
        ranges.append([(r.topic, r.partition, r.start, r.end) for r in batch_ranges(src.start_offsets, src.end_offsets)])
    # batch 0 has no startOffset (the query's first batch): its start is unknown, it is left out
    assert ranges == [[], [(TOPIC, 0, 25, 50)], [(TOPIC, 0, 50, 60)]]


def test_the_rule_names_the_batch_that_carried_the_record() -> None:
    read = read_progress_file(RECORDED)
    now = max(s.observed_at for s in read.samples)
    found = [f for f in evaluate(RulesConfig(), {"q": read.samples}, now) if f.rule == "future_timestamp"]
    (job_level,) = [f for f in found if f.scope.is_job()]
    # batch 1's event-time max is 2099-01-01 (the recording's README): its rows carried the record
    assert (job_level.batch_id, job_level.details[CARRIER]) == (1, 1)


def test_the_finding_gains_the_record() -> None:
    read = read_progress_file(RECORDED)
    now = max(s.observed_at for s in read.samples)
    (finding,) = [f for f in evaluate(RulesConfig(), {"q": read.samples}, now) if f.rule == "future_timestamp"]
    with_record = with_culprit(finding, LOCATED)
    assert with_record.fingerprint() == finding.fingerprint()  # the same alert
    assert with_record.details[CULPRIT] == LOCATED and with_record.details[CARRIER] == 1
    assert with_record.message == finding.message + " " + (
        "The record: topic orders-future-rec partition 0 offset 30, key 'order-30', event time 2099-01-01T00:00Z "
        "(field ts = '2099-01-01T00:00:00'); record timestamp 2099-01-01T00:00Z (CreateTime); the latest-dated of "
        "25 records read from the batch's offsets. Delete or fix it at its producer, or skip that offset when "
        "restarting."
    )


def test_sentences_of_other_outcomes() -> None:
    by_max = {**LOCATED, "method": "max_timestamp", "event_time_field": None, "scanned": 0}
    assert culprit_sentence(by_max) == (
        "The record: topic orders-future-rec partition 0 offset 30, key 'order-30', event time 2099-01-01T00:00Z "
        "(the record timestamp); found by ListOffsets maxTimestamp. Delete or fix it at its producer, or skip that "
        "offset when restarting."
    )
    cut = {**LOCATED, "complete": False}
    assert "(the read was cut short by its bound: a later-dated record may follow)" in culprit_sentence(cut)
    failed = {**LOCATED, "record": None, "errors": ["kafka down (127.0.0.1:9, PLAINTEXT): cannot reach the cluster"]}
    assert culprit_sentence(failed) == (
        "The record could not be located: kafka down (127.0.0.1:9, PLAINTEXT): cannot reach the cluster."
    )


def _kafka(**locate: object) -> dict[str, Any]:
    return {"targets": {"kafka": [{"name": "main", "bootstrap_servers": "k:9092", "locate_event_time": locate}]}}


def test_config_section() -> None:
    cfg = parse_config(_kafka(jobs=["orders"], event_time_field="$.payload.ts", max_bytes=4096, timeout="2s"))
    spec = cfg.targets.kafka[0].locate_event_time
    assert spec is not None
    assert (spec.jobs, spec.event_time_field, spec.max_bytes, spec.timeout) == (["orders"], "$.payload.ts", 4096, 2000)
    assert parse_config({"targets": {"kafka": [{"name": "m", "bootstrap_servers": "k:9092"}]}}).targets.kafka[0].locate_event_time is None
    with pytest.raises(ConfigError, match=r"locate_event_time\.event_time_field.*'a\.\.b'"):
        parse_config(_kafka(event_time_field="a..b"))
    with pytest.raises(ConfigError, match=r"locate_event_time\.max_bytes"):
        parse_config(_kafka(max_bytes=0))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--locate-event-time"], "--locate-event-time needs --spark-progress FILE"),
        (["--event-time-field", "ts"], "--event-time-field and --batch go with --locate-event-time"),
        (["--locate-event-time", "--spark-progress", str(RECORDED), "--max-bytes", "0"], "--max-bytes: expected a positive"),
    ],
)
def test_check_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["check", "kafka", "127.0.0.1:9", *args], capsys)
    assert code == 2 and message in err, err


def test_check_names_a_cluster_that_does_not_answer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(
        ["check", "kafka", "127.0.0.1:9", "--spark-progress", str(RECORDED), "--locate-event-time",
         "--event-time-field", "ts", "--timeout", "1s", "--format", "json"], capsys,
    )  # fmt: skip
    assert code == 2, (out, err)
    doc = json.loads(out)
    (found,) = doc["located"]
    assert found["batch_id"] == 1 and found["culprit"]["record"] is None
    assert doc["errors"] and all(e.startswith("query ") for e in doc["errors"]), doc["errors"]
    assert "The record could not be located: " in found["finding"]["message"]
