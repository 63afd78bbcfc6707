"""No progress: a job that has not terminated stops reporting.

Semantics followed (Spark ``StreamingQueryListener``): a running query reports every trigger, a
``QueryProgressEvent`` per micro-batch or, while it has no data, a ``QueryIdleEvent`` every
``spark.sql.streaming.noDataProgressEventInterval`` (10 s by default); it ends with a
``QueryTerminatedEvent``. A query that reports nothing for many trigger intervals and never terminated
is hung (a stuck batch, a lost driver killed without a clean stop) or no longer written to its event log.
Flink and Kafka targets that stop answering are collector errors (``target_health``), not this rule.

This is the one rule judged at the evaluation tick's ``now`` (processing time) instead of at a batch's
own time (:attr:`rules.registry.RuleSpec.clock`): silence is only visible against a clock. ``scan`` of a
recorded log never runs it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import islice, pairwise

from pydantic import Field

from monitor.model import Engine, Finding, Severity
from monitor.timefmt import format_duration, format_instant_short
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


def _usual_gap(history: JobHistory) -> timedelta | None:
    times = sorted(s.observed_at for s in (*history.batches[-21:], *history.idle[-21:]))
    gaps = sorted(b - a for a, b in pairwise(islice(times, max(0, len(times) - 21), None)) if b > a)
    return gaps[len(gaps) // 2] if gaps else None


def silence_threshold(params: NoProgressParams, history: JobHistory) -> timedelta:
    """``max(for, intervals x usual gap between reports)``: how long a job may be silent."""
    gap = _usual_gap(history)
    return max(params.min_silence(), gap * params.intervals) if gap is not None else params.min_silence()


def evaluate_no_progress(params: NoProgressParams, history: JobHistory, now: datetime) -> list[Finding]:
    """The ``no_progress`` finding (``WARNING``) of a Spark query that has not terminated and whose newest
    report (batch or idle event) is older than :func:`silence_threshold` at ``now``. The registry does not
    run it for a terminated query."""
    if history.engine is not Engine.SPARK or not history.batches or history.newest_at is None:
        return []
    silence = now - history.newest_at
    if silence <= params.min_silence():
        return []  # the threshold is never below it: the usual gap need not be measured (every tick, every job)
    threshold = silence_threshold(params, history)
    if silence <= threshold:
        return []
    last = history.batches[-1]
    gap = _usual_gap(history)
    usual = f" (it usually reports every {format_duration(gap)})" if gap is not None else ""
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
