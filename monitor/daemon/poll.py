"""The poll stage: read one target, store what it read in one transaction, keep the target's health.

:meth:`PollStage.poll` reads first, then stores samples, raw documents, errors and the collector's cursor
advance together in one short transaction (a failed save advances nothing, and the next poll reads the same
data again; :func:`monitor.store.save_poll` is idempotent). No transaction is open while the collector reads
or decompresses: SQLite's write lock is held only for the writes, so a slow read (a large or hostile file)
never makes evaluation fail with "database is locked". The collector bounds what one poll reads (the event
log's ``max_poll_bytes``), which bounds what is held between reading and storing. Stored samples then update the in-memory
:class:`~monitor.metrics.latest.LatestSamples` behind ``/metrics``. Per-target health (up, last poll
duration, errors by kind, the recent distinct problems) is kept for ``/metrics`` and ``/healthz``.
Quarantine, never stop: a line, document or file the collector cannot parse is a collector error
(:class:`~monitor.model.ErrorKind`) and its cursor moves past it with the samples; a piece the database
refuses as data (not a database failure) is stored sample by sample and what is refused becomes an
``unstorable`` error. A target is *down* only when it could not be read at all (an ``unreachable`` error,
or the poll could not be stored). Each distinct problem is logged once while it lasts, not on every poll.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from collectors.base import Collector
from monitor.daemon.fleet import INGEST_TARGET
from monitor.daemon.tick import tick_time
from monitor.metrics.exporter import CollectorStat
from monitor.metrics.latest import LatestSamples
from monitor.model import CollectorError, ErrorKind, PollResult, Sample
from monitor.redaction import Redactor
from monitor.store import get_cursor, get_cursors, save_poll, set_cursors
from monitor.store.database import is_data_error
from monitor.store.fleet_repo import record_job_sources

__all__ = ["INGEST_SOURCE", "LeaseGuard", "PollStage", "StoreCursors", "Target", "TargetHealth"]

#: The source name of the jobs pushed to the listener ingest endpoint (``job_sources``; its lease's name).
INGEST_SOURCE = INGEST_TARGET

LeaseGuard = Callable[[Session, datetime], bool]
"""Run first in a poll's write transaction: ``False`` (the target's lease was lost) stores nothing."""


class _LeaseLost(Exception):
    """The target's lease was lost between the read and the write: the poll is not stored."""

log = logging.getLogger(__name__)

_MAX_RECENT_ERRORS = 1000
_RECENT_PER_TARGET = 5  # distinct recent problems shown per target on /healthz


