"""Text for people: shortening (one helper, so no surface, the demo's terminal lines or Slack blocks, cuts a
message in the middle of a word), counts with their noun, a range of Spark micro-batches."""

from __future__ import annotations

import re

__all__ = ["ELLIPSIS", "POLLS", "batch_range", "clip", "plain", "plural"]

ELLIPSIS = "…"
#: Where a Flink or Kafka finding has no batch range: these engines are polled, their samples have no batch id.
POLLS = "polls (no batch ids)"
_SPACE = re.compile(r"\s")
#: Punctuation left dangling before the ellipsis by a cut ("batch 38, …" reads as "batch 38…").
_TRAILING = " \t\n,;:-–—("


def clip(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters; else its longest prefix that ends at a word boundary
    and leaves room for :data:`ELLIPSIS`, with trailing spaces and dangling punctuation removed, plus the
    ellipsis. The result has at most ``limit`` characters. Only a word that would leave less than half of
    the room (a pasted blob, a 5,000-character token) is cut inside itself: dropping it whole would drop
    most of what there was to show.

    Raises:
        ValueError: ``limit`` < 1.
    """
    if limit < 1:
        raise ValueError(f"clip: limit must be at least 1, got {limit}")
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    if _SPACE.match(text, room):  # the cut falls on a space: the word before it is whole
        head = text[:room]
    else:
        boundary = max((m.start() for m in _SPACE.finditer(text, 0, room)), default=-1)
        head = text[:boundary] if boundary >= room / 2 else text[:room]
    head = head.rstrip(_TRAILING)
    return (head or text[:room]) + ELLIPSIS


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 job``, ``2 jobs``, ``1,200 rows``, ``3 batches``: ``count`` (thousands separated) with ``noun`` or
    its plural (``nouns``; default ``noun + "es"`` after ch/sh/s/x, else ``noun + "s"``)."""
    if count == 1:
        return f"1 {noun}"
    return f"{count:,} {nouns or noun + ('es' if noun.endswith(('ch', 'sh', 's', 'x')) else 's')}"


def batch_range(first: int | None, last: int | None, *, none: str = "") -> str:
    """Spark micro-batch ids ``first`` to ``last`` (``StreamingQueryProgress.batchId``) as ``batch 6`` (one
    batch, or one end unknown) or ``batches 6-9``; ``none`` when both are unknown (Flink and Kafka are polled
    and have no batch ids)."""
    if first is None and last is None:
        return none
    if first is None or last is None or first == last:
        return f"batch {first if first is not None else last}"
    return f"batches {first}-{last}"


def plain(text: str) -> str:
    """``text`` without Markdown code quotes, for a surface that would show them literally (a table cell, a
    chart legend, HTML): ``vertex `Source: telemetry` subtask 1`` -> ``vertex Source: telemetry subtask 1``."""
    return text.replace("`", "")
