"""Scheduled health reports: one pure function from (stored samples, current alerts, ``now``) to a report.

A report lists every job the store knows (by its samples in the evaluation lookback, or by a current
alert) with:

* ``health``: the worst severity of the job's **firing** alerts, ``ok`` when it has none (Burrow's group
  status: the group's status is its worst partition's; :func:`monitor.facts.job_health`). Pending alerts are listed but do not set the
  health: they have not held for their rule's ``for`` yet and may clear without ever firing, exactly as
  they are not notified.
* its firing and pending alerts with their messages (worst first);
* key numbers, all from the job facts (:mod:`monitor.facts`): ``watermark`` and ``watermark_lag_seconds``
  (the newest batch's or poll's processing time minus its watermark, seconds: freshness on the data's own
  clock; Spark's "no watermark yet" is unknown), ``state_rows`` (that batch's), and ``input_rows_last_hour``
  / ``dropped_by_watermark_last_hour``: the rows read / dropped by the batches and polls observed in
  ``(now - 1h, now]`` (a batch counted once).

Unknown is kept distinct from zero: a number no sample reports is ``None`` (JSON ``null``, shown as
"unknown"), never ``0``.

The report of one run is delivered through the notification outbox (:func:`monitor.store.alert_repo.enqueue_report`)
with an idempotency key from the receiver, the report name and its scheduled minute (:func:`report_key`),
so a run repeated in the same minute, or a restart while the row is undelivered, sends it once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.alerts.lifecycle import Alert
from monitor.alerts.notification import format_time, parse_time
from monitor.facts import job_facts, job_health
from monitor.model import MIN_TIME, AlertState, Engine, JobRef, Sample, Severity, ensure_utc

__all__ = [
    "INPUT_WINDOW",
    "HealthReport",
    "JobHealth",
    "JobNumbers",
    "ReportAlert",
    "build_report",
    "report_fingerprint",
    "report_key",
    "report_slot",
]

#: The window of the ``*_last_hour`` sums, back from the report's ``now``.
INPUT_WINDOW = timedelta(hours=1)
_TICK = timedelta(microseconds=1)


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


def _numbers(samples: Sequence[Sample], now: datetime) -> JobNumbers:
    """The key numbers from the job facts (:func:`monitor.facts.job_facts`) over ``(-inf, now]`` (the newest
    batch) and ``(now - 1h, now]`` (the sums)."""
    until = now + _TICK  # facts periods are half-open [since, until): (…, now] is [… , now + 1 µs)
    seen = [s for s in samples if s.observed_at < until]
    if not seen:
        return JobNumbers()
    newest = job_facts(seen, MIN_TIME, until).batches
    if not newest:
        return JobNumbers()
    last = newest[-1]
    recent = [s for s in seen if s.observed_at > now - INPUT_WINDOW]
    hour = job_facts(recent, now - INPUT_WINDOW + _TICK, until, job=last_job(seen)).drops if recent else None
    return JobNumbers(
        observed_at=last.observed_at,
        watermark=last.watermark,
        watermark_lag_seconds=last.freshness_s,
        input_rows_last_hour=None if hour is None else hour.input_rows,
        dropped_by_watermark_last_hour=None if hour is None else hour.dropped_rows,
        state_rows=last.state_rows,
    )


def last_job(samples: Sequence[Sample]) -> JobRef:
    """The job as its newest sample names it."""
    return max(samples, key=lambda s: s.observed_at).job


_CURRENT = (AlertState.FIRING, AlertState.PENDING)


def build_report(
    name: str,
    now: datetime,
    samples: Mapping[tuple[Engine, str], Sequence[Sample]],
    alerts: Iterable[Alert],
    *,
    scheduled_at: datetime | None = None,
) -> HealthReport:
    """Build the report of one run (pure: no clock, no store).

    Args:
        name: the report's ``name`` in the config.
        now: the run's time (aware UTC); samples observed after it are ignored.
        samples: each job's recent samples (:func:`monitor.store.load_recent_samples`), any order.
        alerts: stored alerts; only ``firing`` and ``pending`` ones are shown.
        scheduled_at: the scheduled minute (default :func:`report_slot` of ``now``).

    Returns:
        The report; jobs sorted worst health first, then by engine and job id.

    Raises:
        ValueError: ``now`` or ``scheduled_at`` is naive.
    """
    when = ensure_utc(now, "now")
    assert when is not None
    slot = report_slot(when) if scheduled_at is None else ensure_utc(scheduled_at, "scheduled_at")
    assert slot is not None
    by_job: dict[tuple[str, str], list[Alert]] = {}
    for alert in alerts:
        if alert.state in _CURRENT:
            key = (alert.labels.get("engine", "-"), alert.labels.get("job_id", "-"))
            by_job.setdefault(key, []).append(alert)
    histories = {(engine.value, job_id): list(history) for (engine, job_id), history in samples.items()}
    jobs: list[JobHealth] = []
    for key in sorted(set(histories) | set(by_job)):
        history = histories.get(key, [])
        current = sorted(
            by_job.get(key, []), key=lambda a: (-a.severity, a.state is not AlertState.FIRING, a.rule, a.fingerprint)
        )
        job_name = max(history, key=lambda s: s.observed_at).job.name if history else None
        if job_name is None:
            job_name = next((a.annotations["job_name"] for a in current if "job_name" in a.annotations), None)
        jobs.append(
            JobHealth(
                engine=key[0],
                job_id=key[1],
                name=job_name,
                health=job_health(current).now,
                alerts=tuple(
                    ReportAlert(a.rule, a.severity, a.state, a.message, a.active_at, a.fingerprint) for a in current
                ),
                numbers=_numbers(history, when),
            )
        )
    jobs.sort(key=lambda j: -j.health)  # stable: ties keep engine/job id order
    return HealthReport(name=name, scheduled_at=slot, generated_at=when, jobs=tuple(jobs))
