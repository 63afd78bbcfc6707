"""Prometheus text exposition, read once for the pull collectors that scrape one (Flink's reporter, the
Kafka lag exporters): :func:`parse_exposition` turns ``prometheus_client``'s parser's families into flat
samples whose values are always floats, and its failures into one :class:`monitor.errors.InputError`.

``prometheus_client.parser.text_string_to_metric_families`` raises more than ``ValueError`` on hostile text
(``OverflowError`` for a timestamp of 400 digits, which it divides as an int) and gives an ``int`` for a
value written as an integer (``1`` followed by 400 zeros, too large for a float): here the former is a
refused text and the latter ``+Inf``/``-Inf``, which every reader treats as not a count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from monitor.errors import InputError

__all__ = ["ExpositionSample", "parse_exposition"]


@dataclass(frozen=True, slots=True)
class ExpositionSample:
    """One sample line: metric name (with ``_total``/``_bucket``... suffix as written), labels, value."""

    name: str
    labels: Mapping[str, str]
    value: float


def _float(value: float) -> float:
    try:
        return float(value)
    except OverflowError:  # an int beyond a double
        return math.inf if value > 0 else -math.inf


def parse_exposition(text: str, where: str) -> list[ExpositionSample]:
    """Every sample of a Prometheus text exposition (format 0.0.4, as ``prometheus_client`` parses it).

    Args:
        text: the scraped body.
        where: names the input in the message (a URL without credentials).

    Returns:
        The samples in order; values are floats (an integer beyond a double is ``±inf``).

    Raises:
        InputError: the text is not the exposition format (an HTML page, a broken line); the message starts
            with ``where`` and gives the parser's first line of explanation.
    """
    try:
        return [
            ExpositionSample(s.name, s.labels, _float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except Exception as exc:  # the parser library's own errors: ValueError, and others on odd input
        lines = str(exc).strip().splitlines()
        first = lines[0][:200] if lines else type(exc).__name__
        raise InputError(f"{where}: not Prometheus text exposition format: {first}") from None
