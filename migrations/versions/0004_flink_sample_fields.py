"""Sample columns for Flink: failed checkpoints (a counter) and the +infinity watermark flag (both
nullable: ``NULL`` is *unknown*, as in :class:`monitor.model.Sample`).

See monitor/store/tables.py (``SampleRow``) for what each column means.

Revision ID: 0004_flink_sample_fields
Revises: 0003_sample_rule_inputs
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_flink_sample_fields"
down_revision: str | Sequence[str] | None = "0003_sample_rule_inputs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("checkpoints_failed", sa.BigInteger()),
    ("watermark_end_of_input", sa.Boolean()),
)


def upgrade() -> None:
    with op.batch_alter_table("samples") as batch:
        for name, type_ in _COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("samples") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
