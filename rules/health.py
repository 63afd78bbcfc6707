"""Target health: an unreachable target, a restarted job, a failed job.

Semantics followed:

* Collector errors are data (:class:`monitor.model.CollectorError`, Telegraf's accumulator habit): a
  target whose polls keep failing is unreachable.
* Spark (``StreamingQueryListener``): every start of a query gets a new ``runId`` for the same ``id``
  (``QueryStartedEvent``), so a new run id is a restart; ``QueryTerminatedEvent.exception`` is set when the
  query failed (the collector keeps it in ``Sample.extra["exception"]``).
* Flink (``numRestarts`` job metric, :attr:`Sample.restart_count`): a rising count is a restart by the
  restart strategy. A job first seen with a count above 0 (a one-shot ``check flink``, or a daemon that
  started after the restarts) restarted that often since submission; it is reported when the current
  attempt began running (``extra["running_since_ms"]``, the job's ``RUNNING`` status timestamp) within the
  window. The root cause of the last failure (``extra["exception"]``, from ``/jobs/<jid>/exceptions``:
  ``JobExceptionsHandler``'s root exception, its innermost ``Caused by``) is named in the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import Field

from monitor.model import (
    CollectorError,
    Engine,
    Finding,
    JobRef,
    Sample,
    SampleKind,
    Severity,
    ms_to_datetime,
)
from monitor.timefmt import format_duration, format_instant_short
from rules.common import since_index
from rules.history import JobHistory
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

__all__ = ["RULE", "HealthParams", "evaluate_health", "evaluate_targets"]

RULE = "target_health"


class HealthParams(RuleParams):
    """``target_health`` parameters.

    Attributes:
        restart_window: a restart is reported while it is this recent (default 15m).
        error_window: collector errors are counted over this much time before ``now`` (default 2m)...
        min_errors: ...and this many make the target unreachable (default 2).
    """

    restart_window: Duration = timedelta(minutes=15)
    error_window: Duration = timedelta(minutes=2)
    min_errors: int = Field(2, ge=1)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """The restart window plus the run/restart count just before it (job scope only)."""
        return self.restart_window + timedelta(minutes=5), timedelta(0)


def _failed(history: JobHistory, now: datetime) -> Finding | None:
    if not history.lifecycle:
        return None
    last = history.lifecycle[-1]
    exception = last.extra.get("exception")
    if last.kind is not SampleKind.TERMINATED or not exception:
        return None
    first_line = str(exception).strip().splitlines()[0][:300] if str(exception).strip() else ""
    return Finding(
        rule=RULE,
        severity=Severity.CRITICAL,
        job=history.job,
        message=(
            f"the job failed at {format_instant_short(last.observed_at)} (run {last.job.run_id}): {first_line}. "
            + remedy(history.engine, Cause.FAILED)
        ),
        observed_at=now,
        labels={"check": "failed"},
        details={"run_id": last.job.run_id, "failed_at": format_instant_short(last.observed_at)},
    )


def _run_changes(samples: Sequence[Sample], since: datetime) -> list[tuple[datetime, str | None]]:
    out: list[tuple[datetime, str | None]] = []
    prev: str | None = None
    for s in samples:
        run = s.job.run_id
        if run is None:
            continue
        if prev is not None and run != prev and s.observed_at >= since:
            out.append((s.observed_at, run))
        prev = run
    return out


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _restarted(params: HealthParams, history: JobHistory, now: datetime) -> Finding | None:
    since = now - params.restart_window
    # the run ids in time order: lifecycle events, plus the batches around the window (a listener may
    # have missed a QueryStartedEvent); the batch just before the window gives the run it started from
    batches = history.batches
    start = since_index(batches, since)  # batches[start:] are in the window
    before = batches[start - 1 : start] if start else []
    # run ids never come back, so when the ends of the batches and every lifecycle event share one run
    # id nothing restarted (the common case, checked without copying or sorting the window)
    last_in_window = batches[-1:] if start < len(batches) else []
    ends = [*before, *batches[start : start + 1], *last_in_window, *history.lifecycle]
    if len({s.job.run_id for s in ends if s.job.run_id is not None}) <= 1:
        changes: list[tuple[datetime, str | None]] = []
    else:
        merged = sorted([*history.lifecycle, *before, *batches[start:]], key=lambda s: s.observed_at)
        changes = _run_changes(merged, since)
    restarts = len({run for _, run in changes})
    # Flink's numRestarts is a job metric: read on the job-scope samples, from the last known count before
    # the window to the newest one
    counts: list[int] = []
    last_at = changes[-1][0] if changes else None
    newest = history.batches[-1] if history.batches else None
    if history.engine is not Engine.SPARK:
        older = batches[:start]
        earlier = next((s.restart_count for s in reversed(older) if s.restart_count is not None), None)
        window = [s.restart_count for s in batches[start:] if s.restart_count is not None]
        values = ([earlier] if earlier is not None else []) + window
        counts = [values[-1] - values[0]] if len(values) >= 2 and values[-1] > values[0] else []
        running_since = ms_to_datetime(_int(newest.extra.get("running_since_ms"))) if newest is not None else None
        if (
            not counts
            and earlier is None
            and newest is not None
            and newest.restart_count
            and running_since is not None
            and running_since >= since
        ):
            counts = [newest.restart_count]  # all since submission; the last one within the window
            last_at = running_since
    restarts = max([restarts, *counts])
    if restarts == 0:
        return None
    cause = newest.extra.get("exception") if newest is not None else None
    when = f", last at {format_instant_short(last_at)}" if last_at is not None else ""
    return Finding(
        rule=RULE,
        severity=Severity.WARNING,
        job=history.job,
        message=(
            f"the job restarted {restarts} time{'s' if restarts != 1 else ''} in the last "
            f"{format_duration(params.restart_window)}{when}: each restart replays from the last checkpoint and "
            "delays results. "
            + (f"The last failure: {str(cause)[:300]}. " if cause else "")
            + remedy(history.engine, Cause.RESTARTED)
        ),
        observed_at=now,
        labels={"check": "restarted"},
        details={"restarts": restarts, "cause": cause},
    )


def evaluate_health(params: HealthParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``target_health`` findings of one job: failed (``CRITICAL``: its newest lifecycle event is a
    termination with an exception; label ``check=failed``) and restarted (``WARNING``: a new run id, or a
    rising Flink restart count, within ``restart_window`` before ``now``; label ``check=restarted``)."""
    out = [f for f in (_failed(history, now), _restarted(params, history, now)) if f is not None]
    return out


