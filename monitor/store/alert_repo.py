"""Repository functions for alerts, the outbox, silences and the notification log.

Like :mod:`monitor.store.repo`, every function takes a :class:`~sqlalchemy.orm.Session` and does not
commit: the caller owns the transaction (``with factory.begin() as session:``). In particular
:func:`apply_transitions` writes the alert rows and their outbox rows in the caller's one transaction,
so a crash either keeps both or neither: a transition is never stored without its notifications.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from monitor.alerts.lifecycle import Alert, AlertEvent, EventKind, group_key
from monitor.alerts.notification import AlertNotification, NotificationStatus, notification_key, repeat_key
from monitor.alerts.report_notification import HealthReport, report_fingerprint, report_key
from monitor.alerts.routing import Route, routes_for
from monitor.alerts.silences import Matcher, Silence, is_silenced
from monitor.model import AlertState, Severity
from monitor.store.alert_tables import AlertRow, NotificationLogRow, OutboxRow, SilenceRow
from monitor.store.upsert import chunks, insert_ignoring, upsert_statement

__all__ = [
    "OUTBOX_DELIVERED",
    "OUTBOX_GAVE_UP",
    "OUTBOX_PENDING",
    "OUTBOX_REPORT_STATUS",
    "OUTBOX_SUPPRESSED",
    "OutboxItem",
    "ReportOutboxItem",
    "add_silence",
    "apply_transitions",
    "enqueue_repeats",
    "enqueue_report",
    "expire_silence",
    "finish_outbox",
    "list_silences",
    "load_alerts",
    "open_outbox",
    "open_report_outbox",
    "outbox_backlog",
    "outbox_errors",
    "retry_outbox",
    "seal_outbox",
    "store_transitions",
    "told_in_episode",
    "transition_rows",
]

OUTBOX_PENDING: Final = "pending"
OUTBOX_DELIVERED: Final = "delivered"
OUTBOX_GAVE_UP: Final = "gave_up"
OUTBOX_SUPPRESSED: Final = "suppressed"
_FINISHED_AT: Final = {
    OUTBOX_DELIVERED: "delivered_at",
    OUTBOX_GAVE_UP: "gave_up_at",
    OUTBOX_SUPPRESSED: "suppressed_at",
}
#: ``outbox.status`` of a health report row (alert rows are ``firing``/``resolved``).
OUTBOX_REPORT_STATUS: Final = "report"
_NOTIFY: Final = {EventKind.FIRING: NotificationStatus.FIRING, EventKind.RESOLVED: NotificationStatus.RESOLVED}
_CHUNK: Final = 500


# --- alerts -----------------------------------------------------------------------------------------


def _alert_values(alert: Alert) -> dict[str, Any]:
    return {
        "fingerprint": alert.fingerprint,
        "rule": alert.rule,
        "group_key": group_key(alert.labels),
        "labels": dict(alert.labels),
        "severity": alert.severity.label(),
        "state": alert.state.value,
        "active_at": alert.active_at,
        "fired_at": alert.fired_at,
        "resolved_at": alert.resolved_at,
        "last_evaluated_at": alert.last_evaluated_at,
        "keep_firing_since": alert.keep_firing_since,
        "message": alert.message,
        "annotations": dict(alert.annotations),
        "episode_id": alert.episode_id,
    }


#: the columns an upsert of an alert overwrites (all but its fingerprint)
_ALERT_UPDATED: Final = (
    "rule", "group_key", "labels", "severity", "state", "active_at", "fired_at", "resolved_at", "last_evaluated_at",
    "keep_firing_since", "message", "annotations", "episode_id",
)  # fmt: skip


def _to_alert(row: Any) -> Alert:
    """``row``: an :class:`AlertRow` or a row of its columns."""
    return Alert(
        fingerprint=row.fingerprint,
        rule=row.rule,
        labels={str(k): str(v) for k, v in row.labels.items()},
        severity=Severity.parse(row.severity),
        state=AlertState(row.state),
        active_at=row.active_at,
        fired_at=row.fired_at,
        resolved_at=row.resolved_at,
        last_evaluated_at=row.last_evaluated_at,
        message=row.message,
        annotations={str(k): str(v) for k, v in row.annotations.items()},
        keep_firing_since=row.keep_firing_since,
        episode_id=row.episode_id,
    )


def load_alerts(
    session: Session,
    *,
    states: Iterable[AlertState] | None = None,
    rules: Iterable[str] | None = None,
) -> dict[str, Alert]:
    """Stored alerts by fingerprint, optionally only those in ``states`` and/or of ``rules`` (read as plain
    rows, no ORM object per alert: every evaluation tick and delivery pass reads them all)."""
    query = select(*AlertRow.__table__.columns)
    if states is not None:
        query = query.where(AlertRow.state.in_([s.value for s in states]))
    if rules is not None:
        query = query.where(AlertRow.rule.in_(list(rules)))
    return {row.fingerprint: _to_alert(row) for row in session.execute(query)}


def _upsert_alerts(session: Session, alerts: Sequence[Alert]) -> None:
    """Insert or update ``alerts`` by fingerprint: on SQLite and PostgreSQL one ``INSERT ... ON CONFLICT
    (fingerprint) DO UPDATE`` per :data:`_CHUNK` alerts (no read first, no ORM object per alert); elsewhere a
    read of the stored rows, then ORM inserts and updates."""
    if not alerts:
        return
    dialect = session.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        stmt = upsert_statement(dialect, AlertRow.__table__, ("fingerprint",), _ALERT_UPDATED)
        for chunk in chunks([_alert_values(a) for a in alerts]):
            session.execute(stmt, list(chunk))
        return
    fps = [a.fingerprint for a in alerts]
    rows: dict[str, AlertRow] = {}
    for start in range(0, len(fps), _CHUNK):
        chunk = fps[start : start + _CHUNK]
        rows.update((r.fingerprint, r) for r in session.scalars(select(AlertRow).where(AlertRow.fingerprint.in_(chunk))))
    for alert in alerts:
        values = _alert_values(alert)
        row = rows.get(alert.fingerprint)
        if row is None:
            session.add(AlertRow(**values))
            continue
        for name, value in values.items():
            setattr(row, name, value)


# --- outbox -----------------------------------------------------------------------------------------


_OUTBOX_KEY: Final = ("receiver", "idempotency_key")  # uq_outbox_receiver_idempotency_key


def _queue(session: Session, rows: list[dict[str, Any]]) -> int:
    """Insert outbox rows, ignoring those whose (receiver, idempotency key) is queued already, by this
    transaction or a concurrent one (another instance): the unique constraint is the guard, not a read
    before the write. Returns the number of rows queued."""
    session.flush()
    queued = insert_ignoring(session, OutboxRow, rows, _OUTBOX_KEY, count=True)
    assert queued is not None
    return queued


def _outbox_row(
    receiver: str, notification: AlertNotification, key: str, now: datetime
) -> dict[str, Any]:
    return dict(
        receiver=receiver,
        fingerprint=notification.fingerprint,
        group_key=notification.group_key,
        status=notification.status.value,
        idempotency_key=key,
        payload=notification.to_json(),
        created_at=now,
        state=OUTBOX_PENDING,
        attempts=0,
        next_attempt_at=now,
    )


def apply_transitions(
    session: Session,
    alerts: Iterable[Alert],
    events: Iterable[AlertEvent],
    routes: Sequence[Route],
    now: datetime,
) -> int:
    """Store ``alerts`` (insert or update by fingerprint) and queue one outbox row per notification
    (:func:`transition_rows` then :func:`store_transitions`).

    Nothing is committed: call inside the transaction that must hold both (``with factory.begin() as s:``).

    Args:
        alerts: the alerts :func:`monitor.alerts.lifecycle.step_all` changed (all events' alerts must be
            among them).
        events: that step's events.
        routes: receivers' routes.
        now: the tick's time (``created_at``/first ``next_attempt_at`` of the rows), aware UTC.

    Returns:
        The number of outbox rows queued.

    Raises:
        ValueError: an event names an alert not in ``alerts``.
    """
    by_fp = {a.fingerprint: a for a in alerts}
    return store_transitions(session, list(by_fp.values()), transition_rows(by_fp.values(), events, routes, now))


def transition_rows(
    alerts: Iterable[Alert], events: Iterable[AlertEvent], routes: Sequence[Route], now: datetime
) -> list[dict[str, Any]]:
    """The outbox rows of one step's transitions (no database): every ``FIRING`` and ``RESOLVED`` event
    becomes one row per receiver whose route accepts the alert (:func:`monitor.alerts.routing.routes_for`;
    resolved only where ``send_resolved``), with the alert as it is after that step and a deterministic
    idempotency key (:func:`~monitor.alerts.notification.notification_key`): storing the same transitions
    twice queues nothing new. ``PENDING``/``CLEARED`` events give no row. Arguments as
    :func:`apply_transitions`.

    Raises:
        ValueError: an event names an alert not in ``alerts``.
    """
    by_fp = {a.fingerprint: a for a in alerts}
    wanted: dict[str, list[tuple[str, AlertNotification]]] = {}
    for event in events:
        status = _NOTIFY.get(event.kind)
        if status is None:
            continue
        subject = by_fp.get(event.fingerprint)
        if subject is None:
            raise ValueError(f"event {event.kind.value} for alert {event.fingerprint} that is not being stored")
        notification = AlertNotification.of(subject, status)
        for route in routes_for(routes, subject.all_labels(), subject.severity):
            if status is NotificationStatus.RESOLVED and not route.send_resolved:
                continue
            key = notification_key(route.receiver, subject.fingerprint, status, event.at)
            wanted.setdefault(route.receiver, []).append((key, notification))
    return [_outbox_row(receiver, n, key, now) for receiver, items in wanted.items() for key, n in items]


def store_transitions(session: Session, alerts: Sequence[Alert], rows: list[dict[str, Any]]) -> int:
    """Store ``alerts`` (insert or update by fingerprint; one per fingerprint, as they are now) and queue
    the outbox ``rows`` of their transitions (:func:`transition_rows`, in order), in ``session``'s
    transaction: a tick's transitions of many jobs and instants are stored with a few batched statements.
    Returns the number of outbox rows queued (those whose receiver and idempotency key were queued already
    are skipped)."""
    _upsert_alerts(session, alerts)
    return _queue(session, rows)


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """An open outbox row, detached from the session (what the dispatcher decides on)."""

    id: int
    receiver: str
    fingerprint: str
    group_key: str
    idempotency_key: str
    notification: AlertNotification
    created_at: datetime
    attempts: int
    next_attempt_at: datetime
    batch_key: str | None

    @property
    def status(self) -> str:
        """The row's ``status`` (``firing``/``resolved``)."""
        return self.notification.status.value


