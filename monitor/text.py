"""Shortening text for people: one helper, so no surface (the demo's terminal lines, Slack blocks) cuts a
message in the middle of a word."""

from __future__ import annotations

import re

__all__ = ["ELLIPSIS", "clip"]

ELLIPSIS = "…"
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
