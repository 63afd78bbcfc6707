"""Sample columns the rules need: Kafka committed and log-end offsets, Flink back-pressure ratio and
restart count (all nullable: ``NULL`` is *unknown*, as in :class:`monitor.model.Sample`).

See monitor/store/tables.py (``SampleRow``) for what each column means.

Revision ID: 0003_sample_rule_inputs
Revises: 0002_alerts
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_sample_rule_inputs"
down_revision: str | Sequence[str] | None = "0002_alerts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("committed_offset", sa.BigInteger()),
    ("log_end_offset", sa.BigInteger()),
    ("backpressure_ratio", sa.Double()),
    ("restart_count", sa.BigInteger()),
)


def upgrade() -> None:
    with op.batch_alter_table("samples") as batch:
        for name, type_ in _COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("samples") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
