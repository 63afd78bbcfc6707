"""Small constructors of sample histories for the rule tests (one line per sample in a test table).

Times are minutes (or seconds, for Kafka polls) after ``T0`` = 2026-11-29 12:00 UTC; a watermark or event
time given as a number is minutes after ``T0`` too (negative = before it). ``None`` is *unknown*.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from monitor.model import Engine, JobRef, Sample, SampleKind, Scope
from rules.history import JobHistory, job_history

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SPARK = JobRef(Engine.SPARK, "q1", run_id="r1", name="clicks")
FLINK = JobRef(Engine.FLINK, "f1", name="sessions")
KAFKA = JobRef(Engine.KAFKA, "prod/orders-consumer", name="orders-consumer")


def at(minute: float | None) -> datetime | None:
    """``T0 + minute`` (``None`` stays ``None``)."""
    return None if minute is None else T0 + timedelta(minutes=minute)


def spark(
    minute: float,
    rows: int | None,
    wm: float | datetime | None = None,
    tmax: float | datetime | None = None,
    *,
    batch: int | None = None,
    tmin: float | datetime | None = None,
    dropped: int | None = None,
    state: int | None = None,
    removed: int | None = None,
    duration_ms: int | None = None,
    job: JobRef = SPARK,
) -> Sample:
    """A Spark query-scope progress sample (batch id = the minute unless given)."""

    def t(v: float | datetime | None) -> datetime | None:
        return v if isinstance(v, datetime) or v is None else at(v)

    return Sample(
        job=job,
        observed_at=T0 + timedelta(minutes=minute),
        kind=SampleKind.PROGRESS,
        collector="spark-eventlog",
        batch_id=int(minute) if batch is None else batch,
        num_input_rows=rows,
        watermark=t(wm),
        event_time_max=t(tmax),
        event_time_min=t(tmin),
        dropped_by_watermark=dropped,
        state_rows_total=state,
        state_rows_removed=removed,
        batch_duration_ms=duration_ms,
    )


def source(minute: float, name: str, rows: int | None, job: JobRef = SPARK) -> Sample:
    """A Spark per-source progress sample of the batch at ``minute``."""
    return Sample(
        job=job,
        observed_at=T0 + timedelta(minutes=minute),
        collector="spark-eventlog",
        scope=Scope(source=name),
        batch_id=int(minute),
        num_input_rows=rows,
    )


def flink(
    minute: float,
    subtask: int | None,
    wm: float | None = None,
    rows: int | None = None,
    *,
    idle_ms: int | None = None,
    backpressure: float | None = None,
    restarts: int | None = None,
) -> Sample:
    """A Flink poll: job scope when ``subtask`` is None, else the source vertex's subtask."""
    scope = Scope() if subtask is None else Scope(source="Source: clicks", subtask=subtask)
    return Sample(
        job=FLINK,
        observed_at=T0 + timedelta(minutes=minute),
        kind=SampleKind.GAUGE,
        collector="flink-rest",
        scope=scope,
        watermark=at(wm),
        num_input_rows=rows,
        idle_ms=idle_ms,
        backpressure_ratio=backpressure,
        restart_count=restarts,
    )


def kafka(
    second: float, partition: int, committed: int | None, log_end: int | None, topic: str = "orders"
) -> Sample:
    """A Kafka lag poll of one partition at ``T0 + second`` seconds."""
    return Sample(
        job=KAFKA,
        observed_at=T0 + timedelta(seconds=second),
        kind=SampleKind.GAUGE,
        collector="kafka-lag",
        scope=Scope(source=topic, partition=partition),
        committed_offset=committed,
        log_end_offset=log_end,
    )


def lifecycle(minute: float, kind: SampleKind, run_id: str, **extra: Any) -> Sample:
    """A Spark ``STARTED``/``TERMINATED`` sample of run ``run_id``."""
    job = JobRef(Engine.SPARK, SPARK.job_id, run_id=run_id, name=SPARK.name)
    return Sample(
        job=job,
        observed_at=T0 + timedelta(minutes=minute),
        kind=kind,
        collector="spark-eventlog",
        extra=extra,
    )


def history(samples: Sequence[Sample]) -> JobHistory:
    """:func:`rules.history.job_history` of a non-empty list."""
    h = job_history(samples)
    assert h is not None
    return h


def only_rules(**enabled: dict[str, Any]) -> dict[str, Any]:
    """A ``rules:`` config section with every registered rule disabled except ``enabled`` (name -> params).

    For tests of the alert pipeline that count notifications: replayed recorded data also (rightly) raises
    other rules (freshness of 2024 data, late-drop surges), which would interleave with what they count.
    """
    from rules.registry import RULES

    section: dict[str, Any] = {name: {"enabled": False} for name in RULES if name not in enabled}
    section.update(enabled)
    return section


RULE_CASES = Path(__file__).parent / "fixtures" / "spark" / "rule-cases"
"""Recorded real PySpark 4.3.0 event logs of the section-3 cases (see its PROVENANCE.md)."""


def recorded_case(name: str, upto_batch: int | None = None) -> list[Sample]:
    """The samples of recorded case ``name`` (one query), oldest first; with ``upto_batch``, only what the
    daemon had seen at that batch's time (its lifecycle events at that time excluded)."""
    from collectors.spark.eventlog import EventLogCollector

    poll = EventLogCollector([RULE_CASES / name]).poll(datetime(2030, 1, 1, tzinfo=UTC))
    assert poll.errors == (), poll.errors
    samples = sorted(poll.samples, key=lambda s: s.observed_at)
    if upto_batch is None:
        return samples
    at = next(s.observed_at for s in samples if s.batch_id == upto_batch and s.scope.is_job())
    return [s for s in samples if s.observed_at < at or (s.observed_at == at and s.kind is SampleKind.PROGRESS)]
