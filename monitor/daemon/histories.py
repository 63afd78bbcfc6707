"""The daemon's in-memory copy of each job's recent samples, kept in step with the store.

:class:`JobHistories` loads, at the first call, each job's last ``lookback`` of samples (reaching back to its
evaluation cursor, so a restarted daemon replays what it had not evaluated), then only the rows stored
since (by sample id). It tracks which jobs have samples not evaluated yet (:meth:`JobHistories.pending`),
each job's evaluation cursor (the last instant replayed, stored in the cursor table under collector
``rules``) and when each job's newest sample was first seen (a job whose data was already older than the
history horizon then is *history*: it notifies nobody).

It also keeps each job's :class:`rules.replay.ReplayState` (:meth:`JobHistories.replay_state`: the rolling
history the rules read, fed up to the evaluation cursor) from one tick to the next, so a tick feeds each
job only the samples that arrived since instead of rebuilding its window. A state is dropped when a sample
arrives out of order (older than the job's newest one: the window before the cursor changed) and when the
cursor is re-read from the store (a fleet takeover); the next replay rebuilds it from the window.

Memory: each sample loaded is made to share its job ref, scope, collector name, ``extra`` dict and repeated
times with the previous sample of its scope (:func:`monitor.model.share_equal_parts`): the store loader
shares them only within one load, i.e. one tick, and an hour of 10 s ticks would otherwise keep 360 copies.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from datetime import datetime, timedelta
from operator import attrgetter

from sqlalchemy.orm import Session, sessionmaker

from monitor.daemon.tick import JobKey, job_target
from monitor.model import Sample, SampleKind, ensure_utc, share_equal_parts
from monitor.store import (
    get_cursor,
    get_cursors,
    load_recent_samples,
    load_samples,
    load_samples_after,
    max_sample_id,
)
from rules.replay import ReplayState

__all__ = ["EVAL_CURSOR", "JobHistories"]

EVAL_CURSOR = "rules"
"""Cursor-table collector name of the per-job evaluation cursors (``{"evaluated_at": ISO time, "at_count": n}``)."""
_TIME = attrgetter("observed_at")


def _order(sample: Sample) -> tuple[datetime, bool]:
    return sample.observed_at, sample.kind is SampleKind.TERMINATED


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return ensure_utc(datetime.fromisoformat(text))
    except ValueError:
        return None


def _share_parts(history: list[Sample], new: list[Sample]) -> None:
    """Make each of ``new`` (a job's samples just loaded, oldest first) share equal parts with the previous
    sample of its scope (:func:`monitor.model.share_equal_parts`), looked for among ``new`` and the tail of
    ``history`` (the job's kept samples), walked back until every scope of ``new`` is found or over at most
    ``2 * len(new) + 64`` samples, which reaches back over one poll round whatever its number of scopes.
    Cost: O(len(new)); a Spark query's tick (two scopes) walks back two samples."""
    previous: dict[object, Sample] = {}
    wanted = {sample.scope for sample in new}
    for i in range(len(history) - 1, max(len(history) - 2 * len(new) - 64, 0) - 1, -1):
        kept = history[i]
        if kept.scope in wanted and kept.scope not in previous:
            previous[kept.scope] = kept
            if len(previous) == len(wanted):
                break
    for sample in new:
        before = previous.get(sample.scope)
        if before is not None:
            share_equal_parts(sample, before)
        previous[sample.scope] = sample


class JobHistories:
    """Each job's recent samples, oldest first, with its evaluation cursor (see the module docstring).

    Args:
        sessions: the store's session factory.
        lookback: how much of each job's history is kept (from its newest sample).
        horizon: data older than this when first seen is history.
    """

    def __init__(self, sessions: sessionmaker[Session], lookback: timedelta, horizon: timedelta) -> None:
        self._sessions = sessions
        self._lookback = lookback
        self._horizon = horizon
        self._history: dict[JobKey, list[Sample]] | None = None
        self._history_id = 0
        self._evaluated: dict[JobKey, tuple[datetime, int]] = {}
        self._first_seen: dict[JobKey, tuple[datetime, datetime]] = {}
        self._pending: set[JobKey] = set()
        self._unseen: set[JobKey] = set()
        self._replays: dict[JobKey, ReplayState] = {}

    @property
    def lookback(self) -> timedelta:
        """How much of each job's history is kept."""
        return self._lookback

    def catch_up(self, session: Session, when: datetime | None) -> None:
        """Load the samples stored since the last call into the per-job histories (the first call: each
        job's window, reaching back to its evaluation cursor); the jobs that got samples not evaluated yet
        become pending. ``when`` (the tick's time) records when a job's newest sample was first seen."""
        touched: list[JobKey] = []
        first_load = self._history is None
        if self._history is None:
            top = self._horizon_id(session)  # read first: rows stored meanwhile are picked up next time
            self._history = load_recent_samples(session, self._lookback, upto_id=top)
            stored = get_cursors(session, EVAL_CURSOR)  # every job's cursor in one query
            for key, samples in self._history.items():
                cursor = stored.get(job_target(key))
                at = _parse_time(cursor.get("evaluated_at")) if cursor else None
                last = None
                if at is not None and cursor is not None:
                    count = cursor.get("at_count")
                    last = (at, count if isinstance(count, int) else 0)
                    self._evaluated[key] = last
                    start = at - self._lookback
                    if samples and start < samples[0].observed_at:
                        older = load_samples(session, job_id=key[1], engine=key[0], since=start,
                                             until=samples[0].observed_at)
                        samples[:0] = older
                _share_parts([], samples)
                if samples and (last is None or samples[-1].observed_at > last[0]
                                or sum(1 for s in samples if s.observed_at == last[0]) > last[1]):
                    touched.append(key)
            self._history_id = top
        else:
            new, top = load_samples_after(session, self._history_id, self._horizon_id(session))
            for key, samples in new.items():
                history = self._history.setdefault(key, [])
                samples.sort(key=_order)
                _share_parts(history, samples)
                if history and _order(samples[0]) < _order(history[-1]):
                    # out of order: the samples before the job's cursor changed, so its kept replay too
                    history.extend(samples)
                    history.sort(key=_order)  # nearly sorted: cheap
                    self._replays.pop(key, None)
                else:
                    history.extend(samples)  # what the stable sort would give, without touching the rest
                touched.append(key)
            self._history_id = top
        self._pending.update(touched)
        if first_load:
            self._unseen.update(self._history)
        if when is None:
            return
        # jobs loaded before the first tick (by seed_latest) are first seen at that tick
        for key in {*touched, *self._unseen}:
            newest = self._history[key][-1].observed_at
            seen = self._first_seen.get(key)
            if seen is None or seen[0] != newest:
                self._first_seen[key] = (newest, when)
        self._unseen.clear()

    def _horizon_id(self, session: Session) -> int:
        """The sample id up to which every row is stored for good (:func:`monitor.store.max_sample_id`); on
        PostgreSQL in a short transaction of its own (it holds the sample writers back for that moment),
        elsewhere in ``session`` (SQLite has one writer at a time)."""
        if session.get_bind().dialect.name != "postgresql":
            return max_sample_id(session)
        with self._sessions.begin() as own:
            return max_sample_id(own)

    def trim(self) -> None:
        """Keep each job's samples from its newest one back ``lookback``."""
        assert self._history is not None
        for history in self._history.values():
            if not history:
                continue
            start = bisect_left(history, history[-1].observed_at - self._lookback, key=_TIME)
            if start:
                del history[:start]

    def recent(self) -> dict[JobKey, list[Sample]]:
        """Each job's samples from its newest one back ``lookback``, oldest first (loads what was stored
        since the last call)."""
        with self._sessions() as session:
            self.catch_up(session, None)
        self.trim()
        return {k: list(v) for k, v in self.all().items()}

    def all(self) -> dict[JobKey, list[Sample]]:
        """The histories as loaded (the lists themselves; call :meth:`catch_up` first)."""
        assert self._history is not None, "catch_up first"
        return self._history

    def pending(self) -> list[JobKey]:
        """The jobs with samples not evaluated yet, by engine and job id."""
        return sorted(self._pending, key=lambda k: (k[0].value, k[1]))

    def replay_state(self, key: JobKey) -> ReplayState:
        """Job ``key``'s replay state kept across ticks (a new, empty one the first time): give it to
        :func:`rules.replay.replay` with the job's samples and cursor."""
        state = self._replays.get(key)
        if state is None:
            state = self._replays[key] = ReplayState()
        return state

    def drop_replay(self, key: JobKey) -> None:
        """Forget job ``key``'s replay state (it is rebuilt from the window when needed again)."""
        self._replays.pop(key, None)

    def evaluated(self, key: JobKey) -> tuple[datetime, int] | None:
        """The job's evaluation cursor: the last instant replayed, as ``(at, at_count)``."""
        return self._evaluated.get(key)

    def reload_cursor(self, session: Session, key: JobKey) -> None:
        """Re-read job ``key``'s evaluation cursor from the store and mark it pending: another instance
        evaluated it meanwhile (a target taken over in a fleet), so the in-memory cursor is stale."""
        cursor = get_cursor(session, EVAL_CURSOR, job_target(key))
        at = _parse_time(cursor.get("evaluated_at")) if cursor else None
        self._replays.pop(key, None)
        if at is None or cursor is None:
            self._evaluated.pop(key, None)
        else:
            count = cursor.get("at_count")
            self._evaluated[key] = (at, count if isinstance(count, int) else 0)
        self._pending.add(key)

    def done(self, evaluated: dict[JobKey, tuple[datetime, int]], touched: Iterable[JobKey]) -> None:
        """After a committed evaluation: move the cursors, clear the evaluated jobs and trim."""
        self._evaluated.update(evaluated)
        self._pending.difference_update(touched)
        self.trim()

    def seen_as_history(self, key: JobKey) -> bool:
        """Whether the job's newest sample was already older than the horizon when first loaded."""
        seen = self._first_seen.get(key)
        return seen is not None and seen[1] - seen[0] > self._horizon
