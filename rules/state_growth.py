"""State growth: state rows keep rising, nothing is removed, while the watermark advances.

Spark semantics followed: stateful operators evict state older than the watermark at the end of each
batch (``StateStoreSaveExec`` / ``StreamingDeduplicateExec`` ``removeKeysOlderThanWatermark``), and report
``numRowsTotal`` / ``numRowsRemoved`` in ``StateOperatorProgress``. When the watermark moves forward and
still nothing is removed, the state key does not contain the event-time column (e.g. ``groupBy("user")``
or ``dropDuplicates("id")`` without the event time), so the state grows without bound. A growing state
while the watermark is still flat is normal (nothing is old enough to evict yet); rising state with
removals is a window working as intended. One watermark step without removals is normal too: the watermark
may move without passing the end of any window (a 5-minute window evicts nothing while the watermark moves
3 minutes inside it), so the rule needs several steps of the watermark without a single removal.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, pairwise, repeat
from operator import attrgetter, lt, sub, truediv
from typing import Literal

from pydantic import Field

from monitor.model import JOIN_PLAN_EXTRA, STREAM_JOIN_EXTRA, Engine, Finding, Sample, Severity
from monitor.timefmt import format_duration, format_instant_short
from rules.common import tail_since, watermark_moves
from rules.history import JobHistory, StateTrack, kept_state
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

#: how far ahead a limit is projected; beyond it the message gives no date
_PROJECTION_HORIZON = timedelta(days=36_525)

__all__ = [
    "RULE",
    "Fit",
    "GrowthTrendParams",
    "StateGrowthParams",
    "defers_to_join_rule",
    "evaluate_state_growth",
    "scanned_fit",
    "theil_sen_slope",
]


RULE = "state_growth"
_REMOVED = attrgetter("state_rows_removed")
_TIME = attrgetter("observed_at")
#: ``JobHistory.rule_state`` key of the kept :class:`StateTrack` (:func:`rules.history.kept_state`)
_TRACK = f"{RULE}.track"
_FIT_POINTS = 40  # points the Theil-Sen slope is fitted on (evenly spaced over the window)


class GrowthTrendParams(RuleParams):
    """The trend test a growing state must pass (``state_growth``, ``join_state_unbounded``).

    Attributes:
        window: how much recent history the trend is fitted on (default 30m).
        min_points: samples with a known state size needed in the window.
        min_watermark_steps: times the watermark must advance in the window (nothing to evict otherwise).
        min_growth: relative growth over the window (Theil-Sen slope x window span / first value) that
            counts, e.g. 0.05 = 5 %.
        min_monotone_share: share of steps in the window that must not decrease.
    """

    window: Duration = timedelta(minutes=30)
    min_points: int = Field(6, ge=3)
    min_watermark_steps: int = Field(3, ge=0)
    min_growth: float = Field(0.05, ge=0)
    min_monotone_share: float = Field(0.8, ge=0, le=1)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """The trend window (job-scope batches only)."""
        return self.window, timedelta(0)


class StateGrowthParams(GrowthTrendParams):
    """``state_growth`` parameters (the trend test's, :class:`GrowthTrendParams`, and these).

    Attributes:
        metric: ``rows`` (``state_rows_total``) or ``bytes`` (``state_memory_bytes``).
        limit_rows / limit_bytes: the state size that hurts (memory, checkpoint time): the finding projects
            when it is reached and is ``CRITICAL`` once it is within ``critical_within``.
    """

    metric: Literal["rows", "bytes"] = "rows"
    limit_rows: int | None = Field(None, gt=0, lt=2**63)
    limit_bytes: int | None = Field(None, gt=0, lt=2**63)
    critical_within: Duration = timedelta(hours=1)


def _even_indices(n: int, count: int) -> list[int]:
    """``count`` evenly spaced indices of ``n`` points, first and last included (``n > count >= 2``)."""
    return [round(i * (n - 1) / (count - 1)) for i in range(count)]


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float], max_points: int = 40) -> float:
    """Theil-Sen estimator: the median of the pairwise slopes ``(y_j - y_i) / (x_j - x_i)``, ``x_i < x_j``.

    Robust to outliers (a single doubled value from a ``foreachBatch`` running two actions does not move
    it). At most ``max_points`` evenly spaced points are used (O(max_points^2) pairs).

    Raises:
        ValueError: fewer than two distinct ``x``.
    """
    n = len(xs)
    if n > max_points:
        idx = _even_indices(n, max_points)
        xs = [xs[i] for i in idx]
        ys = [ys[i] for i in idx]
        n = max_points
    slopes: list[float]
    if all(map(lt, xs, islice(xs, 1, None))):  # distinct x (the usual case): the pairs in C-level maps
        slopes = [
            slope
            for i in range(n - 1)
            for slope in map(
                truediv, map(sub, ys[i + 1 :], repeat(ys[i])), map(sub, xs[i + 1 :], repeat(xs[i]))
            )
        ]
    else:
        slopes = [
            (yj - yi) / (xj - xi)
            for i, (xi, yi) in enumerate(zip(xs, ys, strict=True))
            for xj, yj in zip(xs[i + 1 :], ys[i + 1 :], strict=True)
            if xj != xi
        ]
    slopes.sort()
    if not slopes:
        raise ValueError("theil_sen_slope: need two distinct x values")
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def evaluate_state_growth(params: StateGrowthParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``state_growth`` finding of one job (job scope, at most one).

    Over the job batches of the last ``window`` with a known state size: nothing was removed
    (``state_rows_removed`` is 0 in every batch where it is known; a single removal means eviction works
    — saw-tooth and plateau patterns are healthy), the watermark advanced ``min_watermark_steps`` times,
    at least ``min_monotone_share`` of the steps did not decrease, and the Theil-Sen slope grew the state
    by ``min_growth`` of its size over the window. Spark's ``dropDuplicatesWithinWatermark`` keeps about
    twice the delay's worth of keys and removes the rest: it plateaus with removals, so it is not reported.
    The message projects when ``limit_rows``/``limit_bytes`` is reached at the fitted rate. Flink jobs are
    judged on bytes whatever ``metric`` says: the collector's ``state_memory_bytes`` is the latest completed
    checkpoint's ``state_size`` (``CheckpointingStatistics``), Flink's only state-size figure in REST. A Spark
    job whose state operators are all stream-stream joins is left to ``join_state_unbounded``
    (:func:`defers_to_join_rule`), which names the join condition to add.
    """
    batches = history.batches
    if not batches or defers_to_join_rule(batches[-1]):
        return []
    cutoff = batches[-1].observed_at - params.window
    if history.marks_kept and history.newest_removal_at is not None and history.newest_removal_at >= cutoff:
        return []  # eviction works (the common case, in O(1))
    # Flink reports no state rows: its state size is the latest completed checkpoint's state_size (bytes)
    metric = "bytes" if history.engine is Engine.FLINK else params.metric
    field = "state_rows_total" if metric == "rows" else "state_memory_bytes"
    track = kept_state(history, _TRACK, StateTrack)
    if track is not None:
        track.catch_up(batches)
        fit = _tracked_fit(params, track, metric, cutoff)
    else:
        fit = scanned_fit(params, tail_since(batches, cutoff), attrgetter(field), _REMOVED)
    if fit is None:
        return []
    return _finding(params, history, now, metric, fit)


@dataclass(frozen=True, slots=True)
class Fit:
    """The trend of one job's window, for the finding: first and last points, span, slope, watermark steps."""

    first: float
    current: float
    last_point: Sample
    span_seconds: float
    slope: float
    steps: int
    last_step: Sample | None


def defers_to_join_rule(newest: Sample) -> bool:
    """Whether ``state_growth`` leaves the job to ``join_state_unbounded`` (:mod:`rules.join_state`): every
    state operator of its newest batch is a stream-stream join (``extra["stream_join"]["operators"]`` equals
    ``extra["num_state_operators"]``), whose growth that rule reports with the condition to add, unless the
    batch's plan (``extra["join_plan"]``) shows a state cleanup for both sides: then the join rule is silent and
    a growth (a range far wider than needed, a watermark that barely moves) is still ``state_growth``'s."""
    join = newest.extra.get(STREAM_JOIN_EXTRA)
    if not isinstance(join, dict) or join.get("operators") != newest.extra.get("num_state_operators"):
        return False
    plan = newest.extra.get(JOIN_PLAN_EXTRA)
    return not (isinstance(plan, dict) and plan.get("left_cleanup") is True and plan.get("right_cleanup") is True)


def scanned_fit(
    params: GrowthTrendParams,
    window: Sequence[Sample],
    size: Callable[[Sample], float | None],
    removed: Callable[[Sample], int | None],
) -> Fit | None:
    """The growth trend of ``window`` (the job batches since the cutoff, oldest first), or ``None`` when a
    condition of :class:`GrowthTrendParams` fails: nothing removed (``removed`` is 0 or unknown in every
    batch), ``min_points`` batches with a known ``size``, ``min_watermark_steps`` watermark moves
    (:func:`rules.common.watermark_moves`), ``min_monotone_share`` of non-decreasing steps and a Theil-Sen
    growth of ``min_growth``. ``size``/``removed`` read a batch's state rows (or bytes) and rows removed."""
    if any(map(removed, window)):
        return None  # eviction works (checked first: it is the common case)
    points = [b for b in window if size(b) is not None]
    if len(points) < params.min_points:
        return None
    # the watermark's moves over the window's batches: the definition watermark_stall reads too, so the two
    # never disagree on whether (and until when) the watermark advanced
    moves = watermark_moves(window)
    steps = len(moves.steps)
    if steps < params.min_watermark_steps:
        return None
    ys = [float(size(b) or 0) for b in points]
    rises = sum(1 for a, b in pairwise(ys) if b >= a)
    if rises < params.min_monotone_share * (len(ys) - 1):
        return None
    t0 = points[0].observed_at
    xs = [(b.observed_at - t0).total_seconds() for b in points]
    return _fitted(params, xs, ys, ys[0], ys[-1], points[-1], steps, moves.last_step_at)


def _tracked_fit(params: StateGrowthParams, track: StateTrack, metric: str, cutoff: datetime) -> Fit | None:
    """The same fit as :func:`scanned_fit` from the points kept as the batches arrived (no removal in the window is known from ``newest_removal_at``): O(log n) plus the fitted points."""
    known = track.rows if metric == "rows" else track.bytes
    first = bisect_left(known.samples, cutoff, key=_TIME)
    n = len(known.samples) - first
    if n < params.min_points:
        return None
    steps, last_step = track.watermark.since(cutoff)
    if steps < params.min_watermark_steps:
        return None
    if known.rises[-1] - known.rises[first] < params.min_monotone_share * (n - 1):
        return None
    field = known.field
    chosen = range(first, first + n) if n <= _FIT_POINTS else [first + i for i in _even_indices(n, _FIT_POINTS)]
    t0 = known.samples[first].observed_at
    xs = [(known.samples[i].observed_at - t0).total_seconds() for i in chosen]
    ys = [float(getattr(known.samples[i], field)) for i in chosen]
    return _fitted(params, xs, ys, ys[0], ys[-1], known.samples[-1], steps, last_step)


def _fitted(
    params: GrowthTrendParams,
    xs: list[float],
    ys: list[float],
    first: float,
    current: float,
    last_point: Sample,
    steps: int,
    last_step: Sample | None,
) -> Fit | None:
    """The Theil-Sen fit of ``xs``/``ys`` (seconds since the first point, values), ``None`` when the state did
    not grow by ``min_growth`` of its first value."""
    if xs[-1] <= 0 or min(ys) == max(ys):  # a constant state: every pairwise slope, so the median, is 0
        return None
    slope = theil_sen_slope(xs, ys, _FIT_POINTS)
    if slope <= 0 or slope * xs[-1] < params.min_growth * max(first, 1.0):
        return None
    return Fit(first, current, last_point, xs[-1], slope, steps, last_step)


def _finding(
    params: StateGrowthParams, history: JobHistory, now: datetime, metric: str, fit: Fit
) -> list[Finding]:
    """The finding of a fit that grows (message, severity from the projection to the limit)."""
    ys0, current, slope, steps = fit.first, fit.current, fit.slope, fit.steps
    unit = "rows" if metric == "rows" else "bytes"
    limit = params.limit_rows if metric == "rows" else params.limit_bytes
    severity = Severity.WARNING
    projection = ""
    details: dict[str, object] = {"slope_per_hour": slope * 3600, "watermark_steps": steps, unit: current}
    if limit is not None:
        seconds = max(0.0, (limit - current) / slope)
        details["seconds_to_limit"] = seconds
        if current >= limit:
            projection = f" It is already above the limit of {limit} {unit}."
        elif seconds > _PROJECTION_HORIZON.total_seconds():
            # a limit far beyond the trend: no date to give (and none a datetime could hold)
            projection = f" At this rate it does not reach the limit of {limit} {unit} within 100 years."
        else:
            remaining = timedelta(seconds=seconds)
            reach = fit.last_point.observed_at + remaining
            projection = (
                f" At this rate it reaches the limit of {limit} {unit} in {format_duration(remaining)} "
                f"(about {format_instant_short(reach.replace(microsecond=0))})."
            )
        if seconds <= params.critical_within.total_seconds():
            severity = Severity.CRITICAL
    what = "checkpointed state size" if history.engine is Engine.FLINK else f"state {unit}"
    last = fit.last_step
    last_text = f", the last at {format_instant_short(last.observed_at)}" if last is not None and steps > 1 else ""
    if last is not None and steps == 1:
        last_text = f", at {format_instant_short(last.observed_at)}"
    if last is not None:
        details["watermark_last_advanced_at"] = format_instant_short(last.observed_at)
    message = (
        f"{what} grew from {ys0:.0f} to {current:.0f} in {format_duration(timedelta(seconds=fit.span_seconds))} "
        f"(Theil-Sen trend {slope * 3600:.0f} {unit}/h) with no rows removed while the watermark advanced {steps} "
        f"time{'s' if steps != 1 else ''}{last_text}.{projection} {remedy(history.engine, Cause.STATE_GROWTH)}"
    )
    return [
        Finding(
            rule=RULE,
            severity=severity,
            job=history.job,
            message=message,
            observed_at=now,
            batch_id=fit.last_point.batch_id,
            details=details,
        )
    ]
