"""This instance's place in a fleet of daemons sharing one database (PostgreSQL the coordinator).

Every ``tidegauge run`` is an instance (``--instance NAME``, default ``host:pid``). :meth:`Fleet.tick`
(scheduled every :attr:`Fleet.interval`) heartbeats in ``fleet_instances`` and keeps this instance's share
of the leases (:mod:`monitor.store.fleet_repo`): with ``n`` live instances and ``t`` targets it holds at most
``ceil(t / n)`` targets, taking free or expired ones (``FOR UPDATE SKIP LOCKED``) and releasing what is over
its share between two polls of that target and outside an evaluation tick over it (down to ``floor(t / n)``
while another live instance holds fewer), so targets spread evenly as instances join and leave, and the
same for receivers.

* A target is polled only while its lease is held; the poll's write transaction renews the lease
  (:meth:`Fleet.poll_guard`) and stores nothing if it was lost, so a taken-over target resumes from the
  stored cursors: no batch read twice, none lost. A lease lasts ``lease_ttl`` = 3 x the target's poll
  interval, at least 15 s; an instance that stops renewing (killed, cut off from the database) loses its
  targets then, and the others take them at their next tick.
* A job is evaluated by the holder of the target its data comes from (:meth:`Fleet.evaluation_scope`,
  inside the evaluation transaction, which locks those lease rows ``FOR KEY SHARE``: nobody takes them
  meanwhile, while this instance's polls and ticks go on renewing them).
* A receiver is delivered by the holder of its lease only (:meth:`Fleet.held_receivers`).
* Listener pushes (ingest) are accepted by any instance; their jobs, and jobs of unknown source (stored
  by ``scan --db`` or before migration 0006), are evaluated by the holder of the ``ingest`` lease.

On SQLite only one instance may run (:func:`monitor.daemon.instance_lock.lock_sqlite`); it holds every lease.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from monitor.daemon.tick import JobKey, tick_time
from monitor.store.fleet_repo import (
    acquire_leases,
    define_leases,
    heartbeat,
    held_counts,
    job_sources_of,
    leave_fleet,
    list_instances,
    lock_held_leases,
    release_leases,
    renew_leases,
    sourced_jobs,
)

__all__ = [
    "INGEST_TARGET",
    "MIN_LEASE_TTL",
    "EvaluationScope",
    "Fleet",
    "LeasedResource",
    "lease_ttl",
]

log = logging.getLogger(__name__)

#: The shortest lease (and instance heartbeat ttl).
MIN_LEASE_TTL = timedelta(seconds=15)
#: The lease whose holder evaluates the jobs pushed to the listener ingest endpoint.
INGEST_TARGET = "ingest"
_TARGET = "target"
_RECEIVER = "receiver"


def lease_ttl(interval: timedelta) -> timedelta:
    """A lease's length for a resource renewed every ``interval``: 3 x ``interval``, at least 15 s."""
    return max(3 * interval, MIN_LEASE_TTL)


@dataclass(frozen=True, slots=True)
class LeasedResource:
    """A target or receiver that one instance at a time holds: its name, its collector (targets), and how
    often its holder renews the lease (the poll or delivery interval)."""

    name: str
    collector: str | None
    interval: timedelta

    @property
    def ttl(self) -> timedelta:
        """Its lease's length (:func:`lease_ttl`)."""
        return lease_ttl(self.interval)


@dataclass(frozen=True, slots=True)
class EvaluationScope:
    """What one evaluation of this instance covers: the targets it holds (confirmed in the evaluation's
    transaction) and the jobs whose data they bring.

    ``sources`` has only the jobs that a held target stored (each with the target that evaluates it, held
    or not); a job not in it belongs to another instance, unless it has no source at all: then it goes to
    the holder of ``default_target``, which asks ``unsourced`` (the jobs among those given that no target
    stored; ``None``: not this instance's concern)."""

    targets: frozenset[str]
    sources: dict[tuple[str, str], str]
    default_target: str | None
    unsourced: Callable[[Collection[tuple[str, str]]], set[tuple[str, str]]] | None = None
    _orphans: dict[tuple[str, str], bool] = field(default_factory=dict)

    def resolve(self, keys: Iterable[JobKey]) -> None:
        """Find out at once (one query per chunk) which of ``keys`` that no held target stored have no
        source at all, before :meth:`owns_job` asks about them one by one."""
        if self.unsourced is None or self.default_target not in self.targets:
            return
        wanted = {(k[0].value, k[1]) for k in keys} - self.sources.keys() - self._orphans.keys()
        if wanted:
            orphans = self.unsourced(wanted)
            self._orphans.update((j, j in orphans) for j in wanted)

    def owns_job(self, key: JobKey) -> bool:
        """Whether this instance evaluates job ``key`` (a job of unknown source goes to the holder of
        ``default_target``: the ``ingest`` lease)."""
        job = (key[0].value, key[1])
        target = self.sources.get(job)
        if target is not None:
            return target in self.targets
        if self.default_target is None or self.default_target not in self.targets:
            return False
        if self.unsourced is None:
            return True
        if job not in self._orphans:
            self.resolve([key])
        return self._orphans[job]


