"""Late rows dropped by the watermark, per batch and in total.

Flink semantics (``late_drop_surge`` on samples of :class:`collectors.flink.FlinkRestCollector`, whose
``dropped_by_watermark`` is the rise of ``numLateRecordsDropped`` between polls): ``WindowOperator``
skips each window of an element that is late (``isWindowLate``: its cleanup time, ``end - 1 +
allowedLateness``, is at or before the watermark); when every window was skipped and the element itself is
late (``isElementLate``: ``timestamp + allowedLateness <= watermark``) it is dropped and counted in
``numLateRecordsDropped`` — or, with ``sideOutputLateData``, sent to the side output and the counter stays
0. A sliding-window element late for only some of its windows is not added to those and not counted.

``late_rows_dropped`` (Flink only, :func:`evaluate_late_total`) reads the counter itself: ``WindowOperator``'s
``numLateRecordsDropped`` counts from when the subtask's task last started (a restart resets it), so the
newest poll's value is every record dropped since then, whether or not one was dropped between the last two
polls; a job whose windows dropped records early and none since is reported with both figures (the drops
between polls alone, what ``late_drop_surge`` judges, are 0 there).

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

__all__ = [
    "RULE",
    "SURGE_RULE",
    "LateSurgeParams",
    "LateTotalParams",
    "evaluate_late_surge",
    "evaluate_late_total",
]

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
    earlier = f"; the {_rows_at(before)}, before it, were late by the job's own delay" if before else ""
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
        cause = (
            f"rows arrive later than the watermark delay allows. {remedy(history.engine, Cause.LATE_DROPS)}"
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
            details=details,
        )
    ]


class LateTotalParams(RuleParams):
    """``late_rows_dropped`` parameters: ``min_dropped`` (default 1), the fewest records dropped since the
    tasks started that are reported."""

    min_dropped: int = Field(1, ge=1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def evaluate_late_total(params: LateTotalParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``late_rows_dropped`` finding of a Flink job (job scope): its window vertices have dropped at
    least ``min_dropped`` late records since their tasks started.

    Reads each window subtask's newest sample: ``extra["late_records_dropped"]`` is ``WindowOperator``'s
    ``numLateRecordsDropped`` counter (cumulative since the task started, reset by a restart) and
    ``dropped_by_watermark`` its rise since the previous poll (``None`` when unknown: a first poll, or a
    vertex the REST metric store did not refresh). Both are said per vertex: "8 since the tasks started, none
    between the last two polls". Severity ``WARNING`` when records were dropped between the last two polls,
    ``INFO`` when all drops are older (they are lost all the same, and the figure is the only trace:
    ``WindowOperator`` drops them without a log line). Other engines: ``[]`` (Spark's progress has no
    cumulative counter; ``late_drop_surge`` judges its per-batch drops).

    ``details``: ``{"dropped_total": int, "dropped_recent": int | None, "vertices": [{"vertex", "dropped_total",
    "dropped_recent"}]}``.
    """
    if history.engine is not Engine.FLINK or not history.batches:
        return []
    per_vertex: dict[str, list[int | None]] = {}
    for scope, samples in history.series.items():
        newest = samples[-1]
        total = newest.extra.get("late_records_dropped")
        if not isinstance(total, int):
            continue
        vertex = str(newest.extra.get("vertex") or scope.operator)
        agg = per_vertex.setdefault(vertex, [0, 0])
        agg[0] = (agg[0] or 0) + total
        recent = newest.dropped_by_watermark
        agg[1] = None if agg[1] is None or recent is None else agg[1] + recent
    total_all = sum(t or 0 for t, _ in per_vertex.values())
    if total_all < params.min_dropped:
        return []
    recents = [r for _, r in per_vertex.values()]
    recent_all = None if any(r is None for r in recents) else sum(r or 0 for r in recents)
    parts: list[str] = []
    rows: list[dict[str, object]] = []
    for vertex, (total, recent) in sorted(per_vertex.items(), key=lambda kv: -(kv[1][0] or 0)):
        if not total:
            continue
        if recent is None:
            recent_text = "recent unknown"
        elif recent == 0:
            recent_text = "none between the last two polls"
        else:
            recent_text = f"{recent} between the last two polls"
        parts.append(f"`{vertex}` {total} ({recent_text})")
        rows.append({"vertex": vertex, "dropped_total": total, "dropped_recent": recent})
    job = history.job.name or history.job.job_id
    if recent_all:
        when = f"{recent_all} of them between the last two polls: records are still arriving late"
    elif recent_all == 0:
        when = (
            "none of them between the last two polls (they were dropped earlier, e.g. while the job caught up or "
            "after an idle input resumed; the records are lost all the same)"
        )
    else:
        when = (
            "how many of them between the last two polls is unknown (one poll only, or the REST metric store "
            "was not refreshed in between)"
        )
    if len(parts) == 1:
        head = f"have dropped {_plural(total_all, 'late record')} since their tasks started"
        by_vertex = f"By window vertex: {parts[0]}"
    else:
        # each window operator drops its own copy of a late record: the sum over vertices is no count of records
        head = (
            f"have dropped late records in {len(parts)} window vertices since their tasks started ({total_all} "
            "drops in all, counted per vertex: a record late for two windows is one drop in each)"
        )
        by_vertex = "By window vertex: " + "; ".join(parts)
    message = (
        f"the windows of job `{job}` {head} (WindowOperator's numLateRecordsDropped), {when}. {by_vertex}"
        + ". They were behind the watermark by more than the window's allowed lateness. "
        + remedy(Engine.FLINK, Cause.LATE_DROPS)
    )
    return [
        Finding(
            rule=RULE,
            severity=Severity.WARNING if recent_all else Severity.INFO,
            job=history.job,
            message=message,
            observed_at=now,
            details={"dropped_total": total_all, "dropped_recent": recent_all, "vertices": rows},
        )
    ]
