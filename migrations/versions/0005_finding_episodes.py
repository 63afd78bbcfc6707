"""Finding episodes kept as history: the ``finding_episodes`` and ``finding_episode_links`` tables, and
the ``alerts.episode_id`` column naming an alert's current or last episode.

See monitor/store/episode_tables.py for what each column means. Hand-written; constraint names follow the
metadata naming convention (``pk_<table>``, ``fk_<table>_<column>_<referred table>``) or are given
explicitly.

Revision ID: 0005_finding_episodes
Revises: 0004_flink_sample_fields
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_finding_episodes"
down_revision: str | Sequence[str] | None = "0004_flink_sample_fields"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str) -> sa.Column[sa.DateTime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "finding_episodes",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("fingerprint", sa.String(length=16), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("engine", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("job_name", sa.Text(), nullable=True),
        sa.Column("scope_source", sa.Text(), nullable=True),
        sa.Column("scope_partition", sa.BigInteger(), nullable=True),
        sa.Column("scope_subtask", sa.BigInteger(), nullable=True),
        sa.Column("scope_operator", sa.Text(), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        _ts("first_at"),
        _ts("last_at"),
        sa.Column("first_batch_id", sa.BigInteger(), nullable=True),
        sa.Column("last_batch_id", sa.BigInteger(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("cause", sa.Text(), nullable=True),
        sa.Column("remedy", sa.Text(), nullable=True),
        sa.Column("notified", sa.Boolean(), nullable=False),
        sa.Column("history", sa.Boolean(), nullable=False),
        sa.Column("ended_by", sa.String(length=16), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_finding_episodes")),
    )
    op.create_index(
        "ix_finding_episodes_engine_job_id_first_at", "finding_episodes", ["engine", "job_id", "first_at"]
    )
    op.create_index("ix_finding_episodes_last_at", "finding_episodes", ["last_at"])
    op.create_index("ix_finding_episodes_fingerprint_ended_by", "finding_episodes", ["fingerprint", "ended_by"])
    op.create_table(
        "finding_episode_links",
        sa.Column("cause_id", sa.String(length=32), nullable=False),
        sa.Column("effect_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["cause_id"], ["finding_episodes.id"], ondelete="CASCADE",
            name=op.f("fk_finding_episode_links_cause_id_finding_episodes"),
        ),
        sa.ForeignKeyConstraint(
            ["effect_id"], ["finding_episodes.id"], ondelete="CASCADE",
            name=op.f("fk_finding_episode_links_effect_id_finding_episodes"),
        ),
        sa.PrimaryKeyConstraint("cause_id", "effect_id", name=op.f("pk_finding_episode_links")),
    )  # fmt: skip
    op.create_index("ix_finding_episode_links_effect_id", "finding_episode_links", ["effect_id"])
    with op.batch_alter_table("alerts") as batch:
        batch.add_column(sa.Column("episode_id", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("alerts") as batch:
        batch.drop_column("episode_id")
    op.drop_index("ix_finding_episode_links_effect_id", table_name="finding_episode_links")
    op.drop_table("finding_episode_links")
    op.drop_index("ix_finding_episodes_fingerprint_ended_by", table_name="finding_episodes")
    op.drop_index("ix_finding_episodes_last_at", table_name="finding_episodes")
    op.drop_index("ix_finding_episodes_engine_job_id_first_at", table_name="finding_episodes")
    op.drop_table("finding_episodes")
