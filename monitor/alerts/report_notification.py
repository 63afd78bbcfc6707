"""The scheduled health report as a notification payload: the record the outbox stores and a notifier
formats (:class:`HealthReport` with its jobs' health, alerts and key numbers), and its delivery keys.

It sits beside :mod:`monitor.alerts.notification` (the alert's payload) so the store can queue and read a
report without importing the reports package that builds it (:func:`monitor.reports.scheduled.build_report`).
Its JSON (:meth:`HealthReport.to_json` / :meth:`HealthReport.from_json`) is what the outbox row holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.alerts.notification import format_time, parse_time
from monitor.model import AlertState, Severity, ensure_utc

__all__ = ["HealthReport", "JobHealth", "JobNumbers", "ReportAlert", "report_fingerprint", "report_key", "report_slot"]


def _opt_time(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def _opt_parse(value: Any) -> datetime | None:
    return None if value is None else parse_time(str(value))


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class ReportAlert:
    """One current (firing or pending) alert of a job, as the report shows it."""

    rule: str
    severity: Severity
    state: AlertState
    message: str
    active_at: datetime
    fingerprint: str

    def to_json(self) -> dict[str, Any]:
        """JSON object (``jobs[].alerts[]`` of the webhook report payload)."""
        return {
            "rule": self.rule,
            "severity": self.severity.label(),
            "state": self.state.value,
            "message": self.message,
            "active_at": format_time(self.active_at),
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReportAlert:
        """Inverse of :meth:`to_json`. Raises KeyError/ValueError on a malformed document."""
        return cls(
            rule=str(data["rule"]),
            severity=Severity.parse(str(data["severity"])),
            state=AlertState(data["state"]),
            message=str(data["message"]),
            active_at=parse_time(str(data["active_at"])),
            fingerprint=str(data["fingerprint"]),
        )


@dataclass(frozen=True, slots=True)
class JobNumbers:
    """Key numbers of a job; ``None`` means unknown (no sample reports it), never zero.

    Attributes:
        observed_at: ``observed_at`` of the newest whole-job sample (UTC).
        watermark: that sample's watermark (UTC).
        watermark_lag_seconds: ``observed_at - watermark``, seconds.
        input_rows_last_hour: rows read in ``(now - 1h, now]``.
        dropped_by_watermark_last_hour: rows dropped as late by the watermark in ``(now - 1h, now]``.
        state_rows: the newest whole-job sample's ``state_rows_total``.
    """

    observed_at: datetime | None = None
    watermark: datetime | None = None
    watermark_lag_seconds: float | None = None
    input_rows_last_hour: int | None = None
    dropped_by_watermark_last_hour: int | None = None
    state_rows: int | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON object (``jobs[].numbers`` of the webhook report payload)."""
        return {
            "observed_at": _opt_time(self.observed_at),
            "watermark": _opt_time(self.watermark),
            "watermark_lag_seconds": self.watermark_lag_seconds,
            "input_rows_last_hour": self.input_rows_last_hour,
            "dropped_by_watermark_last_hour": self.dropped_by_watermark_last_hour,
            "state_rows": self.state_rows,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobNumbers:
        """Inverse of :meth:`to_json`."""
        lag = data.get("watermark_lag_seconds")
        return cls(
            observed_at=_opt_parse(data.get("observed_at")),
            watermark=_opt_parse(data.get("watermark")),
            watermark_lag_seconds=None if lag is None else float(lag),
            input_rows_last_hour=_opt_int(data.get("input_rows_last_hour")),
            dropped_by_watermark_last_hour=_opt_int(data.get("dropped_by_watermark_last_hour")),
            state_rows=_opt_int(data.get("state_rows")),
        )


@dataclass(frozen=True, slots=True)
class JobHealth:
    """One job's line in a report (``engine``/``job_id`` as in alert labels; ``name`` when known)."""

    engine: str
    job_id: str
    name: str | None
    health: Severity
    alerts: tuple[ReportAlert, ...]
    numbers: JobNumbers

    def to_json(self) -> dict[str, Any]:
        """JSON object (``jobs[]`` of the webhook report payload)."""
        return {
            "engine": self.engine,
            "job_id": self.job_id,
            "name": self.name,
            "health": self.health.label(),
            "alerts": [a.to_json() for a in self.alerts],
            "numbers": self.numbers.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobHealth:
        """Inverse of :meth:`to_json`."""
        name = data.get("name")
        return cls(
            engine=str(data["engine"]),
            job_id=str(data["job_id"]),
            name=None if name is None else str(name),
            health=Severity.parse(str(data["health"])),
            alerts=tuple(ReportAlert.from_json(a) for a in data["alerts"]),
            numbers=JobNumbers.from_json(data["numbers"]),
        )


@dataclass(frozen=True, slots=True)
class HealthReport:
    """A health report: ``name`` (from the config), the run's ``scheduled_at`` minute and ``generated_at``
    (the run's ``now``), and one :class:`JobHealth` per job (worst first, then by engine and job id).

    ``detail`` / ``html``: for webhook receivers, the detailed report (:mod:`monitor.reports.detailed`) as JSON
    and as self-contained HTML; absent (``None``) otherwise, so the payload is unchanged for the others."""

    name: str
    scheduled_at: datetime
    generated_at: datetime
    jobs: tuple[JobHealth, ...]
    detail: Mapping[str, Any] | None = None
    html: str | None = None

    @property
    def health(self) -> Severity:
        """The worst job health (``OK`` without jobs)."""
        return max((j.health for j in self.jobs), default=Severity.OK)

    def to_json(self) -> dict[str, Any]:
        """JSON object (``report`` of the webhook report payload; also the outbox payload)."""
        return {
            "name": self.name,
            "scheduled_at": format_time(self.scheduled_at),
            "generated_at": format_time(self.generated_at),
            "health": self.health.label(),
            "jobs": [j.to_json() for j in self.jobs],
            **({"detail": dict(self.detail)} if self.detail is not None else {}),
            **({"html": self.html} if self.html is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HealthReport:
        """Inverse of :meth:`to_json`. Raises KeyError/ValueError on a malformed document."""
        return cls(
            name=str(data["name"]),
            scheduled_at=parse_time(str(data["scheduled_at"])),
            generated_at=parse_time(str(data["generated_at"])),
            jobs=tuple(JobHealth.from_json(j) for j in data["jobs"]),
            detail=data.get("detail"),
            html=data.get("html"),
        )


def report_slot(now: datetime) -> datetime:
    """The scheduled minute of a run started at ``now`` (crontab resolution is one minute): ``now``
    truncated to the minute, aware UTC. Raises ValueError for a naive ``now``."""
    utc = ensure_utc(now, "now")
    assert utc is not None
    return utc.replace(second=0, microsecond=0)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\x00")
    return h.hexdigest()


def report_key(receiver: str, name: str, scheduled_at: datetime) -> str:
    """Idempotency key (32 hex digits) of report ``name`` scheduled at ``scheduled_at`` for ``receiver``."""
    return _digest("report-v1", receiver, name, format_time(scheduled_at))[:32]


def report_fingerprint(name: str) -> str:
    """The outbox ``fingerprint`` of report ``name`` (16 hex digits; never equal to an alert's, whose
    digest starts from the rule name alone)."""
    return _digest("report", name)[:16]
