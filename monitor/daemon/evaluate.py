"""The evaluate stage: replay what arrived since the last tick through the rules, step the alerts, store
the transitions, their notifications and the finding episodes.

:meth:`EvaluateStage.evaluate` replays every batch stored since the last tick, job by job
(:func:`rules.replay.replay`, from each job's evaluation cursor), stepping the job's alerts at each
batch's own time (:func:`monitor.alerts.step_all`), then the clock rules (``no_progress``) and collector
errors at the tick's ``now``; changed alerts, their outbox rows and the cursors are stored in one
transaction (one batched :func:`monitor.store.alert_repo.store_transitions` per tick), so a crash never stores a transition
without its notifications. Batches older than the history horizon when first seen notify nobody. The
instants are also folded into finding episodes (:class:`Episodes`, with :mod:`rules.episodes`, the fold
``scan`` uses) and stored in the same transaction, notified or history; each alert names its episode.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.lifecycle import Alert, AlertEvent, EventKind, step_all
from monitor.alerts.routing import Route
from monitor.daemon.culprits import CulpritLocator
from monitor.daemon.fleet import EvaluationScope
from monitor.daemon.histories import EVAL_CURSOR, JobHistories
from monitor.daemon.tick import JobKey, job_target, tick_time
from monitor.metrics.exporter import AlertCount
from monitor.model import CollectorError, Engine, Finding, FindingEpisode, RuleTiming, Sample
from monitor.store import load_episodes, read_session, record_episodes, set_cursors
from monitor.store.alert_repo import load_alerts, store_transitions, transition_rows
from rules.episodes import CAUSED_BY, Episode, EpisodeFold, held, link, reopen, to_record
from rules.registry import RULES, Evaluator
from rules.replay import Instant, ReplayState, replay, resume

__all__ = ["Episodes", "EvaluateStage"]

log = logging.getLogger(__name__)

_HISTORY = "history"
_AHEAD_SAMPLES = 200_000
"""At most this many new samples are replayed before the tick's write transaction (the rest inside it, as
before): bounds the memory of the instants held between the two (a first catch-up of a big store)."""
_CLOCK_RULES = frozenset(name for name, spec in RULES.items() if spec.clock)


def _is_clock(rule: str, labels: Any) -> bool:
    """Findings, alerts and episodes judged at the tick's clock: ``no_progress`` and unreachable targets."""
    return rule in _CLOCK_RULES or labels.get("check") == "unreachable"


def _alert_job(alert: Alert) -> JobKey | None:
    try:
        return Engine(alert.labels.get("engine", "")), alert.labels["job_id"]
    except (KeyError, ValueError):
        return None


def _job_of(labels: Any) -> str:
    """``spark job q-1`` from an alert's labels (log lines)."""
    return f"{labels.get('engine', '?')} job {labels.get('job_id', '?')}"


def _with_episode(alert: Alert, episode: Episode | None) -> Alert:
    """``alert`` naming the finding episode its finding is in (unchanged when the finding is absent: it
    keeps naming its last episode)."""
    if episode is None or alert.episode_id == episode.id:
        return alert
    return dataclasses.replace(alert, episode_id=episode.id)


