"""An index of ``job_sources`` by target: each instance's evaluation reads only the jobs of the targets it
holds (:func:`monitor.store.fleet_repo.job_sources_of`), not the whole table.

Revision ID: 0007_job_sources_target
Revises: 0006_i16_fleet
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007_job_sources_target"
down_revision: str | Sequence[str] | None = "0006_i16_fleet"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_job_sources_target", "job_sources", ["target", "engine", "job_id"])


def downgrade() -> None:
    op.drop_index("ix_job_sources_target", table_name="job_sources")
