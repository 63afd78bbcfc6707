"""monitor.commands._scan_render: the JSON document's time format and encoding."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from monitor.commands._scan_render import ScanReport, iso, render_json


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 29, 11, 32, 48, 289000, tzinfo=UTC),
        datetime(2026, 11, 29, 11, 32, 48, tzinfo=UTC),  # no fraction: still .000
        datetime(2026, 11, 29, 11, 32, 48, 999999, tzinfo=UTC),  # truncated, never rounded up
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1000, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime.max.replace(tzinfo=UTC),
        datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))),  # fields printed as they are
    ],
)
def test_iso_prints_the_fields_with_milliseconds_and_z(value: datetime) -> None:
    expected = (
        f"{value.year}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:"
        f"{value.second:02d}.{value.microsecond // 1000:03d}Z"
    )
    assert iso(value) == expected


def test_iso_of_none_is_none() -> None:
    assert iso(None) is None


def test_render_json_is_json_with_utf8_text() -> None:
    text = render_json(ScanReport((), (), ("bad line in café.jsonl",)))
    assert json.loads(text) == {"queries": [], "findings": [], "errors": ["bad line in café.jsonl"]}
    assert "café" in text and text.startswith("{\n  ")
