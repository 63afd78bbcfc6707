"""Human durations (``500ms``, ``30s``, ``10m``, ``1h``, ``2d``, ``1h30m``) to integer milliseconds.

Used by the CLI (``--delay 10m``, ``--future-skew 1h``) and the YAML config (``for: 10m``). The unit
letters follow Prometheus's duration syntax (``ms s m h d w``); a bare number is rejected because its
unit would be a guess.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["format_duration_ms", "parse_duration_ms", "parse_timedelta"]

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration_ms(text: str, what: str = "duration") -> int:
    """Parse ``text`` into integer milliseconds.

    Args:
        text: e.g. ``"10m"``, ``"1h30m"``, ``"0s"``, ``"1.5s"``.
        what: names the option/field in the error message.

    Raises:
        ValueError: empty, unitless, negative or unknown-unit text; the message names ``what`` and
            the accepted units.
    """
    s = text.strip().replace(" ", "")
    pos = 0
    total = 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS_MS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(
            f"{what}: {text!r} is not a duration; use a number with a unit: ms, s, m, h, d, w (e.g. 10m, 1h30m)"
        )
    return round(total)


def parse_timedelta(text: str, what: str = "duration") -> timedelta:
    """Like :func:`parse_duration_ms` but returns a :class:`datetime.timedelta`."""
    return timedelta(milliseconds=parse_duration_ms(text, what))


def format_duration_ms(ms: int) -> str:
    """Format milliseconds compactly: ``600000 -> "10m"``, ``5400000 -> "1h30m"``, ``1500 -> "1.5s"``."""
    if ms == 0:
        return "0s"
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    if ms:
        parts.append(f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms / 1000:g}s" if ms >= 1000 else f"{ms}ms")
    return sign + "".join(parts)
