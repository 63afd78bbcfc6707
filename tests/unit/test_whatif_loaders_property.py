"""Property tests (Hypothesis) over the what-if loaders: CSV, JSON lines and Parquet.

Whatever the file holds, loading it and running ``whatif`` on it (text and JSON) either succeeds or
raises our own :class:`~monitor.errors.InputError` (one line, exit code 2): never another exception.
Inputs start from real rows (the recorded Spark 4.3 run in ``tests/fixtures/spark/epoch-units-4.3.0``
and its progress timestamps) and are mixed with the values issue 11 found crashing (``+inf``,
``1e300``, 20-digit integers, ``\\xff`` bytes, lone surrogates), arbitrary text and numbers, then
mutated as bytes (inserted, dropped and flipped bytes). Runs are derandomized, so they cannot flake.
"""

from __future__ import annotations

import csv
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.commands.whatif import run_whatif
from monitor.errors import InputError
from monitor.watermark import Tumbling, WatermarkConfig
from monitor.watermark.io import load_events

REC = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "epoch-units-4.3.0"

_REAL_ROWS = list(csv.DictReader(io.StringIO((REC / "events.csv").read_text(encoding="utf-8"))))
_REAL_TIMES: list[str] = [r["event_time"] for r in _REAL_ROWS] + [
    v
    for line in (REC / "progress.jsonl").read_text(encoding="utf-8").splitlines()
    for k, v in json.loads(line)["eventTime"].items()
]
_NASTY = [
    "",
    "null",
    "NaN",
    "+inf",
    "-inf",
    "Infinity",
    "1e300",
    "-1e300",
    "9" * 20,
    "9" * 400,
    "1" * 5000,
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-23:59",
    "2026-01-01T00:00:00Z\xff",
    "\ud800",
    "-9223372036854775809",
    "9223372036854775808",
    "0x10",
    "1_000",
    " 1767225600 ",
    "true",
]

PROPS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

