"""Join state unbounded: a Spark stream-stream join whose state is never evicted.

Spark semantics followed (``StreamingSymmetricHashJoinExec`` and
``StreamingSymmetricHashJoinHelper.getStateWatermarkPredicates``): a stream-stream join keeps every row of
both sides in state, and drops a side's row only through a *state watermark predicate*, which Spark plans
only when that side has a watermarked join key or the join condition bounds that side's event-time column
by the other side's watermarked one (a time range: ``click_time BETWEEN imp_time AND imp_time + INTERVAL 1
MINUTE``). Without one, ``numRowsRemoved`` of the join's ``StateOperatorProgress`` (``symmetricHashJoin``)
stays 0 while ``numRowsTotal`` climbs for as long as the query runs, whatever the watermark does.

Two kinds of evidence, either enough: the batch's physical plan (the event log's
``SparkListenerSQLExecutionStart``: ``state cleanup [ left = null, right = null ]``, read by
:func:`collectors.spark.plans.join_plan`), which proves it at once and names the columns; or, where no plan
is collected (listener push, progress files), the state metrics: the growth trend ``state_growth`` tests
(:func:`rules.state_growth.scanned_fit`: no row removed, the watermark advanced, the state grew) applied to
the join operators' own rows. A plan with a cleanup predicate for both sides means eviction works: no
finding even before the watermark has passed the first range. Recorded on real Spark 4.3.0:
``tests/fixtures/spark/stream-join-4.3.0``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from monitor.model import JOIN_PLAN_EXTRA, STREAM_JOIN_EXTRA, Finding, Sample, Severity
from monitor.timefmt import format_duration
from rules.common import tail_since, watermark_moves
from rules.history import JobHistory
from rules.remedies import Cause, remedy
from rules.state_growth import GrowthTrendParams, scanned_fit

__all__ = ["RULE", "JoinStateParams", "condition_to_add", "evaluate_join_state"]

RULE = "join_state_unbounded"


class JoinStateParams(GrowthTrendParams):
    """``join_state_unbounded`` parameters: the growth trend test of :class:`rules.state_growth.GrowthTrendParams`
    (used only when the batches carry no physical plan)."""


def _join(sample: Sample) -> dict[str, Any] | None:
    value = sample.extra.get(STREAM_JOIN_EXTRA)
    return value if isinstance(value, dict) else None


def _join_rows(sample: Sample) -> float | None:
    join = _join(sample)
    rows = join.get("rows_total") if join is not None else None
    return float(rows) if isinstance(rows, int) else None


def _join_removed(sample: Sample) -> int | None:
    join = _join(sample)
    removed = join.get("rows_removed") if join is not None else None
    return removed if isinstance(removed, int) else None


def condition_to_add(plan: dict[str, Any] | None) -> str:
    """The time-range condition to add to the join, in Spark SQL, with the plan's event-time columns
    (``plan["left_time"]``/``["right_time"]``, see :data:`monitor.model.JOIN_PLAN_EXTRA`) where known and
    placeholders otherwise: ``click_time BETWEEN imp_time - INTERVAL 1 HOUR AND imp_time + INTERVAL 1 HOUR``."""
    left = (plan or {}).get("left_time") or "<left event time>"
    right = (plan or {}).get("right_time") or "<right event time>"
    return f"{right} BETWEEN {left} - INTERVAL 1 HOUR AND {left} + INTERVAL 1 HOUR"


def _join_text(plan: dict[str, Any] | None) -> str:
    """``the inner stream-stream join on ad = click_ad`` (or without the keys when no plan is known)."""
    if plan is None:
        return "the stream-stream join"
    keys = " AND ".join(f"{a} = {b}" for a, b in zip(plan.get("left_keys") or [], plan.get("right_keys") or [], strict=False))
    kind = str(plan.get("join_type") or "").replace("Outer", " outer").replace("Semi", " semi").lower().strip()
    on = f" on {keys}" if keys else ""
    return f"the {kind} stream-stream join{on}" if kind else f"the stream-stream join{on}"


def evaluate_join_state(params: JoinStateParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``join_state_unbounded`` finding of one Spark job (job scope, ``WARNING``, at most one).

    Reads the newest batch's ``extra["stream_join"]`` (the join operators' state rows) and, when the event
    log gave it, ``extra["join_plan"]``. Fires when the plan shows a side without a state cleanup predicate
    (and the join holds state), or, without a plan, when the join's rows pass the growth trend test over
    ``window``. The message names the join, what the state did, and the condition to add
    (:func:`condition_to_add`).
    """
    batches = history.batches
    if not batches or _join(batches[-1]) is None:
        return []
    newest = batches[-1]
    raw_plan = newest.extra.get(JOIN_PLAN_EXTRA)
    plan = raw_plan if isinstance(raw_plan, dict) else None
    window = tail_since(batches, newest.observed_at - params.window)
    rows_now = _join_rows(newest)
    if plan is not None:
        kept = [side for side in ("left", "right") if plan.get(f"{side}_cleanup") is False]
        if not kept or not rows_now or not watermark_moves(window, 1).steps:
            return []  # Spark planned eviction for both sides (or nothing is held yet, or no watermark moved)
        fit = None
    else:
        kept = []
        fit = scanned_fit(params, window, _join_rows, _join_removed)
        if fit is None:
            return []
    steps = len(watermark_moves(window).steps)
    removed = sum(r for r in map(_join_removed, window) if r is not None)
    span = format_duration(timedelta(seconds=(newest.observed_at - window[0].observed_at).total_seconds()))
    condition = condition_to_add(plan)
    if plan is not None:
        sides = "either side" if len(kept) == 2 else f"the {kept[0]} side"
        columns = ", ".join(str(plan[k]) for k in ("left_time", "right_time") if plan.get(k))
        why = (
            f"Its physical plan has no state cleanup for {sides}: the join condition "
            f"({plan.get('condition') or 'only the join keys'}) sets no time range between the two sides' "
            f"watermarked event-time columns{f' ({columns})' if columns else ''}, so Spark never drops a row of {sides}"
        )
        state = (
            f"It holds {rows_now:.0f} state rows now; {removed} were removed in the last {span} while the watermark "
            f"advanced {steps} time{'s' if steps != 1 else ''}."
        )
    else:
        assert fit is not None
        why = (
            "The plan is not known here (no event log), but the join's state only grows: the sign of a join "
            "condition without a time range between the two sides' event-time columns, with which Spark keeps "
            "every row"
        )
        state = (
            f"Its state grew from {fit.first:.0f} to {fit.current:.0f} rows in "
            f"{format_duration(timedelta(seconds=fit.span_seconds))} with none removed while the watermark "
            f"advanced {fit.steps} time{'s' if fit.steps != 1 else ''}."
        )
    message = (
        f"join state unbounded: {_join_text(plan)} keeps its state forever. {why}. {state} It grows until the "
        f"executors run out of memory or checkpoints become too slow. {remedy(history.job.engine, Cause.JOIN_STATE_UNBOUNDED, condition=condition)}"
    )
    details: dict[str, object] = {
        "evidence": "plan" if plan is not None else "state_metrics",
        "rows": rows_now,
        "rows_removed": removed,
        "watermark_steps": steps,
        "condition_to_add": condition,
    }
    if plan is not None:
        details["sides_kept"] = kept
        details["left_time"] = plan.get("left_time")
        details["right_time"] = plan.get("right_time")
    return [
        Finding(
            rule=RULE,
            severity=Severity.WARNING,
            job=history.job,
            message=message,
            observed_at=now,
            batch_id=newest.batch_id,
            details=details,
        )
    ]
