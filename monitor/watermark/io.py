"""Load an EVENTS file (CSV, JSON lines or Parquet) into an :class:`~monitor.watermark.EventsTable`.

Columns (names fixed except the event-time column, see ``time_column``):

* ``event_time`` (required): ISO-8601 (``2026-01-02T03:04:05.123Z``; no offset = UTC) or a number of
  epoch ``s``/``ms``/``us`` (``time_unit`` required for numbers). Empty, ``null`` or a missing JSON
  field is a null event time. Anything else is *unparseable*: the row is kept with a null event time
  (Spark's readers, in their default PERMISSIVE mode, read a value they cannot convert as null, and the
  window filter skips it) and reported in ``bad_rows`` with its line and the reason: text that is not
  a time, ``inf``/``nan``-like or out-of-range numbers (beyond :data:`MAX_ABS_EVENT_TIME_US`), a JSON
  line that is not valid JSON or not an object, a number among ISO times when no unit was given.
  Bytes that are not UTF-8 are decoded as U+FFFD, as Spark's UTF-8 text decoding does, so such a time
  is unparseable too (the reason says so).
* A numeric time whose magnitude fits another unit far better than the given one (epoch ms read as
  seconds: year 57,971) is kept exactly as read (Spark would accept it too, and its watermark would
  jump there) and reported in ``unit_mismatches``; when the file's median itself contradicts the unit
  the load fails instead, naming the likely unit.
* ``batch`` (optional): integer micro-batch number.
* ``arrival_time`` (optional): when the row reached the source; same formats as ``event_time``;
  stored as epoch ms (floor).
* ``source``, ``key`` (optional): strings.
* ``partition`` (optional): integer input partition (Kafka partition / file split).

Errors are :class:`EventsFileError` (an :class:`~monitor.errors.InputError`): missing file, unknown
format, no event-time column (the message lists the columns found), numeric times without a unit (when
most times are numbers) or with a unit their median contradicts, a bad ``batch``/``partition``/
``arrival_time`` value (with line and column; integers must fit in 64 bits), a Parquet event-time
column of a type that is not a time (boolean, binary, nested), a malformed CSV record, an unreadable
file.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monitor.errors import InputError
from monitor.watermark.events import (
    MAX_ABS_EVENT_TIME_US,
    BadRow,
    EventsTable,
    UnitMismatch,
    parse_iso_to_us,
)

__all__ = ["MAX_ABS_EVENT_TIME_US", "EventsFileError", "TimeUnit", "load_events"]

TimeUnit = Literal["s", "ms", "us"]
_UNIT_US: dict[str, int] = {"s": 1_000_000, "ms": 1000, "us": 1}
_NULLS = {"", "null", "NULL", "None", "none", "NaN", "nan"}
_KNOWN = ("batch", "arrival_time", "source", "key", "partition")
_I64_MAX = (1 << 63) - 1
_INVALID_UTF8 = "invalid UTF-8 bytes (read as U+FFFD, as Spark decodes them), not a time"


class EventsFileError(InputError):
    """The EVENTS file cannot be used; the message names the file, and the line/column when relevant."""


def _guess_unit(abs_median: float) -> str:
    if abs_median < 1e11:
        return "s"
    if abs_median < 1e14:
        return "ms"
    return "us"


def _year(us: float) -> int:
    """Proleptic Gregorian year of an epoch-microsecond instant (any magnitude; 365.2425-day years)."""
    if not math.isfinite(us):
        return 9999 if us > 0 else 1
    return 1970 + math.floor(us / 31_556_952e6)


def _out_of_range(num: float, factor: int) -> bool:
    return not math.isfinite(num) or abs(num) * factor > MAX_ABS_EVENT_TIME_US


class _TimeParser:
    """Parses one time column value by value; remembers numeric values to check the unit.

    ``parse`` never raises for a value (it returns a reason instead); :meth:`finish` raises when the
    column as a whole is unusable (numbers without a unit, a unit the median contradicts).
    """

    def __init__(self, path: str, column: str, unit: str | None) -> None:
        self.path = path
        self.column = column
        self.unit = unit
        self.numbers: list[float] = []  # the first 10,001 numeric values (for the median)
        self.num_pos: list[int] = []  # position (row index) of every numeric value read with the unit
        self.num_val: list[float] = []  # and the value
        self.iso_count = 0
        self.unitless: list[tuple[int, float]] = []  # (line, value) of numbers read without a unit

    def parse(self, value: Any, line: int, pos: int = -1) -> tuple[int | None, str | None]:
        """Return ``(us, None)``, ``(None, None)`` for null, or ``(None, reason)`` when unparseable."""
        if value is None:
            return None, None
        if isinstance(value, bool):  # a JSON true/false: Spark's JSON reader cannot make it a timestamp
            return None, f"a boolean ({str(value).lower()}), not a time"
        if isinstance(value, int | float):
            if isinstance(value, float) and math.isnan(value):
                return None, None
            exact = value if isinstance(value, int) else None
            return self._number(float(value) if abs(value) < 1e308 else math.inf, exact, line, pos)
        text = str(value).strip()
        if text in _NULLS:
            return None, None
        if "\ufffd" in text:
            return None, _INVALID_UTF8
        if len(text) >= 10 and text[4] == "-":  # ISO-8601 date first: skip the number attempt
            return self._iso(text)
        c = text[0]
        if c.isdigit() or c in "+-.":
            try:
                num = float(text)
            except ValueError:
                pass
            else:
                if math.isinf(num) and not text.lstrip("+-.").isdigit():  # "inf", "+Infinity"
                    return None, "not ISO-8601 nor a number (infinite)"
                digits = text.lstrip("+-")
                exact = int(text) if digits.isdigit() and len(digits) <= 30 else None
                return self._number(num, exact, line, pos)
        return self._iso(text)

    def _iso(self, text: str) -> tuple[int | None, str | None]:
        try:
            us = parse_iso_to_us(text)
        except (ValueError, OverflowError):
            return None, "not ISO-8601 nor a number"
        self.iso_count += 1
        return us, None

    def _number(self, num: float, exact: int | None, line: int, pos: int) -> tuple[int | None, str | None]:
        if self.unit is None:
            self.unitless.append((line, num))
            return None, "an epoch number, but no --time-unit was given (the other times are ISO-8601)"
        f = _UNIT_US[self.unit]
        if _out_of_range(num, f):
            shown = f"{num:g}" if math.isfinite(num) else str(num)
            return None, (
                f"{shown} {self.unit} is outside Spark's timestamp range handled here "
                f"(|t| <= 2^62 us, about year +-146,000)"
            )
        if len(self.numbers) < 10_001:
            self.numbers.append(num)
        self.num_pos.append(pos)
        self.num_val.append(num)
        if exact is not None:
            return exact * f, None
        return math.floor(num * f), None

    def finish(self) -> None:
        """Raise when the column cannot be read as a whole.

        Raises:
            EventsFileError: numbers without a unit where most times are numbers; a unit the numbers'
                median contradicts (e.g. ms values read as seconds).
        """
        if self.unitless and len(self.unitless) > self.iso_count:
            line, num = self.unitless[0]
            guess = _guess_unit(abs(num))
            raise EventsFileError(
                f"{self.path}: line {line}: field {self.column}: holds epoch numbers ({num:g}); pass the unit "
                f"with --time-unit s|ms|us (these look like {guess})"
            )
        self.check_unit()

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

    def mismatches(self, lines: list[int] | np.ndarray) -> tuple[UnitMismatch, ...]:
        """Rows whose number fits another unit far better than the given one (see :func:`unit_mismatches`)."""
        if self.unit is None or not self.num_val:
            return ()
        pos = np.asarray(self.num_pos, dtype=np.int64)
        return unit_mismatches(
            np.asarray(self.num_val, dtype=np.float64), np.asarray(lines, dtype=np.int64)[pos], self.unit
        )


#: Half-width of the band around the median date within which a value counts as plausible: 100 years.
_PLAUSIBLE_US = 100 * 31_556_952 * 1_000_000
_MISMATCH_LIMIT = 1000


def unit_mismatches(values: np.ndarray, lines: np.ndarray, unit: str) -> tuple[UnitMismatch, ...]:
    """Numeric times that, read in ``unit``, lie more than 100 years from the column's median date while
    another unit would put them within 100 years of it (a producer writing ms where the others wrote s).

    Args:
        values: the raw numbers (float64), one per numeric row.
        lines: their line numbers.
        unit: the unit they were read in.

    Returns:
        At most 1,000 :class:`UnitMismatch` records, in line order.
    """
    if len(values) == 0:
        return ()
    f = _UNIT_US[unit]
    us = values * f
    med = float(np.median(us))
    far = np.abs(us - med) > _PLAUSIBLE_US
    if not far.any():
        return ()
    out: list[UnitMismatch] = []
    idx = np.flatnonzero(far)
    others = [u for u in ("s", "ms", "us") if u != unit]
    # per row, the other unit that lands closest to the median date
    dist = np.stack([np.abs(values[idx] * _UNIT_US[u] - med) for u in others])
    best = dist.argmin(axis=0)
    close = dist[best, np.arange(len(idx))] <= _PLAUSIBLE_US
    for i, k in zip(
        idx[close][:_MISMATCH_LIMIT].tolist(), best[close][:_MISMATCH_LIMIT].tolist(), strict=True
    ):
        v = float(values[i])
        other = others[k]
        out.append(
            UnitMismatch(
                line=int(lines[i]),
                value=int(v) if v.is_integer() else v,
                unit=unit,
                read_as_us=math.floor(v * f),
                likely_unit=other,
                likely_us=math.floor(v * _UNIT_US[other]),
            )
        )
    return tuple(sorted(out, key=lambda m: m.line))


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
    if p.is_dir():
        raise EventsFileError(f"{p}: is a directory; give one events file (.csv, .jsonl or .parquet)")
    if not p.is_file():
        raise EventsFileError(f"{p}: no such file")
    kind = fmt or _format_of(p)
    try:
        if kind == "csv":
            fast = _fast_csv(p, time_column, time_unit)
            if fast is not None:
                return fast
            rows, columns = _read_csv(p)
        elif kind == "jsonl":
            fast = _fast_jsonl(p, time_column, time_unit)
            if fast is not None:
                return fast
            rows, columns = _read_jsonl(p, time_column)
        elif kind == "parquet":
            fast = _fast_parquet(p, time_column, time_unit)
            if fast is not None:
                return fast
            rows, columns = _read_parquet(p, time_column)
        else:
            raise EventsFileError(f"{p}: unknown format {kind!r}; use csv, jsonl or parquet")
        return _build(p, rows, columns, time_column, time_unit)
    except OSError as exc:  # permission denied, a directory, a read error
        raise EventsFileError(f"{p}: cannot read: {exc.strerror or exc}") from None


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
    # Invalid UTF-8 bytes become U+FFFD (as Spark's text decoding does); such a time is unparseable.
    with p.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
        try:
            header = [h.strip() for h in next(csv.reader(fh))]
        except StopIteration:
            raise EventsFileError(f"{p}: empty file (expected a header line)") from None
        except csv.Error as exc:
            raise EventsFileError(f"{p}: line 1: malformed CSV header: {exc}") from None

    def gen() -> Iterator[Row]:
        with p.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
            reader = csv.reader(fh)
            next(reader)
            while True:
                try:
                    rec = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    raise EventsFileError(f"{p}: line {reader.line_num}: malformed CSV record: {exc}") from None
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
    corrupt: dict[int, tuple[str, str]] = {}
    with p.open(encoding="utf-8-sig", errors="replace") as fh:
        for i, line in enumerate(fh, start=1):
            s = line.strip()
            if not s:
                continue
            why = ""
            try:
                obj = json.loads(s)
            except json.JSONDecodeError as exc:
                obj, why = None, f"invalid JSON: {exc.msg} at column {exc.colno}"
            except RecursionError:
                obj, why = None, "invalid JSON: nested too deeply"
            except ValueError as exc:  # e.g. an integer beyond Python's digit limit
                obj, why = None, f"invalid JSON: {str(exc).splitlines()[0][:80]}"
            idx = len(lines)
            lines.append(i)
            if not isinstance(obj, dict):
                corrupt[idx] = (s, why or f"not a JSON object (a JSON {_json_kind(obj)})")
                for c in wanted:
                    values[c].append(None)
                continue
            for k in obj:
                if k not in columns:
                    columns[k] = None
            for c in wanted:
                values[c].append(obj.get(c))

    if not columns and corrupt:
        first = min(corrupt)
        raise EventsFileError(
            f"{p}: line {lines[first]}: {corrupt[first][1]}; no line of the file is a JSON object "
            f"({len(corrupt)} unreadable)"
        )

    def gen() -> Iterator[Row]:
        for idx, line in enumerate(lines):
            if idx in corrupt:
                yield line, {"\x00corrupt": corrupt[idx][0], "\x00why": corrupt[idx][1]}
            else:
                yield line, {c: values[c][idx] for c in wanted}

    return gen(), list(columns)


def _json_kind(obj: Any) -> str:
    if isinstance(obj, list):
        return "array"
    if isinstance(obj, str):
        return "string"
    if isinstance(obj, bool):
        return "boolean"
    if obj is None:
        return "null"
    return "number"


def _read_parquet(p: Path, time_column: str) -> tuple[Iterator[Row], list[str]]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise EventsFileError(
            f"{p}: reading Parquet needs pyarrow: pip install 'tidegauge[parquet]'"
        ) from None
    try:
        table = pq.read_table(p)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise EventsFileError(f"{p}: cannot read Parquet: {str(exc).splitlines()[0][:200]}") from None
    columns = list(table.column_names)
    if len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise EventsFileError(f"{p}: Parquet columns named more than once: {', '.join(dup)}")
    data: dict[str, list[Any]] = {}
    for name in columns:
        if name not in (time_column, *_KNOWN):
            continue
        col = table.column(name)
        t = col.type
        if name in (time_column, "arrival_time") and not _parquet_time_type(pa, t):
            raise EventsFileError(
                f"{p}: column {name!r} is {t} in Parquet; a time must be a timestamp, date, string or "
                f"number (Spark's withWatermark needs a timestamp)"
            )
        try:
            if pa.types.is_timestamp(t):
                # raw values in the column's unit -> epoch us (Spark's TimestampType), ns floored
                raw = col.cast(pa.int64()).to_pylist()
                mul, div = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}[t.unit]
                data[name] = [None if v is None else _UsValue(v * mul // div) for v in raw]
            else:
                data[name] = col.to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError, ValueError) as exc:
            raise EventsFileError(f"{p}: column {name!r} ({t}) cannot be read: {exc}") from None

    def gen() -> Iterator[Row]:
        for i in range(table.num_rows):
            yield i + 1, {c: data[c][i] for c in columns}

    return gen(), columns


class _UsValue(int):
    """An int that is already epoch microseconds (a Parquet timestamp), whatever ``time_unit`` says."""


def _parquet_time_type(pa: Any, t: Any) -> bool:
    types = pa.types
    return bool(
        types.is_timestamp(t)
        or types.is_date(t)
        or types.is_string(t)
        or types.is_large_string(t)
        or types.is_integer(t)
        or types.is_floating(t)
        or types.is_decimal(t)
        or types.is_null(t)
        or (types.is_dictionary(t) and (types.is_string(t.value_type) or types.is_large_string(t.value_type)))
    )


#: Bad values of the ``batch``, ``partition`` and ``arrival_time`` columns named in one error, one line each.
_MAX_PROBLEMS = 10


def _build(
    p: Path, rows: Iterable[Row], columns: list[str], time_column: str, unit: str | None
) -> EventsTable:
    if time_column not in columns:
        found = ", ".join(c if c.isprintable() and c == c.strip() else repr(c) for c in columns[:50]) or "(none)"
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
    problems: list[str] = []  # our own columns' bad values: all named at the end, one line each
    for line, rec in rows:
        pos = len(lines)
        lines.append(line)
        if "\x00corrupt" in rec:
            et.append(None)
            why = str(rec["\x00why"])
            bad.append(BadRow(line, _text(rec["\x00corrupt"])[:80], why, kind="line"))
            for c in ("batch", "partition", "arrival_time"):
                if has[c]:
                    raise EventsFileError(f"{p}: line {line}: {why}, so its field {c} is unknown")
            if has["source"]:
                source.append(None)
            if has["key"]:
                key.append(None)
            continue
        v = rec.get(time_column)
        us: int | None
        if isinstance(v, _UsValue):
            us, reason = _us_value(v)
        else:
            us, reason = tparser.parse(v, line, pos)
        et.append(us)
        if reason is not None:
            bad.append(BadRow(line, _text(v)[:80], reason))
        for column, values in (("batch", batch), ("partition", part)):
            if has[column]:
                try:
                    values.append(_int(p, line, column, rec.get(column)))
                except EventsFileError as exc:  # every such line is named (up to _MAX_PROBLEMS), then raised
                    problems.append(str(exc))
                    values.append(0)
        if has["arrival_time"]:
            a = rec.get("arrival_time")
            aus: int | None
            if isinstance(a, _UsValue):
                aus, awhy = _us_value(a)
            else:
                aus, awhy = aparser.parse(a, line)
            if aus is None:
                problems.append(f"{p}: line {line}: field arrival_time: value {_text(a)[:40]!r} is {awhy or 'missing'}")
                aus = 0
            arrival.append(aus // 1000)
        if has["source"]:
            s = rec.get("source")
            source.append(None if s is None else _text(s))
        if has["key"]:
            k = rec.get("key")
            key.append(None if k is None else _text(k))
    if problems:
        more = len(problems) - _MAX_PROBLEMS
        raise EventsFileError(
            "\n".join(problems[:_MAX_PROBLEMS]) + (f"\n{p}: ... and {more} more such lines" if more > 0 else "")
        )
    tparser.finish()
    aparser.finish()
    return EventsTable.from_columns(
        et,
        batch=batch if has["batch"] else None,
        arrival_ms=arrival if has["arrival_time"] else None,
        source=source if has["source"] else None,
        key=key if has["key"] else None,
        partition=part if has["partition"] else None,
        line=lines,
        bad_rows=bad,
        unit_mismatches=tparser.mismatches(lines),
        path=str(p),
    )


def _us_value(v: int) -> tuple[int | None, str | None]:
    if abs(v) > MAX_ABS_EVENT_TIME_US:
        return None, f"{v} us is outside Spark's timestamp range handled here (|t| <= 2^62 us)"
    return int(v), None


def _text(v: Any) -> str:
    """``str(v)`` with lone surrogates (from JSON ``\\ud800`` escapes) replaced, so it can be printed."""
    s = v if isinstance(v, str) else str(v)
    return s if s.isascii() else s.encode("utf-8", "replace").decode("utf-8")


def _int(p: Path, line: int, column: str, value: Any) -> int:
    """An integer column value (``batch``, ``partition``: columns of ours, not Spark's), within int64.

    Raises:
        EventsFileError: naming file, line and column, for anything else.
    """
    out: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        out = value
    elif isinstance(value, float):
        out = int(value) if value.is_integer() else None
    elif isinstance(value, str):
        text = value.strip()
        if text.lstrip("+-").isdigit() and len(text) <= 40:
            out = int(text)
        elif len(text) <= 40 and text.lstrip("+-").replace(".", "", 1).isdigit() and float(text).is_integer():
            out = int(float(text))  # "2.0", as a JSON 2.0 reads
    if out is None:
        got = (
            "null" if value is None else ("true" if value else "false") if isinstance(value, bool)
            else repr(_text(value)[:40])
        )
        raise EventsFileError(f"{p}: line {line}: field {column}: must be an integer, got {got}")
    if not -_I64_MAX - 1 <= out <= _I64_MAX:
        raise EventsFileError(
            f"{p}: line {line}: field {column}: value {_text(value)[:40]} is beyond the 64-bit integer range"
        )
    return out


def _lines_in(data: bytes) -> int:
    """Lines of a file's bytes (a last line without its newline counts)."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _fast_csv(p: Path, time_column: str, unit: str | None) -> EventsTable | None:
    """Vectorised CSV load with pyarrow for clean files; ``None`` means "use the row-by-row path".

    It gives up (returning ``None``) whenever the row-by-row path could say more: pyarrow missing, an
    unparseable or mixed-format time, a numeric time without a unit, a bad integer, or blank/multi-line
    records (line numbers would no longer be ``row + 2``). Same results as the row-by-row path.
    """
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    data = p.read_bytes().removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM (spreadsheet exports) is not data
    first_nl = data.find(b"\n")
    if first_nl < 0:
        return None
    try:
        header = [h.strip() for h in next(csv.reader([data[:first_nl].decode("utf-8", "replace")]))]
    except (csv.Error, StopIteration):
        return None  # the row-by-row path reports it
    if time_column not in header or len(set(header)) != len(header):
        return None
    wanted = [c for c in (time_column, *_KNOWN) if c in header]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            # one thread: with Arrow's pool, a parse error here sometimes aborted the process at exit
            # ("terminate called without an active exception", exit 134); ~40% slower on 1M rows
            read_options=pacsv.ReadOptions(use_threads=False),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in header},
                include_columns=wanted,
                null_values=sorted(_NULLS),
                strings_can_be_null=True,
            ),
        )
    except (pa.ArrowException, UnicodeDecodeError):  # the row-by-row path says what is wrong
        return None
    if _lines_in(data) != table.num_rows + 1:  # blank lines or quoted newlines: keep exact line numbers
        return None
    return _from_arrow(p, table, wanted, time_column, unit, first_line=2)


