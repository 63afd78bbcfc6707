"""Load an EVENTS file (CSV, JSON lines or Parquet) into an :class:`~monitor.watermark.EventsTable`.

Columns (names fixed except the event-time column, see ``time_column``):

* ``event_time`` (required): ISO-8601 (``2026-01-02T03:04:05.123Z``; no offset = UTC) or a number of
  epoch ``s``/``ms``/``us`` (``time_unit`` required for numbers). Empty, ``null`` or a missing JSON
  field is a null event time. Any other text is *unparseable*: the row is kept with a null event time
  (Spark reads it as null and its window filter skips it) and reported in ``bad_rows`` with its line.
* ``batch`` (optional): integer micro-batch number.
* ``arrival_time`` (optional): when the row reached the source; same formats as ``event_time``;
  stored as epoch ms (floor).
* ``source``, ``key`` (optional): strings.
* ``partition`` (optional): integer input partition (Kafka partition / file split).

Errors are :class:`EventsFileError` (an :class:`~monitor.errors.InputError`): missing file, unknown
format, no event-time column (the message lists the columns found), a numeric time without a unit or
with a unit its values contradict, a bad ``batch``/``partition``/``arrival_time`` value (with line).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monitor.errors import InputError
from monitor.watermark.events import BadRow, EventsTable, parse_iso_to_us

__all__ = ["EventsFileError", "TimeUnit", "load_events"]

TimeUnit = Literal["s", "ms", "us"]
_UNIT_US: dict[str, int] = {"s": 1_000_000, "ms": 1000, "us": 1}
_NULLS = {"", "null", "NULL", "None", "none", "NaN", "nan"}
_KNOWN = ("batch", "arrival_time", "source", "key", "partition")


class EventsFileError(InputError):
    """The EVENTS file cannot be used; the message names the file, and the line/column when relevant."""


def _guess_unit(abs_median: float) -> str:
    if abs_median < 1e11:
        return "s"
    if abs_median < 1e14:
        return "ms"
    return "us"


def _year(us: float) -> int:
    try:
        return datetime.fromtimestamp(us / 1e6, tz=UTC).year
    except (OverflowError, OSError, ValueError):
        return 9999 if us > 0 else 1


class _TimeParser:
    """Parses one time column value by value; remembers numeric values to check the unit."""

    def __init__(self, path: str, column: str, unit: str | None) -> None:
        self.path = path
        self.column = column
        self.unit = unit
        self.numbers: list[float] = []
        self.first_number_line: int | None = None

    def parse(self, value: Any, line: int) -> tuple[int | None, str | None]:
        """Return ``(us, None)``, ``(None, None)`` for null, or ``(None, reason)`` when unparseable."""
        if value is None or isinstance(value, bool):
            return None, None
        if isinstance(value, int | float):
            if isinstance(value, float) and math.isnan(value):
                return None, None
            return self._number(float(value), int(value) if isinstance(value, int) else None, line), None
        text = str(value).strip()
        if text in _NULLS:
            return None, None
        if len(text) >= 10 and text[4] == "-":  # ISO-8601 date first: skip the number attempt
            try:
                return parse_iso_to_us(text), None
            except ValueError:
                return None, "not ISO-8601 nor a number"
        c = text[0]
        if c.isdigit() or c in "+-.":
            try:
                num = float(text)
            except ValueError:
                pass
            else:
                exact = int(text) if text.lstrip("+-").isdigit() else None
                return self._number(num, exact, line), None
        try:
            return parse_iso_to_us(text), None
        except ValueError:
            return None, "not ISO-8601 nor a number"

    def _number(self, num: float, exact: int | None, line: int) -> int:
        if self.unit is None:
            guess = _guess_unit(abs(num))
            raise EventsFileError(
                f"{self.path}:{line}: column {self.column!r} holds epoch numbers ({num:g}); pass the unit "
                f"with --time-unit s|ms|us (these look like {guess})"
            )
        if self.first_number_line is None:
            self.first_number_line = line
        if len(self.numbers) < 10_001:
            self.numbers.append(num)
        f = _UNIT_US[self.unit]
        if exact is not None:
            return exact * f
        return math.floor(num * f)

    def check_unit(self) -> None:
        """Raise when the numbers' magnitude contradicts the unit (e.g. ms values read as seconds)."""
        if self.unit is None or not self.numbers:
            return
        med = float(np.median(np.abs(np.asarray(self.numbers))))
        guess = _guess_unit(med)
        if guess == self.unit or med == 0:
            return
        given_year = _year(med * _UNIT_US[self.unit])
        guess_year = _year(med * _UNIT_US[guess])
        if not (1900 <= given_year <= 2200) and 1990 <= guess_year <= 2100:
            raise EventsFileError(
                f"{self.path}: column {self.column!r} read as epoch {self.unit} gives dates around year "
                f"{given_year}; the values (median {med:g}) look like epoch {guess} "
                f"(year {guess_year}): pass --time-unit {guess}"
            )


