"""Columnar input of the engine: one row per event, as NumPy arrays."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.errors import InputError

__all__ = ["MAX_ABS_EVENT_TIME_US", "BadRow", "EventsTable", "UnitMismatch", "factorize", "parse_iso_to_us"]

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
BoolArr = npt.NDArray[np.bool_]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Largest absolute event time (epoch microseconds) the engine takes: 2^62 us, about year +-146,000.
#: Spark's ``TimestampType`` is an int64 of microseconds; half its range keeps every window bound,
#: watermark and lateness the engine computes inside int64. Loaders list times beyond it as
#: unparseable rows (Spark's PERMISSIVE readers null a value they cannot convert).
MAX_ABS_EVENT_TIME_US = 1 << 62


@dataclass(frozen=True, slots=True)
class BadRow:
    """An input row without a usable event time (Spark reads it as ``null`` and skips it).

    Attributes:
        line: 1-based line number in the file (the header is line 1 for CSV), or the row number
            for in-memory input / Parquet.
        value: the raw text (truncated to 80 characters).
        reason: why it was rejected.
        kind: ``"event_time"`` (the value is not a time) or ``"line"`` (the whole line could not be
            read: invalid JSON, not a JSON object).
    """

    line: int
    value: str
    reason: str
    kind: str = "event_time"


@dataclass(frozen=True, slots=True)
class UnitMismatch:
    """A numeric event time that fits another epoch unit far better than the one it was read in.

    Read as given (as Spark would: its JSON reader takes an integer as epoch seconds), the row lies
    more than 100 years from the column's median date; read in ``likely_unit`` it would be within 100
    years of it. Such a row is replayed as read (it moves the watermark, as in Spark) and reported.

    Attributes:
        line: line (or row) number.
        value: the number as written.
        unit: the unit it was read in (``s``, ``ms``, ``us``).
        read_as_us: the event time it was read as (epoch microseconds; may be beyond year 9999).
        likely_unit: the unit that fits the other rows.
        likely_us: the event time in that unit (epoch microseconds).
    """

    line: int
    value: int | float
    unit: str
    read_as_us: int
    likely_unit: str
    likely_us: int


def parse_iso_to_us(text: str) -> int:
    """Parse an ISO-8601 timestamp to epoch microseconds.

    Accepts ``2026-01-02T03:04:05``, ``2026-01-02 03:04:05.123456``, a ``Z`` or ``+hh:mm`` offset and
    a date alone. A timestamp without an offset is read as UTC (Spark with
    ``spark.sql.session.timeZone=UTC``).

    Raises:
        ValueError: the text is not ISO-8601.
    """
    dt = datetime.fromisoformat(text.strip())
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def factorize(values: Sequence[str | None] | npt.NDArray[Any]) -> tuple[I32, tuple[str, ...]]:
    """Map strings to dense int32 codes in order of first appearance; ``None`` becomes ``""``.

    Returns:
        ``(codes, names)`` with ``names[codes[i]] == values[i]``.
    """
    index: dict[str, int] = {}
    codes = np.empty(len(values), dtype=np.int32)
    for i, v in enumerate(values):
        s = "" if v is None else str(v)
        c = index.get(s)
        if c is None:
            c = len(index)
            index[s] = c
        codes[i] = c
    return codes, tuple(index)


@dataclass(frozen=True, eq=False)
class EventsTable:
    """The events of one replay, column-wise. All arrays have the same length ``n``.

    Attributes:
        event_time_us: int64 epoch microseconds (Spark ``TimestampType``); value undefined where
            ``valid`` is False.
        valid: bool, False where the event time is null or could not be parsed.
        batch: optional int64 explicit micro-batch number of each row (``None``: no ``batch`` column).
        arrival_ms: optional int64 processing time at which the row became available to the source.
        source_codes / source_names: int32 codes into ``source_names`` (one input, ``("",)``, when the
            file has no ``source`` column).
        key_codes / key_names: int32 codes into ``key_names`` (``("",)`` when there is no ``key``).
        partition: optional int64 input partition of each row (e.g. Kafka partition); needed to
            reproduce ``numRowsDroppedByWatermark`` of session windows only.
        line: int64 line number of each row in its file (for messages), or row number.
        bad_rows: rows whose event time was unparseable (they are in the table with ``valid=False``).
        unit_mismatches: rows whose numeric time looks written in another unit (kept as read).
        path: the file the table was read from, if any.

    Raises (constructor):
        InputError: arrays of different lengths or wrong dtypes.
    """

    event_time_us: I64
    valid: BoolArr
    source_codes: I32
    source_names: tuple[str, ...]
    key_codes: I32
    key_names: tuple[str, ...]
    batch: I64 | None = None
    arrival_ms: I64 | None = None
    partition: I64 | None = None
    line: I64 | None = None
    bad_rows: tuple[BadRow, ...] = ()
    path: str | None = None
    unit_mismatches: tuple[UnitMismatch, ...] = ()
    _checked: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.event_time_us)
        for name in ("valid", "source_codes", "key_codes", "batch", "arrival_ms", "partition", "line"):
            arr = getattr(self, name)
            if arr is not None and len(arr) != n:
                raise InputError(f"events column {name!r} has {len(arr)} rows, event_time has {n}")
        if self.event_time_us.dtype != np.int64:
            raise InputError("events column 'event_time_us' must be int64 microseconds")
        if n and bool(
            (
                self.valid
                & (
                    (self.event_time_us > MAX_ABS_EVENT_TIME_US)
                    | (self.event_time_us < -MAX_ABS_EVENT_TIME_US)
                )
            ).any()
        ):
            raise InputError(
                "event times must lie within +-2^62 microseconds of the epoch (about year +-146,000)"
            )
        if n and (self.source_codes.max() >= len(self.source_names) or self.source_codes.min() < 0):
            raise InputError("source_codes out of range of source_names")
        if n and (self.key_codes.max() >= len(self.key_names) or self.key_codes.min() < 0):
            raise InputError("key_codes out of range of key_names")

    def __len__(self) -> int:
        return len(self.event_time_us)

    @property
    def has_sources(self) -> bool:
        """True when rows come from more than one named input."""
        return len(self.source_names) > 1 or (len(self.source_names) == 1 and self.source_names[0] != "")

    @property
    def has_keys(self) -> bool:
        """True when the rows carry a ``key`` (a key column with at least one non-empty value)."""
        return len(self.key_names) > 1 or (len(self.key_names) == 1 and self.key_names[0] != "")

    def line_of(self, row_index: int) -> int:
        """Line number (or 1-based row number) of row ``row_index``."""
        return int(self.line[row_index]) if self.line is not None else row_index + 1

    @classmethod
    def from_columns(
        cls,
        event_time_us: Sequence[int | None] | npt.NDArray[Any],
        *,
        batch: Sequence[int] | npt.NDArray[Any] | None = None,
        arrival_ms: Sequence[int] | npt.NDArray[Any] | None = None,
        source: Sequence[str | None] | None = None,
        key: Sequence[str | None] | None = None,
        partition: Sequence[int] | npt.NDArray[Any] | None = None,
        line: Sequence[int] | npt.NDArray[Any] | None = None,
        bad_rows: Iterable[BadRow] = (),
        path: str | None = None,
        unit_mismatches: Iterable[UnitMismatch] = (),
    ) -> EventsTable:
        """Build a table from Python sequences; ``None`` event times are nulls.

        Raises:
            InputError: columns of different lengths.
        """
        n = len(event_time_us)
        if isinstance(event_time_us, np.ndarray) and event_time_us.dtype == np.int64:
            et = event_time_us
            valid = np.ones(n, dtype=np.bool_)
        else:
            valid = np.array([v is not None for v in event_time_us], dtype=np.bool_)
            try:
                et = np.array([0 if v is None else int(v) for v in event_time_us], dtype=np.int64)
            except OverflowError:
                raise InputError("an event time does not fit in int64 microseconds") from None
        s_names: tuple[str, ...]
        k_names: tuple[str, ...]
        if source is None:
            s_codes, s_names = np.zeros(n, dtype=np.int32), ("",)
        else:
            if len(source) != n:
                raise InputError(f"events column 'source' has {len(source)} rows, event_time has {n}")
            s_codes, s_names = factorize(source)
        if key is None:
            k_codes, k_names = np.zeros(n, dtype=np.int32), ("",)
        else:
            if len(key) != n:
                raise InputError(f"events column 'key' has {len(key)} rows, event_time has {n}")
            k_codes, k_names = factorize(key)
        if n == 0:
            s_names = s_names or ("",)
            k_names = k_names or ("",)
        return cls(
            event_time_us=et,
            valid=valid,
            source_codes=s_codes,
            source_names=s_names,
            key_codes=k_codes,
            key_names=k_names,
            batch=None if batch is None else np.asarray(batch, dtype=np.int64),
            arrival_ms=None if arrival_ms is None else np.asarray(arrival_ms, dtype=np.int64),
            partition=None if partition is None else np.asarray(partition, dtype=np.int64),
            line=None if line is None else np.asarray(line, dtype=np.int64),
            bad_rows=tuple(bad_rows),
            path=path,
            unit_mismatches=tuple(unit_mismatches),
        )

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> EventsTable:
        """Build a table from dicts, the style of scripted test streams.

        Keys: ``event_time`` (int epoch **microseconds**, aware ``datetime``, ISO-8601 string, or
        ``None``), and optionally ``batch``, ``arrival_ms``, ``source``, ``key``, ``partition``. A key
        present in the first record must be present in all. An unparseable ISO string is a null
        event time and is listed in ``bad_rows``.

        Raises:
            InputError: inconsistent keys, or a naive ``datetime``.
        """
        recs = list(records)
        cols = set(recs[0]) if recs else {"event_time"}
        et: list[int | None] = []
        bad: list[BadRow] = []
        for i, r in enumerate(recs):
            if set(r) != cols:
                raise InputError(f"record {i + 1} has keys {sorted(r)}, expected {sorted(cols)}")
            v = r["event_time"]
            if v is None:
                et.append(None)
            elif isinstance(v, datetime):
                if v.tzinfo is None:
                    raise InputError(f"record {i + 1}: event_time must be timezone-aware")
                d = v - _EPOCH
                et.append((d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds)
            elif isinstance(v, str):
                try:
                    et.append(parse_iso_to_us(v))
                except ValueError:
                    et.append(None)
                    bad.append(BadRow(i + 1, v[:80], "not an ISO-8601 timestamp"))
            else:
                et.append(int(v))

        def col(name: str) -> list[Any] | None:
            return [r[name] for r in recs] if name in cols else None

        return cls.from_columns(
            et,
            batch=col("batch"),
            arrival_ms=col("arrival_ms"),
            source=col("source"),
            key=col("key"),
            partition=col("partition"),
            bad_rows=bad,
        )

    def with_source_names(self, names: Sequence[str]) -> EventsTable:
        """Return a table whose ``source_names`` start with ``names`` (declared inputs), codes remapped."""
        new_names = list(dict.fromkeys([*names, *self.source_names]))
        remap = np.array([new_names.index(s) for s in self.source_names], dtype=np.int32)
        return EventsTable(
            event_time_us=self.event_time_us,
            valid=self.valid,
            source_codes=remap[self.source_codes] if len(self) else self.source_codes,
            source_names=tuple(new_names),
            key_codes=self.key_codes,
            key_names=self.key_names,
            batch=self.batch,
            arrival_ms=self.arrival_ms,
            partition=self.partition,
            line=self.line,
            bad_rows=self.bad_rows,
            path=self.path,
            unit_mismatches=self.unit_mismatches,
        )
