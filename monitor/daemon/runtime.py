"""What the daemon does on each tick: poll a target, evaluate rules, dispatch notifications, clean up.

Every method takes the tick's ``now`` (aware UTC) from its caller, the scheduler in
:mod:`monitor.daemon.compose`, which reads the clock once per tick; nothing here reads the clock or the
environment, so tests drive a :class:`Runtime` with a fake time and no sleeping.

* :meth:`Runtime.poll` reads one target and stores the result in one transaction: samples, raw documents,
  errors and the collector's cursor advance together (a failed save advances nothing, and the next poll
  reads the same data again; :func:`monitor.store.save_poll` is idempotent). Stored samples then update
  the in-memory :class:`~monitor.metrics.latest.LatestSamples` behind ``/metrics``. Per-target health (up, last
  poll duration, errors by kind, the recent distinct problems) is kept for ``/metrics`` and ``/healthz``.
  Quarantine, never stop: a line, document or file the collector cannot parse is a collector error
  (:class:`~monitor.model.ErrorKind`) and its cursor moves past it with the samples; a piece the database
  refuses as data (not a database failure) is stored sample by sample and what is refused becomes an
  ``unstorable`` error. A target is *down* only when it could not be read at all (an ``unreachable``
  error, or the poll could not be stored). Each distinct problem is logged once while it lasts, not on
  every poll.
* :meth:`Runtime.evaluate` replays every batch stored since the last tick through the rules, job by job
  (:func:`rules.replay.replay`, from each job's evaluation cursor), stepping the job's alerts at each
  batch's own time (:func:`monitor.alerts.step_all`), then the clock rules (``no_progress``) and collector
  errors at the tick's ``now``; changed alerts, their outbox rows and the cursors are stored in one
  transaction (:func:`monitor.store.alert_repo.apply_transitions`), so a crash never stores a transition
  without its notifications. Batches older than the history horizon when first seen notify nobody. The
  instants are also folded into finding episodes (:mod:`rules.episodes`, the fold ``scan`` uses), stored
  in the same transaction (:func:`monitor.store.record_episodes`), notified or history; each alert names
  its episode.
* :meth:`Runtime.dispatch` delivers the outbox (:func:`monitor.notify.dispatcher.dispatch_due`): a row is
  marked delivered only after a 2xx, so a kill between send and record re-sends it with the same
  ``Idempotency-Key``.
* :meth:`Runtime.report` builds a scheduled health report (:func:`monitor.reports.scheduled.build_report`) from the
  stored samples and alerts and queues it in the outbox for its receiver (one row per run, keyed by report
  name and scheduled minute); :meth:`Runtime.dispatch` delivers it like any notification.
* :meth:`Runtime.clean_up` deletes samples, raw documents, collector errors and finding episodes older
  than the retention.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from collectors.base import Collector
from monitor.alerts.lifecycle import Alert, AlertEvent, EventKind, step_all
from monitor.alerts.routing import Route
from monitor.alerts.silences import Matcher, Silence, matches_all
from monitor.metrics.exporter import AlertCount, CollectorStat, DeliveryStat
from monitor.metrics.latest import LatestSamples
from monitor.model import (
    AlertState,
    CollectorError,
    Engine,
    ErrorKind,
    FindingEpisode,
    PollResult,
    Sample,
    SampleKind,
    ensure_utc,
)
from monitor.notify.base import Notifier
from monitor.notify.dispatcher import DispatchReport, RetryPolicy, dispatch_due
from monitor.redaction import Redactor, current
from monitor.reports.detailed import ReportSettings
from monitor.reports.render import Format, to_html
from monitor.reports.scheduled import INPUT_WINDOW as REPORT_INPUT_WINDOW
from monitor.reports.scheduled import HealthReport, build_report
from monitor.reports.source import collect, job_labels, write_files
from monitor.store import (
    PurgeCounts,
    get_cursor,
    load_episodes,
    load_recent_samples,
    load_samples,
    load_samples_after,
    max_sample_id,
    purge_before,
    record_episodes,
    save_poll,
    set_cursor,
)
from monitor.store.alert_repo import (
    add_silence,
    apply_transitions,
    enqueue_report,
    list_silences,
    load_alerts,
    outbox_backlog,
)
from rules.config import RulesConfig
from rules.episodes import CAUSED_BY, Episode, EpisodeFold, held, link, reopen, to_record
from rules.registry import RULES, Evaluator, history_window, rule_timing
from rules.registry import validate as check_rules
from rules.replay import Instant, replay

JobKey = tuple[Engine, str]
"""A job's identity in histories: (engine, job id); run ids change on restart, jobs don't."""

_EVAL_CURSOR = "rules"
"""Cursor-table collector name of the per-job evaluation cursors (``{"evaluated_at": ISO time}``)."""
_HISTORY = "history"
_CLOCK_RULES = frozenset(name for name, spec in RULES.items() if spec.clock)
_TIME = attrgetter("observed_at")


def _order(sample: Sample) -> tuple[datetime, bool]:
    return sample.observed_at, sample.kind is SampleKind.TERMINATED


def _job_target(key: JobKey) -> str:
    return f"{key[0].value}/{key[1]}"


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return ensure_utc(datetime.fromisoformat(text))
    except ValueError:
        return None


def _is_clock_alert(alert: Alert) -> bool:
    """Alerts stepped at the tick's clock: ``no_progress`` and unreachable targets."""
    return alert.rule in _CLOCK_RULES or alert.labels.get("check") == "unreachable"


