"""Late rows dropped by the watermark, per batch and in total.

Flink semantics (``late_drop_surge`` on samples of :class:`collectors.flink.FlinkRestCollector`, whose
``dropped_by_watermark`` is the rise of ``numLateRecordsDropped`` between polls): ``WindowOperator``
skips each window of an element that is late (``isWindowLate``: its cleanup time, ``end - 1 +
allowedLateness``, is at or before the watermark); when every window was skipped and the element itself is
late (``isElementLate``: ``timestamp + allowedLateness <= watermark``) it is dropped and counted in
``numLateRecordsDropped`` — or, with ``sideOutputLateData``, sent to the side output and the counter stays
0. A sliding-window element late for only some of its windows is not added to those and not counted.

Spark semantics followed: stateful operators (``StateStoreSaveExec``, ``StreamingDeduplicateExec``,
stream-stream joins) drop input rows whose event time is older than the watermark the batch runs with and
count them in ``StateOperatorProgress.numRowsDroppedByWatermark`` (``numLateInputs`` before Spark 3.1;
the progress parser sums both over operators into ``Sample.dropped_by_watermark``). Spark drops them
silently: the count is the only trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import Field

from monitor.model import Engine, Finding, Sample, Severity
from rules.batches import fmt_duration, fmt_time, progress_batches
from rules.common import tail_since
from rules.history import JobHistory
from rules.params import Duration, RuleParams

__all__ = ["RULE", "SURGE_RULE", "LateConfig", "LateSurgeParams", "detect_late_rows", "evaluate_late_surge"]

SURGE_RULE = "late_drop_surge"

RULE = "late_rows_dropped"


@dataclass(frozen=True, slots=True)
class LateConfig:
    """``skew``: a watermark further than this ahead of the batch time is reported as the likely cause."""

    skew: timedelta = timedelta(hours=1)


def detect_late_rows(config: LateConfig, samples: Sequence[Sample]) -> list[Finding]:
    """One WARNING finding per batch with ``dropped_by_watermark > 0``, then one total finding.

    The total (``batch_id`` ``None``) is added only when rows were dropped in two or more batches. Zero or
    unknown counts give nothing. When the batch's watermark is ahead of its own time by more than ``skew``
    the message names the future watermark as the cause instead of suggesting a longer delay.
    """
    findings: list[Finding] = []
    total = 0
    dropping: list[Sample] = []
    for batch in progress_batches(samples):
        dropped = batch.dropped_by_watermark
        if not dropped:
            continue
        total += dropped
        dropping.append(batch)
        wm = batch.watermark
        rows = "row" if dropped == 1 else "rows"
        message = f"batch {batch.batch_id}: {dropped} {rows} dropped as later than the watermark"
        if wm is not None and wm > batch.observed_at + config.skew:
            message += (
                f" {fmt_time(wm)}, which is {fmt_duration(wm - batch.observed_at)} ahead of the batch time: a "
                "future event time moved it there, so honest rows are being dropped — filter rows with "
                "future event times before withWatermark."
            )
        else:
            wm_text = f" {fmt_time(wm)}" if wm is not None else ""
            message += (
                f"{wm_text}; Spark drops them silently — if these rows matter, raise the withWatermark delay "
                "to cover how late they arrive, or write the raw input to a side table before the aggregation."
            )
        findings.append(
            Finding(
                rule=RULE,
                severity=Severity.WARNING,
                job=batch.job,
                message=message,
                observed_at=batch.observed_at,
                batch_id=batch.batch_id,
                details={"dropped_by_watermark": dropped},
            )
        )
    if len(dropping) >= 2:
        listed = ", ".join(f"{b.batch_id}" for b in dropping)
        findings.append(
            Finding(
                rule=RULE,
                severity=Severity.WARNING,
                job=dropping[-1].job,
                message=f"{total} rows dropped by the watermark in total, in {len(dropping)} batches ({listed}).",
                observed_at=dropping[-1].observed_at,
                batch_id=None,
                labels={"scope": "total"},
                details={"dropped_by_watermark": total, "batches": [b.batch_id for b in dropping]},
            )
        )
    return findings


# ------------------------------------------------------------------------------ current-state evaluation


class LateSurgeParams(RuleParams):
    """``late_drop_surge`` parameters.

    Attributes:
        window: the recent history summed (default 10m).
        max_share: dropped rows / input rows above this is a surge (default 0.01 = 1 %).
        min_dropped: fewer dropped rows than this is never a surge (default 1).
        skew: a watermark this far ahead of the observation time is named as the cause (default 1h).
    """

    window: Duration = timedelta(minutes=10)
    max_share: float = Field(0.01, ge=0, lt=1)
    min_dropped: int = Field(1, ge=1)
    skew: Duration = timedelta(hours=1)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """The summed window (job-scope batches only)."""
        return self.window, timedelta(0)


def _flink_where(history: JobHistory, since: datetime) -> str:
    """`` Dropped at vertex `w` subtask 0 (12), ...`` from the per-subtask late-drop deltas since ``since``."""
    where: list[tuple[int, str]] = []
    for scope, samples in history.series.items():
        n = sum(s.dropped_by_watermark or 0 for s in tail_since(samples, since))
        if n:
            vertex = samples[-1].extra.get("vertex") or scope.operator
            where.append((n, f"vertex `{vertex}` subtask {scope.subtask} ({n})"))
    if not where:
        return ""
    where.sort(key=lambda w: -w[0])
    return " Dropped by WindowOperator at " + ", ".join(w[1] for w in where[:5]) + "."


def evaluate_late_surge(params: LateSurgeParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``late_drop_surge`` finding (job scope, ``WARNING``): over the job batches of the last
    ``window``, ``sum(dropped_by_watermark) / sum(num_input_rows)`` is above ``max_share`` and at least
    ``min_dropped`` rows were dropped. Unknown counts (no stateful operator) are left out of both sums;
    a window with no known drop count gives nothing. Spark counts the drops per stateful operator
    (``numRowsDroppedByWatermark``), so with two operators, or a ``foreachBatch`` running two actions, the
    share can exceed 1: it is reported as measured.
    """
    batches = history.batches
    if not batches:
        return []
    window = tail_since(batches, batches[-1].observed_at - params.window)
    known = [b for b in window if b.dropped_by_watermark is not None]
    dropped = sum(b.dropped_by_watermark or 0 for b in known)
    rows = sum(b.num_input_rows or 0 for b in known)
    if dropped < params.min_dropped or dropped <= params.max_share * rows:
        return []
    share = dropped / rows if rows else float("inf")
    newest = known[-1]
    wm = newest.watermark
    if wm is not None and wm > newest.observed_at + params.skew:
        cause = (
            f"the watermark {fmt_time(wm)} is {fmt_duration(wm - newest.observed_at)} ahead of the observation "
            "time: a future event time moved it, so honest rows are dropped — see future_timestamp; filter "
            "future event times before the watermark is assigned."
        )
    elif history.engine is Engine.FLINK:
        cause = (
            "records arrive later than the watermark delay plus the window's allowed lateness."
            + _flink_where(history, window[0].observed_at)
            + " If they matter, raise forBoundedOutOfOrderness or allowedLateness, or route them to a late side "
            "output (sideOutputLateData). Note what the counter does not show: with a late side output "
            "numLateRecordsDropped stays 0 (read the side output instead), and sliding windows silently skip "
            "the late windows of an element that still fits a later one, without counting it."
        )
    else:
        cause = (
            "rows arrive later than the watermark delay allows. If they matter, raise the watermark delay "
            "(withWatermark / forBoundedOutOfOrderness) to cover how late they arrive, or route late rows to "
            "a side output (Flink sideOutputLateData) instead of dropping them."
        )
    share_text = f"{share:.1%}" if rows else "all"
    unit = "polls" if history.engine is Engine.FLINK else "batches"
    message = (
        f"{dropped} of {rows} input rows ({share_text}) were dropped as late by the watermark in the last "
        f"{fmt_duration(params.window)} ({len([b for b in known if b.dropped_by_watermark])} {unit}, threshold "
        f"{params.max_share:.1%}); {cause}"
    )
    return [
        Finding(
            rule=SURGE_RULE,
            severity=Severity.WARNING,
            job=history.job,
            message=message,
            observed_at=now,
            batch_id=newest.batch_id,
            details={"dropped": dropped, "rows": rows, "share": share if rows else None},
        )
    ]