def _carry_marks(
    old: Alert | None, new: Alert, events: list[AlertEvent], terminated: bool, historical: bool,
    episode: Episode | None,
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


class Episodes:
    """The daemon's finding episodes: one :class:`~rules.episodes.EpisodeFold` per job (and one for the
    clock rules), reopened from the store's open episodes the first time a job is evaluated in this process,
    and the writing of what an evaluation began, extended or ended.

    Args:
        evaluator: the rules (for each rule's lifecycle ``for``: :func:`rules.episodes.held`).
        lookback: how far before an effect its cause is looked for among the stored episodes.
    """

    def __init__(self, evaluator: Evaluator, lookback: timedelta) -> None:
        self._evaluator = evaluator
        self._lookback = lookback
        self._folds: dict[JobKey, EpisodeFold] = {}
        self._clock: EpisodeFold | None = None

    def job(self, session: Session, key: JobKey) -> EpisodeFold:
        """The job's fold (its open episodes reopened from the store the first time)."""
        fold = self._folds.get(key)
        if fold is None:
            stored = load_episodes(session, engine=key[0], job_id=key[1], open_only=True)
            fold = self._folds[key] = EpisodeFold(reopen(r) for r in stored if not _is_clock(r.rule, r.labels))
        return fold

    def clock(self, session: Session, mine: Callable[[str, str, Any], bool] | None = None) -> EpisodeFold:
        """The fold of the findings judged at the tick's clock (with ``mine``, only the open episodes for
        which ``mine(engine, job_id, labels)`` holds: a fleet instance folds its own jobs' only)."""
        if self._clock is None:
            stored = load_episodes(session, open_only=True)
            self._clock = EpisodeFold(
                reopen(r) for r in stored
                if _is_clock(r.rule, r.labels) and (mine is None or mine(r.job.engine.value, r.job.job_id, r.labels))
            )  # fmt: skip
        return self._clock

    @staticmethod
    def add(fold: EpisodeFold, instant: Instant, touched: dict[str, Episode], *, history: bool = False) -> None:
        """Fold ``instant`` in; the episodes it ended, began or extended join ``touched`` (by id)."""
        ended = fold.add(instant, history=history)
        for episode in [*ended, *(fold.open[f.fingerprint()] for f in instant.findings)]:
            touched[episode.id] = episode

    def record(self, session: Session, key: JobKey | None, episodes: Iterable[Episode]) -> None:
        """Store the episodes that held for their rule's ``for`` (:func:`rules.episodes.held`, as ``scan``
        keeps them), ``notified`` unless history; a finding that names its cause is linked to the cause's
        episode, stored or among these (:func:`rules.episodes.link`)."""
        records = self.records(session, key, episodes)
        if records:
            record_episodes(session, records)

    def records(self, session: Session, key: JobKey | None, episodes: Iterable[Episode]) -> list[FindingEpisode]:
        """What :meth:`record` stores for job ``key`` (``None``: the clock's), without storing it: the jobs'
        records of a tick are stored together (one :func:`record_episodes`) before the clock's, which may
        link to them."""
        records = [to_record(e, notified=not e.history) for e in episodes if held(e, self._evaluator)]
        if not records:
            return []
        known: list[FindingEpisode] = []
        if any(CAUSED_BY in r.details for r in records):
            since = min(r.first_at for r in records) - self._lookback
            # a clock finding may name another job's episode (pipeline_freshness: where the staleness enters)
            jobs = {key} if key is not None else {
                (Engine(c["engine"]), c["job_id"]) for r in records
                if isinstance(c := r.details.get(CAUSED_BY), dict) and isinstance(c.get("job_id"), str)
                and c.get("engine") in {e.value for e in Engine}
            }  # fmt: skip
            for engine, job_id in sorted(jobs):
                known += load_episodes(session, engine=engine, job_id=job_id, since=since)
        return link(records, known)

    def forget(self, keys: Iterable[JobKey]) -> None:
        """Drop the folds of ``keys`` and the clock's (an evaluation that did not commit advanced them): the
        next evaluation reopens them from the store."""
        for key in keys:
            self._folds.pop(key, None)
        self._clock = None


class EvaluateStage:
    """One rule-evaluation tick at a time (see the module docstring); thread-safe for its counters.

    Args:
        sessions: the store's session factory.
        histories: the jobs' in-memory histories.
        evaluator: the compiled rules.
        timing: each rule's lifecycle timing.
        routes: the receivers' routes (which outbox rows a transition queues).
        horizon: instants older than this when first evaluated notify nobody.
        errors: the recent collector errors (``target_health``'s unreachable targets).
        culprits: locates the record behind Spark future-timestamp jumps and attaches it to the findings
            before they are folded and stepped (:mod:`monitor.daemon.culprits`); none by default.
        scope: in a fleet (:meth:`monitor.daemon.fleet.Fleet.evaluation_scope`), called in the tick's
            transaction: only the jobs of the targets this instance holds are evaluated (and their clock
            alerts and episodes); a job taken over from another instance resumes from its stored cursor.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        histories: JobHistories,
        evaluator: Evaluator,
        timing: Callable[[str], RuleTiming],
        routes: Sequence[Route],
        horizon: timedelta,
        errors: Callable[[], list[CollectorError]],
        culprits: CulpritLocator | None = None,
        scope: Callable[[Session, datetime], EvaluationScope | None] | None = None,
    ) -> None:
        self._sessions = sessions
        self._culprits = culprits
        self._scope = scope
        self._owned: set[JobKey] = set()
        self._histories = histories
        self._evaluator = evaluator
        self._timing = timing
        self._routes = list(routes)
        self._horizon = horizon
        self._errors = errors
        self._episodes = Episodes(evaluator, histories.lookback)
        self._lock = threading.Lock()
        self._alert_counts: list[AlertCount] = []
        self._last_at: datetime | None = None

    @property
    def last_evaluation_at(self) -> datetime | None:
        """When the last evaluation ran (its tick's ``now``)."""
        with self._lock:
            return self._last_at

    def evaluate(self, now: datetime) -> list[AlertEvent]:
        """One rule-evaluation tick at ``now``: every batch that arrived since the last tick, in order.

        Each job with new samples is replayed (:func:`rules.replay.replay`) from its evaluation cursor: at
        each new instant (a batch's own trigger time, an idle or lifecycle event) the rules see the history
        up to it, and the job's alerts step through the lifecycle at that time, so a stall that began and
        ended between two ticks (or while the daemon was stopped) fires and resolves. Then the rules judged
        at the tick's clock (``no_progress``) and the collector errors (``target_health`` unreachable) step
        their alerts at ``now``. Transitions, outbox rows and finding episodes are stored in one
        transaction with the jobs' evaluation cursors (collector ``rules`` in the cursor table).

        An instant already older than the history horizon when first evaluated steps the lifecycle (the
        alert is stored and shown) but notifies nobody, and neither does that alert's resolution (its
        episode is stored as history); a job whose newest data was that old when first seen raises no
        ``no_progress`` notification. Alerts resolved because their query terminated carry the annotation
        ``resolved_reason: terminated``.

        Returns:
            The transitions (pending/firing/resolved/cleared events), oldest instant first.

        Raises:
            Exception: the store failed; nothing of the tick is stored and the next tick evaluates it again.
        """
        when = tick_time(now)
        errors = self._errors()
        touched: list[JobKey] = []
        pending: list[JobKey] = []
        # load and replay before the write transaction: on SQLite it holds the store's write lock, which
        # the polls wait for (and fail on with "database is locked" after the busy timeout)
        with read_session(self._sessions) as session:
            self._histories.catch_up(session, when)
        ahead = self._replay_ahead()
        try:
            with self._sessions.begin() as session:
                scope = self._scope(session, when) if self._scope is not None else None
                if scope is not None:
                    self._take_over(session, scope)
                pending = self._histories.pending()
                touched = pending if scope is None else [k for k in pending if scope.owns_job(k)]
                out, alerts, evaluated = self._tick(session, when, touched, errors, scope, ahead)
        except BaseException:
            self._episodes.forget(touched)
            raise
        self._histories.done(evaluated, pending)
        self._set_alert_counts(alerts.values())
        with self._lock:
            self._last_at = when
        for event in out:
            which = alerts.get(event.fingerprint)
            if which is None:
                log.info("alert %s %s at %s", event.fingerprint, event.kind.value, event.at.isoformat())
                continue
            log.info(
                "alert %s %s for %s (%s) at %s: %s [fingerprint %s]",
                which.rule, event.kind.value, _job_of(which.labels), which.severity.label(),
                event.at.isoformat(), event.message or which.message, event.fingerprint,
            )  # fmt: skip
        return out

    def _take_over(self, session: Session, scope: EvaluationScope) -> None:
        """Jobs this instance evaluates now but did not at its last tick (a target taken over, or the
        first tick) continue from their stored cursors and episodes; the clock rules' episodes are re-read
        every tick (the set of jobs they cover may have changed)."""
        scope.resolve(self._histories.all())  # the jobs of unknown source, at once
        owned = {k for k in self._histories.all() if scope.owns_job(k)}
        new = owned - self._owned
        for key in sorted(new, key=lambda k: (k[0].value, k[1])):
            self._histories.reload_cursor(session, key)
        for key in self._owned - owned:
            self._histories.drop_replay(key)  # another instance evaluates it now
        self._episodes.forget(new)
        self._owned = owned

    def _replay_ahead(self) -> dict[JobKey, tuple[tuple[datetime, int] | None, list[Instant]]]:
        """The instants of the pending jobs, replayed before the tick's write transaction: job -> (the
        cursor replayed from, its instants). Only jobs with a kept replay state (their rolling history
        moves on with them), only jobs this instance evaluated at its last tick (in a fleet), and at most
        :data:`_AHEAD_SAMPLES` new samples; the tick replays the others in its transaction. An entry whose
        cursor is not the job's when the transaction uses it (a target taken over meanwhile) is replayed
        again there."""
        histories = self._histories.all()
        out: dict[JobKey, tuple[tuple[datetime, int] | None, list[Instant]]] = {}
        budget = _AHEAD_SAMPLES
        for key in self._histories.pending():
            if self._scope is not None and key not in self._owned:
                continue
            samples = histories[key]
            state = self._kept(key, samples)
            if state is None:
                continue
            last = self._histories.evaluated(key)
            budget -= len(samples) - resume(self._evaluator, samples, last, state)
            if budget < 0:
                break
            out[key] = (last, list(replay(self._evaluator, samples, last, state)))
        return out

    def _tick(
        self, session: Session, when: datetime, touched: list[JobKey], errors: list[CollectorError],
        scope: EvaluationScope | None = None,
        ahead: dict[JobKey, tuple[tuple[datetime, int] | None, list[Instant]]] | None = None,
    ) -> tuple[list[AlertEvent], dict[str, Alert], dict[JobKey, tuple[datetime, int]]]:
        """The evaluation inside the tick's transaction: (events, every alert by fingerprint, new cursors).
        ``ahead``: instants replayed before the transaction (:meth:`_replay_ahead`)."""
        out: list[AlertEvent] = []
        evaluated: dict[JobKey, tuple[datetime, int]] = {}
        alerts = load_alerts(session)
        per_job: dict[JobKey, dict[str, Alert]] = {}
        clock_alerts: dict[str, Alert] = {}

        def owned(engine: str, job_id: str, labels: Any) -> bool:
            if scope is None:
                return True
            if labels.get("check") == "unreachable":  # job_id is the target
                return job_id in scope.targets
            try:
                return scope.owns_job((Engine(engine), job_id))
            except ValueError:
                return False

        for fp, alert in alerts.items():
            if _is_clock(alert.rule, alert.labels):
                if owned(alert.labels.get("engine", ""), alert.labels.get("job_id", ""), alert.labels):
                    clock_alerts[fp] = alert
            else:
                key = _alert_job(alert)
                if key is not None:
                    per_job.setdefault(key, {})[fp] = alert
        histories = self._histories.all()
        cursors: dict[str, dict[str, Any]] = {}
        staged: list[FindingEpisode] = []  # the jobs' episodes, stored together after the loop
        stored: dict[str, Alert] = {}  # the alerts this tick changed, by fingerprint, as they are now
        outbox: list[dict[str, Any]] = []
        for key in touched:
            mine = per_job.setdefault(key, {})
            last = self._histories.evaluated(key)
            fold = self._episodes.job(session, key)
            episodes: dict[str, Episode] = {}
            early = ahead.get(key) if ahead else None
            instants = (early[1] if early is not None and early[0] == last
                        else replay(self._evaluator, histories[key], last, self._kept(key, histories[key])))  # fmt: skip
            for instant in instants:
                if self._culprits:
                    instant = self._culprits.attach(session, key, histories[key], instant)
                historical = when - instant.at > self._horizon
                self._episodes.add(fold, instant, episodes, history=historical)
                changed, events = step_all(mine, instant.findings, self._timing, instant.at)
                last = (instant.at, instant.at_count)
                if not changed:
                    continue
                changed = {fp: _carry_marks(mine.get(fp), alert, events, instant.terminated, historical,
                                            fold.open.get(fp))
                           for fp, alert in changed.items()}  # fmt: skip
                notify = [e for e in events if changed[e.fingerprint].annotations.get(_HISTORY) is None]
                outbox += transition_rows(changed.values(), notify, self._routes, when)
                stored.update(changed)
                mine.update(changed)
                alerts.update(changed)
                out.extend(events)
            staged += self._episodes.records(session, key, episodes.values())
            if last is not None:
                evaluated[key] = last
                cursors[job_target(key)] = {"evaluated_at": last[0].isoformat(), "at_count": last[1]}
        if staged:  # every job's episodes in one batched write, before the clock's (which may link to them)
            record_episodes(session, staged)
        set_cursors(session, EVAL_CURSOR, cursors, when)  # every job's evaluation cursor in one upsert
        findings = [f for key, samples in histories.items()
                    if (scope is None or scope.owns_job(key)) and not self._histories.seen_as_history(key)
                    for f in self._clock_findings(key, samples, when, evaluated.get(key))]  # fmt: skip
        findings += self._evaluator.evaluate_targets(errors, when)
        # a pipeline judged on data older than the history horizon (a catch-up, a scanned recording) notifies
        # nobody; in a fleet each instance keeps the pipeline findings of the jobs it holds (filtered below)
        findings += [f for f in self._evaluator.evaluate_pipelines(histories.values())
                     if when - f.observed_at <= self._horizon]
        if scope is not None:  # e.g. unreachable findings of a target lost while the store was down
            findings = [f for f in findings if owned(f.job.engine.value, f.job.job_id, f.labels)]
            self._episodes.forget(())
        clock_fold = self._episodes.clock(session, owned if scope is not None else None)
        clock_episodes: dict[str, Episode] = {}
        self._episodes.add(clock_fold, Instant(when, None, findings), clock_episodes)
        self._episodes.record(session, None, clock_episodes.values())
        changed, events = step_all(clock_alerts, findings, self._timing, when)
        if changed:
            changed = {fp: _with_episode(alert, clock_fold.open.get(fp)) for fp, alert in changed.items()}
            outbox += transition_rows(changed.values(), events, self._routes, when)
            stored.update(changed)
            alerts.update(changed)
            out.extend(events)
        # every transition of the tick in a few batched statements: each alert as it is now, the outbox rows
        # in the order of their transitions (each built with its alert as it was at that instant)
        store_transitions(session, list(stored.values()), outbox)
        return out, alerts, evaluated

    def _kept(self, key: JobKey, samples: Sequence[Sample]) -> ReplayState | None:
        """Job ``key``'s replay state kept across ticks, or ``None`` (a fresh one at each tick, as before)
        when its rules read further back than the histories keep (``lookback`` capped below the rules'
        window): then the window a tick rebuilds depends on what the list still holds, which a kept
        rolling history would not reproduce."""
        if not samples or self._evaluator.lookback(samples[-1].job) > self._histories.lookback:
            return None
        return self._histories.replay_state(key)

    def _clock_findings(
        self, key: JobKey, samples: Sequence[Sample], when: datetime, cursor: tuple[datetime, int] | None
    ) -> list[Finding]:
        """The clock rules' findings of job ``key`` at ``when``: on its kept rolling history when that
        holds every sample (the job evaluated up to its newest one: the same split history
        :meth:`Evaluator.evaluate_job` would build, without rebuilding it), else from ``samples``.
        ``cursor``: the job's evaluation cursor moved by this tick (``None``: not moved, the stored one)."""
        state = self._kept(key, samples)
        if state is not None:
            last = cursor if cursor is not None else self._histories.evaluated(key)
            start = resume(self._evaluator, samples, last, state)
            history = state.history()
            if start == len(samples) and history is not None:
                return self._evaluator.evaluate_history(history, when, clock=True)
        return self._evaluator.evaluate_job(samples, when, clock=True)

    def alert_counts(self) -> list[AlertCount]:
        """Alerts by rule, severity and state as of the last evaluation."""
        with self._lock:
            return list(self._alert_counts)

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
            self._alert_counts = [AlertCount(r, sev, st, n) for (r, sev, st), n in sorted(counts.items())]
