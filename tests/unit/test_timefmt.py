"""monitor.timefmt: the one time and duration formatter. Expected texts are written out (Spark's own
renderings quoted from the recorded logs)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from monitor.timefmt import (
    format_basic,
    format_duration,
    format_epoch_ms,
    format_instant,
    format_instant_short,
    format_lag,
    format_precise,
    parse_instant,
)
from tests.rule_samples import RULE_CASES


@pytest.mark.parametrize(
    ("epoch_ms", "expected"),
    [
        (0, "1970-01-01T00:00:00.000Z"),  # Spark's "no watermark yet"
        (1_795_952_369_440, "2026-11-29T11:39:29.440Z"),
        # year 57,971 as Spark 4.3 prints it (epoch microseconds read as milliseconds)
        (1_767_225_670_000_000 // 1000 * 1000, "+57971-02-25T19:26:40.000Z"),
        (-62_198_755_200_000, "-0001-01-01T00:00:00.000Z"),  # ISO 8601 expanded year before year 1
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        (253_402_300_800_000, "+10000-01-01T00:00:00.000Z"),
        (-(2**63), "-292275055-05-16T16:47:04.192Z"),  # Long.MIN_VALUE: never raises
    ],
)
def test_format_epoch_ms(epoch_ms: int, expected: str) -> None:
    assert format_epoch_ms(epoch_ms) == expected


def test_format_epoch_ms_prints_spark_5_digit_years_as_the_recording_does() -> None:
    """The recorded epoch_units run: batch 4's eventTime.max as Spark 4.3.0 wrote it."""
    path = next((RULE_CASES / "epoch_units").iterdir())
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    progress = [d["progress"] for d in lines if d["Event"].endswith("QueryProgressEvent")]
    text = progress[4]["eventTime"]["max"]
    assert text == "+56135-05-22T09:20:00.000Z"
    # the row record.py wrote: 2024-03-01T12:02:00Z in epoch ms, 1,709,294,520,000, read as seconds
    assert format_epoch_ms(1_709_294_520_000 * 1000) == text


def test_format_epoch_ms_without_millis() -> None:
    assert format_epoch_ms(30_000, always_millis=False) == "1970-01-01T00:00:30Z"
    assert format_epoch_ms(30_123, always_millis=False) == "1970-01-01T00:00:30.123Z"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 11, 29, 11, 32, 48, 289999, tzinfo=UTC), "2026-11-29T11:32:48.289Z"),  # truncated
        (datetime(999, 1, 1, tzinfo=UTC), "0999-01-01T00:00:00.000Z"),
        (datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))), "2026-01-01T10:00:00.000Z"),
    ],
)
def test_format_instant(value: datetime, expected: str) -> None:
    assert format_instant(value) == expected


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        format_instant(datetime(2026, 1, 1))


def test_precise_round_trip_and_basic() -> None:
    value = datetime(2026, 11, 29, 12, 0, 0, 5, tzinfo=UTC)
    assert format_precise(value) == "2026-11-29T12:00:00.000005Z"
    assert parse_instant("2026-11-29T12:00:00.000005Z") == value
    assert parse_instant("2026-11-29T14:00:00.000005+02:00") == value
    assert format_basic(value) == "20261129T120000Z"
    with pytest.raises(ValueError, match="timezone"):
        parse_instant("2026-11-29T12:00:00")
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_instant("yesterday")


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (None, "unknown"),
        (float("nan"), "unknown"),
        (12.0, "12 s"),
        (-7200.0, "2 h ahead"),  # the watermark ahead of processing time
        (86_737_918.0, "2.7 years"),  # the backfill_future_row recording's freshness
        (0.0, "0 s"),
    ],
)
def test_format_lag(seconds: float | None, expected: str) -> None:
    assert format_lag(seconds) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2099, 1, 1, tzinfo=UTC), "2099-01-01T00:00Z"),  # whole minutes: shortest form
        (datetime(2026, 11, 29, 11, 32, 48, tzinfo=UTC), "2026-11-29T11:32:48Z"),
        (datetime(2026, 11, 29, 11, 32, 48, 289000, tzinfo=UTC), "2026-11-29T11:32:48.289Z"),
    ],
)
def test_format_instant_short(value: datetime, expected: str) -> None:
    assert format_instant_short(value) == expected


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        # 2099-01-01 - 2026-11-29T11:32:48 = 26330.5 days = 72.09 Julian years -> "72 years"
        (datetime(2099, 1, 1, tzinfo=UTC) - datetime(2026, 11, 29, 11, 32, 48, tzinfo=UTC), "72 years"),
        (timedelta(hours=1), "1 h"),
        (timedelta(minutes=90), "1.5 h"),
        (timedelta(minutes=8), "8 min"),
        (timedelta(seconds=9), "9 s"),
        (timedelta(minutes=-5), "5 min"),  # magnitude only; callers add the sign
        (timedelta(days=1), "1 day"),  # singular (a user saw "allowed skew 1 days")
        (timedelta(days=2), "2 days"),
        (timedelta(days=1.5), "1.5 days"),
        (timedelta(days=365.25), "1 year"),
        (timedelta(days=1, seconds=5), "1 day"),  # 1.00006 days: no "1.0 days"
        (timedelta(hours=9, minutes=58), "10 h"),  # 9.97 h rounds to 10, not "10.0 h"
    ],
)
def test_format_duration(delta: timedelta, expected: str) -> None:
    assert format_duration(delta) == expected


