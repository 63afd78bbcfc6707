"""The one place times and durations become text: every surface (rule messages, ``scan``, ``check``,
reports, notifications, ``whatif``, the dashboard) formats through here.

Instants (always UTC, always ``Z``):

* :func:`format_epoch_ms` — any int64 epoch-millisecond instant as Spark prints it
  (``DateTimeUtils``/``formatTimestamp`` in ``ProgressReporter``): ``2026-01-01T00:00:30.000Z``; a year
  beyond 9999 gets its sign and all its digits (``+57971-02-25T19:25:40.000Z``, what Spark 4.3 writes in a
  progress's ``eventTime.watermark``), a year before 1 is ``-0001``-style (ISO 8601 expanded years). It
  never builds a :class:`datetime`, so no int64 makes it fail.
* :func:`format_instant` — an aware :class:`datetime` in that same shape (milliseconds, truncated):
  what ``scan``, ``check`` and the reports print.
* :func:`format_instant_short` — as short as exact (``2099-01-01T00:00Z``, ``2026-11-29T11:32:48.289Z``):
  what rule messages print.
* :func:`format_basic` — ISO 8601 basic format to the second (``20261130T080131Z``): file names.
* :func:`format_precise` / :func:`parse_instant` — RFC 3339 with microseconds
  (``2026-11-29T12:00:00.000000Z``) and its inverse: the wire format of notifications and stored
  documents; idempotency keys hash it, so its output never changes.

Times at the model's clamp: a time Spark writes beyond year 9999 (``+56135-05-22T09:10:00.000Z``: epoch
milliseconds read as seconds) is stored as :data:`monitor.model.MAX_TIME` (year 8999), a stand-in, not a
date. :func:`is_beyond_range` decides it in one place; :func:`format_instant` and
:func:`format_instant_short` write it as :data:`BEYOND_RANGE` (``beyond year 8999``), and
:func:`seconds_between` gives ``None`` (unknown) for a duration from or to it, never "6976 years".

Durations:

* :func:`format_duration` — a rough human duration in the largest fitting unit (``72 years``, ``1 day``,
  ``1.5 h``, ``14 min``, ``9 s``).
* :func:`format_lag` — a signed lag or freshness in seconds: :func:`format_duration` of its size, with
  ``ahead`` when negative (a watermark ahead of processing time) and ``unknown`` for ``None``/NaN.
* the compact, parseable spelling (``1m30s``) is :func:`monitor.durations.format_duration_ms`, beside its
  parser.

Errors: :func:`format_instant` and friends raise :class:`ValueError` for a naive datetime; nothing else
raises.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from monitor.model import MAX_TIME

__all__ = [
    "BEYOND_RANGE",
    "format_basic",
    "format_duration",
    "format_epoch_ms",
    "format_instant",
    "format_instant_short",
    "format_lag",
    "format_precise",
    "is_beyond_range",
    "parse_instant",
    "seconds_between",
]

#: How every surface writes a time at the model's clamp (:data:`monitor.model.MAX_TIME`).
BEYOND_RANGE = f"beyond year {MAX_TIME.year}"


def is_beyond_range(value: datetime | None) -> bool:
    """Whether ``value`` is at the model's clamp (:data:`monitor.model.MAX_TIME`, year 8999): the stand-in
    the Spark parser stores for a time beyond year 9999 (``+56135-...``), so its real value is unknown.
    ``None`` is not."""
    return value is not None and value >= MAX_TIME


def seconds_between(later: datetime | None, earlier: datetime | None) -> float | None:
    """``later - earlier`` in seconds (signed); ``None`` (unknown) when either is ``None`` or beyond the
    model's range (:func:`is_beyond_range`): no duration is computed from the clamp's stand-in."""
    if later is None or earlier is None or is_beyond_range(later) or is_beyond_range(earlier):
        return None
    return (later - earlier).total_seconds()

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """Proleptic Gregorian (year, month, day) of ``days`` since 1970-01-01, any magnitude
    (H. Hinnant's ``civil_from_days``)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def format_epoch_ms(epoch_ms: int, *, always_millis: bool = True) -> str:
    """Epoch milliseconds -> ``2026-01-01T00:00:30.000Z``, for any int64 instant, as Spark renders them.

    Years beyond 9999 get a sign and all their digits (``+57971-02-25T19:25:40.000Z``); years before 1 are
    ``-0001``-style. ``always_millis=False`` omits ``.000`` when the milliseconds are 0. Never raises for an
    ``int``.
    """
    days, rest = divmod(int(epoch_ms), 86_400_000)
    year, month, day = _civil_from_days(days)
    secs, millis = divmod(rest, 1000)
    hh, rem = divmod(secs, 3600)
    mm, ss = divmod(rem, 60)
    sign = "" if 0 <= year <= 9999 else ("+" if year > 0 else "-")
    ytext = f"{sign}{abs(year):04d}"
    frac = f".{millis:03d}" if always_millis or millis else ""
    return f"{ytext}-{month:02d}-{day:02d}T{hh:02d}:{mm:02d}:{ss:02d}{frac}Z"


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"a time to format must be timezone-aware UTC, got naive {value!r}")
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def format_instant(value: datetime) -> str:
    """Aware datetime -> ``2026-11-29T11:32:48.289Z`` (UTC, milliseconds truncated), Spark's shape;
    :data:`BEYOND_RANGE` (``beyond year 8999``) at the model's clamp (:func:`is_beyond_range`).

    Raises:
        ValueError: ``value`` is naive.
    """
    utc = _utc(value)
    if is_beyond_range(utc):
        return BEYOND_RANGE
    text = utc.isoformat(timespec="milliseconds")  # C-level; the general path covers years before 1000
    if utc.year >= 1000:
        return text[:-6] + "Z"
    return format_epoch_ms((utc - _EPOCH) // timedelta(milliseconds=1))


def format_instant_short(value: datetime) -> str:
    """Aware datetime -> ISO-8601 UTC, as short as exact: ``2099-01-01T00:00Z``, ``2026-11-29T11:32:05Z``,
    ``2026-11-29T11:32:48.289Z`` (rule messages).

    Raises:
        ValueError: ``value`` is naive.
    """
    utc = _utc(value)
    text = format_instant(utc)
    if utc.microsecond or is_beyond_range(utc):
        return text
    if utc.second:
        return text[:-5] + "Z"
    return text[:-8] + "Z"


def format_basic(value: datetime) -> str:
    """Aware datetime -> ISO 8601 basic format to the second, ``20261130T080131Z`` (file names).

    Raises:
        ValueError: ``value`` is naive.
    """
    return _utc(value).strftime("%Y%m%dT%H%M%SZ")


def format_precise(value: datetime) -> str:
    """Aware datetime -> RFC 3339 UTC with microseconds, ``2026-11-29T12:00:00.000000Z`` (the wire format of
    notifications and stored documents; :func:`parse_instant` reads it back).

    Raises:
        ValueError: ``value`` is naive.
    """
    return _utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_instant(text: str) -> datetime:
    """Inverse of :func:`format_precise` (any ISO 8601 text with an offset or ``Z``), aware UTC.

    Raises:
        ValueError: no offset, or not ISO 8601 (the message quotes the text).
    """
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"time {text!r} is not ISO 8601") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"time {text!r} must be timezone-aware UTC (end it with Z or an offset)")
    return value.astimezone(UTC)


