"""Formatting helpers used in finding messages, and progress-file splitting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.spark.progress_files import read_progress_file
from monitor.errors import ProgressFormatError
from monitor.timefmt import format_duration, format_instant_short


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2099, 1, 1, tzinfo=UTC), "2099-01-01T00:00Z"),  # whole minutes: shortest form
        (datetime(2026, 11, 29, 11, 32, 48, tzinfo=UTC), "2026-11-29T11:32:48Z"),
        (datetime(2026, 11, 29, 11, 32, 48, 289000, tzinfo=UTC), "2026-11-29T11:32:48.289Z"),
    ],
)
def test_fmt_time(value: datetime, expected: str) -> None:
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
    ],
)
def test_fmt_duration(delta: timedelta, expected: str) -> None:
    assert format_duration(delta) == expected


def test_progress_file_bad_json_names_line(tmp_path: Path, spark_fixtures: Path) -> None:
    good = (spark_fixtures / "progress_pt_initial_idle_b0.json").read_text()
    import json

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(json.loads(good)) + "\n" + '{"id": "x", "timestamp": \n')
    read = read_progress_file(path)  # the bad line is reported, the good one kept
    assert [s.batch_id for s in read.samples if s.scope.is_job()] == [0]
    assert len(read.errors) == 1 and read.errors[0].startswith(f"{path}: line 2: invalid JSON")
    path.write_text('{"id": "x", "timestamp": \n' + '{"id": "y", \n')  # no good line at all
    with pytest.raises(ProgressFormatError, match=r"p\.jsonl: invalid JSON at line 2 column 12"):
        read_progress_file(path)


def test_progress_file_single_object(spark_fixtures: Path) -> None:
    read = read_progress_file(spark_fixtures / "progress_pt_initial_idle_b0.json")
    assert read.samples[0].batch_id == 0 and len(read.raw) == 1 and read.errors == []
