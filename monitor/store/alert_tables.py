"""The tables of migration ``0002_alerts``: alerts, the notification outbox, silences and the
notification log.

* ``alerts``: one row per alert fingerprint with its lifecycle state and every timestamp
  (:class:`monitor.alerts.lifecycle.Alert`), so a restart neither re-fires nor forgets.
* ``outbox``: one row per (receiver, alert transition) that must be delivered; written in the same
  transaction as the ``alerts`` row by :func:`monitor.store.alert_repo.apply_transitions`. ``state`` is
  ``pending`` until the dispatcher records ``delivered`` (after a 2xx), ``gave_up`` (non-retryable error
  or too old) or ``suppressed`` (silenced). ``batch_key`` is set when the row is first put into a batch
  and stays for every retry (the batch's ``Idempotency-Key``).
* ``silences``: matchers (JSON list of ``{"name","op","value"}``) and a time window.
* ``notification_log``: one row per finished outbox row (outcome and time); the dispatcher reads it for
  ``repeat_interval``.

Rows are read and written only through :mod:`monitor.store.alert_repo`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base
from monitor.store.types import BigIntPK, UTCDateTime

__all__ = ["AlertRow", "NotificationLogRow", "OutboxRow", "SilenceRow"]

_FP = String(16)  # monitor.model.fingerprint: 16 hex digits
_KEY = String(32)  # monitor.alerts.notification keys: 32 hex digits
_NAME = String(200)


class AlertRow(Base):
    """One alert (see :class:`monitor.alerts.lifecycle.Alert` for the meaning of each column)."""

    __tablename__ = "alerts"
    __table_args__ = (Index("ix_alerts_state", "state"), Index("ix_alerts_group_key", "group_key"))

    fingerprint: Mapped[str] = mapped_column(_FP, primary_key=True)
    rule: Mapped[str] = mapped_column(Text)
    group_key: Mapped[str] = mapped_column(Text)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON)
    severity: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    active_at: Mapped[datetime] = mapped_column(UTCDateTime)
    fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_evaluated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    keep_firing_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    message: Mapped[str] = mapped_column(Text)
    annotations: Mapped[dict[str, Any]] = mapped_column(JSON)
    # 0005_finding_episodes: the current or last finding episode (monitor.store.episode_tables); NULL for an
    # alert last stepped before 0005 and for one whose episode retention deleted
    episode_id: Mapped[str | None] = mapped_column(String(32))


class OutboxRow(Base):
    """One notification of one alert transition to one receiver, until it is delivered or given up.

    ``payload`` is :meth:`monitor.alerts.notification.AlertNotification.to_json`. ``idempotency_key`` is
    unique per receiver. ``attempts`` counts sends made (the last one may have succeeded);
    ``next_attempt_at`` is when the row is due.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        UniqueConstraint("receiver", "idempotency_key", name="uq_outbox_receiver_idempotency_key"),
        Index("ix_outbox_state_next_attempt_at", "state", "next_attempt_at"),
        Index("ix_outbox_receiver_fingerprint", "receiver", "fingerprint"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    receiver: Mapped[str] = mapped_column(_NAME)
    fingerprint: Mapped[str] = mapped_column(_FP)
    group_key: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    idempotency_key: Mapped[str] = mapped_column(_KEY)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    batch_key: Mapped[str | None] = mapped_column(_KEY)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    gave_up_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    suppressed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)


class SilenceRow(Base):
    """One silence (:class:`monitor.alerts.silences.Silence`)."""

    __tablename__ = "silences"
    __table_args__ = (Index("ix_silences_ends_at", "ends_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    matchers: Mapped[list[dict[str, str]]] = mapped_column(JSON)
    starts_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ends_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str] = mapped_column(Text)
    comment: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class NotificationLogRow(Base):
    """One finished notification: ``outcome`` is ``delivered``, ``gave_up`` or ``suppressed``."""

    __tablename__ = "notification_log"
    __table_args__ = (Index("ix_notification_log_receiver_fingerprint", "receiver", "fingerprint", "at"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    receiver: Mapped[str] = mapped_column(_NAME)
    fingerprint: Mapped[str] = mapped_column(_FP)
    status: Mapped[str] = mapped_column(String(16))
    outcome: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    idempotency_key: Mapped[str] = mapped_column(_KEY)
    outbox_id: Mapped[int] = mapped_column(BigInteger)
