"""Why rows were dropped: which rows moved the watermark, and what would have kept the dropped rows.

Spark's watermark is ``max(previous, max event time - delay)`` (per input, combined by the
multiple-watermark policy) and a batch drops rows against the **previous** batch's watermark (see
:mod:`monitor.watermark.runtime`). So every late row was late against a watermark value ``W``, and
that value was first reached when some row's ``event time - delay`` reached ``W``: under the ``min``
policy, when the **last** input reached it; under ``max``, the first. That row is the late row's
*watermark mover*. :func:`diagnose` attributes every late row of a replay to its mover and flags the
movers that are *ahead of the stream*: almost none of the rows read after them (fewer than 1%) ever
reach the watermark they set. A mis-dated row (dated 2099, or epoch milliseconds read as seconds)
is such a mover; the normal progress of a stream is not (later rows overtake it).

For those rows it answers, by replay, the questions a user asks next:

* *would a larger delay keep the rows?* A delay shifts every watermark down by the same amount, so
  a row late by ``L`` at delay ``d`` is in time at ``d + L + 1 ms``: ``delay_needed_ms`` is that bound
  over the rows the movers made late (``2099`` -> decades: no delay fixes it);
* *would filtering those rows?* The replay without them (a ``filter`` before ``withWatermark``);
* *would* ``--max-future-skew`` *?* When batches have processing times: the smallest round skew that
  removes the movers and keeps every other row (``filter(event_time <= current_timestamp() + skew)``),
  confirmed by replay; ``None`` with a reason otherwise (no processing times, or the movers are not
  ahead of processing time: a backfill's bad row can be in the past).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import WatermarkConfig
from monitor.watermark.events import EventsTable, UnitMismatch
from monitor.watermark.plan import BatchPlan, plan_batches
from monitor.watermark.replay import replay
from monitor.watermark.results import Replay, Summary
from monitor.watermark.sweep import DEFAULT_LADDER_MS, Recommendation, recommend_delay

__all__ = ["DelayAdvice", "Diagnosis", "SkewFix", "WatermarkMover", "advise_delay", "diagnose"]

I64 = npt.NDArray[np.int64]
_LOW = np.iinfo(np.int64).min // 4

#: Candidate ``--max-future-skew`` values (ms), smallest first.
SKEW_LADDER_MS: tuple[int, ...] = tuple(
    s * 1000 for s in (60, 300, 600, 1800, 3600, 7200, 21_600, 43_200, 86_400, 7 * 86_400, 30 * 86_400)
)


@dataclass(frozen=True, slots=True)
class WatermarkMover:
    """A row whose event time moved the watermark that later rows were dropped against.

    Attributes:
        row_index: index into the events table.
        line: its line (or row) number in the file.
        batch_id: the batch that read it (the watermark moved after that batch).
        event_time_us: its event time (epoch us; may be beyond year 9999).
        source: its input (``""`` for one unnamed input).
        watermark_before_ms / watermark_after_ms: the global watermark the batch ran with, and the
            one after it (what the next batch runs with).
        rows_dropped: distinct rows dropped against a watermark this row set.
        ahead_of_stream: fewer than 1% of the rows of its input read after its batch (at least one)
            reach the watermark it set.
        later_max_event_time_us: the largest event time among rows of its input read after its batch
            that are not movers ahead of the stream (``None``: no such row).
        unit_mismatch: the loader's note when its number looks written in another epoch unit.
    """

    row_index: int
    line: int
    batch_id: int
    event_time_us: int
    source: str
    watermark_before_ms: int
    watermark_after_ms: int
    rows_dropped: int
    ahead_of_stream: bool
    later_max_event_time_us: int | None
    unit_mismatch: UnitMismatch | None


@dataclass(frozen=True, slots=True)
class SkewFix:
    """``--max-future-skew`` that removes the mis-dated movers and keeps every other row.

    Attributes:
        max_future_skew_ms: the recommended skew (a round value).
        summary: the replay with it.
        movers_min_lead_ms: how far the earliest mover was ahead of its batch's processing time.
        others_max_lead_ms: how far any other row was (the skew stays at or above it).
    """

    max_future_skew_ms: int
    summary: Summary
    movers_min_lead_ms: int
    others_max_lead_ms: int


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What moved the watermark in a replay, and what each fix would drop.

    Attributes:
        movers: every watermark mover with ``rows_dropped > 0``, most drops first.
        misdated: the movers ahead of the stream (found in up to three rounds: removing one
            mis-dated row can reveal another that it hid).
        dropped_rows: rows dropped in the replay diagnosed.
        dropped_by_misdated: of those, rows dropped against a watermark a mis-dated row set.
        delay_needed_ms: the smallest delay that keeps every row the mis-dated rows made late
            (``None`` when there are none): ``delay_ms + delay_raise_ms`` (one delay for every input).
        delay_raise_ms: how much every input's delay must grow to keep those rows (``None``: none); with
            per-input delays the answer is this raise on each input's own delay.
        without_misdated: the replay with the mis-dated rows filtered out (``None``: none).
        skew_fix: see :class:`SkewFix` (``None``: see ``skew_unavailable``).
        skew_unavailable: why no skew is proposed (``""`` when one is, or nothing is mis-dated).
    """

    movers: tuple[WatermarkMover, ...]
    misdated: tuple[WatermarkMover, ...]
    dropped_rows: int
    dropped_by_misdated: int
    delay_needed_ms: int | None
    without_misdated: Summary | None
    skew_fix: SkewFix | None
    skew_unavailable: str
    delay_raise_ms: int | None = None