class StoreCursors:
    """A collector cursor store (:class:`collectors.spark.eventlog.CursorStore`) in the database.

    While the poll reads (within :meth:`collect`), ``set`` keeps the states in memory and ``get`` sees them;
    :meth:`write` then stores them all with one batched upsert in the transaction that stores the poll's
    samples, so a cursor never advances past data that was not stored. Within :meth:`collect`, the
    collector first :meth:`prefetch`-es the cursors of the files its listing shows (one query per
    :data:`monitor.store.upsert.CHUNK` keys, in one short read-only session): a poll reads only its own target's
    cursors, never those of the collector's other targets. A ``get`` of a key not prefetched (a file the
    listing did not show, or a collector that does not prefetch) reads that one state, so a key missing
    from the prefetch is never taken for a file never read. Outside :meth:`collect`, ``get`` reads the one state.

    Args:
        sessions: session factory of the store.
        collector: the collector name the cursors are kept under.
    """

    def __init__(self, sessions: sessionmaker[Session], collector: str) -> None:
        self._sessions = sessions
        self._collector = collector
        self._collected: dict[str, dict[str, Any]] | None = None
        self._stored: dict[str, dict[str, Any] | None] = {}  # read in this collect(): key -> state or None

    @contextmanager
    def collect(self) -> Iterator[dict[str, dict[str, Any]]]:
        """Within the block, ``set`` keeps states in the yielded dict (target -> state) instead of writing."""
        self._collected = {}
        try:
            yield self._collected
        finally:
            self._collected = None
            self._stored = {}

    def write(self, session: Session, states: dict[str, dict[str, Any]], now: datetime) -> None:
        """Store ``states`` (from :meth:`collect`) in ``session`` with ``updated_at = now`` (one batched upsert)."""
        set_cursors(session, self._collector, states, now)

    def prefetch(self, targets: Iterable[str]) -> None:
        """Within :meth:`collect`: read the stored states of ``targets`` (cursor keys) not read yet in it,
        in one read-only session; later ``get`` calls of these keys need no query. Outside it: nothing."""
        if self._collected is None:
            return
        wanted = sorted({t for t in targets if t not in self._stored})
        if not wanted:
            return
        with self._sessions() as session:
            found = get_cursors(session, self._collector, wanted)
        for target in wanted:
            self._stored[target] = found.get(target)

    def get(self, target: str) -> dict[str, Any] | None:
        """The stored state of ``target`` (or the one collected, not yet stored) or ``None``."""
        if self._collected is None:
            with self._sessions() as session:
                return get_cursor(session, self._collector, target)
        if target in self._collected:
            return self._collected[target]
        if target not in self._stored:
            with self._sessions() as session:
                self._stored[target] = get_cursor(session, self._collector, target)
        return self._stored[target]

    def set(self, target: str, state: dict[str, Any]) -> None:
        """Keep ``state`` for ``target`` until :meth:`write` stores it with the poll.

        Raises:
            RuntimeError: not within :meth:`collect` (the collector was polled outside :meth:`PollStage.poll`).
        """
        if self._collected is None:
            raise RuntimeError("StoreCursors.set outside Runtime.poll: no poll is collecting")
        self._collected[target] = dict(state)


@dataclass
class Target:
    """One configured target.

    Attributes:
        name: the target's ``name`` in the config (the ``target`` label of collector metrics).
        source: the collector.
        interval: poll interval.
        cursors: the collector's database cursor store, if it keeps cursors.
    """

    name: str
    source: Collector
    interval: timedelta
    cursors: StoreCursors | None = None


@dataclass
class TargetHealth:
    """Health of one target (``/healthz`` and ``tidegauge_target_up`` etc.)."""

    collector: str
    target: str
    up: bool = False
    polls: int = 0
    errors_total: int = 0
    last_poll_duration_seconds: float = 0.0
    last_poll_at: datetime | None = None
    last_error: str | None = None
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    recent_errors: deque[dict[str, str]] = field(default_factory=lambda: deque(maxlen=_RECENT_PER_TARGET))
    logged: frozenset[str] = frozenset()  # the problems of the last poll (each is logged once while it lasts)

    def to_json(self) -> dict[str, Any]:
        """The target's ``/healthz`` entry."""
        return {
            "name": self.target,
            "collector": self.collector,
            "up": self.up,
            "polls": self.polls,
            "errors_total": self.errors_total,
            "errors_by_kind": dict(self.errors_by_kind),
            "last_poll_at": self.last_poll_at.isoformat() if self.last_poll_at else None,
            "last_error": self.last_error,
            "recent_errors": list(self.recent_errors),
        }


