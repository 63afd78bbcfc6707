"""Alerts, the notification outbox, silences and the notification log.

See monitor/store/alert_tables.py for what each column means. Hand-written; constraint names follow the
metadata naming convention (``pk_<table>``, ``uq_<table>_<column>``) or are given explicitly.

Revision ID: 0002_alerts
Revises: 0001_initial
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_alerts"
down_revision: str | Sequence[str] | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _ts(name: str, nullable: bool = True) -> sa.Column[sa.DateTime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("fingerprint", sa.String(length=16), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        _ts("active_at", nullable=False),
        _ts("fired_at"),
        _ts("resolved_at"),
        _ts("last_evaluated_at"),
        _ts("keep_firing_since"),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint", name=op.f("pk_alerts")),
    )
    op.create_index("ix_alerts_state", "alerts", ["state"], unique=False)
    op.create_index("ix_alerts_group_key", "alerts", ["group_key"], unique=False)

    op.create_table(
        "outbox",
        sa.Column("id", _BIGINT_PK, autoincrement=True, nullable=False),
        sa.Column("receiver", sa.String(length=200), nullable=False),
        sa.Column("fingerprint", sa.String(length=16), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("idempotency_key", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        _ts("created_at", nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _ts("next_attempt_at", nullable=False),
        sa.Column("batch_key", sa.String(length=32), nullable=True),
        _ts("delivered_at"),
        _ts("gave_up_at"),
        _ts("suppressed_at"),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
        sa.UniqueConstraint("receiver", "idempotency_key", name="uq_outbox_receiver_idempotency_key"),
    )
    op.create_index(
        "ix_outbox_state_next_attempt_at", "outbox", ["state", "next_attempt_at"], unique=False
    )
    op.create_index("ix_outbox_receiver_fingerprint", "outbox", ["receiver", "fingerprint"], unique=False)

    op.create_table(
        "silences",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("matchers", sa.JSON(), nullable=False),
        _ts("starts_at", nullable=False),
        _ts("ends_at", nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        _ts("created_at", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_silences")),
    )
    op.create_index("ix_silences_ends_at", "silences", ["ends_at"], unique=False)

    op.create_table(
        "notification_log",
        sa.Column("id", _BIGINT_PK, autoincrement=True, nullable=False),
        sa.Column("receiver", sa.String(length=200), nullable=False),
        sa.Column("fingerprint", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        _ts("at", nullable=False),
        sa.Column("idempotency_key", sa.String(length=32), nullable=False),
        sa.Column("outbox_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_log")),
    )
    op.create_index(
        "ix_notification_log_receiver_fingerprint",
        "notification_log",
        ["receiver", "fingerprint", "at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_notification_log_receiver_fingerprint", table_name="notification_log")
    op.drop_table("notification_log")
    op.drop_index("ix_silences_ends_at", table_name="silences")
    op.drop_table("silences")
    op.drop_index("ix_outbox_receiver_fingerprint", table_name="outbox")
    op.drop_index("ix_outbox_state_next_attempt_at", table_name="outbox")
    op.drop_table("outbox")
    op.drop_index("ix_alerts_group_key", table_name="alerts")
    op.drop_index("ix_alerts_state", table_name="alerts")
    op.drop_table("alerts")
