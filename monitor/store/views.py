"""Read-only views for the dashboard and reports: fleet summaries and time series without building a
:class:`~monitor.model.Sample` per row.

The dashboard reads many rows (a fleet page shows every job's last half hour); these functions select only
the columns asked for and return plain tuples, using the ``(job_pk, observed_at)`` index: one seek per job
for the newest sample, one range scan for a series. Like the rest of :mod:`monitor.store` they take a
session and do not commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session, aliased

from monitor.model import ensure_utc
from monitor.store.alert_tables import OutboxRow
from monitor.store.tables import JobRow, RunRow, SampleRow

__all__ = [
    "SERIES_FIELDS",
    "JobSummary",
    "RunSpan",
    "StoredReport",
    "job_runs",
    "job_summaries",
    "newest_sample_time",
    "series",
    "stored_reports",
]

#: Measures :func:`series` can return (``SampleRow`` columns, units as in :class:`monitor.model.Sample`).
SERIES_FIELDS: Final = (
    "batch_id",
    "watermark",
    "event_time_min",
    "event_time_max",
    "num_input_rows",
    "input_rows_per_second",
    "processed_rows_per_second",
    "batch_duration_ms",
    "dropped_by_watermark",
    "state_rows_total",
    "state_rows_removed",
    "state_memory_bytes",
    "lag_offsets",
    "lag_seconds",
    "idle_ms",
    "backpressure_ratio",
    "restart_count",
)


def _job_scope() -> Any:
    return and_(
        SampleRow.scope_source.is_(None),
        SampleRow.scope_partition.is_(None),
        SampleRow.scope_subtask.is_(None),
        SampleRow.scope_operator.is_(None),
    )


@dataclass(frozen=True, slots=True)
class JobSummary:
    """One job with its newest whole-job sample's key numbers (``None``: unknown / no such sample).

    Attributes:
        engine / job_id / name / app_id: the job (latest name and app id).
        observed_at: the newest whole-job sample's time (aware UTC).
        kind: its :class:`monitor.model.SampleKind` value.
        batch_id / watermark / event_time_max / num_input_rows / input_rows_per_second /
            state_rows_total / lag_offsets / dropped_by_watermark: its values.
        runs: how many runs (Spark ``runId`` s) are stored; ``last_run_started``: the newest run's first
            sample time.
    """

    engine: str
    job_id: str
    name: str | None
    app_id: str | None
    observed_at: datetime | None
    kind: str | None
    batch_id: int | None
    watermark: datetime | None
    event_time_max: datetime | None
    num_input_rows: int | None
    input_rows_per_second: float | None
    state_rows_total: int | None
    lag_offsets: int | None
    dropped_by_watermark: int | None
    runs: int
    last_run_started: datetime | None


_SUMMARY_COLUMNS: Final = (
    "observed_at",
    "kind",
    "batch_id",
    "watermark",
    "event_time_max",
    "num_input_rows",
    "input_rows_per_second",
    "state_rows_total",
    "lag_offsets",
    "dropped_by_watermark",
)


def job_summaries(session: Session) -> list[JobSummary]:
    """Every job with its newest whole-job sample (one index seek per job), ordered by engine, job id."""
    runs: dict[int, tuple[int, datetime | None]] = {
        pk: (int(n), first)
        for pk, n, first in session.execute(
            select(RunRow.job_pk, func.count(RunRow.id), func.max(RunRow.first_seen)).group_by(RunRow.job_pk)
        )
    }
    columns = [getattr(SampleRow, c) for c in _SUMMARY_COLUMNS]
    out: list[JobSummary] = []
    for job in session.scalars(select(JobRow).order_by(JobRow.engine, JobRow.job_id)):
        newest = session.execute(
            select(*columns)
            .where(SampleRow.job_pk == job.id, _job_scope())
            .order_by(SampleRow.observed_at.desc(), SampleRow.id.desc())
            .limit(1)
        ).first()
        values: dict[str, Any] = dict(zip(_SUMMARY_COLUMNS, newest, strict=True)) if newest else dict.fromkeys(_SUMMARY_COLUMNS)
        n_runs, last_first = runs.get(job.id, (0, None))
        out.append(
            JobSummary(engine=job.engine, job_id=job.job_id, name=job.name, app_id=job.app_id, runs=n_runs,
                       last_run_started=last_first, **values)
        )
    return out


def newest_sample_time(session: Session) -> datetime | None:
    """The newest ``observed_at`` of any sample (``None`` for an empty store)."""
    value: datetime | None = session.scalar(select(func.max(SampleRow.observed_at)))
    return value


def series(
    session: Session,
    fields: Sequence[str],
    *,
    since: datetime,
    until: datetime | None = None,
    job_id: str | None = None,
    engine: str | None = None,
    job_scope_only: bool = True,
) -> list[tuple[Any, ...]]:
    """Rows ``(engine, job_id, run_id, observed_at, kind, scope_source, scope_partition, scope_subtask,
    *fields)`` observed in ``[since, until)``, by job then time.

    Args:
        fields: names from :data:`SERIES_FIELDS`.
        job_id / engine: only that job (or engine).
        job_scope_only: only whole-job samples (else also per source/partition/subtask ones).

    Raises:
        ValueError: an unknown field, or a naive time.
    """
    unknown = [f for f in fields if f not in SERIES_FIELDS]
    if unknown:
        raise ValueError(f"series: unknown field(s) {', '.join(unknown)}; known: {', '.join(SERIES_FIELDS)}")
    start = ensure_utc(since, "since")
    end = ensure_utc(until, "until")
    run = aliased(RunRow)
    stmt = (
        select(
            JobRow.engine, JobRow.job_id, run.run_id, SampleRow.observed_at, SampleRow.kind,
            SampleRow.scope_source, SampleRow.scope_partition, SampleRow.scope_subtask,
            *[getattr(SampleRow, f) for f in fields],
        )
        .join(JobRow, SampleRow.job_pk == JobRow.id)
        .outerjoin(run, SampleRow.run_pk == run.id)
        .where(SampleRow.observed_at >= start)
        .order_by(SampleRow.job_pk, SampleRow.observed_at, SampleRow.id)
    )
    if end is not None:
        stmt = stmt.where(SampleRow.observed_at < end)
    if job_id is not None:
        stmt = stmt.where(JobRow.job_id == job_id)
    if engine is not None:
        stmt = stmt.where(JobRow.engine == engine)
    if job_scope_only:
        stmt = stmt.where(_job_scope())
    return [tuple(row) for row in session.execute(stmt)]


@dataclass(frozen=True, slots=True)
class RunSpan:
    """One run of a job: its ``run_id`` and the first and last sample times (aware UTC)."""

    run_id: str
    first_seen: datetime
    last_seen: datetime


def job_runs(session: Session, engine: str, job_id: str) -> list[RunSpan]:
    """The job's runs, oldest first (a run after the first is a restart)."""
    stmt = (
        select(RunRow.run_id, RunRow.first_seen, RunRow.last_seen)
        .join(JobRow, RunRow.job_pk == JobRow.id)
        .where(JobRow.engine == engine, JobRow.job_id == job_id)
        .order_by(RunRow.first_seen, RunRow.id)
    )
    return [RunSpan(r, f, last) for r, f, last in session.execute(stmt)]


@dataclass(frozen=True, slots=True)
class StoredReport:
    """A scheduled health report as queued for delivery: the outbox row's receiver, state, creation time
    and the report document (:meth:`monitor.reports.HealthReport.to_json`)."""

    id: int
    receiver: str
    state: str
    created_at: datetime
    delivered_at: datetime | None
    document: dict[str, Any]


def stored_reports(session: Session, limit: int = 50) -> list[StoredReport]:
    """The newest ``limit`` scheduled reports in the outbox (any delivery state), newest first."""
    stmt = (
        select(OutboxRow)
        .where(OutboxRow.status == "report")
        .order_by(OutboxRow.created_at.desc(), OutboxRow.id.desc())
        .limit(limit)
    )
    return [
        StoredReport(r.id, r.receiver, r.state, r.created_at, r.delivered_at, dict(r.payload))
        for r in session.scalars(stmt)
    ]
