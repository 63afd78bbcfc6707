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

from datetime import datetime, timedelta
from operator import attrgetter

from pydantic import Field

from monitor.model import Engine, Finding, Severity
from monitor.timefmt import format_duration, format_instant_short
from rules.common import tail_since
from rules.history import JobHistory
from rules.leaps import DEFAULT_JUMP_FACTOR, DEFAULT_MIN_JUMP, find_leap
from rules.params import Duration, RuleParams

__all__ = ["SURGE_RULE", "LateSurgeParams", "evaluate_late_surge"]

SURGE_RULE = "late_drop_surge"
_DROPPED = attrgetter("dropped_by_watermark")

RULE = "late_rows_dropped"


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
    cutoff = batches[-1].observed_at - params.window
    if history.marks_kept and (history.newest_drop_at is None or history.newest_drop_at < cutoff):
        return []  # nothing dropped in the window (the common case), in O(1)
    window = tail_since(batches, cutoff)
    if not any(map(_DROPPED, window)):
        return []  # nothing dropped (the common case, checked at C level)
    known = [b for b in window if b.dropped_by_watermark is not None]
    dropped = sum(b.dropped_by_watermark or 0 for b in known)
    rows = sum(b.num_input_rows or 0 for b in known)
    if dropped < params.min_dropped or dropped <= params.max_share * rows:
        return []
    share = dropped / rows if rows else float("inf")
    newest = known[-1]
    wm = newest.watermark
    leap = find_leap(history.batches, DEFAULT_MIN_JUMP, DEFAULT_JUMP_FACTOR, history.event_max_top)
    dropping = next((b for b in reversed(known) if b.dropped_by_watermark), newest)
    if leap is not None and leap.batch.observed_at < dropping.observed_at:
        moved = (
            f"moved the watermark +{format_duration(leap.watermark_advance)}"
            if leap.watermark_advance is not None
            else f"carried an event time {format_duration(leap.leap)} beyond the rest"
        )
        rows_text = "row" if dropping.dropped_by_watermark == 1 else "rows"
        cause = (
            f"{dropping.dropped_by_watermark} {rows_text} dropped at batch {dropping.batch_id} because batch "
            f"{leap.batch.batch_id} {moved} (a mis-dated row: see future_timestamp). A longer delay does not "
            "help: filter implausible event times before the watermark is assigned."
        )
    elif wm is not None and wm > newest.observed_at + params.skew:
        cause = (
            f"the watermark {format_instant_short(wm)} is {format_duration(wm - newest.observed_at)} ahead of the observation "
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
    unit = "polls" if history.engine is Engine.FLINK else "batches"
    counted = len([b for b in known if b.dropped_by_watermark])
    if rows:
        what = f"{dropped} of {rows} input rows ({share:.1%})"
    elif any(b.num_input_rows is None for b in known):
        # e.g. a Flink poll that read the source vertex from the metric store's previous fetch
        what = f"{dropped} rows (input row count unknown)"
    else:
        what = f"{dropped} of 0 input rows (all)"
    message = (
        f"{what} were dropped as late by the watermark in the last {format_duration(params.window)} ({counted} "
        f"{unit}, threshold {params.max_share:.1%}); {cause}"
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