def _processing_order(
    events: EventsTable, config: WatermarkConfig, plan: BatchPlan, keep: npt.NDArray[np.bool_] | None = None
) -> tuple[I64, I64, I64]:
    """``(order, batch_of_position, candidate_ms)``: rows in the order batches read them, the data
    batch index of each position, and ``floor(event_time / 1 ms) - delay`` of rows that reach the
    watermark (``_LOW`` for null, future-filtered or not-kept rows)."""
    order = plan.order
    sizes = np.diff(plan.bounds)
    pos_batch = np.repeat(np.arange(len(plan), dtype=np.int64), sizes)
    et = events.event_time_us[order]
    ok = events.valid[order].copy()
    if keep is not None:
        ok &= keep[order]
    if config.max_future_skew_ms is not None and len(order):
        times = np.asarray([t if t is not None else 0 for t in plan.times_ms], dtype=np.int64)
        ok &= et <= (times[pos_batch] + config.max_future_skew_ms) * 1000
    delays = np.asarray([config.delay_for(s) for s in events.source_names], dtype=np.int64)
    cand = np.where(ok, np.floor_divide(et, 1000) - delays[events.source_codes[order]], _LOW)
    return order, pos_batch, cand


@dataclass(slots=True)
class _Attribution:
    rows: set[int]
    max_lateness_us: int
    max_watermark_ms: int


def _attribute(
    events: EventsTable, config: WatermarkConfig, plan: BatchPlan, result: Replay, order: I64, cand: I64
) -> dict[int, _Attribution]:
    """Late rows of ``result`` by the position (in ``order``) of the row that moved the watermark
    they were dropped against."""
    codes = events.source_codes[order]
    per_source: list[tuple[I64, I64]] = []  # (positions, running max of cand) per input
    for c in range(len(events.source_names)):
        positions = np.flatnonzero(codes == c)
        if len(positions):
            per_source.append((positions, np.maximum.accumulate(cand[positions])))
    out: dict[int, _Attribution] = {}
    for b in result.batches:
        if not len(b.late_rows) or b.late_watermark_ms <= 0:
            continue
        w = b.late_watermark_ms
        firsts: list[int | None] = []
        for positions, runmax in per_source:
            k = int(np.searchsorted(runmax, w, side="left"))
            firsts.append(int(positions[k]) if k < len(positions) else None)
        reached = [f for f in firsts if f is not None]
        if not reached or (config.policy == "min" and len(reached) < len(firsts)):
            continue  # the watermark was not reached through rows (cannot happen in a replay)
        pos = max(reached) if config.policy == "min" else min(reached)
        a = out.setdefault(pos, _Attribution(set(), 0, 0))
        a.rows.update(b.late_rows.row_index.tolist())
        a.max_lateness_us = max(a.max_lateness_us, int(b.late_rows.lateness_us.max()))
        a.max_watermark_ms = max(a.max_watermark_ms, w)
    return out


