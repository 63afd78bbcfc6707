"""A fleet of daemons on one PostgreSQL: instances and their heartbeats, leases of targets and receivers,
and the target each job's data comes from.

See monitor/store/fleet_tables.py for what each column means. Hand-written; constraint names follow the
metadata naming convention (``pk_<table>``).

Revision ID: 0006_i16_fleet
Revises: 0005_finding_episodes
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_i16_fleet"
down_revision: str | Sequence[str] | None = "0005_finding_episodes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fleet_instances",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_heartbeat", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ttl_ms", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_fleet_instances")),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("collector", sa.Text(), nullable=True),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("held_since", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )
    op.create_index("ix_leases_kind_holder", "leases", ["kind", "holder"])
    op.create_table(
        "job_sources",
        sa.Column("engine", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=512), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("engine", "job_id", "target", name=op.f("pk_job_sources")),
    )


def downgrade() -> None:
    op.drop_table("job_sources")
    op.drop_index("ix_leases_kind_holder", table_name="leases")
    op.drop_table("leases")
    op.drop_table("fleet_instances")
