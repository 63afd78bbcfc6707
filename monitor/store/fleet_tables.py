"""The tables of migrations ``0006_i16_fleet`` and ``0007_job_sources_target``: the instances of a fleet, their leases, and which target
each job's data comes from.

* ``fleet_instances``: one row per ``tidegauge run`` instance (``--instance``, default ``host:pid``), with
  its last heartbeat; an instance whose heartbeat is older than its ``ttl_ms`` is gone.
* ``leases``: one row per leased resource, ``kind`` ``target`` (a configured target, polled only by its
  holder; the holder also evaluates the jobs whose data that target brings) or ``receiver`` (delivered
  only by its holder). ``holder`` keeps it until ``lease_until``, renewed with each poll/delivery; an
  expired lease may be taken by any instance (``SELECT ... FOR UPDATE SKIP LOCKED``).
* ``job_sources``: job (engine, job id) -> the target whose polls stored its samples (``ingest`` for the
  listener endpoint), so every instance knows which jobs the holder of a target evaluates.

Rows are read and written only through :mod:`monitor.store.fleet_repo`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base
from monitor.store.types import UTCDateTime

__all__ = ["FleetInstanceRow", "JobSourceRow", "LeaseRow"]

_NAME = String(200)


class FleetInstanceRow(Base):
    """One instance of the fleet and its heartbeat."""

    __tablename__ = "fleet_instances"

    name: Mapped[str] = mapped_column(_NAME, primary_key=True)
    host: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(BigInteger)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_heartbeat: Mapped[datetime] = mapped_column(UTCDateTime)
    ttl_ms: Mapped[int] = mapped_column(Integer)


class LeaseRow(Base):
    """One leased resource (a target or a receiver) and its holder until ``lease_until``."""

    __tablename__ = "leases"
    __table_args__ = (Index("ix_leases_kind_holder", "kind", "holder"),)

    name: Mapped[str] = mapped_column(_NAME, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    collector: Mapped[str | None] = mapped_column(Text)
    holder: Mapped[str | None] = mapped_column(_NAME)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    held_since: Mapped[datetime | None] = mapped_column(UTCDateTime)


class JobSourceRow(Base):
    """Job (engine, job id) whose samples target ``target`` stored."""

    __tablename__ = "job_sources"
    #: an instance reads the jobs of the targets it holds (migration 0007)
    __table_args__ = (Index("ix_job_sources_target", "target", "engine", "job_id"),)

    engine: Mapped[str] = mapped_column(String(16), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    target: Mapped[str] = mapped_column(_NAME, primary_key=True)
