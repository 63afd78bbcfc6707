"""The daemon's parts composed: what it does on each tick, stage by stage.

Every method takes the tick's ``now`` (aware UTC) from its caller, the scheduler in
:mod:`monitor.daemon.compose`, which reads the clock once per tick; nothing here reads the clock or the
environment, so tests drive a :class:`Runtime` with a fake time and no sleeping. :class:`Runtime` holds one
stage per job and passes each call to it:

* :class:`~monitor.daemon.poll.PollStage` (:meth:`Runtime.poll`, :meth:`Runtime.ingest`): read a target
  and store what it read in one transaction; per-target health;
* :class:`~monitor.daemon.evaluate.EvaluateStage` (:meth:`Runtime.evaluate`): replay what arrived through
  the rules over the jobs' in-memory histories (:class:`~monitor.daemon.histories.JobHistories`), step
  and store the alerts, their notifications and the finding episodes;
* :class:`~monitor.daemon.dispatch.DispatchStage` (:meth:`Runtime.dispatch`): deliver the outbox;
* :class:`~monitor.daemon.reporting.ReportStage` (:meth:`Runtime.report`, :meth:`Runtime.write_report`):
  scheduled health reports;
* :class:`~monitor.daemon.housekeeping.Housekeeping` (:meth:`Runtime.clean_up`,
  :meth:`Runtime.sync_silences`): retention and the config file's silences.

:meth:`Runtime.health` gathers ``/healthz`` from them; the start/stop contract is
:mod:`monitor.daemon.service`'s (the composition root wraps these calls in scheduled services).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.lifecycle import AlertEvent
from monitor.alerts.routing import Route
from monitor.alerts.silences import Matcher, Silence
from monitor.daemon.culprits import CulpritLocator
from monitor.daemon.dispatch import RECEIVER_DEGRADED_AFTER, DispatchStage
from monitor.daemon.evaluate import EvaluateStage
from monitor.daemon.fleet import Fleet
from monitor.daemon.histories import JobHistories
from monitor.daemon.housekeeping import Housekeeping
from monitor.daemon.poll import LeaseGuard, PollStage, StoreCursors, Target, TargetHealth
from monitor.daemon.reporting import ReportStage
from monitor.daemon.tick import JobKey
from monitor.metrics.exporter import AlertCount, CollectorStat, DeliveryStat
from monitor.metrics.latest import LatestSamples
from monitor.model import PollResult, Sample
from monitor.notify.base import Notifier
from monitor.notify.dispatcher import DispatchReport, RetryPolicy
from monitor.redaction import Redactor, current
from monitor.reports.detailed import ReportSettings
from monitor.reports.render import Format
from monitor.reports.scheduled import HealthReport
from monitor.store import PurgeCounts, check_store
from rules.config import RulesConfig
from rules.pipeline import PipelineConfig
from rules.registry import Evaluator, history_window, rule_timing, whole_window
from rules.registry import validate as check_rules

__all__ = [
    "DEFAULT_LOOKBACK",
    "RECEIVER_DEGRADED_AFTER",
    "Runtime",
    "StoreCursors",
    "Target",
    "TargetHealth",
]

#: How much of each job's history (back from its newest sample) rule evaluation looks at.
DEFAULT_LOOKBACK = timedelta(hours=1)


class Runtime:
    """The daemon's ticks over its stages (see the module docstring).

    Args:
        sessions: store session factory.
        targets: configured targets.
        latest: newest-sample registry behind ``/metrics``.
        rules_config: the ``rules:`` section.
        pipelines: the ``pipelines:`` section (``pipeline_freshness``'s graph where inference cannot see).
        notifiers: configured receivers.
        routes: their routes.
        http_client: client the notifiers use.
        retention: samples older than this (relative to the tick's ``now``) are deleted by :meth:`clean_up`.
        lookback: how much of each job's history rules see (from the job's newest sample); a rule that must
            see its whole window (:func:`rules.registry.whole_window`: ``freshness_slo``) raises it.
        history_horizon: instants older than this when first evaluated notify nobody (default: the
            longest window of the enabled rules).
        retry_policy: delivery retry timing.
        rng: random source of the retry jitter.
        monotonic: monotonic clock (seconds) for poll durations.
        redactor: what collector errors, delivery errors and ``/healthz`` texts pass through before they
            are stored, logged or shown (default: the process's, :func:`monitor.redaction.current`).
        culprits: locates the records behind Spark future-timestamp jumps when the evaluate stage runs
            (:mod:`monitor.daemon.culprits`); none by default.
        fleet: this instance's leases (:class:`monitor.daemon.fleet.Fleet`): only the jobs of the targets
            it holds are evaluated and only the receivers it holds are delivered; ``None``: everything.

    Raises:
        ConfigError: invalid rule configuration.
    """

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        targets: Sequence[Target],
        latest: LatestSamples,
        rules_config: RulesConfig,
        pipelines: Sequence[PipelineConfig] = (),
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
        culprits: CulpritLocator | None = None,
        fleet: Fleet | None = None,
    ) -> None:
        check_rules(rules_config)
        self._sessions = sessions
        self._redactor = redactor
        self.targets = list(targets)
        self.latest = latest
        window = history_window(rules_config)
        horizon = history_horizon if history_horizon is not None else window
        # keep in memory only what the enabled rules read (``lookback`` caps it, except for the rules that must
        # see their whole window to alert as ``scan`` does: ``freshness_slo``'s and ``pipeline_slo``'s 3 days)
        evaluator = Evaluator(rules_config, pipelines)
        kept = max(min(lookback, window), whole_window(rules_config), evaluator.pipeline_window())
        self._histories = JobHistories(sessions, kept, horizon)
        self._polls = PollStage(sessions, self.targets, latest, monotonic, lambda: self.redactor)
        self._evaluation = EvaluateStage(
            sessions, self._histories, evaluator, rule_timing(rules_config), routes, horizon,
            self._polls.recent_errors, culprits, fleet.evaluation_scope if fleet is not None else None,
        )  # fmt: skip
        self._delivery = DispatchStage(
            sessions, notifiers, http_client, routes, retry_policy or RetryPolicy(),
            rng or random.Random(),  # noqa: S311 - retry jitter, not cryptography
            lambda: self.redactor, fleet.held_receivers if fleet is not None else None,
        )  # fmt: skip
        self._reports = ReportStage(sessions)
        self._housekeeping = Housekeeping(sessions, retention)

    @property
    def redactor(self) -> Redactor:
        """The redactor of every text this runtime stores or shows."""
        return self._redactor if self._redactor is not None else current()

    @property
    def last_evaluation_at(self) -> datetime | None:
        """When the last evaluation ran."""
        return self._evaluation.last_evaluation_at

    @property
    def last_dispatch_at(self) -> datetime | None:
        """When the last delivery round ran."""
        return self._delivery.last_dispatch_at

    # ------------------------------------------------------------------------------------------- polls

    def poll(self, target: Target, now: datetime, guard: LeaseGuard | None = None) -> PollResult:
        """Poll ``target`` once and store what it read (:meth:`PollStage.poll`, ``guard`` the fleet's
        lease check; never raises)."""
        return self._polls.poll(target, now, guard)

    def ingest(self, result: PollResult, collector: str) -> None:
        """Store what the listener ingest endpoint accepted (:meth:`PollStage.ingest`).

        Raises:
            Exception: the store failed (the endpoint answers 503 and the client retries).
        """
        self._polls.ingest(result, collector)

    def seed_latest(self) -> int:
        """Fill ``latest`` from the store (each job's recent history), so ``/metrics`` shows the jobs
        right after a restart. Returns the number of samples loaded.

        Call before the scheduler starts: it also primes :meth:`recent_history` for the first evaluation.
        """
        by_job = self.recent_history()
        samples: list[Sample] = [s for history in by_job.values() for s in history]
        self.latest.update(samples)
        return len(samples)

    def recent_history(self) -> dict[JobKey, list[Sample]]:
        """Each job's samples from its newest one back ``lookback``, oldest first
        (:meth:`JobHistories.recent`)."""
        return self._histories.recent()

    # ----------------------------------------------------------------------------- evaluation, delivery

    def evaluate(self, now: datetime) -> list[AlertEvent]:
        """One rule-evaluation tick at ``now`` (:meth:`EvaluateStage.evaluate`).

        Returns:
            The transitions (pending/firing/resolved/cleared events), oldest instant first.
        """
        return self._evaluation.evaluate(now)

    def dispatch(self, now: datetime) -> DispatchReport:
        """Deliver the due outbox batches at ``now`` (:meth:`DispatchStage.dispatch`)."""
        return self._delivery.dispatch(now)

    def refresh_outbox_backlog(self) -> None:
        """Re-read each receiver's waiting notifications for ``/metrics``."""
        self._delivery.refresh_outbox_backlog()

    def delivery_stats(self) -> list[DeliveryStat]:
        """Delivery to every receiver, for ``/metrics``."""
        return self._delivery.delivery_stats()

    def failing_receivers(self) -> dict[str, dict[str, Any]]:
        """Receivers whose last :data:`RECEIVER_DEGRADED_AFTER` or more sends failed."""
        return self._delivery.failing_receivers()

    # ----------------------------------------------------------------------------- reports, housekeeping

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
        """One scheduled run of report ``name`` at ``now``, queued for ``receiver`` (:meth:`ReportStage.report`)."""
        return self._reports.report(name, receiver, now, matchers, detail_since=detail_since, settings=settings)

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
        """One scheduled run of a detailed report written into ``directory`` (:meth:`ReportStage.write_report`)."""
        return self._reports.write_report(name, directory, formats, since, now, matchers=matchers, settings=settings)

    def clean_up(self, now: datetime) -> PurgeCounts:
        """Retention at ``now`` (:meth:`Housekeeping.clean_up`)."""
        return self._housekeeping.clean_up(now)

    def sync_silences(self, silences: Sequence[Silence], now: datetime) -> int:
        """Store the config file's new silences (:meth:`Housekeeping.sync_silences`); how many were added."""
        return self._housekeeping.sync_silences(silences, now)

    # ------------------------------------------------------------------------------------------- views

    def alert_counts(self) -> list[AlertCount]:
        """Alerts by rule, severity and state as of the last evaluation."""
        return self._evaluation.alert_counts()

    def load_alert_counts(self) -> None:
        """Initialise :meth:`alert_counts` from the store (at start, before the first evaluation)."""
        self._evaluation.load_alert_counts()

    def collector_stats(self) -> list[CollectorStat]:
        """Health of every target, for ``/metrics``."""
        return self._polls.collector_stats()

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(store reachable, JSON status)`` for ``/healthz``: store, targets, last ticks."""
        store_ok, store = check_store(self._sessions)
        last_evaluation, last_dispatch = self.last_evaluation_at, self.last_dispatch_at
        body: dict[str, Any] = {
            **store,
            "targets": self._polls.target_health(),
            "last_evaluation_at": last_evaluation.isoformat() if last_evaluation else None,
            "last_dispatch_at": last_dispatch.isoformat() if last_dispatch else None,
        }
        failing = self.failing_receivers()
        if failing:
            body["failing_receivers"] = failing
            body["degraded"] = [
                f"receiver {name}: {info['consecutive_failures']} failed sends in a row ({info['last_error']})"
                for name, info in failing.items()
            ]
        return store_ok, self.redactor.redact_json(body)