@dataclass(frozen=True, slots=True)
class ReportOutboxItem:
    """An open outbox row holding a health report (``status`` ``report``), detached from the session."""

    id: int
    receiver: str
    fingerprint: str
    group_key: str
    idempotency_key: str
    report: HealthReport
    created_at: datetime
    attempts: int
    next_attempt_at: datetime
    batch_key: str | None

    @property
    def status(self) -> str:
        """Always :data:`OUTBOX_REPORT_STATUS`."""
        return OUTBOX_REPORT_STATUS


def _row_fields(row: OutboxRow) -> dict[str, Any]:
    """The delivery bookkeeping every outbox item carries, whatever its payload."""
    return {
        "id": row.id,
        "receiver": row.receiver,
        "fingerprint": row.fingerprint,
        "group_key": row.group_key,
        "idempotency_key": row.idempotency_key,
        "created_at": row.created_at,
        "attempts": row.attempts,
        "next_attempt_at": row.next_attempt_at,
        "batch_key": row.batch_key,
    }


def _item(row: OutboxRow) -> OutboxItem:
    return OutboxItem(**_row_fields(row), notification=AlertNotification.from_json(row.payload))


def open_outbox(session: Session) -> list[OutboxItem]:
    """Every pending alert outbox row (not reports: :func:`open_report_outbox`), oldest first (by id)."""
    query = (
        select(OutboxRow)
        .where(OutboxRow.state == OUTBOX_PENDING, OutboxRow.status != OUTBOX_REPORT_STATUS)
        .order_by(OutboxRow.id)
    )
    return [_item(row) for row in session.scalars(query)]


