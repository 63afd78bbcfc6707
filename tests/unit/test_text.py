"""monitor.text.clip: shortened text ends at a word boundary with an ellipsis, never inside a word."""

from __future__ import annotations

import pytest

from monitor.text import clip


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("fits exactly", 12, "fits exactly"),  # 12 characters: untouched
        # 30 -> room for 29 + "…": "...stayed at 2026 f" would cut "for"; the last whole word is "2026"
        ("the watermark stayed at 2026 for 1.8 min", 30, "the watermark stayed at 2026…"),
        ("hello world", 6, "hello…"),  # the cut falls on the space: "hello" is whole
        ("batch 38, the watermark", 11, "batch 38…"),  # the dangling comma goes
        ("abcdefghijklmnop", 8, "abcdefg…"),  # one word longer than the room: cut inside it
        # a word that would leave less than half of the room (9 of 19) is cut inside itself
        ("header: " + "x" * 30, 20, "header: xxxxxxxxxxx…"),
        ("first line\nsecond", 14, "first line…"),  # any whitespace is a boundary
        ("xxxxx", 1, "…"),
    ],
)
def test_clip(text: str, limit: int, expected: str) -> None:
    assert clip(text, limit) == expected
    assert len(clip(text, limit)) <= limit


def test_clip_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="limit must be at least 1, got 0"):
        clip("x", 0)