def _alert_job(alert: Alert) -> JobKey | None:
    try:
        return Engine(alert.labels.get("engine", "")), alert.labels["job_id"]
    except (KeyError, ValueError):
        return None


def _fingerprints(instant: Instant) -> set[str]:
    return {f.fingerprint() for f in instant.findings}


def _is_clock_episode(record: FindingEpisode) -> bool:
    """Episodes of the findings judged at the tick's clock (as :func:`_is_clock_alert`)."""
    return record.rule in _CLOCK_RULES or record.labels.get("check") == "unreachable"


def _with_episode(alert: Alert, episode: Episode | None) -> Alert:
    """``alert`` naming the finding episode its finding is in (unchanged when the finding is absent: it
    keeps naming its last episode)."""
    if episode is None or alert.episode_id == episode.id:
        return alert
    return dataclasses.replace(alert, episode_id=episode.id)


def _carry_marks(
    old: Alert | None, new: Alert, events: list[AlertEvent], terminated: bool, historical: bool,
    episode: Episode | None = None,
) -> Alert:
    """Annotations the lifecycle does not know: ``history`` (fired at an instant older than the horizon:
    neither its firing nor its resolution is notified; kept for the whole episode) and
    ``resolved_reason: terminated``; and the finding episode the alert's finding is in."""
    new = _with_episode(new, episode)
    marks: dict[str, str] = {}
    kinds = {e.kind for e in events if e.fingerprint == new.fingerprint}
    if EventKind.PENDING in kinds:
        if historical:
            marks[_HISTORY] = "raised from history older than the horizon: not notified"
    elif old is not None and old.annotations.get(_HISTORY) is not None:
        marks[_HISTORY] = old.annotations[_HISTORY]
    if EventKind.RESOLVED in kinds and terminated:
        marks["resolved_reason"] = "terminated"
    if not marks:
        return new
    return dataclasses.replace(new, annotations={**new.annotations, **marks})


__all__ = ["DEFAULT_LOOKBACK", "Runtime", "StoreCursors", "Target", "TargetHealth"]

log = logging.getLogger(__name__)

#: How much of each job's history (back from its newest sample) rule evaluation looks at.
DEFAULT_LOOKBACK = timedelta(hours=1)
_MAX_RECENT_ERRORS = 1000
#: Failed sends in a row after which a receiver makes ``/healthz`` say ``degraded``.
RECEIVER_DEGRADED_AFTER = 3
_RECENT_PER_TARGET = 5  # distinct recent problems shown per target on /healthz



class StoreCursors:
    """A collector cursor store (:class:`collectors.spark.eventlog.CursorStore`) in the database.

    ``set`` writes into the transaction bound by :meth:`bind`, the one that stores the poll's samples, so
    a cursor never advances past data that was not stored. ``get`` reads through that transaction too, or
    opens a short session when none is bound.

    Args:
        sessions: session factory of the store.
        collector: the collector name the cursors are kept under.
    """

    def __init__(self, sessions: sessionmaker[Session], collector: str) -> None:
        self._sessions = sessions
        self._collector = collector
        self._bound: tuple[Session, datetime] | None = None

    @contextmanager
    def bind(self, session: Session, now: datetime) -> Iterator[None]:
        """Within the block, ``set`` writes into ``session`` with ``updated_at = now``."""
        self._bound = (session, now)
        try:
            yield
        finally:
            self._bound = None

    def get(self, target: str) -> dict[str, Any] | None:
        """The stored state of ``target`` or ``None``."""
        if self._bound is not None:
            return get_cursor(self._bound[0], self._collector, target)
        with self._sessions() as session:
            return get_cursor(session, self._collector, target)

    def set(self, target: str, state: dict[str, Any]) -> None:
        """Store ``state`` for ``target`` in the bound transaction.

        Raises:
            RuntimeError: no transaction is bound (the collector was polled outside :meth:`Runtime.poll`).
        """
        if self._bound is None:
            raise RuntimeError("StoreCursors.set outside Runtime.poll: no transaction bound")
        session, now = self._bound
        set_cursor(session, self._collector, target, state, now)


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


