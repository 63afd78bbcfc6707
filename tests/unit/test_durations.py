"""Duration parsing and formatting."""

from __future__ import annotations

import pytest

from monitor.durations import format_duration_ms, parse_duration_ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("500ms", 500),
        ("30s", 30_000),
        ("10m", 600_000),
        ("1h", 3_600_000),
        ("1h30m", 5_400_000),
        ("2d", 172_800_000),
        ("1.5s", 1500),
        ("0s", 0),
        (" 5m ", 300_000),
    ],
)
def test_parse(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "10", "10x", "-5m", "m", "5m3", "1h 30"])
def test_parse_rejects_with_the_option_name(text: str) -> None:
    with pytest.raises(ValueError, match=r"--delay: .* is not a duration"):
        parse_duration_ms(text, "--delay")


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (600_000, "10m"),
        (5_400_000, "1h30m"),
        (1500, "1.5s"),
        (250, "250ms"),
        (0, "0s"),
        (90_061_000, "1d1h1m1s"),
    ],
)
def test_format(ms: int, text: str) -> None:
    assert format_duration_ms(ms) == text
    assert parse_duration_ms(text) == ms