def open_report_outbox(session: Session) -> list[ReportOutboxItem]:
    """Every pending health-report outbox row, oldest first (by id)."""
    query = (
        select(OutboxRow)
        .where(OutboxRow.state == OUTBOX_PENDING, OutboxRow.status == OUTBOX_REPORT_STATUS)
        .order_by(OutboxRow.id)
    )
    return [
        ReportOutboxItem(**_row_fields(row), report=HealthReport.from_json(row.payload))
        for row in session.scalars(query)
    ]


def enqueue_report(session: Session, receiver: str, report: HealthReport, now: datetime) -> bool:
    """Queue one outbox row delivering ``report`` to ``receiver``, unless its idempotency key
    (:func:`monitor.alerts.report_notification.report_key` of receiver, report name and ``report.scheduled_at``) is already
    queued: a run repeated for the same scheduled minute queues nothing. The row is its own batch (its
    ``batch_key`` is the idempotency key). Returns whether a row was queued.
    """
    key = report_key(receiver, report.name, report.scheduled_at)
    row = {
        "receiver": receiver,
        "fingerprint": report_fingerprint(report.name),
        "group_key": f"report/{report.name}",
        "status": OUTBOX_REPORT_STATUS,
        "idempotency_key": key,
        "payload": report.to_json(),
        "created_at": now,
        "state": OUTBOX_PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "batch_key": key,
    }
    return _queue(session, [row]) == 1


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def seal_outbox(session: Session, ids: Sequence[int], batch_key: str) -> None:
    """Record that rows ``ids`` form the batch ``batch_key`` (kept for every retry)."""
    for chunk in _chunks(ids):
        session.execute(update(OutboxRow).where(OutboxRow.id.in_(chunk)).values(batch_key=batch_key))


