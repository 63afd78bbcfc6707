"""Batch running: a Spark batch that started and has not finished.

Semantics followed (Spark 4.2+ ``StreamingQueryListener``): ``onQueryExecutionStart``
(``QueryExecutionStartEvent``) is called when a query's trigger starts, ``onQueryProgress`` when its batch
finishes (``ProgressContext.finishTrigger``), both carrying the trigger's start as ``timestamp``. A start
without its progress is a batch still running (:func:`rules.cadence.running_batch`). While it runs the
query reads nothing new, its watermark does not move and nothing is written: this is not a watermark stall
(the watermark waits for a batch, not for event times) and it is told apart from ``no_progress`` (the
driver did report: it started the batch). Without start events (Spark before 4.2) a hung batch shows only
as ``no_progress``.

How long is too long comes from the query's own batches (:func:`rules.cadence.report_cadence`): in
real-time mode (``RealTimeTrigger``) a batch lasts its batch duration by design, so only a batch running
``for`` past it is reported; with micro-batch triggers a batch running ``durations`` times its usual
duration, and at least ``for``.

Judged at the evaluation tick's ``now`` (processing time), like ``no_progress``; ``scan`` never runs it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field

from monitor.model import Engine, Finding, Severity, TriggerKind
from monitor.timefmt import format_duration, format_instant_short
from rules.cadence import Cadence, report_cadence, running_batch
from rules.history import JobHistory
from rules.params import RuleParams
from rules.remedies import Cause, remedy

__all__ = ["RULE", "BatchRunningParams", "evaluate_batch_running", "running_limit"]

RULE = "batch_running"


class BatchRunningParams(RuleParams):
    """``batch_running`` parameters.

    Attributes:
        for_ (``for``): the shortest run reported, and in real-time mode how long past its batch duration a
            batch may run (default 5m).
        durations: a batch running this many times the query's usual batch duration (the median
            ``batchDuration`` of its recent batches) is reported even when longer than ``for`` (default 10).
    """

    durations: int = Field(10, ge=1)

    def min_run(self) -> timedelta:
        """The ``for`` duration (default 5 minutes)."""
        return self.for_ if self.for_ is not None else timedelta(minutes=5)


def _limit(params: BatchRunningParams, cadence: Cadence) -> timedelta:
    usual = cadence.batch_duration
    if cadence.kind is TriggerKind.REAL_TIME and usual is not None:
        return usual + params.min_run()
    return max(params.min_run(), usual * params.durations) if usual is not None else params.min_run()


def running_limit(params: BatchRunningParams, history: JobHistory) -> timedelta:
    """How long a batch of this job may run before it is reported: real-time mode, its batch duration plus
    ``for``; micro-batch triggers, ``max(for, durations x usual batch duration)`` (``for`` when no
    duration is known yet)."""
    return _limit(params, report_cadence(history))


def evaluate_batch_running(params: BatchRunningParams, history: JobHistory, now: datetime) -> list[Finding]:
    """The ``batch_running`` finding (``WARNING``) of a Spark query whose newest started batch has not
    reported at ``now`` and has run longer than :func:`running_limit`. The batch is named as the one after
    the newest reported batch (the start event carries no batch id). The registry does not run it for a
    terminated query."""
    if history.engine is not Engine.SPARK:
        return []
    started = running_batch(history)
    if started is None:
        return []
    running = now - started.observed_at
    cadence = report_cadence(history)
    limit = _limit(params, cadence)
    if running <= limit:
        return []
    last = history.batches[-1] if history.batches else None
    batch_id = last.batch_id + 1 if last is not None and last.batch_id is not None else None
    name = f"batch {batch_id}" if batch_id is not None else "a batch"
    usual = cadence.batch_duration
    if cadence.kind is TriggerKind.REAL_TIME and usual is not None:
        expected = f"in real-time mode each batch runs for {format_duration(usual)}"
    elif usual is not None:
        took = format_duration(usual) if usual >= timedelta(seconds=1) else "under a second"
        expected = f"its batches usually take {took}"
    else:
        expected = "no earlier batch of this run has reported"
    what_to_do = remedy(history.engine, Cause.BATCH_RUNNING, batch=name if batch_id is not None else "the running batch")
    message = (
        f"{name} has been running for {format_duration(running)} (started {format_instant_short(started.observed_at)}) "
        f"and has not finished; {expected}. Until it finishes the query reads no new data, its watermark does "
        f"not move and nothing is written. {what_to_do}"
    )
    details: dict[str, object] = {
        "started_at": format_instant_short(started.observed_at),
        "running_seconds": running.total_seconds(),
        "limit_seconds": limit.total_seconds(),
        "trigger": cadence.kind.value,
    }
    if usual is not None:
        details["usual_batch_seconds"] = usual.total_seconds()
    return [
        Finding(
            rule=RULE,
            severity=Severity.WARNING,
            job=history.job,
            message=message,
            observed_at=now,
            batch_id=batch_id,
            details=details,
        )
    ]