def load_events(
    path: str | Path,
    *,
    time_unit: TimeUnit | None = None,
    time_column: str = "event_time",
    fmt: Literal["csv", "jsonl", "parquet"] | None = None,
) -> EventsTable:
    """Read an EVENTS file (format from the extension unless ``fmt`` is given).

    Args:
        path: ``.csv``, ``.jsonl``/``.ndjson``/``.json`` (one object per line), ``.parquet``/``.pq``.
        time_unit: unit of numeric ``event_time``/``arrival_time`` values.
        time_column: name of the event-time column.
        fmt: force the format.

    Returns:
        The table; unparseable event times are null and listed in ``bad_rows`` (with line numbers).

    Raises:
        EventsFileError: see the module docstring.
    """
    p = Path(path)
    if time_unit is not None and time_unit not in _UNIT_US:
        raise EventsFileError(f"unknown time unit {time_unit!r}; use s, ms or us")
    if not p.is_file():
        raise EventsFileError(f"{p}: no such file")
    kind = fmt or _format_of(p)
    if kind == "csv":
        fast = _fast_csv(p, time_column, time_unit)
        if fast is not None:
            return fast
        rows, columns = _read_csv(p)
    elif kind == "jsonl":
        rows, columns = _read_jsonl(p, time_column)
    elif kind == "parquet":
        rows, columns = _read_parquet(p)
    else:
        raise EventsFileError(f"{p}: unknown format {kind!r}; use csv, jsonl or parquet")
    return _build(p, rows, columns, time_column, time_unit)


def _format_of(p: Path) -> str:
    suf = p.suffix.lower()
    if suf in (".csv", ".tsv"):
        return "csv"
    if suf in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suf in (".parquet", ".pq"):
        return "parquet"
    raise EventsFileError(
        f"{p}: cannot tell the format from the extension {suf!r}; use .csv, .jsonl or .parquet"
    )


Row = tuple[int, Mapping[str, Any]]


def _read_csv(p: Path) -> tuple[Iterator[Row], list[str]]:
    with p.open(newline="", encoding="utf-8-sig") as fh:
        try:
            header = [h.strip() for h in next(csv.reader(fh))]
        except StopIteration:
            raise EventsFileError(f"{p}: empty file (expected a header line)") from None

    def gen() -> Iterator[Row]:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            next(reader)
            for rec in reader:
                if not rec:
                    continue
                yield reader.line_num, dict(zip(header, rec, strict=False))

    return gen(), header


def _read_jsonl(p: Path, time_column: str) -> tuple[Iterator[Row], list[str]]:
    """Parse every line once, keeping only the columns the engine uses (compact for 1M+ lines)."""
    wanted = (time_column, *_KNOWN)
    columns: dict[str, None] = {}
    lines: list[int] = []
    values: dict[str, list[Any]] = {c: [] for c in wanted}
    corrupt: dict[int, str] = {}
    with p.open(encoding="utf-8-sig") as fh:
        for i, line in enumerate(fh, start=1):
            s = line.strip()
            if not s:
                continue
            try:
                obj = json.loads(s)
            except json.JSONDecodeError:
                obj = None
            idx = len(lines)
            lines.append(i)
            if not isinstance(obj, dict):
                corrupt[idx] = s
                for c in wanted:
                    values[c].append(None)
                continue
            for k in obj:
                if k not in columns:
                    columns[k] = None
            for c in wanted:
                values[c].append(obj.get(c))

    def gen() -> Iterator[Row]:
        for idx, line in enumerate(lines):
            if idx in corrupt:
                yield line, {"\x00corrupt": corrupt[idx]}
            else:
                yield line, {c: values[c][idx] for c in wanted}

    return gen(), list(columns)