def outbox_backlog(session: Session) -> dict[str, tuple[int, datetime]]:
    """Pending outbox rows per receiver: ``{receiver: (count, created_at of the oldest)}``."""
    query = (
        select(OutboxRow.receiver, func.count(), func.min(OutboxRow.created_at))
        .where(OutboxRow.state == OUTBOX_PENDING)
        .group_by(OutboxRow.receiver)
    )
    out: dict[str, tuple[int, datetime]] = {}
    for receiver, count, oldest in session.execute(query):
        if isinstance(oldest, str):  # SQLite returns min() of the stored text, not through the column type
            oldest = datetime.fromisoformat(oldest)
        out[receiver] = (int(count), oldest if oldest.tzinfo is not None else oldest.replace(tzinfo=UTC))
    return out


def outbox_errors(session: Session, ids: Sequence[int]) -> list[str | None]:
    """The ``last_error`` of rows ``ids`` (in no particular order)."""
    out: list[str | None] = []
    for chunk in _chunks(ids):
        out.extend(session.scalars(select(OutboxRow.last_error).where(OutboxRow.id.in_(chunk))))
    return out


def retry_outbox(
    session: Session, ids: Sequence[int], attempts: int, next_attempt_at: datetime, error: str
) -> None:
    """After a retryable failure: set ``attempts``, ``next_attempt_at`` and ``last_error``."""
    for chunk in _chunks(ids):
        session.execute(
            update(OutboxRow)
            .where(OutboxRow.id.in_(chunk))
            .values(attempts=attempts, next_attempt_at=next_attempt_at, last_error=error)
        )


