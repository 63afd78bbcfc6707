"""Flink REST values: strings holding int64s, doubles, and the Long.MIN_VALUE / Long.MAX_VALUE markers.

Flink's ``MetricStore`` keeps every metric as a string, so ``GET .../metrics?get=...`` answers
``{"id": "0.op.currentOutputWatermark", "value": "1795952369440"}``. Conventions followed
(``org.apache.flink.streaming.api.watermark.Watermark``, ``WatermarkGauge``, ``StatusWatermarkValve``):

* ``"-9223372036854775808"`` (``Long.MIN_VALUE``): no watermark yet — *unknown*, never a time and never 0;
* ``"9223372036854775807"`` (``Long.MAX_VALUE``, ``Watermark.MAX_WATERMARK``): end of input, or a source
  subtask without splits/partitions advertising +infinity (which hides the idle partitions behind it);
* ``"NaN"``, an empty string, a missing entry or an empty ``[]`` answer: unknown;
* any other watermark or time outside what a sample holds (:data:`monitor.model.MIN_TIME` ..
  :data:`~monitor.model.MAX_TIME`, years 1000-8999): unknown (:func:`parse_epoch_ms`), never a crash of
  the poll.

Integers are parsed from the string (``int("1795952369440")``), never through ``float`` (a double holds
only 53 bits: ``float("9223372036854775807")`` is ``9223372036854775808.0``). Doubles (``"0.9833"``,
``"NaN"``) go through :func:`parse_double`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from monitor.model import MAX_TIME, MIN_TIME, datetime_to_ms

__all__ = [
    "LONG_MAX",
    "LONG_MIN",
    "Watermark",
    "parse_double",
    "parse_epoch_ms",
    "parse_long",
    "parse_watermark",
]

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


def parse_long(value: Any) -> int | None:
    """An int64 from a REST value (``"123"``, ``"123.0"`` as a gauge may print, or a JSON number).

    Returns ``None`` for ``None``, ``""``, ``"NaN"``, booleans and anything unparseable; an integral
    ``"123.0"`` is accepted exactly (decimal text, no float rounding). Values outside int64 are unknown.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if LONG_MIN <= value <= LONG_MAX else None
    if isinstance(value, float):  # orjson reads an integer beyond 64 bits as a float: out of range too
        return int(value) if math.isfinite(value) and value.is_integer() and LONG_MIN <= value <= LONG_MAX else None
    if not isinstance(value, str):
        return None  # a list or object where a number belongs (never ``str()`` of it: it may nest 1,000 deep)
    text = value.strip()
    if not text:
        return None
    whole, dot, frac = text.partition(".")
    if dot and frac.strip("0"):
        return None  # not an integer
    try:
        out = int(whole)
    except ValueError:
        return None
    return out if LONG_MIN <= out <= LONG_MAX else None


_MIN_MS = datetime_to_ms(MIN_TIME)
_MAX_MS = datetime_to_ms(MAX_TIME)


def parse_epoch_ms(value: Any) -> int | None:
    """An epoch-milliseconds time (:func:`parse_long`) a sample can hold (years 1000-8999); else ``None``."""
    ms = parse_long(value)
    assert _MIN_MS is not None and _MAX_MS is not None
    return ms if ms is not None and _MIN_MS <= ms <= _MAX_MS else None


def parse_double(value: Any) -> float | None:
    """A finite double from a REST value; ``NaN``/``Infinity``/unparseable/missing -> ``None``."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


@dataclass(frozen=True, slots=True)
class Watermark:
    """A parsed Flink watermark.

    Attributes:
        epoch_ms: the event time in epoch milliseconds, or ``None`` (no watermark / unknown / +infinity).
        end_of_input: ``True`` for ``Long.MAX_VALUE`` (+infinity), ``False`` otherwise.
    """

    epoch_ms: int | None
    end_of_input: bool = False


UNKNOWN = Watermark(None)
END_OF_INPUT = Watermark(None, end_of_input=True)


def parse_watermark(value: Any) -> Watermark:
    """A REST watermark value: Long.MIN_VALUE and unknown -> no time; Long.MAX_VALUE -> :data:`END_OF_INPUT`."""
    ms = parse_long(value)
    if ms is None or ms == LONG_MIN:
        return UNKNOWN
    if ms == LONG_MAX:
        return END_OF_INPUT
    return Watermark(parse_epoch_ms(ms))
