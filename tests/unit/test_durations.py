"""monitor.durations: the one duration parser of the CLI and config."""

from __future__ import annotations

import pytest

from monitor.durations import DurationError, format_duration_ms, parse_duration_list_ms, parse_duration_ms
from monitor.errors import InputError


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("10m", 600_000),
        ("30s", 30_000),
        ("1h", 3_600_000),
        ("500ms", 500),
        ("1h30m", 5_400_000),
        ("1.5s", 1_500),
        ("2d", 172_800_000),
        ("10 minutes", 600_000),  # Spark's withWatermark spelling
        ("1 hour 30 minutes", 5_400_000),
        ("0", 0),
        (" 5S ", 5_000),
    ],
)
def test_parse_duration_ms(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "10", "5x", "-5s", "1.0005s", "m5", "10m garbage"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError) as ei:
        parse_duration_ms(text, what="--delay")
    assert "--delay" in str(ei.value)
    assert isinstance(ei.value, InputError) and isinstance(ei.value, ValueError)


def test_parse_duration_list() -> None:
    assert parse_duration_list_ms("1m, 5m,10m,30m") == [60_000, 300_000, 600_000, 1_800_000]
    with pytest.raises(DurationError):
        parse_duration_list_ms(" , ")


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0s"), (90_000, "1m30s"), (500, "500ms"), (86_400_000, "1d"),
        # milliseconds beside seconds read as a decimal of the seconds, not "1m8s86ms" (new-user trial)
        (68_086, "1m8.086s"), (1_500, "1.5s"), (60_086, "1m0.086s"), (60_600, "1m0.6s"),
    ],
)
def test_format_duration_ms_round_trips(ms: int, text: str) -> None:
    assert format_duration_ms(ms) == text
    assert parse_duration_ms(text) == ms
