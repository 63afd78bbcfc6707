"""Parser tests for Spark progress documents over recorded real outputs (tests/fixtures/spark)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from collectors.spark.progress import EVENT_PROGRESS, EVENT_TERMINATED, parse_listener_event, parse_progress
from monitor.errors import ProgressFormatError
from monitor.model import SampleKind


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_spark_4_memory_sink_progress(spark_fixtures: Path) -> None:
    # progress_pt_b7_memorysink_listener.json: batchId 7, numInputRows 0, watermark 2098-12-31T23:50Z,
    # one stateStoreSave op: numRowsTotal 1, numRowsRemoved 3, memoryUsedBytes 1936, dropped 0.
    samples = parse_progress(_load(spark_fixtures / "progress_pt_b7_memorysink_listener.json"), collector="t")
    q, src = samples
    assert q.job.job_id == "92f2e0e5-46e5-49c6-98a8-cbd4e61d1c66"
    assert q.job.run_id == "db5df2d6-3a60-41bd-9613-0c9d792cbdef"
    assert q.job.name == "wm_metrics"
    assert q.batch_id == 7
    assert q.observed_at == datetime(2026, 11, 29, 11, 35, 50, tzinfo=UTC)
    assert q.watermark == datetime(2098, 12, 31, 23, 50, tzinfo=UTC)
    assert q.event_time_max is None  # no rows in this batch: eventTime has only the watermark
    assert q.num_input_rows == 0
    assert (q.state_rows_total, q.state_rows_removed, q.state_memory_bytes) == (1, 3, 1936)
    assert q.dropped_by_watermark == 0
    assert q.batch_duration_ms == 454
    assert src.scope.source == "FileStreamSource[file:/data/spark-demo/metrics_default/input]"
    assert src.num_input_rows == 0


def test_old_spark_num_late_inputs_and_empty_event_time(recorded_fixtures: Path) -> None:
    # Spark 3.1 event log excerpt: "eventTime":{}, stateOperators[0].numLateInputs 0, numRowsTotal 1,
    # one Kafka source with numInputRows 36 and offsets as JSON-in-strings; no top-level numInputRows.
    lines = (
        recorded_fixtures / "spark/public/eventlog_local-1596020211915_streaming_excerpt.jsonl"
    ).read_text()
    event = next(json.loads(x) for x in lines.splitlines() if "QueryProgressEvent" in x)
    q, src = parse_listener_event(event, collector="t")
    assert q.watermark is None  # {} means unknown, not epoch
    assert q.dropped_by_watermark == 0
    assert q.num_input_rows == 36  # summed from sources
    assert q.state_rows_total == 1
    assert q.job.name is None
    assert src.scope.source == "KafkaV2[Subscribe[test5]]"


def test_kafka_offsets_behind_latest_as_lag(recorded_fixtures: Path) -> None:
    # sqsps_testProgress5: metrics.maxOffsetsBehindLatest = "270941269" (Spark's own test, SPARK-53690)
    doc = _load(recorded_fixtures / "spark/public/sqsps_testProgress5_kafka_offsets_behind_latest.json")
    q, src = parse_progress(doc, collector="t")
    assert src.lag_offsets == 270_941_269
    assert q.lag_offsets == 270_941_269
    assert q.state_rows_total is None  # no state operators: unknown, not 0


def test_no_event_time_key(recorded_fixtures: Path) -> None:
    # sqsps_testProgress2: no eventTime key, name null, no inputRowsPerSecond (NaN omitted)
    q = parse_progress(
        _load(recorded_fixtures / "spark/public/sqsps_testProgress2_prettyJson_no_eventTime.json"),
        collector="t",
    )[0]
    assert q.watermark is None and q.event_time_max is None
    assert q.input_rows_per_second is None


def test_nan_and_string_numbers() -> None:
    doc = {
        "id": "q",
        "runId": "r",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "batchId": 1,
        "inputRowsPerSecond": "NaN",
        "sources": [{"description": "s", "numInputRows": "2.70941269E8"}],
    }
    q, src = parse_progress(doc, collector="t")
    assert q.input_rows_per_second is None
    assert src.num_input_rows == 270_941_269 and q.num_input_rows == 270_941_269


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"runId": "r", "timestamp": "2026-01-01T00:00:00Z"}, r"^x: field id: missing \(the streaming query id\)$"),
        ({"id": "q", "timestamp": "yesterday"}, r"^x: field timestamp: not an ISO-8601"),
        ({"id": "q"}, r"^x: field timestamp: missing \(expected an ISO-8601 timestamp string\)$"),
        ({"id": "q", "timestamp": "2026-01-01T00:00:00Z", "batchId": "x"}, r"^x: field batchId: expected a number"),
        (
            {"id": "q", "timestamp": "2026-01-01T00:00:00Z", "eventTime": {"watermark": 5}},
            r"^x: field eventTime\.watermark: expected",
        ),
        (
            {"id": "q", "timestamp": "2026-01-01T00:00:00Z", "stateOperators": [{"numRowsTotal": "many"}]},
            r"^x: field stateOperators\[0\]\.numRowsTotal: expected a number",
        ),
        (
            {"id": "q", "timestamp": "2026-01-01T00:00:00Z", "stateOperators": [{}, {"numLateInputs": "a"}]},
            r"^x: field stateOperators\[1\]\.numLateInputs: expected a number",
        ),
        (
            {"id": "q", "timestamp": "2026-01-01T00:00:00Z", "sources": [{"inputRowsPerSecond": "fast"}]},
            r"^x: field sources\[0\]\.inputRowsPerSecond: expected a number",
        ),
        (
            {"id": "q", "timestamp": "2026-01-01T00:00:00Z", "sources": [{}, {"metrics": {"maxOffsetsBehindLatest": []}}]},
            r"^x: field sources\[1\]\.metrics\.maxOffsetsBehindLatest: expected a number",
        ),
        (
            {"id": "q", "timestamp": "2026-01-01T00:00:00Z", "processedRowsPerSecond": {}},
            r"^x: field processedRowsPerSecond: expected a number",
        ),
        (
            {"id": "q", "timestamp": "2026-01-01T00:00:00Z", "batchDuration": "soon"},
            r"^x: field batchDuration: expected a number",
        ),
    ],
)
def test_bad_documents_name_the_field(doc: dict, message: str) -> None:
    with pytest.raises(ProgressFormatError, match=message):
        parse_progress(doc, collector="t", where="x")


def test_terminated_event_without_timestamp_uses_fallback() -> None:
    t = datetime(2026, 11, 29, 11, 32, 45, tzinfo=UTC)
    event = {"Event": EVENT_TERMINATED, "id": "q", "runId": "r", "exception": None}
    (s,) = parse_listener_event(event, collector="t", fallback_time=t)
    assert s.kind is SampleKind.TERMINATED and s.observed_at == t


def test_an_event_without_a_name_takes_the_fallback_name_only() -> None:
    t = datetime(2026, 11, 29, 11, 32, 45, tzinfo=UTC)
    terminated = {"Event": EVENT_TERMINATED, "id": "q", "runId": "r"}
    (s,) = parse_listener_event(terminated, collector="t", fallback_time=t, fallback_name="clicks")
    assert (s.job.job_id, s.job.run_id, s.job.name) == ("q", "r", "clicks")
    (unnamed,) = parse_listener_event(terminated, collector="t", fallback_time=t)
    assert unnamed.job.name is None
    progress = {"id": "q", "runId": "r", "timestamp": "2026-11-29T11:32:45.000Z", "sources": [{"description": "s"}]}
    for name, expected in ((None, "clicks"), (7, "clicks"), ("", ""), ("views", "views")):
        doc = {"Event": EVENT_PROGRESS, "progress": {**progress, "name": name}}
        samples = parse_listener_event(doc, collector="t", fallback_name="clicks")
        assert [x.job.name for x in samples] == [expected, expected], name


def test_listener_event_field_path_is_inside_the_event() -> None:
    event = {"Event": EVENT_PROGRESS, "progress": {"id": "q", "runId": "r"}}  # no timestamp
    with pytest.raises(ProgressFormatError, match=r"^f: line 17: field progress\.timestamp: missing \("):
        parse_listener_event(event, collector="t", where="f: line 17")


def test_load_json_keeps_documents_storable_and_names_what_it_refuses() -> None:
    from collectors.spark.progress import MAX_JSON_DEPTH, load_json
    from monitor.errors import ProgressFormatError

    # non-finite numbers become Jackson's strings (a rate reads them as unknown, a count refuses them)
    assert load_json(b'{"a":1e400,"b":NaN,"c":[-Infinity]}', "w") == {"a": "Infinity", "b": "NaN", "c": ["-Infinity"]}
    # a valid surrogate pair is one character; a lone one is refused with its field
    assert load_json(b'{"name":"\\ud83d\\ude00"}', "w") == {"name": "\U0001f600"}
    with pytest.raises(ProgressFormatError, match=r"^f\.json: line 3: field progress\.sources\[1\]\.name: not valid Unicode"):
        load_json(b'{"progress":{"sources":[{},{"name":"\\udc00"}]}}', "f.json: line 3")
    # exactly MAX_JSON_DEPTH levels pass, one more does not (nor does CPython's own recursion limit)
    deep = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json(deep, "w") is not None
    for depth in (MAX_JSON_DEPTH + 1, 5000):
        with pytest.raises(ProgressFormatError, match=r"^w: JSON nested too deeply"):
            load_json("[" * depth + "]" * depth, "w")
    with pytest.raises(ProgressFormatError, match=r"^w: invalid JSON: a number too long to read"):
        load_json("1" * 4301, "w")
    with pytest.raises(ProgressFormatError, match=r"^w: not UTF-8 \(byte 6\)"):
        load_json(b'{"a":"\xed\xa0\x80"}', "w")
