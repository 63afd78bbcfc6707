"""Tests of the shared core model."""

from __future__ import annotations

import dataclasses
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
    share_equal_parts,
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


T0 = datetime(2026, 1, 1, tzinfo=UTC)
INT_FIELDS = [f.name for f in dataclasses.fields(Sample) if f.type == "int | None"]
FLOAT_FIELDS = [f.name for f in dataclasses.fields(Sample) if f.type == "float | None"]
TIME_FIELDS = [f.name for f in dataclasses.fields(Sample) if f.type in ("datetime", "datetime | None")]


def test_sample_takes_every_field_by_name_and_position_with_the_declared_defaults() -> None:
    s = Sample(JOB, T0)
    for f in dataclasses.fields(Sample):
        if f.name in ("job", "observed_at"):
            continue
        expected = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        assert getattr(s, f.name) == expected, f.name
    assert s.scope == Scope() and s.scope.is_job()
    first, second = Sample(JOB, T0), Sample(JOB, T0)
    first.extra["k"] = 1
    assert second.extra == {}  # a fresh dict per sample
    assert Sample(JOB, T0, Sample.__dataclass_fields__["kind"].default, "c").collector == "c"
    with pytest.raises(TypeError):
        Sample(JOB, T0, nonsense=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Sample(job=JOB)  # type: ignore[call-arg]


def test_sample_stays_frozen_hashable_and_replaceable() -> None:
    s = Sample(JOB, T0, batch_id=3, extra={"a": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.batch_id = 4  # type: ignore[misc]
    assert hash(s) == hash(Sample(JOB, T0, batch_id=3))  # extra is not part of identity
    moved = dataclasses.replace(s, batch_id=4)
    assert (moved.batch_id, moved.observed_at, moved.extra) == (4, T0, {"a": 1})
    with pytest.raises(ValueError, match=r"Sample\.batch_id: integer out of range"):
        dataclasses.replace(s, batch_id=2**63)


def test_share_equal_parts_shares_equal_values_only_and_changes_no_value() -> None:
    # two loads of one query: equal values as separate objects, as a database driver returns them
    def load(batch: int, watermark_s: int) -> Sample:
        return Sample(
            JobRef(Engine.SPARK, "".join(["q", "1"]), "".join(["r", "1"]), "clicks"),
            T0 + timedelta(seconds=10 * batch), collector="".join(["spark-", "eventlog"]),
            scope=Scope(source="".join(["kafka[", "clicks]"])), batch_id=batch,
            watermark=T0 + timedelta(seconds=watermark_s), event_time_max=T0 + timedelta(seconds=batch),
            extra={"sink": "".join(["console", "Sink"]), "num_sources": 1},
        )

    before, after = load(1, 0), load(2, 0)
    expected = Sample(JOB, T0 + timedelta(seconds=20), collector="spark-eventlog", scope=Scope(source="kafka[clicks]"),
                      batch_id=2, watermark=T0, event_time_max=T0 + timedelta(seconds=2),
                      extra={"sink": "consoleSink", "num_sources": 1})  # fmt: skip
    assert after.job is not before.job and after.extra is not before.extra
    share_equal_parts(after, before)
    assert after.job is before.job and after.scope is before.scope and after.collector is before.collector
    assert after.extra is before.extra and after.watermark is before.watermark
    assert after.event_time_max is not before.event_time_max  # a different value stays its own
    assert (after, after.extra, after.event_time_max) == (expected, expected.extra, T0 + timedelta(seconds=2))
    assert hash(after) == hash(expected)
    moved = load(3, 10)
    share_equal_parts(moved, before)
    assert moved.watermark == T0 + timedelta(seconds=10) and moved.watermark is not before.watermark


def test_sample_checks_every_bounded_field_by_name() -> None:
    assert len(INT_FIELDS) == 14 and len(FLOAT_FIELDS) == 4 and len(TIME_FIELDS) == 5
    with pytest.raises(ValueError, match=r"Sample\.observed_at is required"):
        Sample(JOB, None)  # type: ignore[arg-type]
    for name in INT_FIELDS:
        assert getattr(Sample(JOB, T0, **{name: 2**63 - 1}), name) == 2**63 - 1
        assert getattr(Sample(JOB, T0, **{name: -(2**63)}), name) == -(2**63)
        for bad in (2**63, -(2**63) - 1):
            with pytest.raises(ValueError, match=rf"Sample\.{name}: integer out of range"):
                Sample(JOB, T0, **{name: bad})
    for name in FLOAT_FIELDS:
        assert getattr(Sample(JOB, T0, **{name: 1.5}), name) == 1.5
        for bad in (float("nan"), float("inf"), float("-inf")):
            with pytest.raises(ValueError, match=rf"Sample\.{name}: .* is not a finite number"):
                Sample(JOB, T0, **{name: bad})
    plus2 = timezone(timedelta(hours=2))
    for name in TIME_FIELDS:
        args = {"observed_at": T0, name: datetime(2026, 1, 1, 2, 0, tzinfo=plus2)}
        converted = getattr(Sample(JOB, **args), name)
        assert converted == T0 and converted.tzinfo is UTC
        for bad in (datetime(2026, 1, 1), datetime(9999, 1, 1, tzinfo=UTC), datetime(999, 12, 31, tzinfo=UTC)):
            with pytest.raises(ValueError, match=rf"Sample\.{name}"):
                Sample(JOB, **{"observed_at": T0, name: bad})


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
