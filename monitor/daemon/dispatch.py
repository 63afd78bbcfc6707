"""The dispatch stage: deliver the outbox and keep each receiver's delivery figures.

:meth:`DispatchStage.dispatch` delivers the due outbox rows (:func:`monitor.notify.dispatcher.dispatch_due`):
a row is marked delivered only after a 2xx, so a kill between send and record re-sends it with the same
``Idempotency-Key``. Health reports queued by the reporting stage ride the same outbox.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.routing import Route
from monitor.daemon.tick import tick_time
from monitor.metrics.exporter import DeliveryStat
from monitor.notify.base import Notifier
from monitor.notify.dispatcher import DispatchReport, RetryPolicy, dispatch_due
from monitor.redaction import Redactor
from monitor.store.alert_repo import outbox_backlog

__all__ = ["RECEIVER_DEGRADED_AFTER", "DispatchStage"]

log = logging.getLogger(__name__)

#: Failed sends in a row after which a receiver makes ``/healthz`` say ``degraded``.
RECEIVER_DEGRADED_AFTER = 3


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


class DispatchStage:
    """Delivers the outbox to the receivers (see the module docstring); thread-safe for its figures.

    Args:
        sessions: the store's session factory.
        notifiers: the configured receivers.
        client: the HTTP client they send with (``None``: nothing is sent).
        routes: their routes.
        policy: retry timing.
        rng: random source of the retry jitter.
        redactor: the redactor of delivery errors (called each time).
        receivers: in a fleet, the receivers this instance delivers at a tick's ``now`` (the leases it
            holds, :meth:`monitor.daemon.fleet.Fleet.held_receivers`); ``None`` (or a call returning it): all.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        notifiers: Sequence[Notifier],
        client: httpx.Client | None,
        routes: Sequence[Route],
        policy: RetryPolicy,
        rng: random.Random,
        redactor: Callable[[], Redactor],
        receivers: Callable[[datetime], set[str] | None] | None = None,
    ) -> None:
        self._sessions = sessions
        self._receivers = receivers
        self._notifiers = list(notifiers)
        self._client = client
        self._routes = list(routes)
        self._policy = policy
        self._rng = rng
        self._redactor = redactor
        self._lock = threading.Lock()
        self._deliveries: dict[str, _Delivery] = {n.name: _Delivery() for n in notifiers}
        self._last_at: datetime | None = None

    @property
    def last_dispatch_at(self) -> datetime | None:
        """When the last delivery round ran (its tick's ``now``)."""
        with self._lock:
            return self._last_at

    def dispatch(self, now: datetime) -> DispatchReport:
        """Deliver the due outbox batches at ``now`` (nothing to do without receivers)."""
        when = tick_time(now)
        if self._client is None or not self._notifiers:
            return DispatchReport()
        only = self._receivers(when) if self._receivers is not None else None
        try:
            report = dispatch_due(
                self._sessions, self._notifiers, self._client, when,
                routes=self._routes, policy=self._policy, rng=self._rng, redactor=self._redactor(), only=only,
            )  # fmt: skip
        finally:
            self.refresh_outbox_backlog()
        with self._lock:
            self._last_at = when
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