def finish_outbox(
    session: Session,
    items: Sequence[OutboxItem | ReportOutboxItem],
    outcome: str,
    now: datetime,
    *,
    error: str | None = None,
    attempts: int | None = None,
) -> None:
    """Close rows with ``outcome`` (delivered / gave_up / suppressed) at ``now`` and log each one.

    Raises:
        ValueError: unknown outcome.
    """
    column = _FINISHED_AT.get(outcome)
    if column is None:
        raise ValueError(f"unknown outbox outcome {outcome!r}")
    values: dict[str, Any] = {"state": outcome, column: now}
    if error is not None:
        values["last_error"] = error
    if attempts is not None:
        values["attempts"] = attempts
    for chunk in _chunks([i.id for i in items]):
        session.execute(update(OutboxRow).where(OutboxRow.id.in_(chunk)).values(**values))
    session.add_all(
        NotificationLogRow(
            receiver=i.receiver,
            fingerprint=i.fingerprint,
            status=i.status,
            outcome=outcome,
            at=now,
            idempotency_key=i.batch_key or i.idempotency_key,
            outbox_id=i.id,
        )
        for i in items
    )
    session.flush()


def _episode_start(session: Session, receiver: str, fingerprint: str, fired_at: datetime) -> datetime | None:
    """When (wall clock) the first firing notification of the episode that fired at ``fired_at`` was
    queued for ``receiver``; ``None`` if it never was. ``fired_at`` is on the data's clock (a batch's own
    time), so it is only ever used to make the key, never compared with a delivery time."""
    key = notification_key(receiver, fingerprint, NotificationStatus.FIRING, fired_at)
    query = select(OutboxRow.created_at).where(OutboxRow.receiver == receiver, OutboxRow.idempotency_key == key)
    return session.scalar(query)


def _last_firing_outcome(
    session: Session, receiver: str, fingerprint: str, since: datetime, outcomes: Sequence[str]
) -> tuple[datetime, str] | None:
    """(time, outcome) of the latest firing notification to ``receiver`` about ``fingerprint`` that ended
    at or after ``since`` with one of ``outcomes`` (from the notification log)."""
    query = (
        select(NotificationLogRow.at, NotificationLogRow.outcome)
        .where(
            NotificationLogRow.receiver == receiver,
            NotificationLogRow.fingerprint == fingerprint,
            NotificationLogRow.status == NotificationStatus.FIRING.value,
            NotificationLogRow.outcome.in_(list(outcomes)),
            NotificationLogRow.at >= since,
        )
        .order_by(NotificationLogRow.at.desc(), NotificationLogRow.id.desc())
        .limit(1)
    )
    row = session.execute(query).first()
    return None if row is None else (row[0], row[1])


def told_in_episode(session: Session, receiver: str, fingerprint: str, fired_at: datetime | None) -> bool:
    """Whether ``receiver`` got (delivered) a firing notification of the episode that fired at ``fired_at``.

    The episode is named by its first firing row's key, and "after it" is measured on one clock: the
    wall-clock time that row was queued, not ``fired_at`` (the data's clock, which may run ahead of the
    daemon's). Without ``fired_at`` (an alert stored before it was kept), any delivered firing counts.
    """
    start = datetime.min.replace(tzinfo=UTC) if fired_at is None else _episode_start(session, receiver, fingerprint, fired_at)
    if start is None:
        return False
    return _last_firing_outcome(session, receiver, fingerprint, start, (OUTBOX_DELIVERED,)) is not None


def _repeat_due(
    session: Session, receiver: str, fingerprint: str, fired_at: datetime, interval: timedelta
) -> tuple[str, datetime]:
    """(idempotency key, due time) of the next firing notification of the episode that fired at
    ``fired_at``, read from the store only (so every instance computes the same key):

    * never queued for ``receiver`` (a route added since): the episode's own firing key, due now;
    * its last firing row was suppressed (silenced): a repeat due at that row's end, so a silence that
      ends is followed by a notification;
    * its last firing row was delivered or given up: a repeat due ``interval`` after that.
    """
    first = notification_key(receiver, fingerprint, NotificationStatus.FIRING, fired_at)
    start = _episode_start(session, receiver, fingerprint, fired_at)
    if start is None:
        return first, datetime.min.replace(tzinfo=UTC)
    outcomes = (OUTBOX_DELIVERED, OUTBOX_GAVE_UP, OUTBOX_SUPPRESSED)
    last = _last_firing_outcome(session, receiver, fingerprint, start, outcomes)
    if last is None:  # still pending (open rows are skipped before) or being finished right now
        return first, datetime.max.replace(tzinfo=UTC)
    at, outcome = last
    due = at if outcome == OUTBOX_SUPPRESSED else at + interval
    return repeat_key(receiver, fingerprint, due), due


