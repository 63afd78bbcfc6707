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

from sqlalchemy import Text, and_, func, select, type_coerce
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
    "watermark_points",
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


_TIME_FIELDS: Final = frozenset({"observed_at", "watermark", "event_time_min", "event_time_max"})


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
    newest = aliased(SampleRow)
    newest_id = (
        select(newest.id)
        .where(
            newest.job_pk == JobRow.id,
            newest.scope_source.is_(None),
            newest.scope_partition.is_(None),
            newest.scope_subtask.is_(None),
            newest.scope_operator.is_(None),
        )
        .order_by(newest.observed_at.desc(), newest.id.desc())
        .limit(1)
        .correlate(JobRow)
        .scalar_subquery()
    )
    # one statement: per job an index seek for its newest whole-job sample (SQLite and PostgreSQL)
    pairs: dict[int, int | None] = {int(pk): sid for pk, sid in session.execute(select(JobRow.id, newest_id))}
    wanted = [i for i in pairs.values() if i is not None]
    columns = [getattr(SampleRow, c) for c in _SUMMARY_COLUMNS]
    rows: dict[int, dict[str, Any]] = {}
    for start_at in range(0, len(wanted), 500):
        chunk = wanted[start_at : start_at + 500]
        for sample_id, *measures in session.execute(select(SampleRow.id, *columns).where(SampleRow.id.in_(chunk))):
            rows[sample_id] = dict(zip(_SUMMARY_COLUMNS, measures, strict=True))
    out: list[JobSummary] = []
    for job in session.scalars(select(JobRow).order_by(JobRow.engine, JobRow.job_id)):
        sid = pairs.get(job.id)
        found: dict[str, Any] = rows.get(sid, {}) if sid is not None else {}
        values = {c: found.get(c) for c in _SUMMARY_COLUMNS}
        n_runs, last_first = runs.get(job.id, (0, None))
        out.append(
            JobSummary(engine=job.engine, job_id=job.job_id, name=job.name, app_id=job.app_id, runs=n_runs,
                       last_run_started=last_first, **values)
        )
    return out


def newest_sample_time(session: Session) -> datetime | None:
    """The newest ``observed_at`` of any sample (``None`` for an empty store): one index seek per job."""
    newest = (
        select(func.max(SampleRow.observed_at)).where(SampleRow.job_pk == JobRow.id).correlate(JobRow).scalar_subquery()
    )
    value: datetime | None = session.scalar(select(func.max(newest)))
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
    raw_times: bool = False,
) -> list[tuple[Any, ...]]:
    """Rows ``(engine, job_id, run_id, observed_at, kind, scope_source, scope_partition, scope_subtask,
    *fields)`` observed in ``[since, until)``, by job then time.

    Args:
        fields: names from :data:`SERIES_FIELDS`.
        job_id / engine: only that job (or engine).
        job_scope_only: only whole-job samples (else also per source/partition/subtask ones).
        raw_times: return ``observed_at`` and the time fields as the driver gives them (naive-UTC text on
            SQLite, aware datetimes on PostgreSQL) for vectorised parsing (``pandas.to_datetime(utc=True)``),
            skipping the per-value conversion of :class:`~monitor.store.types.UTCDateTime`.

    Raises:
        ValueError: an unknown field, or a naive time.
    """
    unknown = [f for f in fields if f not in SERIES_FIELDS]
    if unknown:
        raise ValueError(f"series: unknown field(s) {', '.join(unknown)}; known: {', '.join(SERIES_FIELDS)}")
    start = ensure_utc(since, "since")
    end = ensure_utc(until, "until")
    run = aliased(RunRow)

    def column(name: str) -> Any:
        col = getattr(SampleRow, name)
        if raw_times and name in _TIME_FIELDS:
            return type_coerce(col, Text).label(name)
        return col

    stmt = (
        select(
            JobRow.engine, JobRow.job_id, run.run_id, column("observed_at"), SampleRow.kind,
            SampleRow.scope_source, SampleRow.scope_partition, SampleRow.scope_subtask,
            *[column(f) for f in fields],
        )
        .join(JobRow, SampleRow.job_pk == JobRow.id)
        .outerjoin(run, SampleRow.run_pk == run.id)
        .where(SampleRow.observed_at >= start)
        .order_by(SampleRow.job_pk, SampleRow.observed_at, SampleRow.id)
    )
    if end is not None:
        stmt = stmt.where(SampleRow.observed_at < end)
    # Filter on job_pk values so the (job_pk, observed_at) index serves every job's time range (a range
    # on observed_at alone would scan the whole table).
    jobs = select(JobRow.id)
    if job_id is not None:
        jobs = jobs.where(JobRow.job_id == job_id)
    if engine is not None:
        jobs = jobs.where(JobRow.engine == engine)
    if job_scope_only:
        stmt = stmt.where(_job_scope())
    pks = list(session.scalars(jobs))
    out: list[tuple[Any, ...]] = []
    for start_at in range(0, len(pks), 500):
        chunk = stmt.where(SampleRow.job_pk.in_(pks[start_at : start_at + 500]))
        out.extend(tuple(row) for row in session.execute(chunk))
    return out


def watermark_points(session: Session, since: datetime) -> list[tuple[str, str, Any, Any]]:
    """Every job's whole-job ``(engine, job_id, observed_at, watermark)`` from ``since`` on, by job then
    time, with the times as the driver gives them (see ``raw_times`` of :func:`series`): the lean query
    behind the fleet's sparklines (Core execution, no run join).

    Raises:
        ValueError: ``since`` is naive.
    """
    start = ensure_utc(since, "since")
    jobs = {pk: (engine, job_id) for pk, engine, job_id in session.execute(select(JobRow.id, JobRow.engine, JobRow.job_id))}
    stmt = (
        select(SampleRow.job_pk, type_coerce(SampleRow.observed_at, Text), type_coerce(SampleRow.watermark, Text))
        .where(SampleRow.observed_at >= start, SampleRow.watermark.is_not(None), _job_scope())
        .order_by(SampleRow.job_pk, SampleRow.observed_at)
    )
    pks = list(jobs)
    out: list[tuple[str, str, Any, Any]] = []
    connection = session.connection()
    for start_at in range(0, len(pks), 500):
        for pk, observed, watermark in connection.execute(stmt.where(SampleRow.job_pk.in_(pks[start_at : start_at + 500]))):
            engine, job_id = jobs[pk]
            out.append((engine, job_id, observed, watermark))
    return out


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
    and the report document (:meth:`monitor.reports.scheduled.HealthReport.to_json`)."""

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
