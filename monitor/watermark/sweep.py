"""Compare watermark delays and recommend the smallest one meeting a completeness target."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import MAX_DELAY_MS, EngineConfigError, WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.plan import BatchPlan, plan_batches
from monitor.watermark.replay import replay
from monitor.watermark.results import Replay, Summary

__all__ = ["DEFAULT_LADDER_MS", "Recommendation", "needed_extra_delay_ms", "recommend_delay", "sweep"]

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
        allowed_rows: how many rows may be dropped (``floor(share * rows with a time)``).
        delay_ms: the smallest delay meeting the target, to 1 ms, confirmed by replay.
        estimated_ms: the delay read off the lateness distribution at delay 0 (see
            :func:`recommend_delay`) before the confirming replays.
        confirmed: the replay at ``delay_ms`` meets the target and the one at ``delay_ms - 1`` does not
            (or ``delay_ms`` is 0).
        summary: the replay summary at ``delay_ms``.
        smallest_candidate_ms: the smallest of the given candidates meeting the target (``None``:
            none did, or no candidates were given).
        evaluated: every summary computed, sorted by delay.
    """

    target_completeness_pct: float
    max_dropped_share: float
    allowed_rows: int
    delay_ms: int
    estimated_ms: int
    confirmed: bool
    summary: Summary
    smallest_candidate_ms: int | None
    evaluated: tuple[Summary, ...]


def needed_extra_delay_ms(result: Replay) -> npt.NDArray[np.int64]:
    """For every distinct late row of ``result``: the extra delay (ms) that keeps it in time.

    A delay larger by ``x`` lowers every watermark by ``x`` (each input's watermark is
    ``max event time - delay``, and the batches do not depend on the delay), so a row compared with
    lateness ``L`` us (``watermark * 1000 - window end``, late when ``>= 0``) is in time once
    ``x > L / 1000``: ``floor(L / 1000) + 1`` ms; for a row late for several (sliding) windows, the
    largest. Needs ``keep_late_rows=True``. Returned unsorted, one value per row.
    """
    rows = [b.late_rows.row_index for b in result.batches if len(b.late_rows)]
    if not rows:
        return np.zeros(0, dtype=np.int64)
    idx = np.concatenate(rows)
    need = np.concatenate([b.late_rows.lateness_us for b in result.batches if len(b.late_rows)]) // 1000 + 1
    order = np.lexsort((-need, idx))
    first = np.concatenate([[True], idx[order][1:] != idx[order][:-1]])
    return np.asarray(need[order][first], dtype=np.int64)


def recommend_delay(
    events: EventsTable,
    config: WatermarkConfig,
    target_completeness_pct: float,
    *,
    candidates_ms: list[int] | None = None,
    plan: BatchPlan | None = None,
    keep: npt.NDArray[np.bool_] | None = None,
) -> Recommendation:
    """Find the smallest delay whose replay drops at most ``100 - target_completeness_pct`` % of rows.

    Read off the observed lateness: replay at delay 0 keeping the late rows, take each late row's
    :func:`needed_extra_delay_ms`, and with ``A`` rows allowed to drop, the estimate is the
    ``(A+1)``-th largest need (0 when at most ``A`` rows are late). It is then confirmed by replay:
    the estimate must meet the target and 1 ms less must not. Where it does not hold (the
    watermark's floor at 0 or no-data batches that run at one delay and not another make the shift
    inexact), a bisection to 1 ms between a failing and a passing delay settles it (dropped rows are
    non-increasing in the delay). ``candidates_ms`` (e.g. the ``--sweep`` delays) are replayed only to
    report the smallest of them that meets the target. ``keep``: as for
    :func:`~monitor.watermark.replay` (recommend for the events without some rows).

    Raises:
        EngineConfigError: the target is not in ``(0, 100]``.
    """
    if not 0 < target_completeness_pct <= 100:
        raise EngineConfigError(f"target completeness must be in (0, 100], got {target_completeness_pct}")
    allowed = (100.0 - target_completeness_pct) / 100.0
    if plan is None:
        plan = plan_batches(events, config)
    done: dict[int, Summary] = {}

    def run(d: int) -> Summary:
        if d not in done:
            done[d] = replay(events, _with_delay(config, d), plan=plan, keep=keep).summary
        return done[d]

    base = replay(events, dataclasses.replace(config, delay_ms=0, keep_late_rows=True), plan=plan, keep=keep)
    done[0] = base.summary
    allowed_rows = int(allowed * base.summary.rows_with_time + 1e-9)

    def ok(s: Summary) -> bool:
        return s.dropped_rows <= allowed_rows

    need = np.sort(needed_extra_delay_ms(base))[::-1]
    estimate = min(int(need[allowed_rows]) if len(need) > allowed_rows else 0, MAX_DELAY_MS)
    lo: int | None = None  # a failing delay
    hi: int | None = None  # a passing delay
    if ok(run(estimate)):
        hi = estimate
        if estimate > 0 and not ok(run(estimate - 1)):
            lo = estimate - 1
        elif estimate > 0:
            lo = -1 if ok(run(0)) else 0
    else:
        lo = estimate
        for d in sorted({*DEFAULT_LADDER_MS, MAX_DELAY_MS}):
            if d > estimate and ok(run(d)):
                hi = d
                break
    if hi is None:  # pragma: no cover - MAX_DELAY_MS keeps every row with an event time
        hi = MAX_DELAY_MS
    if lo == -1:
        hi = 0
    elif lo is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if ok(run(mid)):
                hi = mid
            else:
                lo = mid
    confirmed = ok(run(hi)) and (hi == 0 or not ok(run(hi - 1)))
    smallest = None
    if candidates_ms:
        smallest = next((d for d in sorted(set(candidates_ms)) if ok(run(d))), None)
    return Recommendation(
        target_completeness_pct=target_completeness_pct,
        max_dropped_share=allowed,
        allowed_rows=allowed_rows,
        delay_ms=hi,
        estimated_ms=estimate,
        confirmed=confirmed,
        summary=run(hi),
        smallest_candidate_ms=smallest,
        evaluated=tuple(done[d] for d in sorted(done)),
    )
