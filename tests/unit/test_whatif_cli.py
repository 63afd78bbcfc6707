"""``tidegauge whatif`` end to end (CLI entry point, text and JSON output, errors without tracebacks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli as run

# The real-run stream of test_engine_watermark (PySpark 4.3.0 observed the same batches): batches
# [100 s] [101 s, 83 s, null, unparseable] [84 s, 120 s, 107 s].
EVENTS = (
    "event_time,batch,source\n"
    "1970-01-01T00:01:40Z,0,a\n"
    "1970-01-01T00:01:41Z,1,a\n"
    "1970-01-01T00:01:23Z,1,a\n"
    ",1,a\n"
    "garbage,1,a\n"
    "1970-01-01T00:01:24Z,2,a\n"
    "1970-01-01T00:02:00Z,2,a\n"
    "1970-01-01T00:01:47Z,2,a\n"
)


@pytest.fixture
def events_csv(tmp_path: Path) -> Path:
    p = tmp_path / "events.csv"
    p.write_text(EVENTS, encoding="utf-8")
    return p


def test_whatif_json_shape_and_values(events_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["whatif", str(events_csv), "--delay", "10s", "--window", "5s", "--format", "json"], capsys
    )
    assert code == 0
    doc = json.loads(out)
    batches = doc["batches"]
    assert [
        (b["batch_id"], b["kind"], b["watermark_ms"], b["input_rows"], b["late_rows"], b["state_rows"])
        for b in batches
    ] == [
        (0, "data", 0, 1, 0, 1),
        (1, "no-data", 90_000, 0, 0, 1),
        (2, "data", 90_000, 4, 1, 1),
        (3, "no-data", 91_000, 0, 0, 1),
        (4, "data", 91_000, 3, 1, 3),
        (5, "no-data", 110_000, 0, 0, 1),
    ]
    assert batches[5]["emitted"] == [
        {"start_ms": 100_000, "end_ms": 105_000, "count": 2},
        {"start_ms": 105_000, "end_ms": 110_000, "count": 1},
    ]
    s = doc["summary"]
    assert (s["dropped_rows"], s["rows_with_time"], s["peak_state_rows"]) == (2, 6, 3)
    assert s["dropped_by_source"] == {"a": 2}
    assert doc["bad_rows"] == [
        {"line": 6, "value": "garbage", "reason": "not ISO-8601 nor a number", "kind": "event_time"}
    ]
    assert [
        (e["batch_id"], e["line"], e["window_end_ms"], e["lateness_ms"]) for e in doc["late_row_details"]
    ] == [
        (2, 4, 85_000, 5_000),
        (4, 7, 85_000, 6_000),
    ]


def test_whatif_text_lists_batches_summary_bad_and_late_rows(
    events_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["whatif", str(events_csv), "--delay", "10s", "--window", "5s"], capsys)
    assert code == 0
    assert "line 6: 'garbage'" in out
    assert "rows dropped as late: 2 (33.333%); by source: a=2" in out
    assert "state rows: peak 3" in out
    # the 83 s row is on line 4 of the file (header = line 1), in the file's batch 1 (Spark batch id 2:
    # a no-data batch ran between; the report keeps the file's numbers)
    assert "batch 1: line 4 (event time 1970-01-01T00:01:23Z source a) late by 5s" in out
    # the assumption about arrival is said, and where no-data batches were added
    assert "No-data batches: the file has no arrival_time, so the replay ASSUMES a live query caught up" in out
    assert "  3 added, after file batches 0, 1, 2 (the batch column below keeps the file's numbers" in out
    assert "  after 0     1 no-data 1970-01-01T00:01:30Z" in out
    assert "        0     0 data    -    " in out  # the initial 0 watermark reads "-", as in scan


def test_whatif_backlog_runs_no_data_batches_only_after_the_last(
    events_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the same three file batches as a backlog read one per trigger: data waits at every trigger, so
    # no no-data batch runs before file batch 2; the watermark moves only at data batches
    code, out, _ = run(
        ["whatif", str(events_csv), "--delay", "10s", "--window", "5s", "--backlog", "--format", "json"], capsys
    )
    assert code == 0
    doc = json.loads(out)
    assert [(b["batch_id"], b["kind"], b["watermark_ms"]) for b in doc["batches"]] == [
        (0, "data", 0),
        (1, "data", 90_000),
        (2, "data", 91_000),
        (3, "no-data", 110_000),
    ]
    assert doc["no_data_batches"] == {
        "enabled": True, "basis": "backlog", "added": 1, "after_file_batches": [2]
    }
    # 83 s (window [80, 85) s) against the previous batch's watermark 0: not late; 84 s against 90 s: late
    assert doc["summary"]["dropped_rows"] == 1


def test_whatif_arrival_time_decides_the_no_data_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # batch 1's row had arrived (at 5 s) before batch 0 ran (at 6 s): data waits, no no-data batch; batch 2
    # arrives at 20 s, after batch 1 ran (at 7 s): the engine was idle, a no-data batch runs
    p = tmp_path / "e.csv"
    p.write_text(
        "event_time,batch,arrival_time\n"
        "1970-01-01T00:01:40Z,0,1970-01-01T00:00:06Z\n"
        "1970-01-01T00:02:00Z,1,1970-01-01T00:00:05Z\n"
        "1970-01-01T00:03:00Z,1,1970-01-01T00:00:07Z\n"
        "1970-01-01T00:04:00Z,2,1970-01-01T00:00:20Z\n",
        encoding="utf-8",
    )
    code, out, _ = run(["whatif", str(p), "--delay", "10s", "--window", "5s", "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert [(b["batch_id"], b["kind"]) for b in doc["batches"]] == [
        (0, "data"), (1, "data"), (2, "no-data"), (3, "data"), (4, "no-data")
    ]
    assert doc["no_data_batches"] == {
        "enabled": True, "basis": "arrival_time", "added": 2, "after_file_batches": [1, 2]
    }
    code, _, err = run(["whatif", str(p), "--delay", "10s", "--window", "5s", "--backlog"], capsys)
    assert code == 2
    assert "--backlog: " in err and "has an arrival_time column" in err


def test_whatif_sweep_and_target(events_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        [
            "whatif",
            str(events_csv),
            "--window",
            "5s",
            "--sweep",
            "10s,30s",
            "--target-completeness",
            "80",
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0
    doc = json.loads(out)
    assert [(s["delay_ms"], s["dropped_rows"]) for s in doc["sweep"]] == [(10_000, 2), (30_000, 0)]
    # 80% completeness allows 1 of 6 rows with a time. Delay 15.001 s: wm after batch 0 = 84.999 s, so
    # batch 2 (late wm 84.999) keeps 83 s ([80,85) ends 85 > 84.999); batch 4 (late wm 101 - 15.001 =
    # 85.999) drops 84 s: 1 dropped. Delay 15 s: late wm 85 drops 83 s too: 2 dropped.
    assert doc["recommendation"]["delay_ms"] == 15_001
    assert doc["recommendation"]["confirmed_by_replay"] is True
    assert doc["recommendation"]["smallest_candidate_ms"] == 30_000


def test_whatif_future_skew_reports_what_the_filter_saves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "e.csv"
    p.write_text(
        "event_time,arrival_time\n"
        "1970-01-01T00:01:30Z,1970-01-01T00:01:35Z\n"
        "2099-01-01T00:00:00Z,1970-01-01T00:01:35Z\n"
        "1970-01-01T00:01:36Z,1970-01-01T00:02:05Z\n",
        encoding="utf-8",
    )
    code, out, _ = run(
        [
            "whatif",
            str(p),
            "--delay",
            "10s",
            "--window",
            "5s",
            "--trigger",
            "10s",
            "--max-future-skew",
            "1h",
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["future_skew"]["late_rows_saved"] == 1
    assert doc["future_skew"]["rows_filtered"] == 1
    assert doc["summary"]["latency"] is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--delay", "10s", "--window", "5s", "--time-column", "ts"], "no column 'ts'; columns found"),
        (["--delay", "10x", "--window", "5s"], "unknown unit"),
        (["--window", "5s"], "--delay is required"),
        (["--delay", "10s"], "give --window"),
        (["--delay", "10s", "--window", "5s", "--trigger", "10s"], "has a 'batch' column"),
        (["--delay", "10s", "--window", "5s", "--engine", "beam"], "is not supported"),
        (["--delay", "10s", "--session-gap", "5s", "--output-mode", "update"], "append"),
    ],
)
def test_whatif_bad_options_are_one_line_errors(
    events_csv: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _out, err = run(["whatif", str(events_csv), *args], capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_whatif_trigger_without_arrival_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "e.csv"
    p.write_text("event_time\n1970-01-01T00:01:30Z\n", encoding="utf-8")
    code, _, err = run(["whatif", str(p), "--delay", "10s", "--window", "5s", "--trigger", "10s"], capsys)
    assert code == 2
    assert "needs an 'arrival_time' column" in err
