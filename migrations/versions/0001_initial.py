"""Initial schema: jobs, runs, samples, raw documents, collector cursors and collector errors.

Tables for alerts and the notification outbox come in the next revision (down_revision "0001_initial").
See monitor/store/tables.py for what each column means.

Revision ID: 0001_initial
Revises: (none)
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("engine", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("app_id", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("engine", "job_id", name="uq_jobs_engine_job_id"),
    )
    op.create_table(
        "runs",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("job_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.id"], name=op.f("fk_runs_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("job_pk", "run_id", name="uq_runs_job_pk_run_id"),
    )
    op.create_table(
        "samples",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("dedup_key", sa.String(length=64), nullable=False),
        sa.Column("job_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("job_name", sa.Text(), nullable=True),
        sa.Column("app_id", sa.Text(), nullable=True),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("collector", sa.Text(), nullable=False),
        sa.Column("scope_source", sa.Text(), nullable=True),
        sa.Column("scope_partition", sa.BigInteger(), nullable=True),
        sa.Column("scope_subtask", sa.BigInteger(), nullable=True),
        sa.Column("scope_operator", sa.Text(), nullable=True),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("watermark", sa.DateTime(timezone=True), nullable=True),
        sa.Column("event_time_min", sa.DateTime(timezone=True), nullable=True),
        sa.Column("event_time_max", sa.DateTime(timezone=True), nullable=True),
        sa.Column("event_time_avg", sa.DateTime(timezone=True), nullable=True),
        sa.Column("num_input_rows", sa.BigInteger(), nullable=True),
        sa.Column("input_rows_per_second", sa.Double(), nullable=True),
        sa.Column("processed_rows_per_second", sa.Double(), nullable=True),
        sa.Column("batch_duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("dropped_by_watermark", sa.BigInteger(), nullable=True),
        sa.Column("state_rows_total", sa.BigInteger(), nullable=True),
        sa.Column("state_rows_updated", sa.BigInteger(), nullable=True),
        sa.Column("state_rows_removed", sa.BigInteger(), nullable=True),
        sa.Column("state_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("lag_offsets", sa.BigInteger(), nullable=True),
        sa.Column("lag_seconds", sa.Double(), nullable=True),
        sa.Column("idle_ms", sa.BigInteger(), nullable=True),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.id"], name=op.f("fk_samples_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["run_pk"], ["runs.id"], name=op.f("fk_samples_run_pk_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
        sa.UniqueConstraint("dedup_key", name=op.f("uq_samples_dedup_key")),
    )
    op.create_index("ix_samples_job_pk_observed_at", "samples", ["job_pk", "observed_at"], unique=False)
    op.create_table(
        "raw_documents",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("dedup_key", sa.String(length=64), nullable=False),
        sa.Column("job_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("job_name", sa.Text(), nullable=True),
        sa.Column("app_id", sa.Text(), nullable=True),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("collector", sa.Text(), nullable=False),
        sa.Column("codec", sa.String(length=16), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_pk"], ["jobs.id"], name=op.f("fk_raw_documents_job_pk_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["run_pk"], ["runs.id"], name=op.f("fk_raw_documents_run_pk_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_raw_documents")),
        sa.UniqueConstraint("dedup_key", name=op.f("uq_raw_documents_dedup_key")),
    )
    op.create_index(
        "ix_raw_documents_job_pk_observed_at", "raw_documents", ["job_pk", "observed_at"], unique=False
    )
    op.create_table(
        "collector_cursors",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("collector", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_collector_cursors")),
        sa.UniqueConstraint("collector", "target", name="uq_collector_cursors_collector_target"),
    )
    op.create_table(
        "collector_errors",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("dedup_key", sa.String(length=64), nullable=False),
        sa.Column("collector", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retryable", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_collector_errors")),
        sa.UniqueConstraint("dedup_key", name=op.f("uq_collector_errors_dedup_key")),
    )
    op.create_index(
        "ix_collector_errors_collector_observed_at",
        "collector_errors",
        ["collector", "observed_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_collector_errors_collector_observed_at", table_name="collector_errors")
    op.drop_table("collector_errors")
    op.drop_table("collector_cursors")
    op.drop_index("ix_raw_documents_job_pk_observed_at", table_name="raw_documents")
    op.drop_table("raw_documents")
    op.drop_index("ix_samples_job_pk_observed_at", table_name="samples")
    op.drop_table("samples")
    op.drop_table("runs")
    op.drop_table("jobs")
