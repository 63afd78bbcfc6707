"""What a receiver is told: one alert's notification record and a batch of them for one job.

These records are the outbox payload (``to_json``/``from_json``, stored as JSON) and the input of every
notifier (:mod:`monitor.notify`). Times are aware UTC and serialize as RFC 3339 ``...Z`` strings
(:func:`monitor.timefmt.format_precise`, re-exported here as ``format_time``; ``parse_time`` is
:func:`monitor.timefmt.parse_instant`).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.alerts.lifecycle import Alert, group_key
from monitor.model import Severity
from monitor.timefmt import format_precise as format_time
from monitor.timefmt import parse_instant as parse_time

__all__ = [
    "AlertNotification",
    "NotificationBatch",
    "NotificationStatus",
    "batch_key",
    "format_time",
    "notification_key",
    "parse_time",
    "repeat_key",
]


class NotificationStatus(enum.StrEnum):
    """``firing`` (including repeats) or ``resolved``."""

    FIRING = "firing"
    RESOLVED = "resolved"


def _opt_time(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def _opt_parse(text: Any) -> datetime | None:
    return None if text is None else parse_time(str(text))


@dataclass(frozen=True, slots=True)
class AlertNotification:
    """One alert as a receiver sees it.

    Attributes:
        status: firing or resolved.
        fingerprint: the alert's stable identity.
        rule: rule name.
        severity: severity at the time of the transition.
        labels: :meth:`Alert.all_labels` (``alertname``, ``severity``, ``engine``, ``job_id``, ...).
        annotations: ``description`` etc.
        message: the finding's message (what and why).
        active_at: since when the condition holds (start of ``pending``).
        fired_at: when it started firing (Alertmanager ``startsAt``; Prometheus sends ``FiredAt``).
        resolved_at: when it resolved (Alertmanager ``endsAt``); ``None`` while firing.
    """

    status: NotificationStatus
    fingerprint: str
    rule: str
    severity: Severity
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    message: str
    active_at: datetime
    fired_at: datetime | None
    resolved_at: datetime | None = None

    @classmethod
    def of(cls, alert: Alert, status: NotificationStatus) -> AlertNotification:
        """The notification of ``alert`` with ``status``."""
        return cls(
            status=status,
            fingerprint=alert.fingerprint,
            rule=alert.rule,
            severity=alert.severity,
            labels=alert.all_labels(),
            annotations=dict(alert.annotations),
            message=alert.message,
            active_at=alert.active_at,
            fired_at=alert.fired_at,
            resolved_at=alert.resolved_at if status is NotificationStatus.RESOLVED else None,
        )

    @property
    def group_key(self) -> str:
        """The job this alert belongs to (see :func:`monitor.alerts.lifecycle.group_key`)."""
        return group_key(self.labels)

    def to_json(self) -> dict[str, Any]:
        """JSON object (the ``alerts[]`` item of the webhook payload schema)."""
        return {
            "status": self.status.value,
            "fingerprint": self.fingerprint,
            "rule": self.rule,
            "severity": self.severity.label(),
            "labels": dict(sorted(self.labels.items())),
            "annotations": dict(sorted(self.annotations.items())),
            "message": self.message,
            "active_at": format_time(self.active_at),
            "fired_at": _opt_time(self.fired_at),
            "resolved_at": _opt_time(self.resolved_at),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlertNotification:
        """Inverse of :meth:`to_json`. Raises KeyError/ValueError on a malformed document."""
        return cls(
            status=NotificationStatus(data["status"]),
            fingerprint=str(data["fingerprint"]),
            rule=str(data["rule"]),
            severity=Severity.parse(str(data["severity"])),
            labels={str(k): str(v) for k, v in data["labels"].items()},
            annotations={str(k): str(v) for k, v in data["annotations"].items()},
            message=str(data["message"]),
            active_at=parse_time(str(data["active_at"])),
            fired_at=_opt_parse(data.get("fired_at")),
            resolved_at=_opt_parse(data.get("resolved_at")),
        )


@dataclass(frozen=True, slots=True)
class NotificationBatch:
    """What one notifier call delivers: the alerts of one job for one receiver.

    Attributes:
        receiver: receiver name.
        group_key: the job, ``"<engine>/<job_id>"``.
        idempotency_key: the same on every retry of this batch; receivers deduplicate by it.
        alerts: at most one notification per fingerprint, in outbox order.
        sent_at: the dispatcher's ``now`` for this attempt (aware UTC); signatures use it.
    """

    receiver: str
    group_key: str
    idempotency_key: str
    alerts: tuple[AlertNotification, ...]
    sent_at: datetime

    @property
    def status(self) -> NotificationStatus:
        """``firing`` if any alert fires, else ``resolved``."""
        if any(a.status is NotificationStatus.FIRING for a in self.alerts):
            return NotificationStatus.FIRING
        return NotificationStatus.RESOLVED

    def firing(self) -> tuple[AlertNotification, ...]:
        """The firing alerts."""
        return tuple(a for a in self.alerts if a.status is NotificationStatus.FIRING)

    def resolved(self) -> tuple[AlertNotification, ...]:
        """The resolved alerts."""
        return tuple(a for a in self.alerts if a.status is NotificationStatus.RESOLVED)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\x00")
    return h.hexdigest()[:32]


def notification_key(receiver: str, fingerprint: str, status: NotificationStatus, at: datetime) -> str:
    """Idempotency key of one alert's notification to one receiver for the transition at ``at``.

    Deterministic (32 hex digits), so writing the same transition twice yields the same key and the
    outbox's unique ``(receiver, idempotency_key)`` constraint keeps one row.
    """
    return _digest("notification-v1", receiver, fingerprint, status.value, format_time(at))


def repeat_key(receiver: str, fingerprint: str, due_at: datetime) -> str:
    """Idempotency key of a repeat of a still-firing alert's notification (Alertmanager
    ``repeat_interval``) to one receiver, due at ``due_at``: a time read from the store (the last
    notification's outcome time plus the interval), never the tick's clock, so every dispatcher of the
    fleet that sees the same store makes the same key and the outbox keeps one row."""
    return _digest("notification-v1", receiver, fingerprint, "repeat", format_time(due_at))


def batch_key(receiver: str, row_keys: list[str]) -> str:
    """Idempotency key of a batch: digest of its rows' keys (order-insensitive), 32 hex digits."""
    return _digest("batch-v1", receiver, *sorted(row_keys))
