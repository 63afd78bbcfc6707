"""The tables of the first migration (``0001_initial``): jobs, runs, samples, raw documents, collector
cursors and collector errors.

Rows are written and read through :mod:`monitor.store.repo`; nothing outside the store imports these
classes. Every append-only table carries a ``dedup_key`` (SHA-256 hex of the row's identity, see
:mod:`monitor.store.keys`) under a unique constraint, so re-reading the same input does not duplicate rows.
A hash is used rather than a composite unique constraint because the identity has nullable parts
(``run_id``, ``batch_id``, scope fields) and SQL unique constraints treat ``NULL`` values as distinct.

All ``datetime`` columns are :class:`~monitor.store.types.UTCDateTime` (aware UTC in and out).
Multi-column constraints are named explicitly (the metadata naming convention names single-column ones).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base
from monitor.store.types import BigIntPK, UTCDateTime

__all__ = ["CollectorCursorRow", "CollectorErrorRow", "JobRow", "RawDocumentRow", "RunRow", "SampleRow"]

_KEY = String(64)  # SHA-256 hex digest


class JobRow(Base):
    """One streaming job (:class:`monitor.model.JobRef` without ``run_id``); unique per engine + job id.

    ``name`` and ``app_id`` hold the most recently saved non-null values (samples keep their own copy, so
    a sample round-trips with the name/app id it was observed with).
    """

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("engine", "job_id", name="uq_jobs_engine_job_id"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    engine: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[str] = mapped_column(Text)
    name: Mapped[str | None] = mapped_column(Text)
    app_id: Mapped[str | None] = mapped_column(Text)


class RunRow(Base):
    """One run of a job (Spark query ``runId``, new on every restart); unique per job + run id.

    ``first_seen`` / ``last_seen``: earliest and latest ``observed_at`` saved for the run (aware UTC).
    """

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("job_pk", "run_id", name="uq_runs_job_pk_run_id"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(Text)
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime())


class SampleRow(Base):
    """One :class:`monitor.model.Sample`: every field is a column (scope fields prefixed ``scope_``).

    ``job_name`` / ``app_id`` are the :class:`~monitor.model.JobRef` name and app id as observed with this
    sample; ``run_pk`` is ``NULL`` when the sample has no ``run_id``. Units follow the model's field names.
    """

    __tablename__ = "samples"
    __table_args__ = (Index("ix_samples_job_pk_observed_at", "job_pk", "observed_at"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    dedup_key: Mapped[str] = mapped_column(_KEY, unique=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    run_pk: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    job_name: Mapped[str | None] = mapped_column(Text)
    app_id: Mapped[str | None] = mapped_column(Text)
    observed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    kind: Mapped[str] = mapped_column(String(16))
    collector: Mapped[str] = mapped_column(Text)
    scope_source: Mapped[str | None] = mapped_column(Text)
    scope_partition: Mapped[int | None] = mapped_column(BigInteger)
    scope_subtask: Mapped[int | None] = mapped_column(BigInteger)
    scope_operator: Mapped[str | None] = mapped_column(Text)
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    watermark: Mapped[datetime | None] = mapped_column(UTCDateTime())
    event_time_min: Mapped[datetime | None] = mapped_column(UTCDateTime())
    event_time_max: Mapped[datetime | None] = mapped_column(UTCDateTime())
    event_time_avg: Mapped[datetime | None] = mapped_column(UTCDateTime())
    num_input_rows: Mapped[int | None] = mapped_column(BigInteger)
    input_rows_per_second: Mapped[float | None] = mapped_column(Double)
    processed_rows_per_second: Mapped[float | None] = mapped_column(Double)
    batch_duration_ms: Mapped[int | None] = mapped_column(BigInteger)
    dropped_by_watermark: Mapped[int | None] = mapped_column(BigInteger)
    state_rows_total: Mapped[int | None] = mapped_column(BigInteger)
    state_rows_updated: Mapped[int | None] = mapped_column(BigInteger)
    state_rows_removed: Mapped[int | None] = mapped_column(BigInteger)
    state_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    lag_offsets: Mapped[int | None] = mapped_column(BigInteger)
    lag_seconds: Mapped[float | None] = mapped_column(Double)
    idle_ms: Mapped[int | None] = mapped_column(BigInteger)
    # 0003_sample_offsets
    committed_offset: Mapped[int | None] = mapped_column(BigInteger)
    log_end_offset: Mapped[int | None] = mapped_column(BigInteger)
    backpressure_ratio: Mapped[float | None] = mapped_column(Double)
    restart_count: Mapped[int | None] = mapped_column(BigInteger)
    # 0004_flink_sample_fields
    checkpoints_failed: Mapped[int | None] = mapped_column(BigInteger)
    watermark_end_of_input: Mapped[bool | None] = mapped_column(Boolean)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON)


class RawDocumentRow(Base):
    """One raw engine document (a Spark progress JSON, a Flink REST response...) kept for replay.

    ``payload`` is the canonical JSON (UTF-8, sorted keys) compressed with ``codec`` (``"zstd"``);
    ``content_sha256`` is the hash of the uncompressed canonical JSON.
    """

    __tablename__ = "raw_documents"
    __table_args__ = (Index("ix_raw_documents_job_pk_observed_at", "job_pk", "observed_at"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    dedup_key: Mapped[str] = mapped_column(_KEY, unique=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    run_pk: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    job_name: Mapped[str | None] = mapped_column(Text)
    app_id: Mapped[str | None] = mapped_column(Text)
    observed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    kind: Mapped[str] = mapped_column(Text)
    collector: Mapped[str] = mapped_column(Text)
    codec: Mapped[str] = mapped_column(String(16))
    content_sha256: Mapped[str] = mapped_column(_KEY)
    payload: Mapped[bytes] = mapped_column(LargeBinary)


class CollectorCursorRow(Base):
    """Where a collector stopped reading one target (e.g. byte offset + file identity of an event log).

    ``state`` is opaque JSON owned by the collector; unique per collector + target.
    """

    __tablename__ = "collector_cursors"
    __table_args__ = (UniqueConstraint("collector", "target", name="uq_collector_cursors_collector_target"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    collector: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class CollectorErrorRow(Base):
    """One :class:`monitor.model.CollectorError` (partial failure of a poll, kept as data)."""

    __tablename__ = "collector_errors"
    __table_args__ = (Index("ix_collector_errors_collector_observed_at", "collector", "observed_at"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    dedup_key: Mapped[str] = mapped_column(_KEY, unique=True)
    collector: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text)
    message: Mapped[str] = mapped_column(Text)
    observed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    retryable: Mapped[bool] = mapped_column(Boolean)
