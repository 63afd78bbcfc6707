"""What-if pieces of the Flink mode shared by ``tidegauge whatif --engine flink`` and the dashboard's
What-if lab: build a :class:`FlinkConfig` from plain millisecond settings, check that an events file fits
the modelled job, sweep ``forBoundedOutOfOrderness`` delays, recommend one, and find the element that
moved the watermark most.

Semantics: the watermark is ``BoundedOutOfOrdernessWatermarks``' ``maxTimestamp - delay - 1`` per split,
combined by ``CombinedWatermarkStatus`` (see :mod:`.watermarks`); lateness is ``WindowOperator``'s, per
element against the current watermark (see :mod:`.operator`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from monitor.watermark.config import EngineConfigError, Session, Sliding, Tumbling
from monitor.watermark.events import EventsTable
from monitor.watermark.flink.config import LONG_MAX, LONG_MIN, FlinkConfig
from monitor.watermark.flink.replay import FlinkReplay, FlinkSummary, replay_flink

__all__ = [
    "DEFAULT_WATERMARK_INTERVAL_MS",
    "MIN_LATER_ELEMENTS",
    "FlinkDelayAdvice",
    "FlinkWhatifError",
    "WatermarkMover",
    "advise_flink_delay",
    "check_flink_events",
    "flink_config",
    "misdated_element",
    "recommend_flink_delay",
    "sweep_flink",
    "watermark_mover",
    "window_spec",
]

#: ``pipeline.auto-watermark-interval``'s default.
DEFAULT_WATERMARK_INTERVAL_MS = 200


class FlinkWhatifError(EngineConfigError):
    """Flink-mode what-if settings or events that do not fit the modelled job (the message says which)."""


def window_spec(*, size_ms: int | None, slide_ms: int | None = None, gap_ms: int | None = None
                ) -> Tumbling | Sliding | Session:
    """The window assigner: ``EventTimeSessionWindows.withGap(gap)`` when ``gap_ms`` is given, else
    ``SlidingEventTimeWindows.of(size, slide)`` (``TumblingEventTimeWindows.of(size)`` when ``slide ==
    size`` or no slide).

    Raises:
        FlinkWhatifError: a gap together with a size/slide, a slide without a size, or neither.
    """
    if gap_ms is not None:
        if slide_ms is not None or size_ms is not None:
            raise FlinkWhatifError("a session gap cannot be combined with a window size / slide")
        return Session(gap_ms)
    if size_ms is None:
        raise FlinkWhatifError("give a window size (with an optional slide) or a session gap")
    if slide_ms is None or slide_ms == size_ms:
        return Tumbling(size_ms)
    return Sliding(size_ms, slide_ms)


def flink_config(
    *,
    delay_ms: int,
    window: Tumbling | Sliding | Session,
    allowed_lateness_ms: int = 0,
    idleness_ms: int | None = None,
    watermark_interval_ms: int | None = None,
    per_event_watermarks: bool = False,
    late_side_output: bool = False,
    end_of_input: bool = False,
) -> FlinkConfig:
    """A :class:`FlinkConfig` for ``forBoundedOutOfOrderness(delay)[.withIdleness(idleness)]`` with
    ``pipeline.auto-watermark-interval`` (default 200 ms) or a per-event generator, and the window.

    Raises:
        FlinkWhatifError: an interval with per-event watermarks and no idleness (in per-event mode the
            interval only paces ``WatermarksWithIdleness``' checks).
        EngineConfigError: a field out of range (:meth:`FlinkConfig.validate`).
    """
    if per_event_watermarks and watermark_interval_ms is not None and idleness_ms is None:
        raise FlinkWhatifError(
            "the watermark interval and per-event watermarks exclude each other (the interval only paces "
            "idleness checks in per-event mode: give an idleness timeout too)"
        )
    return FlinkConfig(
        delay_ms=delay_ms,
        window=window,
        allowed_lateness_ms=allowed_lateness_ms,
        idleness_ms=idleness_ms,
        watermark_interval_ms=watermark_interval_ms or DEFAULT_WATERMARK_INTERVAL_MS,
        per_event_watermarks=per_event_watermarks,
        late_side_output=late_side_output,
        end_of_input=end_of_input,
    )


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
