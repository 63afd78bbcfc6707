"""What-if pieces of the Flink mode shared by ``tidegauge whatif --engine flink`` and the dashboard's
What-if lab (the config itself comes from :func:`monitor.watermark.whatif_config.flink_config`): check
that an events file fits the modelled job, sweep ``forBoundedOutOfOrderness`` delays, recommend one,
and find the element that moved the watermark most.

Semantics: the watermark is ``BoundedOutOfOrdernessWatermarks``' ``maxTimestamp - delay - 1`` per split,
combined by ``CombinedWatermarkStatus`` (see :mod:`.watermarks`); lateness is ``WindowOperator``'s, per
element against the current watermark (see :mod:`.operator`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from monitor.watermark.config import EngineConfigError
from monitor.watermark.events import EventsTable
from monitor.watermark.flink.config import LONG_MAX, LONG_MIN, FlinkConfig
from monitor.watermark.flink.replay import FlinkReplay, FlinkSummary, replay_flink

__all__ = [
    "MIN_LATER_ELEMENTS",
    "FlinkDelayAdvice",
    "FlinkWhatifError",
    "WatermarkMover",
    "advise_flink_delay",
    "check_flink_events",
    "misdated_element",
    "recommend_flink_delay",
    "sweep_flink",
    "watermark_mover",
]


class FlinkWhatifError(EngineConfigError):
    """Events that do not fit the modelled Flink job (the message says which)."""


def check_flink_events(events: EventsTable, name: str) -> None:
    """Refuse what the modelled job has no place for: a ``batch`` column (Flink has no micro-batches)
    and a ``source`` column naming several inputs (the model is one source whose partitions/splits each
    have a generator; a column naming one input is that source).

    Raises:
        FlinkWhatifError: naming the file ``name`` and the column.
    """
    if events.batch is not None:
        raise FlinkWhatifError(f"{name} has a 'batch' column: Flink has no micro-batches (drop it)")
    if len(events.source_names) > 1:
        raise FlinkWhatifError(
            f"{name} has a 'source' column with several inputs: the Flink mode models one source "
            "whose partitions (splits) each have a watermark generator; use a 'partition' column"
        )


def sweep_flink(events: EventsTable, config: FlinkConfig, delays_ms: Iterable[int]) -> list[FlinkSummary]:
    """Replay ``config`` at each delay (ms, in the order given); the summaries (late rows not kept)."""
    return [
        replay_flink(events, dataclasses.replace(config, delay_ms=d, keep_late_rows=False)).summary
        for d in delays_ms
    ]


def recommend_flink_delay(summaries: Iterable[FlinkSummary], target_pct: float) -> int | None:
    """The smallest swept delay (ms) whose late elements are at most ``floor((100 - target) % of the
    rows with a time)``; ``None`` when none is. Only the candidates are tried (no search between them).

    Raises:
        EngineConfigError: ``target_pct`` not in ``(0, 100]``.
    """
    if not 0 < target_pct <= 100:
        raise EngineConfigError(f"target completeness must be in (0, 100], got {target_pct}")
    ok = [
        s.delay_ms
        for s in summaries
        if s.late_elements <= int((100.0 - target_pct) / 100.0 * (s.input_rows - s.rows_without_time) + 1e-9)
    ]
    return min(ok) if ok else None


@dataclasses.dataclass(frozen=True, slots=True)
class WatermarkMover:
    """The largest step of the combined watermark and the element behind it.

    Attributes:
        advance: index into the timeline's advances; from_ms / to_ms: the watermark before and after.
        processing_time_ms: processing time of the step (``-1``: unknown, no arrival times).
        row: row index (into the events) of the last element processed before the step whose timestamp
            is ``to_ms + delay + 1`` (``BoundedOutOfOrdernessWatermarks``); ``None`` when no element has it.
    """

    advance: int
    from_ms: int
    to_ms: int
    processing_time_ms: int
    row: int | None


def watermark_mover(events: EventsTable, result: FlinkReplay) -> WatermarkMover | None:
    """The step that moved the watermark most (the first watermark, from ``Long.MIN_VALUE``, and the
    end-of-input ``Long.MAX_VALUE`` are not steps); ``None`` with fewer than two watermarks."""
    tl = result.timeline
    adv = tl.advance_ms
    keep = (adv != LONG_MIN) & (adv != LONG_MAX)
    idx = np.flatnonzero(keep)
    if len(idx) < 2:
        return None
    steps = np.diff(adv[idx])
    k = int(idx[1:][int(np.argmax(steps))])
    prev = int(idx[int(np.searchsorted(idx, k)) - 1])
    to_ms = int(adv[k])
    processed = result.order[: int(tl.advance_pos[k])]
    ts = np.floor_divide(events.event_time_us[processed], 1000)
    hits = np.flatnonzero(ts == to_ms + result.summary.delay_ms + 1)
    return WatermarkMover(
        advance=k,
        from_ms=int(adv[prev]),
        to_ms=to_ms,
        processing_time_ms=int(tl.advance_time_ms[k]),
        row=int(processed[hits[-1]]) if len(hits) else None,
    )


#: elements that must follow a watermark step before it can be judged ahead of the stream
MIN_LATER_ELEMENTS = 10


def misdated_element(events: EventsTable, result: FlinkReplay) -> WatermarkMover | None:
    """The largest watermark step (:func:`watermark_mover`) when the element behind it is *ahead of the
    stream*: fewer than 1% of the elements processed after it reach the watermark it set — the criterion
    of the Spark mode's :func:`monitor.watermark.diagnose.diagnose` — with at least
    :data:`MIN_LATER_ELEMENTS` elements after it (a few late elements at the end of a file are no evidence). Such an element (dated
    2099, or milliseconds read as seconds) makes every later element late under
    ``BoundedOutOfOrdernessWatermarks`` (the watermark never goes back), whatever the delay; ``None``
    otherwise."""
    m = watermark_mover(events, result)
    if m is None or m.row is None:
        return None
    after = result.order[int(result.timeline.advance_pos[m.advance]) :]
    if len(after) < MIN_LATER_ELEMENTS:
        return None
    ts = np.floor_divide(events.event_time_us[after], 1000)
    reach = int((ts > m.to_ms).sum())
    return m if reach < max(1, len(after) // 100) else None


@dataclasses.dataclass(frozen=True, slots=True)
class FlinkDelayAdvice:
    """The delay a completeness target needs (Flink mode), led by the useful answer.

    Attributes:
        misdated: the mis-dated element (:func:`misdated_element`), or ``None``.
        recommended_ms: the smallest swept delay meeting the target — without the mis-dated element
            when there is one (filtered before the ``WatermarkStrategy``) — or ``None`` when none does.
        with_element_ms: with a mis-dated element: the smallest swept delay meeting the target with it
            kept (``None``: none of the sweep does, the usual case); without one, equal to ``recommended_ms``.
        sweep_without: the sweep without the mis-dated element (``[]`` when there is none).
    """

    misdated: WatermarkMover | None
    recommended_ms: int | None
    with_element_ms: int | None
    sweep_without: list[FlinkSummary]


def advise_flink_delay(
    events: EventsTable,
    config: FlinkConfig,
    result: FlinkReplay,
    summaries: list[FlinkSummary],
    delays_ms: Iterable[int],
    target_pct: float,
) -> FlinkDelayAdvice:
    """Recommend a ``forBoundedOutOfOrderness`` delay from the sweep ``summaries`` (of ``delays_ms``) of
    ``config``'s replay ``result``; with a mis-dated element, sweep again without it (marked invalid:
    left out as a record the assigner rejects) and recommend from that.

    Raises:
        EngineConfigError: ``target_pct`` not in ``(0, 100]``, or as :func:`replay_flink`.
    """
    with_element = recommend_flink_delay(summaries, target_pct)
    m = misdated_element(events, result)
    if m is None or m.row is None:
        return FlinkDelayAdvice(None, with_element, with_element, [])
    valid = events.valid.copy()
    valid[m.row] = False
    without_events = dataclasses.replace(events, valid=valid)
    sweep_without = sweep_flink(without_events, config, delays_ms)
    return FlinkDelayAdvice(m, recommend_flink_delay(sweep_without, target_pct), with_element, sweep_without)
