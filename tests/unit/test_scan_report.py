"""monitor.commands._scan_render: the JSON document's time format and encoding."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from monitor.commands._scan_render import ScanReport, iso, render_json


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 11, 29, 11, 32, 48, 289000, tzinfo=UTC), "2026-11-29T11:32:48.289Z"),
        (datetime(2026, 11, 29, 11, 32, 48, tzinfo=UTC), "2026-11-29T11:32:48.000Z"),  # no fraction: still .000
        (datetime(2026, 11, 29, 11, 32, 48, 999999, tzinfo=UTC), "2026-11-29T11:32:48.999Z"),  # truncated
        (datetime(1970, 1, 1, tzinfo=UTC), "1970-01-01T00:00:00.000Z"),
        (datetime(1000, 1, 1, tzinfo=UTC), "1000-01-01T00:00:00.000Z"),
        (datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC), "0999-12-31T23:59:59.000Z"),  # ISO 8601: four digits
        (datetime.max.replace(tzinfo=UTC), "beyond year 8999"),  # past the model's clamp: no date
        (datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))), "2026-01-01T10:00:00.000Z"),  # in UTC
    ],
)
def test_iso_prints_utc_with_milliseconds_and_z(value: datetime, expected: str) -> None:
    assert iso(value) == expected


def test_iso_of_none_is_none() -> None:
    assert iso(None) is None


def test_render_json_is_json_with_utf8_text() -> None:
    text = render_json(ScanReport((), (), ("bad line in café.jsonl",)))
    assert json.loads(text) == {"queries": [], "findings": [], "errors": ["bad line in café.jsonl"]}
    assert "café" in text and text.startswith("{\n  ")
