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

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from monitor.alerts.lifecycle import Alert
from monitor.alerts.report_notification import (
    HealthReport,
    JobHealth,
    JobNumbers,
    ReportAlert,
    report_fingerprint,
    report_key,
    report_slot,
)
from monitor.facts import job_facts, job_health
from monitor.model import MIN_TIME, AlertState, Engine, JobRef, Sample, ensure_utc

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