class PollStage:
    """Polls targets and stores what they read (see the module docstring); thread-safe.

    Args:
        sessions: the store's session factory.
        targets: the configured targets.
        latest: newest-sample registry behind ``/metrics``.
        monotonic: monotonic clock (seconds) for poll durations.
        redactor: the redactor of every text stored or shown (called each time: the process's may change).
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        targets: Sequence[Target],
        latest: LatestSamples,
        monotonic: Callable[[], float],
        redactor: Callable[[], Redactor],
    ) -> None:
        self._sessions = sessions
        self._latest = latest
        self._monotonic = monotonic
        self._redactor = redactor
        self._lock = threading.Lock()
        self._health = {t.name: TargetHealth(t.source.name, t.name) for t in targets}
        # recent collector errors for target_health (bounded; the rule looks at its own window)
        self._recent_errors: deque[CollectorError] = deque(maxlen=_MAX_RECENT_ERRORS)
        self._sources: set[tuple[str, str, str]] = set()  # (target, engine, job id) in job_sources

    def _record_sources(self, session: Session, source: str, samples: Sequence[Sample]) -> set[tuple[str, str, str]]:
        """Record the jobs of ``samples`` as read by ``source`` (once per process); returns the new triples
        (known only once the transaction commits)."""
        new = {(source, s.job.engine.value, s.job.job_id) for s in samples} - self._sources
        if new:
            record_job_sources(session, source, [(e, j) for _t, e, j in new])
        return new

    def poll(self, target: Target, now: datetime, guard: LeaseGuard | None = None) -> PollResult:
        """Poll ``target`` once with the tick's ``now`` and store what it read (one transaction).

        With ``guard`` (a fleet: :meth:`monitor.daemon.fleet.Fleet.poll_guard`), the write transaction
        first renews the target's lease; if it was lost, nothing is stored (no cursor moves, the next holder
        reads the same data) and an empty result is returned without touching the target's health.

        Never raises. Returns:
            What was stored, with the collector errors (quarantined lines, documents, files; an unreadable
            target). A failure to store (database down) is an ``ErrorKind.STORE`` error of the target; it
            returns no samples and the data is read again by the next poll.
        """
        when = tick_time(now)
        started = self._monotonic()
        samples: list[Sample] = []
        errors: list[CollectorError] = []
        failure: CollectorError | None = None
        try:
            with self._collecting(target) as states:  # read first, with no transaction open
                pieces = [self._redacted(raw_piece) for raw_piece in target.source.iter_poll(when)]
            with self._sessions.begin() as session:  # then write, in one short transaction
                if guard is not None and not guard(session, when):
                    raise _LeaseLost(target.name)
                for stored in self._save_pieces(session, pieces, target, when):
                    samples.extend(stored.samples)  # raw documents stay in the store only
                    errors.extend(stored.errors)
                if target.cursors is not None:
                    target.cursors.write(session, states, when)
                sources = self._record_sources(session, target.name, samples)
            self._sources.update(sources)
            del pieces
        except _LeaseLost:
            return PollResult()
        except Exception as exc:
            what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
            failure = CollectorError(
                target.source.name,
                target.name,
                self._redactor().redact(f"poll not stored, read again next time ({what})"),
                when,
                retryable=True,
                kind=ErrorKind.STORE,
            )
            log.debug("poll of target %s failed", target.name, exc_info=True)  # the traceback, for --debug
            samples, errors = [], []
        result = PollResult(tuple(samples), tuple(errors))
        self._latest.update(result.samples)
        duration = self._monotonic() - started
        reported = [*result.errors, *([failure] if failure else [])]
        with self._lock:
            health = self._health[target.name]
            health.polls += 1
            health.last_poll_at = when
            health.last_poll_duration_seconds = duration
            health.errors_total += len(reported)
            health.up = not any(e.kind.target_down for e in reported)
            for error in reported:
                health.errors_by_kind[error.kind.value] = health.errors_by_kind.get(error.kind.value, 0) + 1
                health.recent_errors.append(
                    {"at": when.isoformat(), "kind": error.kind.value, "message": error.message}
                )
            if reported:
                health.last_error = reported[-1].message
            self._recent_errors.extend(reported)
            previous, health.logged = health.logged, frozenset(e.message for e in reported)
        for error in reported:
            if error.message not in previous:
                log.warning("target %s: %s error: %s", target.name, error.kind.value, error.message)
        return result

    def _redacted(self, piece: PollResult) -> PollResult:
        """``piece`` with its error messages and targets redacted (they are stored and shown)."""
        if not piece.errors:
            return piece
        redact = self._redactor().redact
        errors = tuple(
            dataclasses.replace(e, message=redact(e.message), target=redact(e.target)) for e in piece.errors
        )
        return dataclasses.replace(piece, errors=errors)

    def _save_pieces(
        self, session: Session, pieces: list[PollResult], target: Target, now: datetime
    ) -> list[PollResult]:
        """Store a poll's pieces (one per file read) with one :func:`~monitor.store.save_poll` of them all:
        multi-row inserts, a few statements per poll instead of a dozen per file. If the database refuses
        something in them as data, that save is rolled back (its savepoint) and each piece is stored on its
        own by :meth:`_save_piece`, which quarantines what is refused.

        Returns:
            What was stored, per piece (or the whole poll as one piece), with the errors of refused parts.
        """
        if len(pieces) > 1:
            whole = PollResult(
                tuple(s for p in pieces for s in p.samples),
                tuple(e for p in pieces for e in p.errors),
                tuple(r for p in pieces for r in p.raw),
            )
            try:
                save_poll(session, whole, collector=target.source.name)
                return [whole]
            except Exception as exc:
                if not is_data_error(exc):
                    raise
        return [self._save_piece(session, piece, target, now) for piece in pieces]

    def _save_piece(self, session: Session, piece: PollResult, target: Target, now: datetime) -> PollResult:
        """Store one piece of a poll; what the database refuses as data is quarantined, not fatal.

        A data error (a value the store cannot hold: ``ValueError``/``OverflowError`` of the encoding or
        the driver, SQL ``DataError``) makes it store the piece's samples, raw documents and errors one by
        one (each in its own savepoint) and report each refused one as an ``ErrorKind.UNSTORABLE`` error.
        Any other failure (the database is unreachable, locked) is raised: nothing of the poll is stored.

        Returns:
            What was stored, plus the errors of the refused parts.
        """
        collector = target.source.name
        try:
            save_poll(session, piece, collector=collector)
            return piece
        except Exception as exc:
            if not is_data_error(exc):
                raise
        stored: list[Sample] = []
        refused: list[CollectorError] = []

        def refuse(what: str, exc: Exception) -> None:
            reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            reason = self._redactor().redact(reason)
            refused.append(
                CollectorError(
                    collector, target.name, f"{what}: cannot be stored ({reason}); skipped", now,
                    retryable=False, kind=ErrorKind.UNSTORABLE,
                )
            )

        for sample in piece.samples:
            try:
                save_poll(session, PollResult(samples=(sample,)), collector=collector)
                stored.append(sample)
            except Exception as exc:
                if not is_data_error(exc):
                    raise
                refuse(f"sample of job {sample.job.job_id!r} at {sample.observed_at.isoformat()}", exc)
        for raw in piece.raw:
            try:
                save_poll(session, PollResult(raw=(raw,)), collector=collector)
            except Exception as exc:
                if not is_data_error(exc):
                    raise
                refuse(f"raw {raw[2]} document of job {raw[0].job_id!r} at {raw[1].isoformat()}", exc)
        errors = [*piece.errors, *refused]
        save_poll(session, PollResult(errors=tuple(errors)), collector=collector)
        return PollResult(tuple(stored), tuple(errors))

    def ingest(self, result: PollResult, collector: str) -> None:
        """Store what the listener ingest endpoint accepted (one transaction, raw documents under
        ``collector``) and show it on ``/metrics``.

        Raises:
            Exception: the store failed (the endpoint answers 503 and the client retries).
        """
        with self._sessions.begin() as session:
            save_poll(session, result, collector=collector)
            sources = self._record_sources(session, INGEST_SOURCE, result.samples)
        self._sources.update(sources)
        self._latest.update(result.samples)

    @staticmethod
    def _collecting(target: Target) -> AbstractContextManager[dict[str, dict[str, Any]]]:
        return target.cursors.collect() if target.cursors is not None else nullcontext({})

    def recent_errors(self) -> list[CollectorError]:
        """The recent collector errors (at most 1000), oldest first, for ``target_health``."""
        with self._lock:
            return list(self._recent_errors)

    def collector_stats(self) -> list[CollectorStat]:
        """Health of every target, for ``/metrics``."""
        with self._lock:
            return [
                CollectorStat(
                    h.collector, h.target, h.up, h.last_poll_duration_seconds, h.errors_total, dict(h.errors_by_kind)
                )
                for h in self._health.values()
            ]

    def target_health(self) -> list[dict[str, Any]]:
        """Every target's ``/healthz`` entry (:meth:`TargetHealth.to_json`)."""
        with self._lock:
            return [h.to_json() for h in self._health.values()]