def _read_parquet(p: Path) -> tuple[Iterator[Row], list[str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise EventsFileError(
            f"{p}: reading Parquet needs pyarrow: pip install 'tidegauge[parquet]'"
        ) from None
    try:
        table = pq.read_table(p)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise EventsFileError(f"{p}: cannot read Parquet: {exc}") from None
    columns = list(table.column_names)
    data: dict[str, list[Any]] = {}
    for name in columns:
        col = table.column(name)
        import pyarrow as pa

        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", tz=col.type.tz)).cast(pa.int64())
            data[name] = [None if v is None else _UsValue(v) for v in col.to_pylist()]
        else:
            data[name] = col.to_pylist()

    def gen() -> Iterator[Row]:
        for i in range(table.num_rows):
            yield i + 1, {c: data[c][i] for c in columns}

    return gen(), columns


class _UsValue(int):
    """An int that is already epoch microseconds (a Parquet timestamp), whatever ``time_unit`` says."""


def _build(
    p: Path, rows: Iterable[Row], columns: list[str], time_column: str, unit: str | None
) -> EventsTable:
    if time_column not in columns:
        found = ", ".join(columns) or "(none)"
        raise EventsFileError(f"{p}: no column {time_column!r}; columns found: {found}")
    tparser = _TimeParser(str(p), time_column, unit)
    aparser = _TimeParser(str(p), "arrival_time", unit)
    has = {c: c in columns for c in _KNOWN}
    et: list[int | None] = []
    lines: list[int] = []
    bad: list[BadRow] = []
    batch: list[int] = []
    arrival: list[int] = []
    source: list[str | None] = []
    key: list[str | None] = []
    part: list[int] = []
    for line, rec in rows:
        lines.append(line)
        if "\x00corrupt" in rec:
            et.append(None)
            bad.append(BadRow(line, str(rec["\x00corrupt"])[:80], "not a JSON object"))
            for c in ("batch", "partition", "arrival_time"):
                if has[c]:
                    raise EventsFileError(f"{p}:{line}: not a JSON object, so its {c!r} is unknown")
            if has["source"]:
                source.append(None)
            if has["key"]:
                key.append(None)
            continue
        v = rec.get(time_column)
        if isinstance(v, _UsValue):
            us: int | None = int(v)
            reason = None
        else:
            us, reason = tparser.parse(v, line)
        et.append(us)
        if reason is not None:
            bad.append(BadRow(line, str(v)[:80], reason))
        if has["batch"]:
            batch.append(_int(p, line, "batch", rec.get("batch")))
        if has["partition"]:
            part.append(_int(p, line, "partition", rec.get("partition")))
        if has["arrival_time"]:
            a = rec.get("arrival_time")
            aus: int | None = int(a) if isinstance(a, _UsValue) else None
            why: str | None = None
            if aus is None:
                aus, why = aparser.parse(a, line)
            if aus is None:
                raise EventsFileError(f"{p}:{line}: arrival_time {str(a)[:40]!r} is {why or 'missing'}")
            arrival.append(aus // 1000)
        if has["source"]:
            s = rec.get("source")
            source.append(None if s is None else str(s))
        if has["key"]:
            k = rec.get("key")
            key.append(None if k is None else str(k))
    tparser.check_unit()
    aparser.check_unit()
    return EventsTable.from_columns(
        et,
        batch=batch if has["batch"] else None,
        arrival_ms=arrival if has["arrival_time"] else None,
        source=source if has["source"] else None,
        key=key if has["key"] else None,
        partition=part if has["partition"] else None,
        line=lines,
        bad_rows=bad,
        path=str(p),
    )


def _int(p: Path, line: int, column: str, value: Any) -> int:
    if isinstance(value, bool):
        raise EventsFileError(f"{p}:{line}: column {column!r} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise EventsFileError(
            f"{p}:{line}: column {column!r} must be an integer, got {str(value)[:40]!r}"
        ) from None


def _fast_csv(p: Path, time_column: str, unit: str | None) -> EventsTable | None:
    """Vectorised CSV load with pyarrow for clean files; ``None`` means "use the row-by-row path".

    It gives up (returning ``None``) whenever the row-by-row path could say more: pyarrow missing, an
    unparseable or mixed-format time, a numeric time without a unit, a bad integer, or blank/multi-line
    records (line numbers would no longer be ``row + 2``). Same results as the row-by-row path.
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    data = p.read_bytes().removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM (spreadsheet exports) is not data
    first_nl = data.find(b"\n")
    if first_nl < 0:
        return None
    header = [h.strip() for h in next(csv.reader([data[:first_nl].decode("utf-8", "replace")]))]
    if time_column not in header or len(set(header)) != len(header):
        return None
    wanted = [c for c in (time_column, *_KNOWN) if c in header]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in header},
                include_columns=wanted,
                null_values=sorted(_NULLS),
                strings_can_be_null=True,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    n = table.num_rows
    lines_in_file = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if lines_in_file != n + 1:  # blank lines or quoted newlines: keep exact line numbers
        return None

    def times_us(name: str) -> tuple[np.ndarray, np.ndarray] | None:
        col = table.column(name)
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
        if unit is not None:
            try:
                ints = pc.cast(col, pa.int64())
            except pa.ArrowInvalid:
                ints = None
            if ints is not None:
                vals = ints.fill_null(0).to_numpy()
                parser = _TimeParser(str(p), name, unit)
                parser.numbers = [float(v) for v in vals[valid][:10_001]]
                parser.check_unit()
                return vals.astype(np.int64) * _UNIT_US[unit], valid
        for target in (pa.timestamp("us", tz="UTC"), pa.timestamp("us")):
            try:
                ts = pc.cast(col, target)
            except pa.ArrowInvalid:
                continue
            return ts.cast(pa.int64()).fill_null(0).to_numpy().astype(np.int64), valid
        return None

    et = times_us(time_column)
    if et is None:
        return None
    event_us, valid = et

    def ints(name: str) -> np.ndarray | None:
        col = table.column(name)
        if col.null_count:
            return None
        try:
            out: np.ndarray = np.asarray(pc.cast(col, pa.int64()).to_numpy(), dtype=np.int64)
        except pa.ArrowInvalid:
            return None
        return out

    cols: dict[str, Any] = {}
    for name in ("batch", "partition"):
        if name in header:
            arr = ints(name)
            if arr is None:
                return None
            cols[name] = arr
    arrival_ms = None
    if "arrival_time" in header:
        at = times_us("arrival_time")
        if at is None or not at[1].all():
            return None
        arrival_ms = np.floor_divide(at[0], 1000)
    names: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
    for name in ("source", "key"):
        if name in header:
            enc = table.column(name).fill_null("").dictionary_encode().combine_chunks()
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32)
            names[name] = (codes, tuple(str(v) for v in enc.dictionary.to_pylist()))
    zeros = np.zeros(n, dtype=np.int32)
    return EventsTable(
        event_time_us=np.where(valid, event_us, 0).astype(np.int64),
        valid=valid,
        source_codes=names["source"][0] if "source" in names else zeros,
        source_names=names["source"][1] if "source" in names else ("",),
        key_codes=names["key"][0] if "key" in names else zeros.copy(),
        key_names=names["key"][1] if "key" in names else ("",),
        batch=cols.get("batch"),
        arrival_ms=arrival_ms,
        partition=cols.get("partition"),
        line=np.arange(2, n + 2, dtype=np.int64),
        path=str(p),
    )
