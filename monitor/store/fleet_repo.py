"""Repository functions of a fleet of daemons on one database: heartbeats, leases, job sources.

PostgreSQL is the coordinator (as job queues such as procrastinate and the Flink operator's leader lease
use it): a lease is a row with a ``holder`` and ``lease_until``; an instance takes free or expired rows with
``SELECT ... FOR UPDATE SKIP LOCKED`` (two instances never take the same row, and a row whose holder is
writing a poll or an evaluation right now, and so holds its row lock, is skipped), renews them with an
``UPDATE ... WHERE holder = me AND lease_until >= now`` inside the transaction that stores what it did (so a
lost lease stores nothing), and releases them. On SQLite (one instance only) ``FOR UPDATE`` is not emitted
and the same statements hold all leases for the one instance.

Like :mod:`monitor.store.repo`, every function takes a session and does not commit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from monitor.store.fleet_tables import FleetInstanceRow, JobSourceRow, LeaseRow
from monitor.store.upsert import chunks, insert_ignoring

__all__ = [
    "InstanceInfo",
    "LeaseInfo",
    "acquire_leases",
    "define_leases",
    "heartbeat",
    "held_counts",
    "job_sources_of",
    "leave_fleet",
    "list_instances",
    "list_leases",
    "lock_held_leases",
    "record_job_sources",
    "release_leases",
    "renew_leases",
    "sourced_jobs",
]


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """One instance as stored: name, host, pid, start, last heartbeat (aware UTC), heartbeat ttl."""

    name: str
    host: str
    pid: int
    started_at: datetime
    last_heartbeat: datetime
    ttl: timedelta

    def alive(self, now: datetime) -> bool:
        """Whether its last heartbeat is within its ttl of ``now``."""
        return now - self.last_heartbeat <= self.ttl


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """One lease as stored (``holder``/``lease_until``/``held_since`` ``None`` when free)."""

    name: str
    kind: str
    collector: str | None
    holder: str | None
    lease_until: datetime | None
    held_since: datetime | None

    @property
    def resource(self) -> str:
        """The target's or receiver's name (the lease's ``name`` is ``<kind>/<resource>``)."""
        return self.name.split("/", 1)[-1]

    def held_by(self, now: datetime) -> str | None:
        """The holder if the lease has not expired at ``now``, else ``None``."""
        if self.holder is None or self.lease_until is None or self.lease_until < now:
            return None
        return self.holder


def heartbeat(session: Session, name: str, host: str, pid: int, now: datetime, ttl: timedelta) -> None:
    """Insert or refresh instance ``name``'s row with ``last_heartbeat = now`` (a new ``pid`` or ``host``
    means a restart under the same name: ``started_at`` becomes ``now``)."""
    row = session.get(FleetInstanceRow, name, with_for_update=True)
    ttl_ms = int(ttl.total_seconds() * 1000)
    if row is None:
        insert_ignoring(
            session,
            FleetInstanceRow,
            [{"name": name, "host": host, "pid": pid, "started_at": now, "last_heartbeat": now, "ttl_ms": ttl_ms}],
            ["name"],
        )
        return
    if (row.host, row.pid) != (host, pid):
        row.host, row.pid, row.started_at = host, pid, now
    row.last_heartbeat, row.ttl_ms = now, ttl_ms
    session.flush()


def leave_fleet(session: Session, name: str, now: datetime) -> int:
    """Instance ``name`` stops: release its leases (free at once for the others) and drop its row.
    Returns the number of leases released."""
    released = session.execute(
        update(LeaseRow)
        .where(LeaseRow.holder == name)
        .values(holder=None, lease_until=now, held_since=None)
        .returning(LeaseRow.name)
    ).all()
    session.execute(delete(FleetInstanceRow).where(FleetInstanceRow.name == name))
    return len(released)


def list_instances(session: Session) -> list[InstanceInfo]:
    """Every stored instance, by name."""
    rows = session.scalars(select(FleetInstanceRow).order_by(FleetInstanceRow.name))
    return [
        InstanceInfo(r.name, r.host, int(r.pid), r.started_at, r.last_heartbeat, timedelta(milliseconds=r.ttl_ms))
        for r in rows
    ]


def list_leases(session: Session, kind: str | None = None) -> list[LeaseInfo]:
    """Every lease (of ``kind`` if given), by name."""
    query = select(LeaseRow).order_by(LeaseRow.name)
    if kind is not None:
        query = query.where(LeaseRow.kind == kind)
    return [
        LeaseInfo(r.name, r.kind, r.collector, r.holder, r.lease_until, r.held_since) for r in session.scalars(query)
    ]


def define_leases(session: Session, kind: str, resources: Mapping[str, str | None]) -> None:
    """Make sure a lease row exists for each resource name (-> its collector) of ``kind`` (free when new)."""
    rows = [
        {"name": name, "kind": kind, "collector": collector, "holder": None, "lease_until": None, "held_since": None}
        for name, collector in sorted(resources.items())
    ]
    insert_ignoring(session, LeaseRow, rows, ["name"])


def held_counts(session: Session, kind: str, now: datetime) -> dict[str, int]:
    """Unexpired leases of ``kind`` at ``now`` per holder."""
    query = (
        select(LeaseRow.holder, func.count())
        .where(LeaseRow.kind == kind, LeaseRow.holder.is_not(None), LeaseRow.lease_until >= now)
        .group_by(LeaseRow.holder)
    )
    return {str(holder): int(count) for holder, count in session.execute(query)}


def renew_leases(
    session: Session, holder: str, names: Collection[str], now: datetime, until: Mapping[str, datetime]
) -> set[str]:
    """Extend ``holder``'s unexpired leases among ``names`` to ``until[name]``; returns those renewed (a
    lease that expired, or that another instance took, is not renewed: it is lost). The updated rows stay
    locked until the transaction ends, so no instance takes them meanwhile."""
    if not names:
        return set()
    renewed: set[str] = set()
    for name in sorted(names):
        row = session.execute(
            update(LeaseRow)
            .where(LeaseRow.name == name, LeaseRow.holder == holder, LeaseRow.lease_until >= now)
            .values(lease_until=until[name])
            .returning(LeaseRow.name)
        ).first()
        if row is not None:
            renewed.add(name)
    return renewed


def lock_held_leases(session: Session, holder: str, names: Collection[str], now: datetime) -> set[str]:
    """Which of ``names`` ``holder`` holds unexpired at ``now``, those rows locked ``FOR KEY SHARE`` until
    the transaction ends (PostgreSQL row locks: no other instance takes them meanwhile, since taking one is
    ``FOR UPDATE SKIP LOCKED``, which skips a row locked this way; but the holder's own polls and fleet tick
    still renew them, an ``UPDATE`` of non-key columns that this lock does not block). For a long
    transaction that must not store anything for a lease it lost, without stalling the lease's renewals: the
    evaluation tick. Nothing is renewed. On SQLite no lock is emitted (one instance only)."""
    if not names:
        return set()
    query = (
        select(LeaseRow.name)
        .where(LeaseRow.name.in_(sorted(names)), LeaseRow.holder == holder, LeaseRow.lease_until >= now)
        .with_for_update(read=True, key_share=True)  # FOR KEY SHARE (key_share alone: FOR NO KEY UPDATE)
    )
    return set(session.scalars(query))


def acquire_leases(
    session: Session, holder: str, kind: str, limit: int, now: datetime, until: Mapping[str, datetime]
) -> list[str]:
    """Take up to ``limit`` free or expired leases of ``kind`` (by name; rows locked by another
    transaction are skipped: ``FOR UPDATE SKIP LOCKED``) for ``holder`` until ``until[name]``, with
    ``held_since = now``. Returns the names taken."""
    if limit <= 0:
        return []
    query = (
        select(LeaseRow.name)
        .where(
            LeaseRow.kind == kind,
            LeaseRow.name.in_(sorted(until)),
            or_(LeaseRow.holder.is_(None), LeaseRow.lease_until.is_(None), LeaseRow.lease_until < now),
        )
        .order_by(LeaseRow.name)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    names = list(session.scalars(query))
    for name in names:
        session.execute(
            update(LeaseRow)
            .where(LeaseRow.name == name)
            .values(holder=holder, lease_until=until[name], held_since=now)
        )
    return names


def release_leases(session: Session, holder: str, names: Iterable[str], now: datetime) -> None:
    """Free ``holder``'s leases among ``names`` at once (``lease_until = now``) for another instance."""
    wanted = sorted(names)
    if not wanted:
        return
    session.execute(
        update(LeaseRow)
        .where(and_(LeaseRow.name.in_(wanted), LeaseRow.holder == holder))
        .values(holder=None, lease_until=now, held_since=None)
    )


def record_job_sources(session: Session, target: str, jobs: Iterable[tuple[str, str]]) -> None:
    """Record that target ``target`` stored samples of ``jobs`` ((engine, job id) pairs); known pairs are
    ignored."""
    rows = [{"engine": e, "job_id": j, "target": target} for e, j in sorted(set(jobs))]
    insert_ignoring(session, JobSourceRow, rows, ["engine", "job_id", "target"])


def job_sources_of(session: Session, targets: Collection[str]) -> dict[tuple[str, str], str]:
    """(engine, job id) -> the target that evaluates it (the first by name of all the targets that stored its samples, held by this instance or not), for the jobs that any of
    ``targets`` stored; the other jobs' rows are not read (the ``ix_job_sources_target`` index finds these)."""
    if not targets:
        return {}
    ours = (
        select(JobSourceRow.engine, JobSourceRow.job_id)
        .where(JobSourceRow.target.in_(sorted(targets)))
        .distinct()
        .subquery()
    )
    out: dict[tuple[str, str], str] = {}
    for engine, job_id, target in session.execute(
        select(JobSourceRow.engine, JobSourceRow.job_id, JobSourceRow.target)
        .join(ours, and_(JobSourceRow.engine == ours.c.engine, JobSourceRow.job_id == ours.c.job_id))
        .order_by(JobSourceRow.target)
    ):
        out.setdefault((engine, job_id), target)
    return out


def sourced_jobs(session: Session, jobs: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which of ``jobs`` ((engine, job id) pairs) some target stored samples of (have a ``job_sources``
    row); one query per engine and :data:`monitor.store.upsert.CHUNK` job ids (on the primary key)."""
    by_engine: dict[str, set[str]] = {}
    for engine, job_id in jobs:
        by_engine.setdefault(engine, set()).add(job_id)
    return {
        (engine, job_id)
        for engine, ids in sorted(by_engine.items())
        for chunk in chunks(sorted(ids))
        for job_id in session.scalars(
            select(JobSourceRow.job_id)
            .where(JobSourceRow.engine == engine, JobSourceRow.job_id.in_(chunk))
            .distinct()
        )
    }
