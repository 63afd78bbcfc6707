"""collectors.kafka.spark.source_offsets on recorded Spark progress documents (tests/fixtures/spark/public,
provenance in tests/fixtures/public-PROVENANCE.md); values read off the files by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.kafka.spark import source_offsets
from monitor.errors import InputError


def test_kafka_source_end_offsets_and_spark_offsets_behind_latest(recorded_fixtures: Path) -> None:
    doc = json.loads((recorded_fixtures / "spark/public/sqsps_testProgress5_kafka_offsets_behind_latest.json").read_text())
    (src,) = source_offsets(doc)
    assert src.description == "KafkaV2[Subscribe[bigdata_omsTrade_cdc]]"
    assert src.end_offsets == {("bigdata_omsTrade_cdc", 0): 18432809459}
    assert src.latest_offsets == {("bigdata_omsTrade_cdc", 0): 18703750728}
    # Spark's own: latestOffset - endOffset = 270941269 (strings in the JSON, numbers here)
    assert src.metrics == {"avgOffsetsBehindLatest": 270941269.0, "maxOffsetsBehindLatest": 270941269.0,
                           "minOffsetsBehindLatest": 270941269.0}


def test_non_kafka_sources_are_skipped_and_json_text_offsets_are_read(recorded_fixtures: Path) -> None:
    rate = json.loads((recorded_fixtures / "spark/public/japila_ProgressReporter_rate_source_lastProgress_batch10.json").read_text())
    assert source_offsets(rate) == []  # a rate source's endOffset is a number, not {topic: {partition: offset}}
    text = {"sources": [{"description": "KafkaV2[Subscribe[t]]", "endOffset": '{"t":{"1":7,"0":5}}'}]}
    assert source_offsets(text)[0].end_offsets == {("t", 0): 5, ("t", 1): 7}


def test_a_malformed_kafka_offset_names_the_field() -> None:
    bad = {"sources": [{"endOffset": {"t": {"0": "five"}}}]}
    with pytest.raises(InputError, match=r"^p.json: sources\[0\]: field endOffset.t.0: expected an integer"):
        source_offsets(bad, "p.json")


def test_event_log_progress_holds_end_offset_as_json_text(recorded_fixtures: Path) -> None:
    path = recorded_fixtures / "spark/public/eventlog_local-1596020211915_streaming_excerpt.jsonl"
    (event,) = [json.loads(line) for line in path.read_text().splitlines() if "QueryProgressEvent" in line]
    (src,) = source_offsets(event["progress"])
    # "endOffset":"{\"test5\":{\"0\":48917}}" in batch 7
    assert src.end_offsets == {("test5", 0): 48917}
