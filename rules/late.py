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
from datetime import datetime, timedelta
from operator import attrgetter

from pydantic import Field

from monitor.model import Engine, Finding, Sample, Severity
from monitor.timefmt import format_duration, format_instant_short
from rules.common import tail_since
from rules.history import JobHistory
from rules.jumps import Jump, batch_name, find_jump
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

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


def _rows_at(batches: Sequence[Sample]) -> str:
    """``2 rows dropped at batch 8`` / ``3 rows dropped at batches 2, 4`` / ``60 rows dropped at 5 batches from
    batch 6 to batch 10`` / ``... at 2 polls, the last at <t>`` (Flink polls have no batch id)."""
    n = sum(b.dropped_by_watermark or 0 for b in batches)
    rows = "row" if n == 1 else "rows"
    if len(batches) == 1:
        where = batch_name(batches[0])
    elif all(b.batch_id is not None for b in batches) and len(batches) <= 4:
        where = "batches " + ", ".join(str(b.batch_id) for b in batches)
    elif all(b.batch_id is not None for b in batches):
        where = f"{len(batches)} batches from {batch_name(batches[0])} to {batch_name(batches[-1])}"
    else:
        where = f"{len(batches)} polls, the last at {format_instant_short(batches[-1].observed_at)}"
    return f"{n} {rows} dropped at {where}"


def _jump_cause(jump: Jump, known: Sequence[Sample], engine: Engine) -> str:
    """Why the window's rows were dropped when the job's watermark rests on a mis-dated row: the drops at or
    after the row's batch are behind the watermark it set (not late); those before it were late by the job's
    own delay, but no longer delay is advised for either (it cannot cure the jump, the urgent problem)."""
    dropped = [b for b in known if b.dropped_by_watermark]
    after = [b for b in dropped if b.observed_at >= jump.batch.observed_at]
    before = [b for b in dropped if b.observed_at < jump.batch.observed_at]
    if not after:
        return (
            f"the {_rows_at(before)} came before the mis-dated row and were late by the job's own delay, but the "
            f"urgent problem is that {jump.describe()}: every row after it is behind the watermark. "
            f"{jump.remedy(engine)}"
        )
    earlier = (
        f"; the {_rows_at(before)}, before it, were late by the job's own delay" if before else ""
    )
    return (
        f"{_rows_at(after)} because {jump.describe()}: they are behind a watermark a mis-dated row set, not "
        f"late{earlier}. {jump.remedy(engine)}"
    )


def evaluate_late_surge(params: LateSurgeParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``late_drop_surge`` finding (job scope, ``WARNING``): over the job batches of the last
    ``window``, ``sum(dropped_by_watermark) / sum(num_input_rows)`` is above ``max_share`` and at least
    ``min_dropped`` rows were dropped. Unknown counts (no stateful operator) are left out of both sums;
    a window with no known drop count gives nothing. Spark counts the drops per stateful operator
    (``numRowsDroppedByWatermark``), so with two operators, or a ``foreachBatch`` running two actions, the
    share can exceed 1: it is reported as measured.

    When the job's watermark rests on a mis-dated row (:func:`rules.jumps.find_jump`, the row
    ``future_timestamp``/``event_time_units`` report), no longer delay is advised for any drop of the window:
    those at or after the row's batch are behind the watermark it set, those before it were late by the
    job's own delay, and the row is named as the urgent problem with its remedy (``details["caused_by"]``).
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
    jump = find_jump(history, skew=params.skew)
    details: dict[str, object] = {"dropped": dropped, "rows": rows, "share": share if rows else None}
    if jump is not None:
        cause = _jump_cause(jump, known, history.engine)
        details["caused_by"] = jump.details()
    elif history.engine is Engine.FLINK:
        cause = (
            "records arrive later than the watermark delay plus the window's allowed lateness."
            + _flink_where(history, window[0].observed_at)
            + " "
            + remedy(history.engine, Cause.LATE_DROPS)
        )
    else:
        cause = f"rows arrive later than the watermark delay allows. {remedy(history.engine, Cause.LATE_DROPS)}"
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
            details=details,
        )
    ]