_ENGINE_PREFIX = {"spark": Engine.SPARK, "flink": Engine.FLINK, "kafka": Engine.KAFKA}


def evaluate_targets(params: HealthParams, errors: Sequence[CollectorError], now: datetime) -> list[Finding]:
    """``target_health`` findings for unreachable targets (``CRITICAL``, label ``check=unreachable``): at
    least ``min_errors`` collector errors that mean the target could not be read at all
    (:attr:`monitor.model.ErrorKind.target_down`: unreachable, an HTTP answer refused by a read bound, or the poll could not be stored) for the same
    collector and target in the ``error_window`` before ``now``; quarantined lines, documents and files
    are counted on ``/metrics`` and ``/healthz`` instead. The finding's job is the target (``job_id`` = target, engine from the collector name prefix
    ``spark-``/``flink-``/``kafka-``; Spark otherwise)."""
    since = now - params.error_window
    grouped: dict[tuple[str, str], list[CollectorError]] = {}
    for error in errors:
        # a quarantined line, document or file is not an unreachable target (its other data is read)
        if error.kind.target_down and since <= error.observed_at <= now:
            grouped.setdefault((error.collector, error.target), []).append(error)
    out: list[Finding] = []
    for (collector, target), errs in sorted(grouped.items()):
        if len(errs) < params.min_errors:
            continue
        errs.sort(key=lambda e: e.observed_at)
        engine = _ENGINE_PREFIX.get(collector.split("-", 1)[0], Engine.SPARK)
        out.append(
            Finding(
                rule=RULE,
                severity=Severity.CRITICAL,
                job=JobRef(engine, target),
                message=(
                    f"{collector} could not read {target}: {len(errs)} errors in the last "
                    f"{format_duration(params.error_window)}, the last at {format_instant_short(errs[-1].observed_at)}: "
                    f"{errs[-1].message}. Its jobs are not monitored meanwhile. {remedy(engine, Cause.UNREACHABLE)}"
                ),
                observed_at=now,
                labels={"check": "unreachable", "collector": collector},
                details={"errors": len(errs), "retryable": errs[-1].retryable},
            )
        )
    return out
