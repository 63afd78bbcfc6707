"""No progress: a job that has not terminated stops reporting.

Semantics followed (Spark ``StreamingQueryListener``): a running query reports every trigger, a
``QueryProgressEvent`` per micro-batch or, while it has no data, a ``QueryIdleEvent`` every
``spark.sql.streaming.noDataProgressEventInterval`` (10 s by default); it ends with a
``QueryTerminatedEvent``. A query that reports nothing for many trigger intervals and never terminated
is hung (a stuck batch, a lost driver killed without a clean stop) or no longer written to its event log.
In real-time mode (``RealTimeTrigger``, Spark 4.1+) a query reports once per batch, at the batch's end, so a
silence of one batch duration is its normal rhythm (:mod:`rules.cadence` decides the spacing to expect).
Flink and Kafka targets that stop answering are collector errors (``target_health``), not this rule.

This is the one rule judged at the evaluation tick's ``now`` (processing time) instead of at a batch's
own time (:attr:`rules.registry.RuleSpec.clock`): silence is only visible against a clock. ``scan`` of a
recorded log never runs it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field

from monitor.model import Engine, Finding, Severity, TriggerKind
from monitor.timefmt import format_duration, format_instant_short
from rules.cadence import Cadence, report_at, report_cadence, running_batch
from rules.history import JobHistory
from rules.params import RuleParams
from rules.remedies import Cause, remedy

__all__ = ["RULE", "NoProgressParams", "evaluate_no_progress", "silence_threshold"]

RULE = "no_progress"


class NoProgressParams(RuleParams):
    """``no_progress`` parameters.

    Attributes:
        for_ (``for``): the shortest silence reported (default 5m).
        intervals: a silence of this many usual trigger intervals (the median gap between the job's recent
            reports) is reported even when longer than ``for`` (default 10).
    """

    intervals: int = Field(10, ge=1)

    def min_silence(self) -> timedelta:
        """The ``for`` duration (default 5 minutes)."""
        return self.for_ if self.for_ is not None else timedelta(minutes=5)


def _threshold(params: NoProgressParams, cadence: Cadence) -> timedelta:
    if cadence.kind is TriggerKind.REAL_TIME and cadence.spacing is not None:
        # RealTimeTrigger: the next report is due one batch after the newest one, whatever the data does
        return cadence.spacing + params.min_silence()
    gap = cadence.report_gap
    return max(params.min_silence(), gap * params.intervals) if gap is not None else params.min_silence()


def silence_threshold(params: NoProgressParams, history: JobHistory) -> timedelta:
    """How long a job may be silent after its newest report (:func:`rules.cadence.report_cadence` decides
    the spacing): ``max(for, intervals x usual gap between reports)`` for micro-batch triggers; in real-time
    mode one batch duration (the next report is due then) plus ``for``."""
    return _threshold(params, report_cadence(history))


def evaluate_no_progress(params: NoProgressParams, history: JobHistory, now: datetime) -> list[Finding]:
    """The ``no_progress`` finding (``WARNING``) of a Spark query that has not terminated and whose newest
    report (batch or idle event) is older than :func:`silence_threshold` at ``now``. A batch's report is
    dated when Spark posted it (:func:`rules.cadence.report_at`: its start plus its ``batchDuration``), so a
    real-time-mode batch of 5 minutes is not 5 minutes of silence. A batch started since the newest report
    (Spark 4.2+ ``QueryExecutionStartEvent``) is ``batch_running``'s finding, not this one. The registry
    does not run it for a terminated query."""
    if history.engine is not Engine.SPARK or not history.batches or history.newest_at is None:
        return []
    last = history.batches[-1]
    silence = now - max(history.newest_at, report_at(last))
    if silence <= params.min_silence():
        return []  # the threshold is never below it: the usual gap need not be measured (every tick, every job)
    if running_batch(history) is not None:
        return []  # the driver reported a batch start since: a batch is running (rule batch_running)
    cadence = report_cadence(history)
    threshold = _threshold(params, cadence)
    if silence <= threshold:
        return []
    usual = f" ({cadence.describe()})" if cadence.describe() else ""
    return [
        Finding(
            rule=RULE,
            severity=Severity.WARNING,
            job=history.job,
            message=(
                f"no progress for {format_duration(silence)}; last batch {last.batch_id} at {format_instant_short(last.observed_at)}"
                f"{usual}, and the query has not terminated. {remedy(history.engine, Cause.NO_PROGRESS)}"
            ),
            observed_at=now,
            batch_id=last.batch_id,
            details={
                "silence_seconds": silence.total_seconds(),
                "threshold_seconds": threshold.total_seconds(),
                "last_batch_at": format_instant_short(last.observed_at),
            },
        )
    ]
