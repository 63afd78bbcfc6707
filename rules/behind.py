"""Falling behind: micro-batches slower than the trigger, or sustained back-pressure.

Semantics followed:

* Spark (``ProcessingTimeExecutor`` of ``Trigger.ProcessingTime``): when a batch takes longer than the
  trigger interval the next one starts immediately ("falling behind" is logged) and input accumulates;
  ``batchDuration`` (:attr:`Sample.batch_duration_ms`) above the interval for several consecutive batches
  means the query cannot keep up.
* Flink (``backPressuredTimeMsPerSecond``; the web UI calls a ratio above 0.5 HIGH): a task that spends
  most of its time waiting for output buffers is held up by a slower operator downstream
  (:attr:`Sample.backpressure_ratio`, 0.0-1.0).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import Field

from monitor.model import Engine, Finding, Sample, Scope, Severity
from monitor.timefmt import format_duration, format_instant_short
from rules.common import flink_scope_name, scope_name, tail_since
from rules.history import JobHistory
from rules.params import Duration, RuleParams

__all__ = ["RULE", "BehindParams", "evaluate_behind"]

RULE = "falling_behind"
_JOB_SCOPE = Scope()  # the whole job (a frozen value, made once)


class BehindParams(RuleParams):
    """``falling_behind`` parameters.

    Attributes:
        trigger_interval: the Spark query's processing-time trigger; without it batch durations are not
            judged.
        batches: consecutive batches that must exceed it (default 3).
        backpressure_ratio: Flink back-pressure ratio that counts as high (default 0.5, Flink's HIGH).
        for_ (``for``): how long back-pressure must stay high (default 1m).
    """

    trigger_interval: Duration | None = None
    batches: int = Field(3, ge=1)
    backpressure_ratio: float = Field(0.5, gt=0, le=1)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """Recent batches, and twice ``for`` of back-pressure samples."""
        return 2 * self.pressure_for(), 2 * self.pressure_for()

    def pressure_for(self) -> timedelta:
        """The ``for`` duration (default 1 minute)."""
        return self.for_ if self.for_ is not None else timedelta(minutes=1)


def _slow_batches(params: BehindParams, history: JobHistory, now: datetime) -> Finding | None:
    if params.trigger_interval is None or len(history.batches) < params.batches:
        return None
    limit_ms = params.trigger_interval.total_seconds() * 1000
    last = history.batches[-params.batches :]
    durations = [b.batch_duration_ms for b in last]
    if any(d is None or d <= limit_ms for d in durations):
        return None
    known = [d for d in durations if d is not None]
    return Finding(
        rule=RULE,
        severity=Severity.WARNING,
        job=history.job,
        message=(
            f"the last {len(last)} batches (up to batch {last[-1].batch_id}) took {min(known)}-{max(known)} ms, "
            f"longer than the trigger interval {format_duration(params.trigger_interval)}: the query is falling "
            "behind and input accumulates. Add executors or partitions, cap the batch size "
            "(maxOffsetsPerTrigger / maxFilesPerTrigger), or lengthen the trigger."
        ),
        observed_at=now,
        batch_id=last[-1].batch_id,
        details={"batch_duration_ms": known, "trigger_interval_ms": limit_ms},
    )


def _name(history: JobHistory, scope: Scope, newest: Sample) -> str:
    if history.engine is Engine.FLINK and not scope.is_job():
        return flink_scope_name(history.job.name or history.job.job_id, newest)
    return scope_name(scope)


def _pressured(
    params: BehindParams, scope: Scope, samples: Sequence[Sample], history: JobHistory, now: datetime
) -> Finding | None:
    newest = samples[-1]
    if newest.backpressure_ratio is None or newest.backpressure_ratio < params.backpressure_ratio:
        return None
    cutoff = newest.observed_at - params.pressure_for()
    if samples[0].observed_at > cutoff:
        return None  # not seen for long enough yet
    window = tail_since(samples, cutoff)
    if any(s.backpressure_ratio is None or s.backpressure_ratio < params.backpressure_ratio for s in window):
        return None
    ratios = [s.backpressure_ratio for s in window if s.backpressure_ratio is not None]
    return Finding(
        rule=RULE,
        severity=Severity.WARNING,
        job=history.job,
        message=(
            f"{_name(history, scope, newest)} has been back-pressured {min(ratios):.0%}-{max(ratios):.0%} of the time since "
            f"{format_instant_short(window[0].observed_at)}: an operator downstream is slower than its input. Find the first "
            "operator downstream that is busy but not back-pressured (the bottleneck) and raise its parallelism "
            "or make it cheaper (async I/O, less state access)."
        ),
        observed_at=now,
        scope=scope,
        details={"backpressure_ratio": ratios[-1]},
    )


def evaluate_behind(params: BehindParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``falling_behind`` findings (``WARNING``): the job's last ``batches`` batches each took longer
    than ``trigger_interval`` (job scope), and each scope (or the whole job) whose back-pressure ratio stayed
    at or above ``backpressure_ratio`` in every sample of the last ``for``. Unknown durations or ratios
    never count as slow."""
    out: list[Finding] = []
    slow = _slow_batches(params, history, now)
    if slow is not None:
        out.append(slow)
    if history.batches:
        job_level = _pressured(params, _JOB_SCOPE, history.batches, history, now)
        if job_level is not None:
            out.append(job_level)
    for scope, samples in history.series.items():
        found = _pressured(params, scope, samples, history, now)
        if found is not None:
            out.append(found)
    return out