@dataclass
class _Held:
    held_since: datetime
    lease_until: datetime


class Fleet:
    """This instance's heartbeat and leases (see the module docstring); thread-safe.

    Args:
        sessions: the store's session factory.
        name: the instance's name.
        host: its host name; pid: its process id (shown by ``cluster status``).
        targets: the configured targets (plus :data:`INGEST_TARGET` when the ingest endpoint is on).
        receivers: the configured receivers.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        name: str,
        host: str,
        pid: int,
        targets: Sequence[LeasedResource],
        receivers: Sequence[LeasedResource],
    ) -> None:
        self._sessions = sessions
        self.name = name
        self._host = host
        self._pid = pid
        self._resources = {_TARGET: {t.name: t for t in targets}, _RECEIVER: {r.name: r for r in receivers}}
        intervals = [r.interval for r in (*targets, *receivers)] or [timedelta(seconds=5)]
        #: how often :meth:`tick` runs: the shortest interval, between 1 s and 5 s
        self.interval = min(max(min(intervals), timedelta(seconds=1)), timedelta(seconds=5))
        self._ttl = lease_ttl(self.interval)
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, _Held]] = {_TARGET: {}, _RECEIVER: {}}
        self._polling: set[str] = set()
        #: targets whose lease rows an evaluation transaction of this instance has locked (until it ends)
        self._evaluating: set[str] = set()
        #: jobs known to have a ``job_sources`` row (so not of unknown source; the rows are never deleted)
        self._sourced: set[tuple[str, str]] = set()
        self._defined = False
        #: whether a :meth:`tick` succeeded: before that (a runtime driven without starting the daemon, as
        #: tests and the demo's seeding do) evaluation and delivery cover everything, as a lone daemon's
        self.joined = False

    # ------------------------------------------------------------------------------------ the tick

    def tick(self, now: datetime) -> dict[str, int]:
        """Heartbeat, renew, take this instance's share of free leases and release what is over it.

        Returns:
            Leases held after the tick, by kind (``{"target": n, "receiver": m}``).

        Raises:
            Exception: the store failed; the leases run out on their own if it keeps failing.
        """
        when = tick_time(now)
        with self._sessions.begin() as session:
            heartbeat(session, self.name, self._host, self._pid, when, self._ttl)
            if not self._defined:
                for kind, resources in self._resources.items():
                    define_leases(session, f"{kind}", {_key(kind, n): r.collector for n, r in resources.items()})
            live_names = {i.name for i in list_instances(session) if i.alive(when)} | {self.name}
            changes: list[str] = []
            for kind, resources in self._resources.items():
                released, taken, lost = self._keep_share(session, kind, resources, live_names, when)
                changes += [f"took {kind} {n}" for n in taken] + [f"lost {kind} {n}" for n in lost]
                changes += [f"released {kind} {n}" for n in released]
        self._defined = True
        self.joined = True
        for change in changes:
            log.info("instance %s: %s", self.name, change)
        with self._lock:
            return {kind: len(held) for kind, held in self._held.items()}

    def _keep_share(
        self, session: Session, kind: str, resources: dict[str, LeasedResource], live: set[str], now: datetime
    ) -> tuple[list[str], list[str], list[str]]:
        """(released, taken, lost) names of ``kind`` in this tick.

        The share is ``ceil(n / live)``: taken up to it; what is over it is given back. While a live
        instance holds fewer than ``floor(n / live)`` (it joined after the others took everything), the
        others give back down to ``floor(n / live)`` so that it can take its part."""
        if not resources:
            return [], [], []
        until = {_key(kind, n): now + r.ttl for n, r in resources.items()}
        with self._lock:
            mine = set(self._held[kind])
        renewed = {_name(k) for k in renew_leases(session, self.name, [_key(kind, n) for n in mine], now, until)}
        lost = sorted(mine - renewed)
        share = math.ceil(len(resources) / len(live))
        floor = len(resources) // len(live)
        counts = held_counts(session, kind, now)
        starving = any(counts.get(name, 0) < floor for name in live if name != self.name)
        keep = floor if starving and floor > 0 else share
        taken: list[str] = []
        if len(renewed) < share:
            taken = [_name(k) for k in acquire_leases(session, self.name, kind, share - len(renewed), now, until)]
        with self._lock:
            held = self._held[kind]
            for name in lost:
                held.pop(name, None)
            for name in renewed:
                if name in held:
                    held[name].lease_until = until[_key(kind, name)]
            for name in taken:
                held[name] = _Held(now, until[_key(kind, name)])
            over = len(held) - keep
            released: list[str] = []
            if over > 0:  # give back what is not being polled or evaluated now (the rest at a later tick)
                idle = sorted(n for n in held if n not in self._polling and n not in self._evaluating)
                released = idle[:over]
                for name in released:
                    del held[name]
        release_leases(session, self.name, [_key(kind, n) for n in released], now)
        return released, taken, lost

    def leave(self, now: datetime) -> None:
        """On a clean stop: release every lease at once and drop this instance's row."""
        with self._lock:
            for held in self._held.values():
                held.clear()
        with self._sessions.begin() as session:
            count = leave_fleet(session, self.name, tick_time(now))
        log.info("instance %s left the fleet; %d lease(s) released", self.name, count)

    # ------------------------------------------------------------------------------------ targets

    def holds_target(self, name: str, now: datetime) -> bool:
        """Whether this instance holds target ``name``'s lease, unexpired at ``now``."""
        with self._lock:
            held = self._held[_TARGET].get(name)
            return held is not None and held.lease_until >= now

    @contextmanager
    def polling(self, name: str, now: datetime) -> Iterator[bool]:
        """Within the block the target is being polled (its lease is not released meanwhile); yields
        whether this instance holds it (poll only then)."""
        with self._lock:
            held = self._held[_TARGET].get(name)
            ok = held is not None and held.lease_until >= now
            if ok:
                self._polling.add(name)
        try:
            yield ok
        finally:
            with self._lock:
                self._polling.discard(name)

    def poll_guard(self, name: str) -> Callable[[Session, datetime], bool]:
        """The check run in a poll's write transaction: renew target ``name``'s lease (its row stays
        locked until the commit); ``False`` if it was lost (then nothing of the poll is stored)."""
        resource = self._resources[_TARGET][name]

        def guard(session: Session, now: datetime) -> bool:
            key = _key(_TARGET, name)
            renewed = renew_leases(session, self.name, [key], now, {key: now + resource.ttl})
            with self._lock:
                held = self._held[_TARGET].get(name)
                if key in renewed and held is not None:
                    held.lease_until = now + resource.ttl
                elif not renewed:
                    self._held[_TARGET].pop(name, None)
            if not renewed:
                log.warning("instance %s: lost target %s (its lease expired); the poll is not stored", self.name, name)
            return bool(renewed)

        return guard

    def held_targets(self) -> dict[str, datetime]:
        """Targets held, with the time each was taken (``held_since``)."""
        with self._lock:
            return {n: h.held_since for n, h in sorted(self._held[_TARGET].items())}

    def evaluation_scope(self, session: Session, now: datetime) -> EvaluationScope | None:
        """Within the evaluation's transaction: lock the held targets' unexpired leases so that no other
        instance takes them before it commits, and read which target each job's data comes from (``None``:
        not joined yet, evaluate everything).

        The lock is ``FOR KEY SHARE`` (:func:`monitor.store.fleet_repo.lock_held_leases`), not a renewal:
        renewing (an ``UPDATE``) would hold the rows' write lock for the whole tick, and every poll of
        those targets (its write transaction renews its lease first) and the fleet tick would wait for the
        evaluation to commit. Polls and the fleet tick renew the leases."""
        if not self.joined:
            return None
        with self._lock:
            mine = [_key(_TARGET, n) for n in self._held[_TARGET]]
        held = {_name(k) for k in lock_held_leases(session, self.name, mine, now)}
        # a target released while this transaction holds its row lock could not be taken by another instance
        # (taking skips locked rows) until the evaluation commits: nobody would poll it meanwhile. Keep
        # such targets until then (the fleet tick releases them later).
        with self._lock:
            self._evaluating = set(held)

        def done(_session: Session, *_args: object) -> None:
            with self._lock:
                self._evaluating = set()

        for hook in ("after_commit", "after_rollback"):
            event.listen(session, hook, done, once=True)
        names = self._resources[_TARGET]
        default = INGEST_TARGET if INGEST_TARGET in names else min(names, default=None)
        sources = job_sources_of(session, held)  # only the jobs of the targets held (never the whole table)

        def unsourced(jobs: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
            with self._lock:
                unknown = set(jobs) - self._sourced
            found = sourced_jobs(session, unknown)
            with self._lock:
                self._sourced |= found  # job_sources rows are never deleted: a job with a source keeps one
            return unknown - found

        with self._lock:
            self._sourced.update(sources)
        return EvaluationScope(frozenset(held), sources, default, unsourced)

    # ------------------------------------------------------------------------------------ receivers

    def held_receivers(self, now: datetime) -> set[str] | None:
        """Receivers this instance delivers (lease held, unexpired at ``now``; ``None``: not joined yet,
        all)."""
        if not self.joined:
            return None
        with self._lock:
            return {n for n, h in self._held[_RECEIVER].items() if h.lease_until >= now}


def _key(kind: str, name: str) -> str:
    """A lease row's name: ``target/<name>``, ``receiver/<name>``."""
    return f"{kind}/{name}"


def _name(key: str) -> str:
    return key.split("/", 1)[1]