time_values = st.one_of(
    st.sampled_from(_REAL_TIMES),
    st.sampled_from(_NASTY),
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=30),
)
batch_values = st.one_of(
    st.sampled_from([r["batch"] for r in _REAL_ROWS]),
    st.sampled_from(["99999999999999999999", "-1", "1e300", "inf", "", "x", "1.0", "true"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)
words = st.one_of(st.sampled_from(["a", "b", "", "\ud800", "naïve"]), st.text(max_size=8))
columns = st.sets(st.sampled_from(["batch", "arrival_time", "source", "key", "partition"]), max_size=5)


def _mutate(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """Apply (kind, position, byte) edits: 0 insert, 1 delete, 2 replace."""
    b = bytearray(data)
    for kind, pos, value in edits:
        if not b:
            break
        i = pos % (len(b) + (kind == 0))
        if kind == 0:
            b.insert(i, value)
        elif kind == 1 and i < len(b):
            del b[i]
        elif i < len(b):
            b[i] = value
    return bytes(b)


edits = st.lists(
    st.tuples(
        st.integers(0, 2), st.integers(0, 10_000), st.sampled_from([0, 10, 13, 34, 44, 123, 125, 255, 0xC3])
    ),
    max_size=4,
)
units = st.sampled_from([None, "s", "ms", "us"])


def _whatif(path: Path, unit: str | None, has_arrival: bool) -> None:
    """Load and run ``whatif`` in both formats; only our own error type may come out."""
    try:
        load_events(path, time_unit=unit)  # type: ignore[arg-type]
    except InputError:
        return
    config = WatermarkConfig(
        delay_ms=60_000, window=Tumbling(60_000), trigger_ms=10_000 if has_arrival else None
    )
    for fmt in ("text", "json"):
        out = io.StringIO()
        try:
            run_whatif(
                path,
                config=config,
                time_unit=unit,
                time_column="event_time",
                fmt=fmt,
                sweep_delays=None,
                target_completeness=None,
                show_batches=5,
                show_late=3,
                out=out,
            )
        except InputError:
            return
        out.getvalue().encode("utf-8")  # printable as UTF-8 (no lone surrogate reaches stdout)
        if fmt == "json":
            json.loads(out.getvalue())


def _row(draw: Any, cols: set[str]) -> dict[str, str]:
    row = {"event_time": draw(time_values)}
    for c in cols:
        row[c] = (
            draw(batch_values)
            if c in ("batch", "partition")
            else draw(time_values if c == "arrival_time" else words)
        )
    return row


@PROPS
@given(data=st.data(), cols=columns, unit=units, mutations=edits, n=st.integers(1, 12))
def test_csv_loader_and_whatif_raise_only_our_error(
    data: st.DataObject, cols: set[str], unit: str | None, mutations: list[tuple[int, int, int]], n: int
) -> None:
    rows = [_row(data.draw, cols) for _ in range(n)]
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=["event_time", *sorted(cols)])
    w.writeheader()
    w.writerows(rows)
    raw = _mutate(text.getvalue().encode("utf-8", "surrogatepass"), mutations)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "events.csv"
        p.write_bytes(raw)
        _whatif(p, unit, "arrival_time" in cols)


def _json_value(draw: Any) -> Any:
    return draw(
        st.one_of(
            time_values,
            st.integers(min_value=-(10**30), max_value=10**30),
            st.floats(allow_nan=True, allow_infinity=True),
            st.booleans(),
            st.none(),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        )
    )


@PROPS
@given(data=st.data(), cols=columns, unit=units, mutations=edits, n=st.integers(1, 12))
def test_jsonl_loader_and_whatif_raise_only_our_error(
    data: st.DataObject, cols: set[str], unit: str | None, mutations: list[tuple[int, int, int]], n: int
) -> None:
    lines = []
    for _ in range(n):
        obj = {
            k: (v if data.draw(st.booleans()) else _json_value(data.draw))
            for k, v in _row(data.draw, cols).items()
        }
        lines.append(json.dumps(obj))  # NaN/Infinity tokens included, as Python writes them
    raw = _mutate("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n", mutations)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "events.jsonl"
        p.write_bytes(raw)
        _whatif(p, unit, "arrival_time" in cols)


@PROPS
@given(
    data=st.data(),
    kind=st.sampled_from(
        ["ts_s", "ts_ms", "ts_us", "ts_ns", "int", "float", "string", "bool", "binary", "date", "list"]
    ),
    with_batch=st.sampled_from([None, "int", "string", "float"]),
    unit=units,
    truncate=st.one_of(st.none(), st.integers(0, 2000)),
    n=st.integers(1, 10),
)
def test_parquet_loader_and_whatif_raise_only_our_error(
    data: st.DataObject, kind: str, with_batch: str | None, unit: str | None, truncate: int | None, n: int
) -> None:
    i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
    real = [int(r["event_time"]) for r in _REAL_ROWS]
    ints = st.one_of(st.sampled_from(real), i64, st.none())
    if kind.startswith("ts_"):
        col = pa.array([data.draw(ints) for _ in range(n)], type=pa.timestamp(kind[3:], tz="UTC"))
    elif kind == "int":
        col = pa.array([data.draw(ints) for _ in range(n)], type=pa.int64())
    elif kind == "float":
        col = pa.array([data.draw(st.floats(allow_nan=True, allow_infinity=True)) for _ in range(n)])
    elif kind == "string":
        col = pa.array([data.draw(time_values).encode("utf-8", "replace").decode("utf-8") for _ in range(n)])
    elif kind == "bool":
        col = pa.array([data.draw(st.booleans()) for _ in range(n)])
    elif kind == "binary":
        col = pa.array([data.draw(st.binary(max_size=10)) for _ in range(n)])
    elif kind == "date":
        col = pa.array([data.draw(st.integers(-(2**31), 2**31 - 1)) for _ in range(n)], type=pa.date32())
    else:
        col = pa.array([[data.draw(st.integers(0, 9))] for _ in range(n)])
    table: dict[str, Any] = {"event_time": col}
    if with_batch == "int":
        table["batch"] = pa.array([data.draw(i64) for _ in range(n)], type=pa.int64())
    elif with_batch == "string":
        table["batch"] = pa.array([data.draw(batch_values) for _ in range(n)])
    elif with_batch == "float":
        table["batch"] = pa.array(
            [data.draw(st.floats(allow_nan=True, allow_infinity=True)) for _ in range(n)]
        )
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "events.parquet"
        try:
            pq.write_table(pa.table(table), p)
        except pa.ArrowInvalid:
            return  # the writer refuses it (a seconds timestamp beyond what Parquet's ms can hold)
        if truncate is not None:
            raw = p.read_bytes()
            p.write_bytes(raw[: truncate % (len(raw) + 1)])
        _whatif(p, unit, False)


def test_the_properties_see_the_nasty_values() -> None:
    # the seeds include what issue 11 found crashing; a guard against the strategies losing them
    assert {"+inf", "1e300", "9" * 20, "2026-01-01T00:00:00Z\xff"} <= set(_NASTY)
    assert any(math.isfinite(float(t)) for t in _REAL_TIMES if t.isdigit())
