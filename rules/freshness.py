"""Freshness SLO: how far the event-time watermark trails processing time.

Semantics followed: the watermark is the engine's claim that no event older than it will still arrive
(Spark ``eventTime.watermark``; Flink ``currentInputWatermark``/``currentOutputWatermark``), so results for
event times after it are not final. ``now - watermark`` is the data's end-to-end delay as the job sees it
(Flink's ``watermarkLag`` metric measures the same thing per source).

Judged at each batch's own time. Spark's progress ``timestamp`` is the trigger's start
(``ProgressContext.constructNewProgress``), the instant the batch's watermark took effect, so a query in
real-time mode (``RealTimeTrigger``, Spark 4.1+), whose progress arrives only at the end of each long batch,
is judged as of when its watermark held, not at the report's arrival: its reporting does not make it stale
(shown on a recorded real-time-mode query, ``tests/unit/test_real_time_mode.py``). Where another job's clock
judges it (a pipeline), :meth:`rules.cadence.Cadence.unreported_at` allows for the batch running unreported.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from monitor.model import Finding, Sample, Severity
from monitor.timefmt import format_duration, format_instant_short
from rules.common import is_epoch, watermark_unused
from rules.history import JobHistory
from rules.jumps import find_jump
from rules.params import Duration, RuleParams

__all__ = ["RULE", "FreshnessParams", "evaluate_freshness", "job_watermark"]

RULE = "freshness"


class FreshnessParams(RuleParams):
    """``freshness`` parameters: ``target`` is the SLO (``now - watermark`` at most this); without a target
    the rule is off (no default can suit every job)."""

    target: Duration | None = None


def job_watermark(batch: Sample | None, scopes_newest: Iterable[Sample]) -> datetime | None:
    """The job's watermark as freshness measures it: ``batch``'s (the job-scope sample, Spark
    ``eventTime.watermark`` / Flink job watermark) when it has one, else the minimum of every scope's newest
    watermark (Flink subtasks' ``currentInputWatermark``), and only when all of them are known.

    Returns ``None`` for an unknown watermark (a Flink subtask at ``Long.MIN_VALUE``, no scope at all) and
    for Spark's initial 1970 watermark ("not computed yet", not a 56-year delay), and for a Spark query whose
    plan shows that no operator uses its watermark (:func:`rules.common.watermark_unused`). The one definition of the
    watermark that ``freshness`` and ``freshness_slo`` (:mod:`rules.slo`) compare with processing time.
    """
    if batch is not None and watermark_unused(batch):
        return None  # no operator of the query waits for its watermark (rules.common.watermark_unused)
    watermark = batch.watermark if batch is not None else None
    if watermark is None:
        newest = [sample.watermark for sample in scopes_newest]
        if newest and all(wm is not None for wm in newest):
            watermark = min(wm for wm in newest if wm is not None)
    if watermark is None or is_epoch(watermark):
        return None
    return watermark


def evaluate_freshness(params: FreshnessParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``freshness`` finding (job scope, ``WARNING``): ``now - watermark > target``.

    The watermark is the newest job-scope one; without one, the minimum of every sub-scope's newest
    watermark, and only when all of them are known (a Flink subtask at Long.MIN_VALUE, ``None``, leaves
    freshness unknown: ``watermark_stall``/``idle_source`` report that). Spark's initial 1970 watermark is
    "not computed yet", not a 56-year delay, and is skipped the same way. When the watermark rests on a
    mis-dated row (:func:`rules.jumps.find_jump`), the finding names that row (``details["caused_by"]``) and
    gives its remedy: no delay brings such a watermark back.
    """
    if params.target is None:
        return []
    watermark = job_watermark(
        history.batches[-1] if history.batches else None, (samples[-1] for samples in history.series.values())
    )
    if watermark is None:
        return []
    behind = now - watermark
    if behind <= params.target:
        return []
    details: dict[str, object] = {
        "behind_seconds": behind.total_seconds(),
        "target_seconds": params.target.total_seconds(),
    }
    head = (
        f"the watermark {format_instant_short(watermark)} is {format_duration(behind)} behind processing time "
        f"(target {format_duration(params.target)}): results after it are not final yet."
    )
    jump = find_jump(history)
    if jump is not None:
        # the watermark rests on a mis-dated row: no honest row can move it until processing time passes it
        details["caused_by"] = jump.details()
        message = (
            f"{head} It rests on a jump: {jump.describe()}; every honest row since is behind it. "
            f"{jump.remedy(history.engine)}"
        )
    else:
        message = (
            f"{head} The cause is upstream of the watermark: look at this job's watermark_stall, idle_source, "
            "falling_behind and consumer_lag findings; if none, the data itself arrives late (producer or "
            "ingestion delay)."
        )
    return [Finding(rule=RULE, severity=Severity.WARNING, job=history.job, message=message, observed_at=now,
                    details=details)]