def _fast_jsonl(p: Path, time_column: str, unit: str | None) -> EventsTable | None:
    """Vectorised JSON-lines load with pyarrow (``pyarrow.json``: the columns the engine uses, times read as
    strings, or as integers when a unit is given and they are numbers); ``None`` means "use the row-by-row
    path", which it leaves every case it could say more about: a blank, corrupt or non-object line (line
    numbers would no longer be ``row + 1``), a value of another JSON type than the column's, a field present
    on some lines only. Same results as the row-by-row path."""
    try:
        import pyarrow as pa
        import pyarrow.json as pajson
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    data = p.read_bytes().removeprefix(b"\xef\xbb\xbf")
    if not data.strip() or b"\n\n" in data or data.startswith(b"\n") or b"\r" in data:
        return None
    wanted = [c for c in (time_column, *_KNOWN) if b'"' + c.encode() + b'"' in data]
    if time_column not in wanted:
        return None
    times = (time_column, "arrival_time")
    lines = _lines_in(data)
    for time_type in (pa.string(), pa.int64()):
        fields = [
            pa.field(c, time_type if c in times else pa.int64() if c in ("batch", "partition") else pa.string())
            for c in wanted
        ]
        try:
            table = pajson.read_json(
                pa.py_buffer(data),
                read_options=pajson.ReadOptions(use_threads=False),
                parse_options=pajson.ParseOptions(
                    explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore"
                ),
            )
        except (pa.ArrowException, UnicodeDecodeError):
            continue
        if table.num_rows != lines:
            return None
        # a field missing on some lines (null here) is for the row-by-row path, but a null event time
        if any(table.column(c).null_count for c in wanted if c != time_column):
            return None
        return _from_arrow(p, table, wanted, time_column, unit, first_line=1)
    return None