def _movers(
    events: EventsTable,
    config: WatermarkConfig,
    plan: BatchPlan,
    result: Replay,
    keep: npt.NDArray[np.bool_] | None = None,
) -> tuple[list[WatermarkMover], dict[int, _Attribution]]:
    """Every mover with drops (most drops first) and the attribution by row index; ``keep`` as
    given to the replay that made ``result``."""
    order, pos_batch, cand = _processing_order(events, config, plan, keep)
    attribution = _attribute(events, config, plan, result, order, cand)
    et_ms = np.floor_divide(events.event_time_us[order], 1000)
    eligible = cand > _LOW
    data_batches = [b for b in result.batches if b.kind == "data"]
    mismatch = {m.line: m for m in events.unit_mismatches}
    codes = events.source_codes[order]
    ahead: dict[int, bool] = {}
    for pos, a in attribution.items():
        after = int(plan.bounds[int(pos_batch[pos]) + 1])
        # the rows of the mover's own input: another input behind it is skew between inputs (each has its
        # own delay), not a sign that this row is mis-dated
        own = eligible[after:] & (codes[after:] == codes[pos])
        n_later = int(own.sum())
        reach = int((own & (et_ms[after:] > a.max_watermark_ms)).sum())
        ahead[pos] = n_later >= 1 and reach < max(1, n_later // 100)
    excluded = np.zeros(len(order), dtype=np.bool_)
    for pos, is_ahead in ahead.items():
        excluded[pos] = is_ahead
    out: list[WatermarkMover] = []
    by_row: dict[int, _Attribution] = {}
    for pos, a in attribution.items():
        j = int(pos_batch[pos])
        b = data_batches[j]
        after = int(plan.bounds[j + 1])
        later = eligible[after:] & ~excluded[after:] & (codes[after:] == codes[pos])
        later_max = int(events.event_time_us[order[after:]][later].max()) if later.any() else None
        row = int(order[pos])
        line = events.line_of(row)
        by_row[row] = a
        out.append(
            WatermarkMover(
                row_index=row,
                line=line,
                batch_id=b.batch_id,
                event_time_us=int(events.event_time_us[row]),
                source=events.source_names[int(events.source_codes[row])],
                watermark_before_ms=b.watermark_ms,
                watermark_after_ms=b.next_watermark_ms,
                rows_dropped=len(a.rows),
                ahead_of_stream=ahead[pos],
                later_max_event_time_us=later_max,
                unit_mismatch=mismatch.get(line),
            )
        )
    out.sort(key=lambda m: (-m.rows_dropped, m.line))
    return out, by_row


def diagnose(
    events: EventsTable,
    config: WatermarkConfig,
    *,
    plan: BatchPlan | None = None,
    result: Replay | None = None,
    rounds: int = 3,
) -> Diagnosis:
    """Attribute the late rows of a replay of ``events`` under ``config`` to the rows that moved the
    watermark, and replay the fixes (see the module docstring).

    Args:
        events / config: as for :func:`~monitor.watermark.replay`.
        plan: the batch plan (computed when ``None``).
        result: a replay of exactly this config made with ``keep_late_rows=True`` (replayed when
            ``None`` or when it kept no late-row details).
        rounds: how many times to look again after removing the mis-dated rows found.

    Returns:
        :class:`Diagnosis`.

    Raises:
        EngineConfigError: as :func:`~monitor.watermark.replay`.
    """
    if plan is None:
        plan = plan_batches(events, config)
    cfg = dataclasses.replace(config, keep_late_rows=True)
    if result is None or not config.keep_late_rows:
        result = replay(events, cfg, plan=plan)
    movers, by_row = _movers(events, cfg, plan, result)
    misdated = [m for m in movers if m.ahead_of_stream]
    late_rows: set[int] = set()
    max_lateness_us = -1
    for m in misdated:
        late_rows |= by_row[m.row_index].rows
        max_lateness_us = max(max_lateness_us, by_row[m.row_index].max_lateness_us)
    without: Summary | None = None
    keep = np.ones(len(events), dtype=np.bool_)
    found = list(misdated)
    for _ in range(rounds):
        new = [m for m in found if keep[m.row_index]]
        if not new:
            break
        keep[[m.row_index for m in new]] = False
        again = replay(events, cfg, plan=plan, keep=keep)
        without = again.summary
        more, _ = _movers(events, cfg, plan, again, keep)
        found.extend(m for m in more if m.ahead_of_stream and keep[m.row_index])
    misdated = found
    skew_fix, why = _skew_fix(events, cfg, plan, misdated)
    return Diagnosis(
        movers=tuple(movers),
        misdated=tuple(misdated),
        dropped_rows=result.summary.dropped_rows,
        dropped_by_misdated=len(late_rows),
        delay_needed_ms=config.delay_ms + max_lateness_us // 1000 + 1 if max_lateness_us >= 0 else None,
        without_misdated=without,
        skew_fix=skew_fix,
        skew_unavailable=why,
        delay_raise_ms=max_lateness_us // 1000 + 1 if max_lateness_us >= 0 else None,
    )


def _skew_fix(
    events: EventsTable, config: WatermarkConfig, plan: BatchPlan, misdated: list[WatermarkMover]
) -> tuple[SkewFix | None, str]:
    if not misdated:
        return None, ""
    if config.max_future_skew_ms is not None:
        return None, (
            "the rows are within the future-skew filter already applied; filter them by event time instead"
        )
    if len(plan) == 0 or any(t is None for t in plan.times_ms):
        return None, (
            "it compares event time with processing time, and the events have no arrival_time column"
        )
    order, pos_batch, cand = _processing_order(events, config, plan)
    times = np.asarray(plan.times_ms, dtype=np.int64)
    lead = np.floor_divide(events.event_time_us[order], 1000) - times[pos_batch]
    where = np.empty(len(order), dtype=np.int64)
    where[order] = np.arange(len(order), dtype=np.int64)
    mover_pos = where[[m.row_index for m in misdated]]
    others = cand > _LOW
    others[mover_pos] = False
    movers_min = int(lead[mover_pos].min())
    others_max = int(lead[others].max()) if others.any() else 0
    floor = max(others_max, 0)
    if movers_min <= floor:
        return None, (
            f"the mis-dated rows are at most {movers_min} ms ahead of processing time, no more than "
            f"other rows ({others_max} ms): a skew filter cannot tell them apart; filter them by event time"
        )
    skew = next((s for s in SKEW_LADDER_MS if floor <= s < movers_min), floor)
    summary = replay(events, dataclasses.replace(config, max_future_skew_ms=skew), plan=plan).summary
    return SkewFix(skew, summary, movers_min, others_max), ""


@dataclass(frozen=True, slots=True)
class DelayAdvice:
    """The delay a completeness target needs, led by the useful answer when a mis-dated row is present.

    Attributes:
        misdated: the mis-dated rows (:attr:`Diagnosis.misdated`), ``()`` when none: then ``without`` is
            ``None`` and ``with_rows`` is the only answer.
        without: the smallest delay meeting the target once the mis-dated rows are filtered out (a
            ``filter`` before ``withWatermark``): the delay to recommend.
        with_rows: the smallest delay meeting the target with every row kept (with a mis-dated row this
            is decades: what no one should configure, shown only for comparison).
        diagnosis: the diagnosis the mis-dated rows come from.
        diagnosed_at_ms: the delay it was made at.
    """

    misdated: tuple[WatermarkMover, ...]
    without: Recommendation | None
    with_rows: Recommendation
    diagnosis: Diagnosis
    diagnosed_at_ms: int

    @property
    def recommended(self) -> Recommendation:
        """The delay to recommend: ``without`` when there are mis-dated rows, else ``with_rows``."""
        return self.without if self.without is not None else self.with_rows


def advise_delay(
    events: EventsTable,
    config: WatermarkConfig,
    target_completeness_pct: float,
    *,
    candidates_ms: list[int] | None = None,
    plan: BatchPlan | None = None,
    diagnose_at_ms: int | None = None,
) -> DelayAdvice:
    """:func:`~monitor.watermark.sweep.recommend_delay` with every row, and — when :func:`diagnose` (at
    ``diagnose_at_ms``, default the largest candidate or the largest of the default ladder: what no delay
    up to it fixed) finds mis-dated rows — once more without them. Spark semantics as
    :func:`~monitor.watermark.replay` (``EventTimeWatermarkExec``: a delay shifts every watermark; it cannot
    bring back a watermark a row dated decades ahead set).

    Raises:
        EngineConfigError: the target is not in ``(0, 100]``, or as :func:`~monitor.watermark.replay`.
    """
    if plan is None:
        plan = plan_batches(events, config)
    with_rows = recommend_delay(events, config, target_completeness_pct, candidates_ms=candidates_ms, plan=plan)
    if diagnose_at_ms is None:
        diagnose_at_ms = max(candidates_ms) if candidates_ms else DEFAULT_LADDER_MS[-1]
    diagnosis = diagnose(events, dataclasses.replace(config, delay_ms=diagnose_at_ms), plan=plan)
    without: Recommendation | None = None
    if diagnosis.misdated:
        keep = np.ones(len(events), dtype=np.bool_)
        keep[[m.row_index for m in diagnosis.misdated]] = False
        without = recommend_delay(
            events, config, target_completeness_pct, candidates_ms=candidates_ms, plan=plan, keep=keep
        )
    return DelayAdvice(diagnosis.misdated, without, with_rows, diagnosis, diagnose_at_ms)
