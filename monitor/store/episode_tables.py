"""The tables of migration ``0005_finding_episodes``: finding episodes and the links between them.

* ``finding_episodes``: one row per :class:`monitor.model.FindingEpisode`, keyed by its stable id
  (:func:`monitor.model.episode_id`: the finding's fingerprint and the instant it first held), so
  ``scan --db`` and the daemon store an episode once however often they read the same batches, and an open
  episode's row is extended in place.
* ``finding_episode_links``: ``cause_id`` caused ``effect_id`` (a stall following a future jump, drops
  behind a mis-dated row); both directions are read from here (``caused_by`` / ``causes``).

The ``alerts`` table's ``episode_id`` column (same migration, :class:`~monitor.store.alert_tables.AlertRow`)
names the alert's current or last episode. Rows are read and written only through
:mod:`monitor.store.episode_repo`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base
from monitor.store.types import UTCDateTime

__all__ = ["EPISODE_ID", "FindingEpisodeLinkRow", "FindingEpisodeRow"]

#: :func:`monitor.model.episode_id`: 32 hex digits.
EPISODE_ID = String(32)


class FindingEpisodeRow(Base):
    """One finding episode (see :class:`monitor.model.FindingEpisode` for each column's meaning; the job's
    ``engine``/``job_id``/``run_id``/``job_name`` and the scope's fields are columns, ``severity`` its
    label, ``ended_by`` the :class:`~monitor.model.EpisodeEnd` value or ``NULL`` while open)."""

    __tablename__ = "finding_episodes"
    __table_args__ = (
        Index("ix_finding_episodes_engine_job_id_first_at", "engine", "job_id", "first_at"),
        Index("ix_finding_episodes_last_at", "last_at"),
        Index("ix_finding_episodes_fingerprint_ended_by", "fingerprint", "ended_by"),
    )

    id: Mapped[str] = mapped_column(EPISODE_ID, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(16))
    rule: Mapped[str] = mapped_column(Text)
    engine: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    job_name: Mapped[str | None] = mapped_column(Text)
    scope_source: Mapped[str | None] = mapped_column(Text)
    scope_partition: Mapped[int | None] = mapped_column(BigInteger)
    scope_subtask: Mapped[int | None] = mapped_column(BigInteger)
    scope_operator: Mapped[str | None] = mapped_column(Text)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON)
    severity: Mapped[str] = mapped_column(String(16))
    first_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_at: Mapped[datetime] = mapped_column(UTCDateTime())
    first_batch_id: Mapped[int | None] = mapped_column(BigInteger)
    last_batch_id: Mapped[int | None] = mapped_column(BigInteger)
    message: Mapped[str] = mapped_column(Text)
    cause: Mapped[str | None] = mapped_column(Text)
    remedy: Mapped[str | None] = mapped_column(Text)
    notified: Mapped[bool] = mapped_column(Boolean)
    history: Mapped[bool] = mapped_column(Boolean)
    ended_by: Mapped[str | None] = mapped_column(String(16))
    details: Mapped[dict[str, Any]] = mapped_column(JSON)


class FindingEpisodeLinkRow(Base):
    """``cause_id`` caused ``effect_id``; deleted with either episode."""

    __tablename__ = "finding_episode_links"
    __table_args__ = (Index("ix_finding_episode_links_effect_id", "effect_id"),)

    cause_id: Mapped[str] = mapped_column(
        EPISODE_ID, ForeignKey("finding_episodes.id", ondelete="CASCADE"), primary_key=True
    )
    effect_id: Mapped[str] = mapped_column(
        EPISODE_ID, ForeignKey("finding_episodes.id", ondelete="CASCADE"), primary_key=True
    )
