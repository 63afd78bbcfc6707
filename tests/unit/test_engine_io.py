"""Loading EVENTS files: CSV, JSON lines, Parquet; bad rows with line numbers; clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from monitor.watermark import EventsTable
from monitor.watermark.io import EventsFileError, load_events

SEC_US = 1_000_000


def write(p: Path, text: str) -> Path:
    p.write_text(text, encoding="utf-8")
    return p


def test_csv_iso_times_batches_sources_and_a_bad_row_with_its_line(tmp_path: Path) -> None:
    f = write(
        tmp_path / "e.csv",
        "event_time,batch,source,key\n"
        "2026-01-01T00:00:00Z,0,s1,a\n"
        "2026-01-01 00:00:01.5,0,s2,b\n"  # no offset: UTC; fractional seconds
        ",1,s1,a\n"  # empty: null, not a bad row
        "yesterday,1,s1,a\n"  # line 5: unparseable
        "2026-01-01T02:00:00+02:00,1,s1,c\n",
    )
    ev = load_events(f)
    base = 1_767_225_600 * SEC_US  # 2026-01-01T00:00:00Z
    assert ev.valid.tolist() == [True, True, False, False, True]
    assert ev.event_time_us[[0, 1, 4]].tolist() == [base, base + 1_500_000, base]
    assert [(b.line, b.value) for b in ev.bad_rows] == [(5, "yesterday")]
    assert ev.batch is not None and ev.batch.tolist() == [0, 0, 1, 1, 1]
    assert ev.source_names == ("s1", "s2") and ev.key_names == ("a", "b", "c")
    assert ev.line is not None and ev.line.tolist() == [2, 3, 4, 5, 6]


def test_jsonl_numeric_times_with_unit_and_arrival(tmp_path: Path) -> None:
    f = write(
        tmp_path / "e.jsonl",
        '{"event_time": 1767225600000, "arrival_time": 1767225601000, "partition": 3}\n'
        "\n"
        "{not json\n"  # line 3: corrupt record -> null time, reported
        '{"event_time": null, "arrival_time": 1767225602000, "partition": 1}\n',
    )
    with pytest.raises(EventsFileError, match=r"e.jsonl: line 3: invalid JSON: Expecting property name"):
        load_events(f, time_unit="ms")  # a corrupt line cannot give the arrival time needed to plan
    f2 = write(
        tmp_path / "e2.jsonl",
        '{"event_time": 1767225600000, "key": "a"}\n{not json\n{"event_time": 1767225600500.5}\n',
    )
    ev = load_events(f2, time_unit="ms")
    assert ev.event_time_us.tolist()[0] == 1_767_225_600 * SEC_US
    assert ev.event_time_us.tolist()[2] == 1_767_225_600 * SEC_US + 500_500
    assert [(b.line, b.kind, b.reason) for b in ev.bad_rows] == [
        (2, "line", "invalid JSON: Expecting property name enclosed in double quotes at column 2")
    ]
    assert ev.key_names == ("a", "")


def test_parquet_timestamp_column(tmp_path: Path) -> None:
    t = pa.table(
        {
            "event_time": pa.array([1_767_225_600_000_000, None], type=pa.timestamp("us", tz="UTC")),
            "batch": [0, 1],
        }
    )
    pq.write_table(t, tmp_path / "e.parquet")
    ev = load_events(tmp_path / "e.parquet")
    assert ev.valid.tolist() == [True, False]
    assert ev.event_time_us[0] == 1_767_225_600 * SEC_US


def test_wrong_column_name_lists_the_columns(tmp_path: Path) -> None:
    f = write(tmp_path / "e.csv", "ts,batch\n2026-01-01T00:00:00Z,0\n")
    with pytest.raises(EventsFileError, match=r"no column 'event_time'; columns found: ts, batch"):
        load_events(f)
    assert load_events(f, time_column="ts").valid.tolist() == [True]


def test_numeric_times_need_a_unit(tmp_path: Path) -> None:
    f = write(tmp_path / "e.csv", "event_time\n1767225600000\n")
    with pytest.raises(EventsFileError, match=r"--time-unit s\|ms\|us \(these look like ms\)"):
        load_events(f)


def test_wrong_unit_is_a_clear_error(tmp_path: Path) -> None:
    # epoch milliseconds read as seconds would be ~year 57970: refused, naming the likely unit.
    f = write(tmp_path / "e.csv", "event_time\n1767225600000\n1767225601000\n")
    with pytest.raises(EventsFileError, match="pass --time-unit ms"):
        load_events(f, time_unit="s")
    # small numbers in seconds (a test clock near 1970) are accepted as given
    f2 = write(tmp_path / "small.csv", "event_time\n100\n103\n")
    assert load_events(f2, time_unit="s").event_time_us.tolist() == [100 * SEC_US, 103 * SEC_US]


def test_bad_batch_value_names_line_and_column(tmp_path: Path) -> None:
    f = write(tmp_path / "e.csv", "event_time,batch\n2026-01-01T00:00:00Z,0\n2026-01-01T00:00:00Z,x\n")
    with pytest.raises(EventsFileError, match=r"e.csv: line 3: field batch: must be an integer"):
        load_events(f)


def test_missing_file_and_unknown_extension(tmp_path: Path) -> None:
    with pytest.raises(EventsFileError, match="no such file"):
        load_events(tmp_path / "nope.csv")
    with pytest.raises(EventsFileError, match="extension"):
        load_events(write(tmp_path / "e.txt", "event_time\n"))


def load_both_ways(f: Path, unit: str | None, reader: str, monkeypatch: pytest.MonkeyPatch) -> EventsTable:
    """Load ``f`` with its vectorised ``reader`` (``_fast_csv``, ``_fast_jsonl``, ``_fast_parquet``) and again
    with that reader turned off (the row-by-row path); assert both read it alike; return the first."""
    import monitor.watermark.io as io_mod

    fast = load_events(f, time_unit=unit)  # type: ignore[arg-type]
    monkeypatch.setattr(io_mod, reader, lambda *a, **k: None)
    assert_same_table(fast, load_events(f, time_unit=unit))  # type: ignore[arg-type]
    return fast


def assert_same_table(fast: EventsTable, slow: EventsTable) -> None:
    """The vectorised and the row-by-row loader read the file alike (null times are 0 in both)."""
    for attr in ("event_time_us", "valid", "source_codes", "key_codes", "batch", "arrival_ms", "partition", "line"):
        a, b = getattr(fast, attr), getattr(slow, attr)
        assert (a is None) == (b is None), attr
        if a is not None:
            assert a.tolist() == b.tolist(), attr
    assert (fast.source_names, fast.key_names, fast.bad_rows) == (slow.source_names, slow.key_names, slow.bad_rows)


CLEAN_FILES = {
    "iso": "event_time,batch,source,key,arrival_time\n"
    "2026-01-01T00:00:00Z,0,s1,a,2026-01-01T00:00:01Z\n"
    "2026-01-01T00:00:01.123456Z,0,s2,,2026-01-01T00:00:02.5Z\n"
    ",1,s1,b,2026-01-01T00:00:03Z\n"
    "2026-01-01T02:00:00+02:00,2,,a,2026-01-01T00:00:04Z\n",
    "naive": "event_time,partition\n2026-01-01 00:00:01.5,3\n2026-01-01,4\nnull,5\n",
    "numeric": "event_time,arrival_time,batch\n"
    "1767225600000,1767225600500,0\n"
    "1767225600001,1767225600999,1\n",
    "mixed": "event_time\n2026-01-01T00:00:00Z\n1767225600\nnot a time\n",  # row-by-row only
    "blank_lines": "event_time\n2026-01-01T00:00:00Z\n\n2026-01-01T00:00:01Z\n",
}


@pytest.mark.parametrize("name", sorted(CLEAN_FILES))
def test_vectorised_csv_path_equals_row_by_row_path(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = write(tmp_path / f"{name}.csv", CLEAN_FILES[name])
    unit = "ms" if name == "numeric" else ("s" if name == "mixed" else None)
    load_both_ways(f, unit, "_fast_csv", monkeypatch)



JSONL_FILES = {
    # every column, an explicit null event time and a missing one, an offset, fractions of a second
    "iso": '{"event_time": "2026-01-01T00:00:00Z", "batch": 0, "source": "s1", "key": "a", "arrival_time": "2026-01-01T00:00:01Z"}\n'
    '{"event_time": "2026-01-01T00:00:01.123456Z", "batch": 0, "source": "s2", "key": "", "arrival_time": "2026-01-01T00:00:02.5Z"}\n'
    '{"event_time": null, "batch": 1, "source": "s1", "key": "b", "arrival_time": "2026-01-01T00:00:03Z"}\n'
    '{"batch": 2, "source": "s1", "key": "a", "arrival_time": "2026-01-01T00:00:04Z", "other": [1, {"x": 2}]}\n'
    '{"event_time": "2026-01-01T02:00:00+02:00", "batch": 2, "source": "s3", "key": "a", "arrival_time": "2026-01-01T00:00:04Z"}\n',
    "numeric": '{"event_time": 1767225600000, "arrival_time": 1767225600500, "partition": 1}\n'
    '{"event_time": 1767225600001, "arrival_time": 1767225600999, "partition": 0}',  # no final newline
    # the row-by-row path only: a key on some lines, a blank line, a number among ISO times, a number key
    "key_on_some_lines": '{"event_time": "2026-01-01T00:00:00Z", "key": "a"}\n{"event_time": "2026-01-01T00:00:01Z"}\n',
    "blank_line": '{"event_time": "2026-01-01T00:00:00Z"}\n\n{"event_time": "2026-01-01T00:00:01Z"}\n',
    "mixed": '{"event_time": "2026-01-01T00:00:00Z"}\n{"event_time": 1767225600}\n{"event_time": "not a time"}\n',
    "number_key": '{"event_time": "2026-01-01T00:00:00Z", "key": 7}\n{"event_time": "2026-01-01T00:00:01Z", "key": 1.5}\n',
}


@pytest.mark.parametrize("name", sorted(JSONL_FILES))
def test_vectorised_jsonl_path_equals_row_by_row_path(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import monitor.watermark.io as io_mod

    f = write(tmp_path / f"{name}.jsonl", JSONL_FILES[name])
    unit = "ms" if name == "numeric" else ("s" if name == "mixed" else None)
    taken = io_mod._fast_jsonl(f, "event_time", unit) is not None
    assert taken == (name in ("iso", "numeric"))  # the others are the row-by-row path's to report
    fast = load_both_ways(f, unit, "_fast_jsonl", monkeypatch)
    if name == "iso":  # written out: line 3 null, line 4 missing; 02:00+02:00 is midnight UTC
        assert fast.valid.tolist() == [True, True, False, False, True]
        assert fast.event_time_us.tolist()[:2] == [1767225600_000000, 1767225601_123456]
        assert fast.event_time_us.tolist()[4] == 1767225600_000000
        assert fast.line.tolist() == [1, 2, 3, 4, 5]


def _parquet_tables() -> dict[str, Any]:
    import pyarrow as pa

    ms = pa.array([1767225600123, None, 1767225599999], type=pa.timestamp("ms", tz="UTC"))
    return {
        # timestamp[ms] with a null, every optional column
        "ts_ms": pa.table({
            "event_time": ms, "batch": pa.array([0, 0, 1], pa.int32()), "key": ["a", None, "a"],
            "source": ["s", "s", "t"], "partition": pa.array([1, 2, 1], pa.int64()),
            "arrival_time": pa.array([1767225601000, 1767225601000, 1767225602000], type=pa.timestamp("ms")),
        }),
        # timestamp[ns] before 1970 floors to the microsecond below, as Spark's TimestampType does
        "ts_ns_negative": pa.table({"event_time": pa.array([-1501, 1500], type=pa.timestamp("ns"))}),
        "strings": pa.table({"event_time": ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01.5Z", None]}),
        "epoch_ms_ints": pa.table({"event_time": pa.array([1767225600000, 1767225600001], pa.int64())}),
        # the row-by-row path only: a dictionary-encoded key, a date
        "dictionary_key": pa.table({
            "event_time": pa.array([0, 1000], type=pa.timestamp("ms")),
            "key": pa.array(["a", "b"]).dictionary_encode(),
        }),
        "date": pa.table({"event_time": pa.array([20000, 20001], type=pa.date32())}),
    }


@pytest.mark.parametrize("name", ["ts_ms", "ts_ns_negative", "strings", "epoch_ms_ints", "dictionary_key", "date"])
def test_vectorised_parquet_path_equals_row_by_row_path(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    import monitor.watermark.io as io_mod

    f = tmp_path / f"{name}.parquet"
    pq.write_table(_parquet_tables()[name], f)
    unit = "ms" if name == "epoch_ms_ints" else None
    taken = io_mod._fast_parquet(f, "event_time", unit) is not None
    assert taken == (name not in ("dictionary_key", "date"))
    fast = load_both_ways(f, unit, "_fast_parquet", monkeypatch)
    if name == "ts_ns_negative":  # written out: -1501 ns -> -2 us (floor), 1500 ns -> 1 us
        assert fast.event_time_us.tolist() == [-2, 1]
    if name == "ts_ms":
        assert fast.event_time_us.tolist() == [1767225600_123000, 0, 1767225599_999000]
        assert fast.valid.tolist() == [True, False, True] and fast.line.tolist() == [1, 2, 3]


def test_jsonl_numbers_without_a_unit_are_still_the_row_path_s_error(tmp_path: Path) -> None:
    f = write(tmp_path / "n.jsonl", '{"event_time": 1767225600000}\n{"event_time": 1767225600001}\n')
    with pytest.raises(EventsFileError, match="unit"):
        load_events(f)


def test_loading_a_file_never_imports_pandas(tmp_path: Path) -> None:
    # pyarrow's to_numpy imports pandas (about a second) on first use; a whatif run needs none of it
    import subprocess
    import sys

    csv_file = write(tmp_path / "e.csv", CLEAN_FILES["iso"])
    jsonl_file = write(tmp_path / "e.jsonl", JSONL_FILES["iso"])
    code = (
        "import sys; from monitor.watermark.io import load_events; "
        f"load_events({str(csv_file)!r}); load_events({str(jsonl_file)!r}); "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_from_records_accepts_iso_datetimes_and_micros_and_rejects_naive() -> None:
    from datetime import UTC, datetime

    from monitor.errors import InputError
    from monitor.watermark import EventsTable

    ev = EventsTable.from_records(
        [
            {"event_time": "1970-01-01T00:01:40Z"},
            {"event_time": datetime(1970, 1, 1, 0, 1, 41, tzinfo=UTC)},
            {"event_time": 102 * SEC_US},
            {"event_time": None},
            {"event_time": "soon"},
        ]
    )
    assert ev.event_time_us[:3].tolist() == [100 * SEC_US, 101 * SEC_US, 102 * SEC_US]
    assert ev.valid.tolist() == [True, True, True, False, False]
    assert [(b.line, b.value) for b in ev.bad_rows] == [(5, "soon")]
    with pytest.raises(InputError, match="timezone-aware"):
        EventsTable.from_records([{"event_time": datetime(2026, 1, 1)}])
    with pytest.raises(InputError, match="keys"):
        EventsTable.from_records([{"event_time": 1}, {"event_time": 2, "batch": 0}])


@pytest.mark.parametrize(
    ("name", "text"),
    [
        # clean CSV (vectorised path) and one with a bad row (row-by-row path), and JSON lines
        ("clean.csv", "event_time,batch\n2026-01-01T00:00:00Z,0\n2026-01-01T00:00:01Z,1\n"),
        ("bad.csv", "event_time,batch\n2026-01-01T00:00:00Z,0\nnope,1\n"),
        (
            "e.jsonl",
            '{"event_time": "2026-01-01T00:00:00Z", "batch": 0}\n{"event_time": "nope", "batch": 1}\n',
        ),
    ],
)
def test_utf8_bom_is_not_part_of_the_first_column_name(tmp_path: Path, name: str, text: str) -> None:
    # spreadsheet exports start with a BOM; it used to end up in the header: "no column 'event_time';
    # columns found: \ufeffevent_time"
    f = tmp_path / name
    f.write_bytes(b"\xef\xbb\xbf" + text.encode())
    ev = load_events(f)
    assert len(ev) == 2
    assert ev.valid.tolist()[0] is True
