"""Hostile and careless what-if input (issue 11): one-line errors naming file, line and column, exit
code 2, or the row listed as unparseable where Spark reads the value as null - never a traceback.

Spark's choice is recorded in ``tests/fixtures/spark/epoch-units-4.3.0/extremes.json``: its JSON
reader reads ``1e300``, a 20-digit integer and ``"+inf"`` in a timestamp column as null (PERMISSIVE
mode), so those rows are listed and skipped. ``batch``/``partition``/``arrival_time`` are what-if's
own columns (how to cut batches, when rows arrived): a bad value there is an error, since the replay
cannot be planned without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli import run_cli as _run


def _whatif(path: Path, *extra: str) -> list[str]:
    return ["whatif", str(path), "--delay", "1m", "--window", "1m", *extra]


ISO = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("name", "content", "unit", "line", "reason"),
    [
        ("inf.csv", f"event_time,batch\n{ISO},0\n+inf,0\n", None, 3, "not ISO-8601 nor a number"),
        ("inf_s.csv", "event_time,batch\n1767225600,0\n+inf,0\n", "s", 3, "(infinite)"),
        ("big.csv", "event_time,batch\n1767225600,0\n1e300,1\n", "s", 3, "outside Spark's timestamp range"),
        ("digits.csv", "event_time,batch\n1767225600,0\n" + "9" * 5000 + ",1\n", "s", 3, "outside"),
        ("ff.csv", b"event_time,batch\n2026-01-01T00:00:00Z\xff,0\n", None, 2, "invalid UTF-8"),
        ("ff.jsonl", b'{"event_time": "2026-01-01T00:00:00Z\xff"}\n', None, 1, "invalid UTF-8"),
        (
            "bool.jsonl",
            '{"event_time": true}\n{"event_time": "2026-01-01T00:00:00Z"}\n',
            None,
            1,
            "a boolean",
        ),
        ("inf.jsonl", '{"event_time": 1e400}\n{"event_time": 1767225600}\n', "s", 1, "outside"),
    ],
)
def test_values_spark_reads_as_null_are_listed_rows(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str | bytes,
    unit: str | None,
    line: int,
    reason: str,
) -> None:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    extra = ["--time-unit", unit] if unit else []
    for fmt in ("text", "json"):
        code, out, err = _run([*_whatif(p, *extra), "--format", fmt], capsys)
        assert code == 0, err
        assert "Traceback" not in err
    doc = json.loads(out)
    assert [b["line"] for b in doc["bad_rows"]] == [line]
    assert reason in doc["bad_rows"][0]["reason"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "batch.csv",
            f"event_time,batch\n{ISO},99999999999999999999\n",
            "batch.csv: line 2: field batch: value 99999999999999999999 is beyond the 64-bit integer range",
        ),
        (
            "batch_inf.jsonl",
            f'{{"event_time": "{ISO}", "batch": 1e400}}\n',
            "batch_inf.jsonl: line 1: field batch: must be an integer",
        ),
        (
            "batch_big.jsonl",
            f'{{"event_time": "{ISO}", "batch": 1e300}}\n',
            "batch_big.jsonl: line 1: field batch: value",
        ),
        (
            "part.csv",
            f"event_time,partition\n{ISO},-9223372036854775809\n",
            "part.csv: line 2: field partition: value",
        ),
        (
            "arrival.csv",
            "event_time,arrival_time\n1767225600,+inf\n",
            "arrival.csv: line 2: field arrival_time: value '+inf' is",
        ),
        (
            "digits.jsonl",
            '{{"event_time": "{}", "batch": {}}}\n'.format(ISO, "1" * 5000),
            "digits.jsonl: line 1: invalid JSON",
        ),
    ],
)
def test_bad_whatif_columns_are_one_line_errors_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, message: str
) -> None:
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    code, _, err = _run([*_whatif(p, "--time-unit", "s", "--trigger", "1m")[:-2], "--time-unit", "s"], capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_iso_time_at_the_edge_of_the_calendar_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # year 1 at +01:00 is year 0 in UTC: beyond what a datetime holds, within a Spark timestamp
    p = tmp_path / "edge.csv"
    p.write_text("event_time\n0001-01-01T00:00:00+01:00\n9999-12-31T23:59:59-23:59\n", encoding="utf-8")
    for fmt in ("text", "json"):
        code, out, err = _run([*_whatif(p), "--format", fmt], capsys)
        assert code == 0, err
    doc = json.loads(out)
    assert doc["bad_rows"] == []
    assert doc["summary"]["final_watermark_ms"] == 253_402_387_139_000 - 60_000  # 10000-01-01T23:58:59Z


def test_a_huge_delay_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "e.csv"
    p.write_text(f"event_time\n{ISO}\n", encoding="utf-8")
    code, _, err = _run(["whatif", str(p), "--delay", "99999999999999999999999h", "--window", "1m"], capsys)
    # refused by the one duration parser (at most 100 years), naming the option
    assert code == 2 and "--delay" in err and "longer than the longest duration" in err and "Traceback" not in err


def test_a_malformed_json_line_is_reported_as_invalid_json_not_as_an_event_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "e.jsonl"
    p.write_text(
        f'{{"event_time": "{ISO}"}}\n{{"event_time": "2026-01-01T00:00:05Z"\n[1, 2]\n', encoding="utf-8"
    )
    code, out, _ = _run(_whatif(p), capsys)
    assert code == 0
    assert "Invalid lines: 2 rows" in out
    assert "line 2: invalid JSON: Expecting ',' delimiter at column 38" in out
    assert "line 3: not a JSON object (a JSON array)" in out
    assert "Unparseable event times" not in out


def test_deeply_nested_json_is_an_invalid_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "e.jsonl"
    p.write_text(f'{{"event_time": "{ISO}"}}\n' + "[" * 100_000 + "\n", encoding="utf-8")
    code, out, err = _run(_whatif(p), capsys)
    assert code == 0, err
    assert "line 2: invalid JSON" in out


def test_one_epoch_number_among_iso_times_is_that_row_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: the whole CSV was rejected ("holds epoch numbers; pass --time-unit")
    p = tmp_path / "e.csv"
    p.write_text(f"event_time\n{ISO}\n1767225605\n2026-01-01T00:00:10Z\n", encoding="utf-8")
    code, out, err = _run(_whatif(p), capsys)
    assert code == 0, err
    assert "line 3: '1767225605' (an epoch number, but no --time-unit was given" in out
    # a column of numbers still needs the unit
    q = tmp_path / "n.csv"
    q.write_text("event_time\n1767225600\n1767225605\n", encoding="utf-8")
    code, _, err = _run(_whatif(q), capsys)
    assert code == 2 and "pass the unit with --time-unit" in err


def test_a_lone_surrogate_in_a_source_name_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "e.jsonl"
    p.write_text(
        '{"event_time": "2026-01-01T00:05:00Z", "source": "\\ud800x", "batch": 0}\n'
        f'{{"event_time": "{ISO}", "source": "\\ud800x", "batch": 1}}\n',
        encoding="utf-8",
    )
    code, out, err = _run(_whatif(p), capsys)
    assert code == 0, err
    out.encode("utf-8")  # printable: no lone surrogate reaches stdout
    assert "source ?x" in out


def test_a_boolean_parquet_event_time_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "e.parquet"
    pq.write_table(pa.table({"event_time": [True, False]}), p)
    code, _, err = _run(_whatif(p), capsys)
    assert code == 2
    assert "e.parquet: column 'event_time' is bool in Parquet; a time must be a timestamp" in err


def test_parquet_nanosecond_and_second_timestamps_are_floored_to_microseconds(tmp_path: Path) -> None:
    from monitor.watermark.io import load_events

    p = tmp_path / "e.parquet"
    pq.write_table(
        pa.table(
            {
                "event_time": pa.array([1_767_225_600_123_456_789, None], type=pa.timestamp("ns", tz="UTC")),
                "arrival_time": pa.array([1_767_225_601, 1_767_225_602], type=pa.timestamp("s")),
            }
        ),
        p,
    )
    ev = load_events(p)
    assert ev.event_time_us.tolist()[0] == 1_767_225_600_123_456
    assert ev.arrival_ms is not None and ev.arrival_ms.tolist() == [1_767_225_601_000, 1_767_225_602_000]


def test_an_unreadable_path_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "dir.csv"
    d.mkdir()
    code, _, err = _run(_whatif(d), capsys)
    assert code == 2 and "dir.csv: is a directory; give one events file" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # found by the property tests: a carriage return before the header crashed the fast path
        (b"\revent_time\n1767225600\n", "no column 'event_time'"),
        # an unclosed quote swallows the file: one line naming the column as read; with Arrow's
        # thread pool the fast path's parse error sometimes aborted the process at exit (code 134)
        (b'"event_time\n2026-01-01T00:00:00Z\n', "columns found: 'event_time\\n2026-01-01T00:00:00Z'"),
    ],
)
def test_broken_csv_structure_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    p = tmp_path / "e.csv"
    p.write_bytes(content)
    code, _, err = _run(_whatif(p), capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_arrival_times_without_trigger_or_batch_name_the_file_and_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "arr.csv"
    p.write_text("event_time,arrival_time\n2026-01-01T00:00:00Z,2026-01-01T00:00:05Z\n")
    code, _, err = _run(_whatif(p), capsys)
    assert code == 2, err
    assert "arr.csv has an arrival_time column but no 'batch' column" in err and "pass --trigger" in err


def test_a_null_batch_reads_null_not_a_python_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "nb.jsonl"
    p.write_text('{"event_time": "2026-01-01T00:00:00Z", "batch": 0}\n{"event_time": "2026-01-01T00:00:01Z", "batch": null}\n')
    code, _, err = _run(_whatif(p), capsys)
    assert code == 2 and "nb.jsonl: line 2: field batch: must be an integer, got null" in err, err


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--idleness", "10s", "--per-event-watermarks"], "--idleness: {f} has no arrival_time column"),
        ([], "{f} has no arrival_time column: periodic watermarks (every 200ms)"),
    ],
)
def test_flink_processing_time_options_without_arrival_times_name_the_option_and_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    p = tmp_path / "f.csv"
    p.write_text("event_time\n2026-01-01T00:00:00Z\n2026-01-01T00:00:01Z\n")
    code, _, err = _run(
        ["whatif", str(p), "--engine", "flink", "--delay", "2s", "--window", "10s", *extra], capsys
    )
    assert code == 2 and expected.format(f=p) in err, err


def test_every_bad_batch_value_is_named_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "eb.csv"
    rows = "".join(f"2026-01-01T00:00:{i:02d}Z,x{i}\n" for i in range(14))
    p.write_text("event_time,batch\n2026-01-01T00:00:00Z,0\n2026-01-01T00:00:01Z,\n2026-01-01T00:00:02Z,1.5\n" + rows)
    code, _, err = _run(_whatif(p), capsys)
    assert code == 2
    lines = err.splitlines()
    assert f"{p}: line 3: field batch: must be an integer, got ''" in lines[0]
    assert f"{p}: line 4: field batch: must be an integer, got '1.5'" in lines[1]
    assert len(lines) == 11 and lines[-1].endswith(f"{p}: ... and 6 more such lines"), lines


def test_batch_values_read_alike_in_csv_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.watermark.io import load_events

    csv = tmp_path / "b.csv"
    csv.write_text("event_time,batch\n2026-01-01T00:00:00Z,2.0\n")
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text('{"event_time": "2026-01-01T00:00:00Z", "batch": 2.0}\n')
    assert load_events(csv).batch.tolist() == load_events(jsonl).batch.tolist() == [2]
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"event_time": "2026-01-01T00:00:00Z", "batch": true}\n')
    code, _, err = _run(_whatif(bad), capsys)
    assert code == 2 and "t.jsonl: line 1: field batch: must be an integer, got true" in err, err