_UNITS = (("year", 365.25 * 86400), ("day", 86400.0), ("h", 3600.0), ("min", 60.0))


def format_duration(delta: timedelta | float) -> str:
    """A rough human duration (its size; the sign is dropped) in the largest fitting unit: ``72 years``,
    ``1 day``, ``1.5 h``, ``14 min``, ``9 s`` (one decimal below 10 of a unit, none when it is 0: 24 h 5 s
    is ``1 day``). ``delta`` is a :class:`timedelta` or seconds."""
    seconds = abs(delta.total_seconds() if isinstance(delta, timedelta) else float(delta))
    for unit, size in _UNITS:
        if seconds >= size:
            amount = seconds / size
            text = f"{amount:.0f}" if amount >= 10 else f"{amount:.1f}".removesuffix(".0")
            plural = "s" if unit in ("year", "day") and text != "1" else ""
            return f"{text} {unit}{plural}"
    return f"{seconds:.0f} s"


def format_lag(seconds: float | None) -> str:
    """A lag or freshness in seconds as text (:func:`format_duration`), ``... ahead`` when negative (the
    watermark ahead of processing time: a future-dated row moved it), ``unknown`` for ``None`` or NaN."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "unknown"
    text = format_duration(seconds)
    return f"{text} ahead" if seconds < 0 else text
