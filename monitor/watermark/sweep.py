"""Compare watermark delays and recommend the smallest one meeting a completeness target."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from monitor.watermark.config import EngineConfigError, WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.plan import BatchPlan, plan_batches
from monitor.watermark.replay import replay
from monitor.watermark.results import Summary

__all__ = ["DEFAULT_LADDER_MS", "Recommendation", "recommend_delay", "sweep"]

DEFAULT_LADDER_MS: tuple[int, ...] = tuple(
    s * 1000
    for s in (0, 1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400, 7 * 86400)
)


def _with_delay(config: WatermarkConfig, delay_ms: int) -> WatermarkConfig:
    return dataclasses.replace(config, delay_ms=delay_ms, keep_late_rows=False)


def sweep(
    events: EventsTable, config: WatermarkConfig, delays_ms: list[int], *, plan: BatchPlan | None = None
) -> list[Summary]:
    """Replay once per delay (same batches, same query) and return the summaries in ``delays_ms`` order.

    Raises:
        EngineConfigError: see :func:`monitor.watermark.replay`.
    """
    if plan is None:
        plan = plan_batches(events, config)
    return [replay(events, _with_delay(config, d), plan=plan).summary for d in delays_ms]


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The answer to "which delay drops at most ``(100 - target)%`` of rows?".

    Attributes:
        target_completeness_pct: e.g. ``99.9``.
        max_dropped_share: ``(100 - target) / 100``.
        delay_ms: the smallest delay found meeting the target (searched to ``resolution_ms`` between
            the largest failing and the smallest passing candidate), ``None`` when no candidate met it.
        summary: the replay summary at ``delay_ms`` (or at the largest candidate when none met it).
        smallest_candidate_ms: the smallest of the given candidates meeting the target.
        evaluated: every summary computed, sorted by delay.
    """

    target_completeness_pct: float
    max_dropped_share: float
    delay_ms: int | None
    summary: Summary
    smallest_candidate_ms: int | None
    evaluated: tuple[Summary, ...]


def recommend_delay(
    events: EventsTable,
    config: WatermarkConfig,
    target_completeness_pct: float,
    *,
    candidates_ms: list[int] | None = None,
    resolution_ms: int = 1000,
    plan: BatchPlan | None = None,
) -> Recommendation:
    """Find the smallest delay whose replay drops at most ``100 - target_completeness_pct`` % of rows.

    Dropped share is non-increasing in the delay (a larger delay gives a lower watermark at every
    batch), so after evaluating ``candidates_ms`` (default :data:`DEFAULT_LADDER_MS`) a bisection
    between the largest failing and smallest passing candidate narrows it to ``resolution_ms``.

    Raises:
        EngineConfigError: the target is not in ``(0, 100]``.
    """
    if not 0 < target_completeness_pct <= 100:
        raise EngineConfigError(f"target completeness must be in (0, 100], got {target_completeness_pct}")
    allowed = (100.0 - target_completeness_pct) / 100.0
    if plan is None:
        plan = plan_batches(events, config)
    cands = sorted(set(candidates_ms if candidates_ms is not None else DEFAULT_LADDER_MS))
    done: dict[int, Summary] = {}

    def run(d: int) -> Summary:
        if d not in done:
            done[d] = replay(events, _with_delay(config, d), plan=plan).summary
        return done[d]

    def ok(s: Summary) -> bool:
        return s.dropped_rows <= allowed * s.rows_with_time + 1e-9

    smallest = next((d for d in cands if ok(run(d))), None)  # ascending; stops at the first pass
    best = smallest
    if smallest is not None:
        failing = [d for d in cands if d < smallest]
        lo = failing[-1] if failing else None
        hi = smallest
        if lo is not None:
            while hi - lo > resolution_ms:
                mid = (lo + hi) // 2
                mid -= mid % resolution_ms if mid - mid % resolution_ms > lo else 0
                if ok(run(mid)):
                    hi = mid
                else:
                    lo = mid
        best = hi
    summary = run(best) if best is not None else run(cands[-1])
    return Recommendation(
        target_completeness_pct=target_completeness_pct,
        max_dropped_share=allowed,
        delay_ms=best,
        summary=summary,
        smallest_candidate_ms=smallest,
        evaluated=tuple(done[d] for d in sorted(done)),
    )
