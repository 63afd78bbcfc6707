"""Parse and format human durations (``10m``, ``30s``, ``1h30m``, ``500ms``, ``10 minutes``).

One parser for every command that takes a duration on the command line or in config. The result is
an integer number of **milliseconds** (the engine's unit; see DESIGN.md).

Grammar: one or more ``<number><unit>`` terms, optionally separated by spaces, summed. ``<number>`` is
a non-negative integer or decimal (``1.5s``); the total must be a whole number of milliseconds.
Units (case-insensitive): ``ms``/``msec``/``millisecond(s)``; ``s``/``sec``/``second(s)``;
``m``/``min``/``minute(s)``; ``h``/``hr``/``hour(s)``; ``d``/``day(s)``; ``w``/``week(s)``.
A bare ``0`` is accepted; any other bare number is rejected (the unit is never guessed). The Spark
interval spelling used by ``withWatermark`` (``"10 minutes"``, ``"1 hour 30 minutes"``) parses too.

Errors: :class:`DurationError` (an :class:`~monitor.errors.InputError` and a :class:`ValueError`) whose
message quotes the text and lists the units.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from monitor.errors import InputError

__all__ = ["MAX_DURATION_MS", "DurationError", "format_duration_ms", "parse_duration_list_ms", "parse_duration_ms", "parse_timedelta"]

_UNIT_MS: dict[str, int] = {}
for _names, _ms in (
    (("ms", "msec", "msecs", "millisecond", "milliseconds"), 1),
    (("s", "sec", "secs", "second", "seconds"), 1000),
    (("m", "min", "mins", "minute", "minutes"), 60_000),
    (("h", "hr", "hrs", "hour", "hours"), 3_600_000),
    (("d", "day", "days"), 86_400_000),
    (("w", "week", "weeks"), 7 * 86_400_000),
):
    for _n in _names:
        _UNIT_MS[_n] = _ms

#: The longest duration accepted (100 years of 365.25 days): anything a delay, window, skew, interval or
#: retention can sensibly be, and short enough that a supported time (``monitor.model.MIN_TIME`` ..
#: ``MAX_TIME``) plus or minus it stays in the calendar.
MAX_DURATION_MS = 100 * 36_525 * 86_400_000 // 100

_TERM = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")
_UNITS_HELP = "ms, s, m, h, d, w (e.g. 500ms, 30s, 10m, 1h30m, '10 minutes')"


class DurationError(InputError, ValueError):
    """A duration string could not be parsed; the message quotes it and lists the accepted units."""


def parse_duration_ms(text: str, *, what: str = "duration") -> int:
    """Parse ``text`` into integer milliseconds.

    Args:
        text: e.g. ``"10m"``, ``"1h30m"``, ``"500ms"``, ``"1.5s"``, ``"10 minutes"``, ``"0"``.
        what: the name of the option/field, used in the error message.

    Returns:
        The duration in milliseconds (``>= 0``).

    Raises:
        DurationError: empty text, an unknown unit, a bare non-zero number, a negative value, a value
            longer than :data:`MAX_DURATION_MS` or one that is not a whole number of milliseconds.
    """
    raw = text
    text = text.strip()
    if not text:
        raise DurationError(f"{what}: empty duration; use {_UNITS_HELP}")
    if text == "0":
        return 0
    if text.startswith("-"):
        raise DurationError(f"{what}: negative duration {raw!r} is not allowed")
    pos = 0
    total = Decimal(0)
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.end() == pos:
            raise DurationError(f"{what}: cannot parse {raw!r} as a duration; use {_UNITS_HELP}")
        number, unit = m.group(1), m.group(2).lower()
        if unit not in _UNIT_MS:
            raise DurationError(f"{what}: unknown unit {m.group(2)!r} in {raw!r}; use {_UNITS_HELP}")
        try:
            total += Decimal(number) * _UNIT_MS[unit]
        except InvalidOperation:  # pragma: no cover - the regex only admits valid decimals
            raise DurationError(f"{what}: bad number {number!r} in {raw!r}") from None
        pos = m.end()
    if total > MAX_DURATION_MS:
        raise DurationError(f"{what}: {_show(raw)} is longer than the longest duration accepted (100 years)")
    if total != total.to_integral_value():
        raise DurationError(f"{what}: {raw!r} is not a whole number of milliseconds")
    return int(total)


def _show(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 60 else f"{shown[:40]}... ({len(text)} characters)"


def parse_optional_duration_ms(text: str | None, *, what: str = "duration") -> int | None:
    """:func:`parse_duration_ms` of an option that may be absent: ``None`` for ``None``.

    Raises:
        DurationError: as :func:`parse_duration_ms`.
    """
    return None if text is None else parse_duration_ms(text, what=what)


def parse_duration_list_ms(text: str, *, what: str = "durations") -> list[int]:
    """Parse a comma-separated list such as ``"1m,5m,10m,30m"`` into milliseconds (order kept).

    Raises:
        DurationError: an item does not parse (the message names it), or the list is empty.
    """
    items = [t for t in (p.strip() for p in text.split(",")) if t]
    if not items:
        raise DurationError(f"{what}: empty list; expected e.g. 1m,5m,10m")
    return [parse_duration_ms(t, what=what) for t in items]


def format_duration_ms(ms: int) -> str:
    """Format milliseconds compactly, largest units first: ``90_000 -> "1m30s"``, ``0 -> "0s"``,
    ``68_086 -> "1m8.086s"`` (milliseconds as a decimal of the seconds), ``86 -> "86ms"``,
    ``60_086 -> "1m0.086s"`` (after a larger unit the milliseconds stay a decimal of the seconds).

    Negative values are formatted with a leading ``-``. The output parses back with
    :func:`parse_duration_ms` (for non-negative values). Every duration ``whatif``, ``scan`` and the
    findings print in this compact form goes through it (one formatter).
    """
    if ms == 0:
        return "0s"
    sign = "-" if ms < 0 else ""
    rest = abs(ms)
    parts: list[str] = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        q, rest = divmod(rest, size)
        if q:
            parts.append(f"{q}{unit}")
    seconds, millis = divmod(rest, 1000)
    if millis and (seconds or parts):
        parts.append(f"{seconds}.{millis:03d}".rstrip("0") + "s")
    elif millis:
        parts.append(f"{millis}ms")
    elif seconds:
        parts.append(f"{seconds}s")
    return sign + "".join(parts)


def parse_timedelta(text: str, *, what: str = "duration") -> timedelta:
    """Like :func:`parse_duration_ms`, returning a :class:`datetime.timedelta`.

    Raises:
        DurationError: as :func:`parse_duration_ms`.
    """
    return timedelta(milliseconds=parse_duration_ms(text, what=what))