def _fast_parquet(p: Path, time_column: str, unit: str | None) -> EventsTable | None:
    """Vectorised Parquet load (the columns the engine uses, read as columns); ``None`` means "use the
    row-by-row path", which reports what this does not take: a file pyarrow cannot read, a column named
    twice, times of another type than timestamp, string or integer, keys that are not strings."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    try:
        names = pq.read_schema(p).names
        if len(set(names)) != len(names) or time_column not in names:
            return None
        wanted = [c for c in (time_column, *_KNOWN) if c in names]
        table = pq.read_table(p, columns=wanted, use_threads=False)
    except Exception:  # pyarrow raises several types for corrupt files; the row-by-row path names it
        return None
    if any(not pa.types.is_string(table.column(c).type) for c in ("source", "key") if c in wanted):
        return None
    return _from_arrow(p, table, wanted, time_column, unit, first_line=1)


def _np(values: Any, dtype: Any) -> np.ndarray:
    """A numeric Arrow (chunked) array as a NumPy array, read from its data buffer (a null's slot holds
    any value: callers mask it). pyarrow imports pandas (about a second) on its first ``to_numpy`` or
    conversion of a Python value (``fill_null(0)``), which a CLI run never needs, so neither is used here."""
    arr = values.combine_chunks() if hasattr(values, "combine_chunks") else values
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=dtype)
    width = np.dtype(dtype).itemsize
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=n, offset=arr.offset * width).copy()


def _from_arrow(
    p: Path, table: Any, present: list[str], time_column: str, unit: str | None, first_line: int
) -> EventsTable | None:
    """The :class:`EventsTable` of an Arrow table of the file's columns (``present``; times as strings or
    integers), line ``first_line + row``; ``None`` when a column needs the row-by-row path to be reported."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    mismatches: tuple[UnitMismatch, ...] = ()

    def times_us(name: str) -> tuple[np.ndarray, np.ndarray] | None:
        nonlocal mismatches
        col = table.column(name)
        valid = _np(pc.cast(col.is_valid(), pa.uint8()), np.uint8).astype(np.bool_)
        if pa.types.is_timestamp(col.type):  # Parquet: raw values in the column's unit -> epoch us, ns floored
            mul, div = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}[col.type.unit]
            raw = np.where(valid, _np(pc.cast(col, pa.int64()), np.int64), 0)
            if mul > 1 and bool((np.abs(raw) > MAX_ABS_EVENT_TIME_US // mul).any()):
                return None  # out of range: the row-by-row path reports those rows
            us = raw * mul // div
            return (None if bool((np.abs(us) > MAX_ABS_EVENT_TIME_US).any()) else (us, valid))
        if not (pa.types.is_string(col.type) or pa.types.is_integer(col.type)):
            return None  # a date, float, decimal...: the row-by-row path reads (or reports) it
        if unit is not None:
            try:
                ints = pc.cast(col, pa.int64())
            except pa.ArrowException:
                ints = None
            if ints is not None:
                vals = np.where(valid, _np(ints, np.int64), 0)
                lim = MAX_ABS_EVENT_TIME_US // _UNIT_US[unit]
                if bool(((vals > lim) | (vals < -lim)).any()):
                    return None  # out of range: the row-by-row path reports those rows
                parser = _TimeParser(str(p), name, unit)
                parser.numbers = [float(v) for v in vals[valid][:10_001]]
                parser.check_unit()
                if name == time_column:
                    rows = np.flatnonzero(valid)
                    mismatches = unit_mismatches(vals[rows].astype(np.float64), rows + first_line, unit)
                return vals * _UNIT_US[unit], valid
        if not pa.types.is_string(col.type):
            return None  # a number without a unit: the row-by-row path says so
        for target in (pa.timestamp("us", tz="UTC"), pa.timestamp("us")):
            try:
                ts = pc.cast(col, target)
            except pa.ArrowException:
                continue
            return np.where(valid, _np(ts.cast(pa.int64()), np.int64), 0), valid
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
            return _np(pc.cast(col, pa.int64()), np.int64)
        except pa.ArrowException:
            return None

    cols: dict[str, Any] = {}
    for name in ("batch", "partition"):
        if name in present:
            arr = ints(name)
            if arr is None:
                return None
            cols[name] = arr
    arrival_ms = None
    if "arrival_time" in present:
        at = times_us("arrival_time")
        if at is None or not at[1].all():
            return None
        arrival_ms = np.floor_divide(at[0], 1000)
    names: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
    for name in ("source", "key"):
        if name in present:
            # nulls encoded as a value of their own, then read as "" (merged with a real "", if any)
            enc = pc.dictionary_encode(table.column(name), null_encoding="encode").combine_chunks()
            index: dict[str, int] = {}
            remap = np.asarray(
                [index.setdefault("" if v is None else str(v), len(index)) for v in enc.dictionary.to_pylist()],
                dtype=np.int32,
            )
            codes = remap[_np(enc.indices, np.int32)] if len(remap) else np.zeros(n, dtype=np.int32)
            names[name] = (codes, tuple(index))
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
        line=np.arange(first_line, n + first_line, dtype=np.int64),
        unit_mismatches=mismatches,
        path=str(p),
    )
