"""The dispatcher: delivers the outbox and owns every delivery policy.

One :func:`dispatch_due` call (the composition root calls it on each tick with the tick's ``now``):

1. In one transaction: queue repeats of still-firing alerts (``repeat_interval``, skipping silenced
   ones), read the pending outbox, keep per (receiver, alert) only the oldest row (so a ``resolved``
   never overtakes its ``firing``), suppress rows whose alert a silence mutes and resolved rows whose
   firing was never delivered to that receiver, give up on batches older than ``max_age``, and seal the
   due rows into batches: one per receiver and job (grouping), with an idempotency key that is kept for
   every retry of that batch. A health-report row (:func:`monitor.store.alert_repo.enqueue_report`) is
   its own batch, keyed by report name and scheduled minute; silences do not apply to it, and a
   receiver without ``send_report`` (Alertmanager) gives it up.
2. For each batch, first record the attempt in its own transaction (``attempts + 1``, ``next_attempt_at``
   = now + backoff, ``last_error`` saying the attempt's outcome was not recorded): if the process dies
   during the send, the row says so and is sent again only after the backoff, the one message that was
   in flight. Then send it through its notifier, outside any transaction.
3. Record each outcome in its own transaction: 2xx -> ``delivered``; a retryable
   :class:`~monitor.errors.DeliveryError` (429, 5xx, timeout, connection error) -> ``attempts + 1`` and
   ``next_attempt_at = now + full-jitter backoff``; any other failure -> ``gave_up`` with the error.

A row is marked delivered only after a 2xx, so a crash between send and record re-sends the same batch
with the same ``Idempotency-Key`` (at-least-once; exactly-once for receivers that honour the key). Slack
incoming webhooks have no idempotency key: there a crash during a send can duplicate that one message
(never more: batches are sent one at a time and each outcome is committed before the next send), and the
re-send is logged as a possible duplicate. One dispatcher delivers a receiver at a time: in a fleet, the
holder of the receiver's lease (``only``).

Every error text is stored and logged through the process's redactor (:mod:`monitor.redaction`), so a
receiver echoing its URL's path or a token in its error body leaks nothing. Log lines name the receiver,
the rules and the job; each delivery is logged (INFO), each failure too (WARNING).
:attr:`DispatchReport.by_receiver` counts, per receiver, the notifications sent, failed, retried and
given up (``/metrics``).

Backoff follows "exponential backoff with full jitter" (AWS Architecture Blog, 2015): after the n-th
failed attempt the delay is ``uniform(0, min(max_backoff, initial_backoff * 2**(n-1)))``. The random
source is injected, and so is the clock (``now``): tests step a fake clock and never sleep.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx
from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.notification import NotificationBatch, NotificationStatus, batch_key
from monitor.alerts.routing import Route
from monitor.alerts.silences import Silence, is_silenced
from monitor.errors import DeliveryError
from monitor.model import ensure_utc
from monitor.notify.base import Notifier, ReportBatch, ReportNotifier, job_title
from monitor.redaction import Redactor, current
from monitor.store.alert_repo import (
    OUTBOX_DELIVERED,
    OUTBOX_GAVE_UP,
    OUTBOX_SUPPRESSED,
    OutboxItem,
    ReportOutboxItem,
    enqueue_repeats,
    finish_outbox,
    list_silences,
    open_outbox,
    open_report_outbox,
    outbox_errors,
    retry_outbox,
    seal_outbox,
    told_in_episode,
)

__all__ = ["IN_FLIGHT", "DispatchReport", "ReceiverOutcome", "RetryPolicy", "dispatch_due"]

#: Start of ``last_error`` while an attempt is in flight (what a row says after a crash during a send).
IN_FLIGHT = "attempt started"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """Retry timing.

    Attributes:
        initial_backoff: upper bound of the first retry delay.
        max_backoff: cap of the delay's upper bound.
        max_age: a batch whose oldest row was queued longer ago than this is given up (recorded as
            ``gave_up`` with ``last_error`` saying so) instead of being sent.

    Raises:
        ValueError: non-positive durations or ``max_backoff < initial_backoff``.
    """

    initial_backoff: timedelta = timedelta(seconds=10)
    max_backoff: timedelta = timedelta(minutes=5)
    max_age: timedelta = timedelta(hours=24)

    def __post_init__(self) -> None:
        zero = timedelta(0)
        if min(self.initial_backoff, self.max_backoff, self.max_age) <= zero:
            raise ValueError("RetryPolicy durations must be positive")
        if self.max_backoff < self.initial_backoff:
            raise ValueError("RetryPolicy.max_backoff must be >= initial_backoff")

    def backoff(self, attempts: int, rng: random.Random) -> timedelta:
        """Delay before the next attempt after ``attempts`` failed ones (>= 1): full jitter."""
        ceiling_s = min(
            self.max_backoff.total_seconds(),
            self.initial_backoff.total_seconds() * 2.0 ** min(max(attempts - 1, 0), 62),
        )
        return timedelta(seconds=rng.uniform(0.0, ceiling_s))


@dataclass
class ReceiverOutcome:
    """One receiver's part of a :class:`DispatchReport`, in notifications (outbox rows).

    Attributes:
        sent: delivered (2xx).
        failed: in a send that failed (retryable or not).
        retried: failed and scheduled again.
        gave_up: given up (a non-retryable failure, ``max_age``, no notifier).
        last_error: the latest failure's text (redacted), ``None`` if the latest send succeeded.
        delivered_any: whether a send succeeded.
        failed_sends_since_success: failed sends (batches) after the last successful one (all of them
            when none succeeded).
    """

    sent: int = 0
    failed: int = 0
    retried: int = 0
    gave_up: int = 0
    last_error: str | None = None
    delivered_any: bool = False
    failed_sends_since_success: int = 0


@dataclass
class DispatchReport:
    """What one :func:`dispatch_due` call did (counts of outbox rows; ``batches_sent`` counts sends)."""

    queued_repeats: int = 0
    batches_sent: int = 0
    delivered: int = 0
    retried: int = 0
    gave_up: int = 0
    suppressed: int = 0
    errors: list[str] = field(default_factory=list)
    by_receiver: dict[str, ReceiverOutcome] = field(default_factory=dict)

    def receiver(self, name: str) -> ReceiverOutcome:
        """The (created on first use) outcome of receiver ``name``."""
        return self.by_receiver.setdefault(name, ReceiverOutcome())


@dataclass(frozen=True)
class _Batch:
    receiver: str
    group_key: str
    key: str
    items: tuple[OutboxItem, ...] | tuple[ReportOutboxItem]

    @property
    def oldest(self) -> datetime:
        return min(i.created_at for i in self.items)

    @property
    def attempts(self) -> int:
        return max(i.attempts for i in self.items)


def _head_of_line(items: Sequence[OutboxItem]) -> list[OutboxItem]:
    """The oldest open row per (receiver, fingerprint): later rows wait until it is finished."""
    seen: set[tuple[str, str]] = set()
    heads: list[OutboxItem] = []
    for item in items:  # ordered by id
        pair = (item.receiver, item.fingerprint)
        if pair not in seen:
            seen.add(pair)
            heads.append(item)
    return heads


def _plan(
    session: Session,
    notifiers: Mapping[str, Notifier],
    routes: Sequence[Route],
    policy: RetryPolicy,
    now: datetime,
    report: DispatchReport,
    only: Collection[str] | None = None,
) -> list[_Batch]:
    silences: list[Silence] = list_silences(session, active_at=now)
    if only is not None:
        routes = [r for r in routes if r.receiver in only]
    report.queued_repeats = enqueue_repeats(session, routes, silences, now) if routes else 0
    heads = _head_of_line(open_outbox(session))
    if only is not None:
        heads = [i for i in heads if i.receiver in only]

    unknown = [i for i in heads if i.receiver not in notifiers]
    if unknown:
        names = sorted({i.receiver for i in unknown})
        finish_outbox(session, unknown, OUTBOX_GAVE_UP, now, error=f"no notifier configured for {names}")
        report.gave_up += len(unknown)
        for item in unknown:
            report.receiver(item.receiver).gave_up += 1
    heads = [i for i in heads if i.receiver in notifiers]

    # Silences apply to rows not yet sent; a sealed batch may already have reached the receiver.
    muted = [i for i in heads if i.batch_key is None and is_silenced(i.notification.labels, silences, now)]
    if muted:
        finish_outbox(session, muted, OUTBOX_SUPPRESSED, now, error="silenced")
        report.suppressed += len(muted)
    muted_ids = {i.id for i in muted}

    # A resolved message only follows a firing message the receiver got in the same episode (as in
    # Alertmanager): an alert silenced while it fired, or whose firing was given up, resolves quietly.
    resolved = [
        i for i in heads
        if i.batch_key is None and i.id not in muted_ids and i.notification.status is NotificationStatus.RESOLVED
    ]  # fmt: skip
    if resolved:
        orphans = [
            i for i in resolved
            if not told_in_episode(session, i.receiver, i.fingerprint, i.notification.fired_at)
        ]  # fmt: skip
        if orphans:
            finish_outbox(session, orphans, OUTBOX_SUPPRESSED, now, error="firing was not delivered")
            report.suppressed += len(orphans)
            muted_ids.update(i.id for i in orphans)

    sealed: dict[str, list[OutboxItem]] = {}
    fresh: dict[tuple[str, str], list[OutboxItem]] = {}
    for item in heads:
        if item.id in muted_ids or item.next_attempt_at > now:
            continue
        if item.batch_key is not None:
            sealed.setdefault(item.batch_key, []).append(item)
        else:
            fresh.setdefault((item.receiver, item.group_key), []).append(item)

    batches = [_Batch(v[0].receiver, v[0].group_key, k, tuple(v)) for k, v in sealed.items()]
    for (receiver, group), group_items in fresh.items():
        key = batch_key(receiver, [i.idempotency_key for i in group_items])
        seal_outbox(session, [i.id for i in group_items], key)
        batches.append(_Batch(receiver, group, key, tuple(group_items)))

    batches.extend(_report_batches(session, notifiers, now, report))

    due: list[_Batch] = []
    for batch in sorted(batches, key=lambda b: min(i.id for i in b.items)):
        if now - batch.oldest > policy.max_age:
            error = f"gave up: older than max_age {policy.max_age} after {batch.attempts} failed attempts"
            finish_outbox(session, batch.items, OUTBOX_GAVE_UP, now, error=error)
            report.gave_up += len(batch.items)
            report.receiver(batch.receiver).gave_up += len(batch.items)
            log.warning("%s: %s", _describe(batch), error)
        else:
            due.append(batch)
    return due


def _report_batches(
    session: Session, notifiers: Mapping[str, Notifier], now: datetime, report: DispatchReport
) -> list[_Batch]:
    """Health-report rows: each is its own batch (silences and grouping do not apply to reports)."""
    out: list[_Batch] = []
    for item in open_report_outbox(session):
        notifier = notifiers.get(item.receiver)
        if not isinstance(notifier, ReportNotifier):
            why = "no notifier configured" if notifier is None else "the receiver cannot deliver reports"
            finish_outbox(session, [item], OUTBOX_GAVE_UP, now, error=f"{why}: {item.receiver!r}")
            report.gave_up += 1
            report.receiver(item.receiver).gave_up += 1
        elif item.next_attempt_at <= now:
            out.append(_Batch(item.receiver, item.group_key, item.batch_key or item.idempotency_key, (item,)))
    return out


def _describe(batch: _Batch) -> str:
    """``receiver 'ops': firing watermark_stall for clicks (spark q-1), batch <key>`` (log lines)."""
    first = batch.items[0]
    if isinstance(first, ReportOutboxItem):
        return f"receiver {batch.receiver!r}: report {first.report.name}, batch {batch.key}"
    alerts = [i.notification for i in batch.items if isinstance(i, OutboxItem)]
    labels, annotations = alerts[0].labels, alerts[0].annotations
    job = job_title(labels.get("engine"), labels.get("job_id"), annotations.get("job_name"))
    what = ", ".join(sorted({f"{a.status.value} {a.rule}" for a in alerts}))
    return f"receiver {batch.receiver!r}: {what} for {job}, batch {batch.key}"


def _deliver(notifier: Notifier, batch: _Batch, client: httpx.Client, now: datetime) -> None:
    first = batch.items[0]
    if isinstance(first, ReportOutboxItem):
        assert isinstance(notifier, ReportNotifier)  # checked by _report_batches
        notifier.send_report(ReportBatch(batch.receiver, batch.key, first.report, now), client)
        return
    alerts = tuple(i.notification for i in batch.items if isinstance(i, OutboxItem))
    notifier.send(NotificationBatch(batch.receiver, batch.group_key, batch.key, alerts, now), client)


def _send(
    notifier: Notifier, batch: _Batch, client: httpx.Client, now: datetime
) -> DeliveryError | None:
    try:
        _deliver(notifier, batch, client, now)
    except DeliveryError as exc:
        return exc
    except Exception as exc:  # a notifier bug must not stop the other receivers' deliveries
        # Only the type is recorded: the message of an unexpected error might quote a secret.
        return DeliveryError(f"receiver {batch.receiver!r}: unexpected {type(exc).__name__}", retryable=True)
    return None


def dispatch_due(
    session_factory: sessionmaker[Session],
    notifiers: Iterable[Notifier],
    client: httpx.Client,
    now: datetime,
    *,
    routes: Sequence[Route] = (),
    policy: RetryPolicy | None = None,
    rng: random.Random | None = None,
    on_sent: Callable[[str, int], None] | None = None,
    redactor: Redactor | None = None,
    only: Collection[str] | None = None,
) -> DispatchReport:
    """Deliver every due outbox batch once (see the module docstring for the policy).

    Args:
        session_factory: opens the transactions (``factory.begin()``).
        notifiers: the configured receivers (by ``name``).
        client: HTTP client the notifiers use.
        now: the tick's time, aware UTC.
        routes: receivers' routes, used to queue ``repeat_interval`` repeats (none: no repeats).
        policy: retry timing (default :class:`RetryPolicy`).
        rng: random source of the backoff jitter (default: a fresh :class:`random.Random`).
        on_sent: optional hook called with (receiver, number of alerts) after each 2xx (metrics).
        redactor: what error texts pass through before they are stored or logged (default: the
            process's, :func:`monitor.redaction.current`).
        only: deliver only these receivers' rows and repeats, leave the others' alone (a fleet instance
            delivers the receivers whose lease it holds, :mod:`monitor.daemon.fleet`); ``None``: all.

    Returns:
        Counts of what happened.

    Raises:
        ValueError: ``now`` is naive, or two notifiers share a name.
    """
    now_utc = ensure_utc(now, "now")
    assert now_utc is not None
    by_name: dict[str, Notifier] = {}
    for notifier in notifiers:
        if notifier.name in by_name:
            raise ValueError(f"two notifiers are named {notifier.name!r}")
        by_name[notifier.name] = notifier
    policy = policy or RetryPolicy()
    rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
    report = DispatchReport()

    with session_factory.begin() as session:
        batches = _plan(session, by_name, routes, policy, now_utc, report, only)

    redact = (redactor or current()).redact
    for batch in batches:
        attempts = batch.attempts + 1
        described = _describe(batch)
        with session_factory.begin() as session:
            _record_attempt(session, batch, attempts, now_utc + policy.backoff(attempts, rng), now_utc, by_name)
        error = _send(by_name[batch.receiver], batch, client, now_utc)
        report.batches_sent += 1
        outcome = report.receiver(batch.receiver)
        text = redact(str(error)) if error is not None else None
        with session_factory.begin() as session:
            if error is None:
                finish_outbox(session, batch.items, OUTBOX_DELIVERED, now_utc, attempts=attempts)
                report.delivered += len(batch.items)
                outcome.sent += len(batch.items)
                outcome.last_error = None
                outcome.delivered_any = True
                outcome.failed_sends_since_success = 0
            elif error.retryable:
                assert text is not None
                next_at = now_utc + policy.backoff(attempts, rng)
                retry_outbox(session, [i.id for i in batch.items], attempts, next_at, text)
                report.retried += len(batch.items)
                outcome.failed += len(batch.items)
                outcome.retried += len(batch.items)
                outcome.last_error = text
                outcome.failed_sends_since_success += 1
            else:
                finish_outbox(session, batch.items, OUTBOX_GAVE_UP, now_utc, error=text, attempts=attempts)
                report.gave_up += len(batch.items)
                outcome.failed += len(batch.items)
                outcome.gave_up += len(batch.items)
                outcome.last_error = text
                outcome.failed_sends_since_success += 1
        if error is None:
            log.info("delivered %d notification(s) to %s (attempt %d)", len(batch.items), described, attempts)
            if on_sent is not None:
                on_sent(batch.receiver, len(batch.items))
        else:
            assert text is not None
            report.errors.append(text)
            verdict = "will retry" if error.retryable else "gave up"
            log.warning("not delivered (attempt %d, %s) to %s: %s", attempts, verdict, described, text)
    return report


def _record_attempt(
    session: Session,
    batch: _Batch,
    attempts: int,
    retry_at: datetime,
    now: datetime,
    notifiers: Mapping[str, Notifier],
) -> None:
    """Commit, before the send, that attempt ``attempts`` of ``batch`` starts at ``now``: should the
    process die during the send, the row is tried again at ``retry_at`` (not at once) and says why. A
    batch whose previous attempt was cut off this way is logged, as a possible duplicate where the
    receiver has no idempotency key."""
    previous = _previous_errors(session, batch)
    if any(e is not None and e.startswith(IN_FLIGHT) for e in previous):
        keyed = getattr(notifiers[batch.receiver], "honours_idempotency_key", True)
        log.warning(
            "%s: the previous attempt was cut off (the daemon stopped during the send); sending again%s",
            _describe(batch),
            "" if keyed else ": the receiver has no idempotency key, so it may show this message twice",
        )
    note = f"{IN_FLIGHT} at {now.isoformat()}; its outcome was not recorded (the daemon stopped during the send?)"
    retry_outbox(session, [i.id for i in batch.items], attempts, retry_at, note)


def _previous_errors(session: Session, batch: _Batch) -> list[str | None]:
    return outbox_errors(session, [i.id for i in batch.items])