@dataclass
class _Counts:
    alerts: list[AlertCount] = field(default_factory=list)


@dataclass
class _Delivery:
    """One receiver's delivery counters (since start), failures in a row and its outbox backlog."""

    sent: int = 0
    failed: int = 0
    retried: int = 0
    given_up: int = 0
    consecutive_failures: int = 0
    last_error: str | None = None
    depth: int = 0
    oldest_pending_at: datetime | None = None


class Runtime:
    """The daemon's ticks over its parts (see the module docstring).

    Args:
        sessions: store session factory.
        targets: configured targets.
        latest: newest-sample registry behind ``/metrics``.
        rules_config: the ``rules:`` section.
        notifiers: configured receivers.
        routes: their routes.
        http_client: client the notifiers use.
        retention: samples older than this (relative to the tick's ``now``) are deleted by :meth:`clean_up`.
        lookback: how much of each job's history rules see (from the job's newest sample).
        history_horizon: instants older than this when first evaluated notify nobody (default: the
            longest window of the enabled rules).
        retry_policy: delivery retry timing.
        rng: random source of the retry jitter.
        monotonic: monotonic clock (seconds) for poll durations.
        redactor: what collector errors, delivery errors and ``/healthz`` texts pass through before they
            are stored, logged or shown (default: the process's, :func:`monitor.redaction.current`).
    """

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        targets: Sequence[Target],
        latest: LatestSamples,
        rules_config: RulesConfig,
        notifiers: Sequence[Notifier] = (),
        routes: Sequence[Route] = (),
        http_client: httpx.Client | None = None,
        retention: timedelta = timedelta(days=14),
        lookback: timedelta = DEFAULT_LOOKBACK,
        history_horizon: timedelta | None = None,
        retry_policy: RetryPolicy | None = None,
        rng: random.Random | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        redactor: Redactor | None = None,
    ) -> None:
        self._sessions = sessions
        self._redactor = redactor
        self.targets = list(targets)
        self.latest = latest
        check_rules(rules_config)
        self._rules_config = rules_config
        self._timing = rule_timing(rules_config)
        self._notifiers = list(notifiers)
        self._routes = list(routes)
        self._client = http_client
        self._retention = retention
        # keep in memory only what the enabled rules read (``lookback`` caps it)
        self._lookback = min(lookback, history_window(rules_config))
        self._evaluator = Evaluator(rules_config)
        self._horizon = history_horizon if history_horizon is not None else history_window(rules_config)
        self._evaluated: dict[JobKey, tuple[datetime, int]] = {}
        self._first_seen: dict[JobKey, tuple[datetime, datetime]] = {}
        self._pending: set[JobKey] = set()
        self._unseen: set[JobKey] = set()
        self._policy = retry_policy or RetryPolicy()
        self._rng = rng or random.Random()  # noqa: S311 - retry jitter, not cryptography
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._health = {t.name: TargetHealth(t.source.name, t.name) for t in self.targets}
        self._counts = _Counts()
        self._deliveries: dict[str, _Delivery] = {n.name: _Delivery() for n in notifiers}
        self._history: dict[JobKey, list[Sample]] | None = None
        # each job's open finding episodes (rules.episodes), and those of the clock rules; None: not loaded
        self._folds: dict[JobKey, EpisodeFold] = {}
        self._clock_fold: EpisodeFold | None = None
        self._history_id = 0
        # recent collector errors for target_health (bounded; the rule looks at its own window)
        self._recent_errors: deque[CollectorError] = deque(maxlen=_MAX_RECENT_ERRORS)
        self.last_evaluation_at: datetime | None = None
        self.last_dispatch_at: datetime | None = None

    # ------------------------------------------------------------------------------------------- polls

    def poll(self, target: Target, now: datetime) -> PollResult:
        """Poll ``target`` once with the tick's ``now`` and store what it read (one transaction).

        Never raises. Returns:
            What was stored, with the collector errors (quarantined lines, documents, files; an unreadable
            target). A failure to store (database down) is an ``ErrorKind.STORE`` error of the target; it
            returns no samples and the data is read again by the next poll.
        """
        when = _utc(now)
        started = self._monotonic()
        samples: list[Sample] = []
        errors: list[CollectorError] = []
        failure: CollectorError | None = None
        try:
            with self._sessions.begin() as session, self._bound(target, session, when):
                for raw_piece in target.source.iter_poll(when):
                    stored = self._save_piece(session, self._redacted(raw_piece), target, when)
                    samples.extend(stored.samples)  # raw documents stay in the store only
                    errors.extend(stored.errors)
        except Exception as exc:
            what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
            failure = CollectorError(
                target.source.name,
                target.name,
                self.redactor.redact(f"poll not stored, read again next time ({what})"),
                when,
                retryable=True,
                kind=ErrorKind.STORE,
            )
            log.debug("poll of target %s failed", target.name, exc_info=True)  # the traceback, for --debug
            samples, errors = [], []
        result = PollResult(tuple(samples), tuple(errors))
        self.latest.update(result.samples)
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

    @property
    def redactor(self) -> Redactor:
        """The redactor of every text this runtime stores or shows."""
        return self._redactor if self._redactor is not None else current()

    def _redacted(self, piece: PollResult) -> PollResult:
        """``piece`` with its error messages and targets redacted (they are stored and shown)."""
        if not piece.errors:
            return piece
        redact = self.redactor.redact
        errors = tuple(
            dataclasses.replace(e, message=redact(e.message), target=redact(e.target)) for e in piece.errors
        )
        return dataclasses.replace(piece, errors=errors)

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
            if not _is_data_error(exc):
                raise
        stored: list[Sample] = []
        refused: list[CollectorError] = []

        def refuse(what: str, exc: Exception) -> None:
            reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            reason = self.redactor.redact(reason)
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
                if not _is_data_error(exc):
                    raise
                refuse(f"sample of job {sample.job.job_id!r} at {sample.observed_at.isoformat()}", exc)
        for raw in piece.raw:
            try:
                save_poll(session, PollResult(raw=(raw,)), collector=collector)
            except Exception as exc:
                if not _is_data_error(exc):
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
        self.latest.update(result.samples)

    @staticmethod
    def _bound(target: Target, session: Session, now: datetime) -> AbstractContextManager[None]:
        return target.cursors.bind(session, now) if target.cursors is not None else nullcontext()

    def seed_latest(self) -> int:
        """Fill ``latest`` from the store (each job's recent history), so ``/metrics`` shows the jobs
        right after a restart. Returns the number of samples loaded.

        Call before the scheduler starts: it also primes :meth:`recent_history` for the first evaluation.
        """
        by_job = self.recent_history()
        samples: list[Sample] = [s for history in by_job.values() for s in history]
        self.latest.update(samples)
        return len(samples)

    # -------------------------------------------------------------------------------------- evaluation

    def evaluate(self, now: datetime) -> list[AlertEvent]:
        """One rule-evaluation tick at ``now``: every batch that arrived since the last tick, in order.

        Each job with new samples is replayed (:func:`rules.replay.replay`) from its evaluation cursor: at
        each new instant (a batch's own trigger time, an idle or lifecycle event) the rules see the history
        up to it, and the job's alerts step through the lifecycle at that time, so a stall that began and
        ended between two ticks (or while the daemon was stopped) fires and resolves. Then the rules judged
        at the tick's clock (``no_progress``) and the collector errors (``target_health`` unreachable) step
        their alerts at ``now``. Transitions and outbox rows are stored per instant in one transaction with
        the jobs' evaluation cursors (collector ``rules`` in the cursor table).

        An instant already older than the history horizon when first evaluated steps the lifecycle (the
        alert is stored and shown) but notifies nobody, and neither does that alert's resolution; a job
        whose newest data was that old when first seen raises no ``no_progress`` notification. Alerts
        resolved because their query terminated carry the annotation ``resolved_reason: terminated``.

        Returns:
            The transitions (pending/firing/resolved/cleared events), oldest instant first.
        """
        when = _utc(now)
        with self._lock:
            errors = list(self._recent_errors)
        horizon = self._horizon
        out: list[AlertEvent] = []
        evaluated: dict[JobKey, tuple[datetime, int]] = {}
        with self._sessions.begin() as session:
            self._catch_up(session, when)
            touched = sorted(self._pending, key=lambda k: (k[0].value, k[1]))
            alerts = load_alerts(session)
            per_job: dict[JobKey, dict[str, Alert]] = {}
            clock_alerts: dict[str, Alert] = {}
            for fp, alert in alerts.items():
                if _is_clock_alert(alert):
                    clock_alerts[fp] = alert
                else:
                    key = _alert_job(alert)
                    if key is not None:
                        per_job.setdefault(key, {})[fp] = alert
            assert self._history is not None
            for key in touched:
                samples = self._history[key]
                mine = per_job.setdefault(key, {})
                last = self._evaluated.get(key)
                fold = self._fold(session, key)
                episodes: dict[str, Episode] = {}
                for instant in replay(self._evaluator, samples, last):
                    historical = when - instant.at > horizon
                    for episode in [*fold.add(instant, history=historical),
                                    *(fold.open[fp] for fp in _fingerprints(instant))]:
                        episodes[episode.id] = episode
                    changed, events = step_all(mine, instant.findings, self._timing, instant.at)
                    last = (instant.at, instant.at_count)
                    if not changed:
                        continue
                    changed = {fp: _carry_marks(mine.get(fp), alert, events, instant.terminated, historical,
                                                fold.open.get(fp))
                               for fp, alert in changed.items()}
                    notify = [e for e in events if changed[e.fingerprint].annotations.get(_HISTORY) is None]
                    apply_transitions(session, changed.values(), notify, self._routes, when)
                    mine.update(changed)
                    alerts.update(changed)
                    out.extend(events)
                self._record(session, key, episodes.values())
                if last is not None:
                    evaluated[key] = last
                    state = {"evaluated_at": last[0].isoformat(), "at_count": last[1]}
                    set_cursor(session, _EVAL_CURSOR, _job_target(key), state, when)
            findings = [f for key, samples in self._history.items()
                        for f in self._evaluator.evaluate_job(samples, when, clock=True)
                        if not self._seen_as_history(key)]
            findings += self._evaluator.evaluate_targets(errors, when)
            clock_fold = self._clock_episodes(session)
            tick = Instant(when, None, findings)
            ended = clock_fold.add(tick)
            self._record(session, None, [*ended, *(clock_fold.open[fp] for fp in _fingerprints(tick))])
            changed, events = step_all(clock_alerts, findings, self._timing, when)
            if changed:
                changed = {fp: _with_episode(alert, clock_fold.open.get(fp)) for fp, alert in changed.items()}
                apply_transitions(session, changed.values(), events, self._routes, when)
                alerts.update(changed)
                out.extend(events)
        self._evaluated.update(evaluated)
        self._pending.difference_update(touched)
        self._trim()
        self._set_alert_counts(alerts.values())
        with self._lock:
            self.last_evaluation_at = when
        for event in out:
            which = alerts.get(event.fingerprint)
            if which is None:
                log.info("alert %s %s at %s", event.fingerprint, event.kind.value, event.at.isoformat())
                continue
            log.info(
                "alert %s %s for %s (%s) at %s: %s [fingerprint %s]",
                which.rule, event.kind.value, _job_of(which.labels), which.severity.label(),
                event.at.isoformat(), which.message, event.fingerprint,
            )  # fmt: skip
        return out

    def _fold(self, session: Session, key: JobKey) -> EpisodeFold:
        """The job's episode fold; the first time in this process, its open episodes reopened from the store
        (so an episode open when the daemon stopped is extended, not begun again)."""
        fold = self._folds.get(key)
        if fold is None:
            stored = load_episodes(session, engine=key[0], job_id=key[1], open_only=True)
            fold = self._folds[key] = EpisodeFold(reopen(r) for r in stored if not _is_clock_episode(r))
        return fold

    def _clock_episodes(self, session: Session) -> EpisodeFold:
        """The fold of the findings judged at the tick's clock (``no_progress``, unreachable targets)."""
        if self._clock_fold is None:
            stored = load_episodes(session, open_only=True)
            self._clock_fold = EpisodeFold(reopen(r) for r in stored if _is_clock_episode(r))
        return self._clock_fold

    def _record(self, session: Session, key: JobKey | None, episodes: Iterable[Episode]) -> None:
        """Store the episodes an evaluation began, extended or ended that held for their rule's ``for``
        (:func:`rules.episodes.held`, as ``scan`` keeps them); ``notified`` unless history. A finding that
        names its cause is linked to the cause's episode, stored or among these (:func:`rules.episodes.link`)."""
        records = [to_record(e, notified=not e.history) for e in episodes if held(e, self._evaluator)]
        if not records:
            return
        known: list[FindingEpisode] = []
        if key is not None and any(CAUSED_BY in r.details for r in records):
            since = min(r.first_at for r in records) - self._lookback
            known = load_episodes(session, engine=key[0], job_id=key[1], since=since)
        record_episodes(session, link(records, known))

    def _seen_as_history(self, key: JobKey) -> bool:
        """Whether the job's newest sample was already older than the horizon when first loaded."""
        seen = self._first_seen.get(key)
        return seen is not None and seen[1] - seen[0] > self._horizon

    def _catch_up(self, session: Session, when: datetime | None) -> None:
        """Load the samples stored since the last call into the per-job histories (the first call: each
        job's window, reaching back to its evaluation cursor); the jobs that got samples not evaluated yet
        join ``_pending``. ``when`` (the tick's time) records when a job's newest sample was first seen."""
        touched: list[JobKey] = []
        first_load = self._history is None
        if self._history is None:
            top = max_sample_id(session)  # read first: rows stored meanwhile are picked up next time
            self._history = load_recent_samples(session, self._lookback, upto_id=top)
            for key, samples in self._history.items():
                cursor = get_cursor(session, _EVAL_CURSOR, _job_target(key))
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
                if samples and (last is None or samples[-1].observed_at > last[0]
                                or sum(1 for s in samples if s.observed_at == last[0]) > last[1]):
                    touched.append(key)
            self._history_id = top
        else:
            new, top = load_samples_after(session, self._history_id)
            for key, samples in new.items():
                history = self._history.setdefault(key, [])
                history.extend(samples)
                history.sort(key=_order)  # nearly sorted: cheap
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

    def _trim(self) -> None:
        """Keep each job's samples from its newest one back ``lookback``."""
        assert self._history is not None
        for history in self._history.values():
            if not history:
                continue
            start = bisect_left(history, history[-1].observed_at - self._lookback, key=_TIME)
            if start:
                del history[:start]

    def recent_history(self) -> dict[JobKey, list[Sample]]:
        """Each job's samples from its newest one back ``lookback``, oldest first (loads what was stored
        since the last call; called by :meth:`seed_latest` before the scheduler starts)."""
        with self._sessions() as session:
            self._catch_up(session, None)
        self._trim()
        assert self._history is not None
        return {k: list(v) for k, v in self._history.items()}

    def dispatch(self, now: datetime) -> DispatchReport:
        """Deliver the due outbox batches at ``now`` (nothing to do without receivers)."""
        when = _utc(now)
        if self._client is None or not self._notifiers:
            return DispatchReport()
        try:
            report = dispatch_due(
                self._sessions, self._notifiers, self._client, when,
                routes=self._routes, policy=self._policy, rng=self._rng, redactor=self.redactor,
            )  # fmt: skip
        finally:
            self.refresh_outbox_backlog()
        with self._lock:
            self.last_dispatch_at = when
            for name, outcome in report.by_receiver.items():
                d = self._deliveries.setdefault(name, _Delivery())
                d.sent += outcome.sent
                d.failed += outcome.failed
                d.retried += outcome.retried
                d.given_up += outcome.gave_up
                if outcome.delivered_any:
                    d.consecutive_failures = outcome.failed_sends_since_success
                else:
                    d.consecutive_failures += outcome.failed_sends_since_success
                if outcome.failed_sends_since_success:
                    d.last_error = outcome.last_error
                elif outcome.delivered_any:
                    d.last_error = None
        return report

    def refresh_outbox_backlog(self) -> None:
        """Re-read each receiver's waiting notifications (count, oldest) for ``/metrics``; a database
        failure keeps the previous figures (it is reported by the failing tick)."""
        try:
            with self._sessions() as session:
                backlog = outbox_backlog(session)
        except Exception:  # the dispatch tick that failed reports it; metrics keep the last figures
            log.debug("outbox backlog not refreshed", exc_info=True)
            return
        with self._lock:
            for name in set(self._deliveries) | set(backlog):
                d = self._deliveries.setdefault(name, _Delivery())
                d.depth, d.oldest_pending_at = backlog.get(name, (0, None))

    def delivery_stats(self) -> list[DeliveryStat]:
        """Delivery to every receiver, for ``/metrics``."""
        with self._lock:
            return [
                DeliveryStat(
                    name, d.sent, d.failed, d.retried, d.given_up, d.depth, d.oldest_pending_at,
                    d.consecutive_failures,
                )
                for name, d in sorted(self._deliveries.items())
            ]

    def failing_receivers(self) -> dict[str, dict[str, Any]]:
        """Receivers whose last :data:`RECEIVER_DEGRADED_AFTER` or more sends failed:
        ``{name: {"consecutive_failures", "last_error"}}`` (errors redacted)."""
        with self._lock:
            return {
                name: {"consecutive_failures": d.consecutive_failures, "last_error": d.last_error}
                for name, d in sorted(self._deliveries.items())
                if d.consecutive_failures >= RECEIVER_DEGRADED_AFTER
            }

    def report(
        self,
        name: str,
        receiver: str,
        now: datetime,
        matchers: Sequence[Matcher] = (),
        *,
        detail_since: timedelta | None = None,
        settings: ReportSettings | None = None,
    ) -> HealthReport:
        """One scheduled run of report ``name`` at ``now``: build it from the stored samples (each job's
        last ``lookback``) and current alerts, and queue it for ``receiver`` in the outbox, in one
        transaction. A second run for the same scheduled minute queues nothing (same idempotency key).
        ``matchers`` (over ``engine``, ``job_id``, ``job_name``) keep only the jobs they match. With
        ``detail_since`` the detailed report over ``[now - detail_since, now)`` rides along as JSON and HTML
        (``HealthReport.detail`` / ``.html``, for webhook receivers).

        Returns:
            The report built.
        """
        when = _utc(now)
        with self._sessions.begin() as session:
            samples = load_recent_samples(session, REPORT_INPUT_WINDOW)
            alerts = load_alerts(session, states=[AlertState.FIRING, AlertState.PENDING])
            if matchers:
                samples = {
                    k: v for k, v in samples.items()
                    if matches_all(matchers, job_labels(k[0].value, k[1], next((s.job.name for s in reversed(v) if s.job.name), None)))
                }
                alerts = {
                    fp: a for fp, a in alerts.items()
                    if matches_all(matchers, job_labels(a.labels.get("engine", ""), a.labels.get("job_id", ""),
                                                        a.annotations.get("job_name")))
                }
            report = build_report(name, when, samples, alerts.values())
            if detail_since is not None:
                detailed = collect(session, name, when - detail_since, when, matchers=matchers, settings=settings)
                report = dataclasses.replace(report, detail=detailed.to_json(), html=to_html(detailed))
            queued = enqueue_report(session, receiver, report, when)
        log.info(
            "report %s for %s (%d jobs, %s) %s",
            name,
            receiver,
            len(report.jobs),
            report.health.label(),
            "queued" if queued else "already queued for this minute",
        )
        return report

    def write_report(
        self,
        name: str,
        directory: Path,
        formats: Sequence[Format],
        since: timedelta,
        now: datetime,
        *,
        matchers: Sequence[Matcher] = (),
        settings: ReportSettings | None = None,
    ) -> list[Path]:
        """One scheduled run of a detailed report (:mod:`monitor.reports.detailed`) over ``[now - since, now)``,
        written into ``directory`` once per format (:func:`monitor.reports.source.write_files`).

        Returns:
            The files written.
        """
        when = _utc(now)
        with self._sessions() as session:
            detailed = collect(session, name, when - since, when, matchers=matchers, settings=settings)
        paths = write_files(detailed, directory, formats)
        log.info("report %s: %d jobs (%s) written to %s", name, len(detailed.jobs), detailed.health,
                 ", ".join(str(p) for p in paths))
        return paths

    def clean_up(self, now: datetime) -> PurgeCounts:
        """Delete stored samples, raw documents and collector errors older than ``now - retention``, and the
        finding episodes whose last instant is before it."""
        when = _utc(now)
        with self._sessions.begin() as session:
            counts = purge_before(session, when - self._retention)
        if counts.samples or counts.raw_documents or counts.collector_errors or counts.episodes:
            log.info(
                "retention: deleted %d samples, %d raw documents, %d collector errors, %d finding episodes "
                "older than %s",
                counts.samples,
                counts.raw_documents,
                counts.collector_errors,
                counts.episodes,
                (when - self._retention).isoformat(),
            )
        return counts

    def sync_silences(self, silences: Sequence[Silence], now: datetime) -> int:
        """Store the config file's silences that are not stored yet (by id), starting at ``now`` (or at
        their end, if that is earlier). Returns how many were added."""
        when = _utc(now)
        with self._sessions.begin() as session:
            stored = {s.id for s in list_silences(session)}
            added = 0
            for silence in silences:
                if silence.id in stored:
                    continue
                start = min(when, silence.ends_at)
                add_silence(session, dataclasses.replace(silence, starts_at=start, created_at=when), when)
                stored.add(silence.id)
                added += 1
        return added

    # ------------------------------------------------------------------------------------------- views

    def alert_counts(self) -> list[AlertCount]:
        """Alerts by rule, severity and state as of the last evaluation."""
        with self._lock:
            return list(self._counts.alerts)

    def load_alert_counts(self) -> None:
        """Initialise :meth:`alert_counts` from the store (at start, before the first evaluation)."""
        with self._sessions() as session:
            alerts = load_alerts(session)
        self._set_alert_counts(alerts.values())

    def _set_alert_counts(self, alerts: Iterable[Alert]) -> None:
        """Count ``alerts`` by (rule, severity, state) for :meth:`alert_counts` (``/metrics``)."""
        counts: dict[tuple[str, str, str], int] = {}
        for alert in alerts:
            key = (alert.rule, alert.severity.label(), alert.state.value)
            counts[key] = counts.get(key, 0) + 1
        with self._lock:
            self._counts.alerts = [AlertCount(r, sev, st, n) for (r, sev, st), n in sorted(counts.items())]

    def collector_stats(self) -> list[CollectorStat]:
        """Health of every target, for ``/metrics``."""
        with self._lock:
            return [
                CollectorStat(
                    h.collector, h.target, h.up, h.last_poll_duration_seconds, h.errors_total, dict(h.errors_by_kind)
                )
                for h in self._health.values()
            ]

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(store reachable, JSON status)`` for ``/healthz``: store, targets, last ticks."""
        try:
            with self._sessions() as session:
                session.execute(text("SELECT 1"))
            store_ok, store_error = True, None
        except Exception as exc:
            store_ok, store_error = False, type(exc).__name__
        with self._lock:
            targets = [
                {
                    "name": h.target,
                    "collector": h.collector,
                    "up": h.up,
                    "polls": h.polls,
                    "errors_total": h.errors_total,
                    "errors_by_kind": dict(h.errors_by_kind),
                    "last_poll_at": h.last_poll_at.isoformat() if h.last_poll_at else None,
                    "last_error": h.last_error,
                    "recent_errors": list(h.recent_errors),
                }
                for h in self._health.values()
            ]
            body: dict[str, Any] = {
                "store": "ok" if store_ok else "unreachable",
                "targets": targets,
                "last_evaluation_at": self.last_evaluation_at.isoformat() if self.last_evaluation_at else None,
                "last_dispatch_at": self.last_dispatch_at.isoformat() if self.last_dispatch_at else None,
            }
        if store_error is not None:
            body["store_error"] = store_error
        failing = self.failing_receivers()
        if failing:
            body["failing_receivers"] = failing
            body["degraded"] = [
                f"receiver {name}: {info['consecutive_failures']} failed sends in a row ({info['last_error']})"
                for name, info in failing.items()
            ]
        return store_ok, self.redactor.redact_json(body)


def _job_of(labels: Any) -> str:
    """``spark job q-1`` from an alert's labels (log lines)."""
    return f"{labels.get('engine', '?')} job {labels.get('job_id', '?')}"


def _is_data_error(exc: BaseException) -> bool:
    """True when the store refused a value (bad data), not when the database failed."""
    if isinstance(exc, sa_exc.DataError):
        return True
    if isinstance(exc, sa_exc.DBAPIError):  # OperationalError ("database is locked"), IntegrityError, ...
        return False
    if isinstance(exc, sa_exc.StatementError):  # raised before reaching the database: binding a value
        return isinstance(exc.orig, ValueError | OverflowError | TypeError)
    return isinstance(exc, ValueError | OverflowError)


def _utc(now: datetime) -> datetime:
    when = ensure_utc(now, "now")
    if when is None:
        raise ValueError("now is required")
    return when
