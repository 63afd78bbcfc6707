"""Epoch milliseconds read as seconds (issue 10, section 3): replayed exactly as real Spark 4.3 ran it.

The recording (``tests/fixtures/spark/epoch-units-4.3.0/``, see its PROVENANCE.md) is a real PySpark
4.3.0 run of ``withWatermark("event_time", "1 minute").groupBy(window(..., "1 minute")).count()`` over
epoch seconds with one row written in milliseconds (line 6 of ``events.csv``): Spark read it as year
57,971, its watermark jumped there and every later row was dropped. The engine must replay the same
batches, watermarks, windows and drop counts; ``whatif`` must report the row and never crash.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.timefmt import format_epoch_ms
from monitor.watermark import Tumbling, WatermarkConfig, replay
from monitor.watermark.io import load_events
from tests.cli import run_cli as _run

REC = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "epoch-units-4.3.0"


def _progress() -> list[dict]:
    return [json.loads(line) for line in (REC / "progress.jsonl").read_text(encoding="utf-8").splitlines()]


def test_engine_replays_the_recorded_spark_run_batch_by_batch() -> None:
    events = load_events(REC / "events.csv", time_unit="s")
    result = replay(events, WatermarkConfig(delay_ms=60_000, window=Tumbling(60_000)))
    progress = _progress()
    emitted = json.loads((REC / "emitted.json").read_text(encoding="utf-8"))["emitted"]
    assert [b.batch_id for b in result.batches] == [p["batchId"] for p in progress]
    for b, p in zip(result.batches, progress, strict=True):
        op = p["stateOperators"][0]
        assert b.input_rows == p["numInputRows"], b.batch_id
        # Spark's own rendering of the watermark, year 57,971 included
        assert format_epoch_ms(b.watermark_ms) == p["eventTime"]["watermark"], b.batch_id
        if "max" in p["eventTime"]:
            assert b.event_time is not None
            assert format_epoch_ms(b.event_time.max_ms) == p["eventTime"]["max"], b.batch_id
        assert (b.state_rows, b.state_rows_removed, b.dropped_by_watermark_metric) == (
            op["numRowsTotal"],
            op["numRowsRemoved"],
            op["numRowsDroppedByWatermark"],
        ), b.batch_id
        assert (
            sorted([w.start_ms * 1000, w.end_ms * 1000, w.count] for w in b.emitted)
            == emitted[str(b.batch_id)]
        )
    assert result.summary.dropped_rows == 5  # every row after the ms row's batch


def test_loader_reports_the_row_written_in_another_unit() -> None:
    events = load_events(REC / "events.csv", time_unit="s")
    [m] = events.unit_mismatches
    assert (m.line, m.value, m.unit, m.likely_unit) == (6, 1_767_225_670_000, "s", "ms")
    assert format_epoch_ms(m.read_as_us // 1000) == "+57971-02-25T19:26:40.000Z"  # Spark's eventTime.max
    assert format_epoch_ms(m.likely_us // 1000) == "2026-01-01T00:01:10.000Z"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_whatif_reports_the_row_and_the_unit_and_does_not_crash(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: ValueError: year 57971 is out of range (while rendering, even with --format json)
    code, out, err = _run(
        [
            "whatif",
            str(REC / "events.csv"),
            "--time-unit",
            "s",
            "--delay",
            "1m",
            "--window",
            "1m",
            "--format",
            fmt,
        ],
        capsys,
    )
    assert code == 0, err
    if fmt == "json":
        doc = json.loads(out)
        assert doc["unit_mismatches"][0]["line"] == 6
        assert doc["unit_mismatches"][0]["read_as"] == "+57971-02-25T19:26:40Z"
        [row] = doc["cause"]["misdated_rows"]
        assert (row["line"], row["batch_id"], row["unit_mismatch"]["likely_unit"]) == (6, 2, "ms")
        assert doc["cause"]["without_misdated_rows"]["dropped_rows"] == 0
        assert doc["summary"]["final_watermark_ms"] == (1_767_225_670_000 - 60) * 1000
    else:
        assert (
            "line 6: 1767225670000 read as epoch s is +57971-02-25T19:26:40Z; as epoch ms it would be "
            "2026-01-01T00:01:10Z" in out
        )
        # the file's batch 1 (Spark batch id 2 in the JSON: a no-data batch ran before it)
        assert "line 6 (batch 1): event time +57971-02-25T19:26:40Z moved the watermark" in out
        assert "+57971-02-25T19:25:40Z" in out  # the watermark, as Spark printed it (without .000)


def test_extreme_numbers_are_null_rows_as_spark_read_them(tmp_path: Path) -> None:
    rec = json.loads((REC / "extremes.json").read_text(encoding="utf-8"))
    f = tmp_path / "extremes.jsonl"
    f.write_text("".join(line + "\n" for line in rec["input_lines"]), encoding="utf-8")
    events = load_events(f, time_unit="s")
    spark = rec["sink_event_time_us"]
    # 1e300, a 20-digit integer, "+inf": Spark's reader made them null; so does the loader (listed)
    for i in (0, 1, 2):
        assert spark[i] is None
        assert not events.valid[i]
    assert [b.line for b in events.bad_rows] == [1, 2, 3, 4]
    # epoch us read as s: Spark's JSON reader overflowed silently to a negative time; the loader lists
    # the row as outside the range it handles instead of inventing year -114,000 (documented)
    assert spark[3] < 0 and not events.valid[3]
    assert "outside Spark's timestamp range" in events.bad_rows[3].reason
    assert events.valid[4] and int(events.event_time_us[4]) == spark[4]
