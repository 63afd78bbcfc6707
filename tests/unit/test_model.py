"""Tests of the shared core model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from monitor.model import (
    Engine,
    Finding,
    JobRef,
    Sample,
    Scope,
    Severity,
    datetime_to_ms,
    fingerprint,
    ms_to_datetime,
)

JOB = JobRef(Engine.SPARK, "q1", "r1", "clicks")


def test_naive_datetime_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"Sample\.observed_at"):
        Sample(job=JOB, observed_at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match=r"Sample\.watermark"):
        Sample(job=JOB, observed_at=datetime(2026, 1, 1, tzinfo=UTC), watermark=datetime(2026, 1, 1))


def test_other_timezones_are_converted_to_utc() -> None:
    plus2 = timezone(timedelta(hours=2))
    s = Sample(job=JOB, observed_at=datetime(2026, 1, 1, 2, 0, tzinfo=plus2))
    assert s.observed_at == datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
    assert s.observed_at.tzinfo is UTC


def test_unknown_is_distinct_from_zero() -> None:
    s = Sample(job=JOB, observed_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert s.watermark is None and s.dropped_by_watermark is None and s.state_rows_total is None
    z = Sample(job=JOB, observed_at=datetime(2026, 1, 1, tzinfo=UTC), dropped_by_watermark=0)
    assert z != s


def test_ms_round_trip_including_pre_epoch_and_2099() -> None:
    # 2099-01-01T00:00:00Z = 4070908800000 ms (date -u -d 2099-01-01 +%s -> 4070908800)
    dt = datetime(2099, 1, 1, tzinfo=UTC)
    assert datetime_to_ms(dt) == 4_070_908_800_000
    assert ms_to_datetime(4_070_908_800_000) == dt
    assert datetime_to_ms(datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)) == -1
    assert ms_to_datetime(None) is None


def test_severity_is_ordered_and_parsed() -> None:
    assert max([Severity.INFO, Severity.CRITICAL, Severity.WARNING]) is Severity.CRITICAL
    assert Severity.parse("Warning") is Severity.WARNING
    with pytest.raises(ValueError, match="allowed: ok, info, warning, critical"):
        Severity.parse("urgent")


def test_fingerprint_depends_on_rule_and_labels_not_message_or_order() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    a = Finding(
        "watermark_stall", Severity.WARNING, JOB, "flat for 14 min", now, Scope(source="s", partition=3)
    )
    b = Finding(
        "watermark_stall", Severity.CRITICAL, JOB, "flat for 20 min", now, Scope(source="s", partition=3)
    )
    c = Finding("watermark_stall", Severity.WARNING, JOB, "flat", now, Scope(source="s", partition=4))
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()
    assert fingerprint("r", {"a": "1", "b": "2"}) == fingerprint("r", {"b": "2", "a": "1"})
    assert fingerprint("r", {"a": "1"}) != fingerprint("s", {"a": "1"})