def enqueue_repeats(
    session: Session, routes: Sequence[Route], silences: Sequence[Silence], now: datetime
) -> int:
    """Queue a new firing notification for every firing, unsilenced alert and accepting route whose
    receiver has no open row for it and was last told (delivered or given up) at least
    ``route.repeat_interval`` ago in the current episode (Alertmanager ``repeat_interval``).

    An alert whose episode has no delivered/given-up firing notification for a receiver (it was silenced
    when it fired, or the route is new) is queued at once, so a silence that ends is followed by a
    notification. Keys come from the store, not from ``now`` (:func:`_repeat_due`): two dispatchers, or
    two ticks, never queue the same notification under two keys. Returns the number of rows queued.
    """
    firing = load_alerts(session, states=[AlertState.FIRING])
    if not firing or not routes:
        return 0
    open_pairs = {
        (receiver, fp)
        for receiver, fp in session.execute(
            select(OutboxRow.receiver, OutboxRow.fingerprint).where(OutboxRow.state == OUTBOX_PENDING)
        )
    }
    rows: list[dict[str, Any]] = []
    for fp, alert in sorted(firing.items()):
        labels = alert.all_labels()
        if alert.fired_at is None or is_silenced(labels, silences, now):
            continue
        notification = AlertNotification.of(alert, NotificationStatus.FIRING)
        for route in routes_for(routes, labels, alert.severity):
            if (route.receiver, fp) in open_pairs:
                continue
            key, due = _repeat_due(session, route.receiver, fp, alert.fired_at, route.repeat_interval)
            if due <= now:
                rows.append(_outbox_row(route.receiver, notification, key, now))
    return _queue(session, rows)


# --- silences ---------------------------------------------------------------------------------------


def _to_silence(row: SilenceRow) -> Silence:
    return Silence(
        id=row.id,
        matchers=tuple(Matcher.from_json(m) for m in row.matchers),
        starts_at=row.starts_at,
        ends_at=row.ends_at,
        created_by=row.created_by,
        comment=row.comment,
        created_at=row.created_at,
    )


def add_silence(session: Session, silence: Silence, now: datetime) -> None:
    """Store ``silence`` (its ``created_at`` defaults to ``now``)."""
    session.add(
        SilenceRow(
            id=silence.id,
            matchers=[m.to_json() for m in silence.matchers],
            starts_at=silence.starts_at,
            ends_at=silence.ends_at,
            created_by=silence.created_by,
            comment=silence.comment,
            created_at=silence.created_at or now,
        )
    )
    session.flush()


def list_silences(session: Session, *, active_at: datetime | None = None) -> list[Silence]:
    """Silences ordered by start; with ``active_at``, only those active then (not expired, started)."""
    query = select(SilenceRow).order_by(SilenceRow.starts_at, SilenceRow.id)
    if active_at is not None:
        query = query.where(SilenceRow.starts_at <= active_at, SilenceRow.ends_at > active_at)
    return [_to_silence(row) for row in session.scalars(query)]


def expire_silence(session: Session, silence_id: str, now: datetime) -> bool:
    """End the silence at ``now`` (a not-yet-started one ends at its start, i.e. never applies).

    Returns:
        False if no such silence or it had already ended (including a not-yet-started one already
        expired: its window is empty).
    """
    row = session.get(SilenceRow, silence_id)
    if row is None or row.ends_at <= now or row.ends_at <= row.starts_at:
        return False
    # A silence that has not started yet gets an empty window [starts_at, starts_at): it never applies.
    row.ends_at = max(now, row.starts_at)
    session.flush()
    return True
