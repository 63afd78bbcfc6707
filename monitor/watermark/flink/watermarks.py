"""Flink's watermark generation, per split, combined: when the window operator sees which watermark.

Semantics (Flink 2.3; each rule from the class named, checked against a real run by the differential
tests in ``tests/differential/flink``):

* ``BoundedOutOfOrdernessWatermarks``: ``maxTimestamp`` starts at ``Long.MIN_VALUE + delay + 1`` and
  takes the max of each event's timestamp; ``onPeriodicEmit`` emits ``maxTimestamp - delay - 1``, so
  the watermark is ``Long.MIN_VALUE`` before the first event. ``forMonotonousTimestamps`` is the same
  with ``delay = 0``. A per-event ("punctuated") generator emits the same value in ``onEvent``.
* Periodic emission (``TimestampsAndWatermarksOperator`` / ``SourceOperator``): a processing-time timer
  every ``pipeline.auto-watermark-interval``; here ticks at ``start + k * interval`` (``k >= 1``) of the
  events' arrival times, an event arriving at ``T`` being read before the tick at ``T``.
* One generator per partition/split (``ProgressiveTimestampsAndWatermarks`` split-local outputs): the
  split's ``onEvent`` writes to the multiplexer's *immediate* output, ``onPeriodicEmit`` to its
  *deferred* output, then ``WatermarkOutputMultiplexer.onPeriodicEmit`` combines.
* ``CombinedWatermarkStatus`` (as compiled in flink-dist 2.3.0): the combined watermark is the min
  over the splits that are not idle, only moves forward, starts at ``Long.MIN_VALUE``. When **every**
  split is idle it becomes the **max** over all splits' last watermarks (if that is higher), is
  emitted, and the output is then marked idle: event time first jumps to the most advanced split,
  then freezes (``WatermarkOutputMultiplexer.updateCombinedWatermark`` emits, then marks idle).
  That flush is FLINK-38454 (apache/flink#27066), first in Flink 2.2.0; Flink 2.0 and 2.1 (and 1.x)
  leave the watermark where it was, i.e. where the split that went idle last left it
  (``FlinkConfig.flink_version`` picks; the pre-2.2 ``updateCombinedWatermark`` only moves on
  ``!allIdle && min > combined``). The differential run of seed 8 showed the 2.3.0 behaviour,
  confirmed in the bytecode. Setting a split's watermark clears its idle
  flag; an immediate update recombines only when the split's watermark rose above the combined one.
* ``WatermarksWithIdleness`` (``IdlenessTimer``): checked only in ``onPeriodicEmit``. A check that saw
  no event since the previous check starts the countdown (at that check's time); the split is marked
  idle at the first later check more than ``timeout`` after that start, i.e. between ``timeout`` and
  ``timeout + 3 intervals`` after its last event. While idle it emits no watermark; its next event
  clears the countdown and its next periodic emission makes it active again.
* ``TimestampsAndWatermarksOperator.WatermarkEmitter`` forwards only strictly increasing watermarks:
  the watermark never goes back (asserted here).

Not modelled: parallel source *subtasks* feeding the window operator's input channels
(``StatusWatermarkValve``): there a re-activated channel below the current watermark is left out of
the min until it catches up, whereas the split multiplexer keeps it in the min (the combined value just
cannot go back). Watermark alignment and back-pressure pausing of the idleness clock are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.versions import flushes_when_all_idle
from monitor.watermark.config import EngineConfigError
from monitor.watermark.flink.config import LONG_MAX, LONG_MIN, FlinkConfig

__all__ = [
    "IdlePeriod",
    "WatermarkTimeline",
    "periodic_ticks",
    "watermark_timeline",
    "watermark_timeline_stepwise",
]

I64 = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]
_EMPTY = np.zeros(0, dtype=np.int64)

#: Most periodic ticks one replay may hold (memory: a few int64 arrays of this length per partition).
MAX_TICKS = 20_000_000


@dataclass(frozen=True, slots=True)
class IdlePeriod:
    """A partition (or, with ``partition=None``, every partition) marked idle.

    ``from_ms``: processing time of the check that marked it idle; ``until_ms``: the check at which it
    was active again (``None``: still idle at the end).
    """

    partition: int | None
    from_ms: int
    until_ms: int | None


@dataclass(frozen=True, eq=False)
class WatermarkTimeline:
    """The combined watermark as the window operator sees it, relative to the processed events.

    Attributes:
        event_watermark_ms: int64, for each processed event ``i`` (processing order), the watermark in
            effect when the window operator processes it (``Long.MIN_VALUE`` before the first).
        advance_pos: int64, for each watermark advance, how many events were processed before it.
        advance_ms: int64, the new watermark of each advance (strictly increasing).
        advance_time_ms: int64, processing time of each advance (tick time, or the event's arrival in
            per-event mode; ``-1`` when unknown).
        idle_periods: per-partition and all-partition idle periods (empty without idleness).
        final_partition_watermarks_ms: each partition's last emitted watermark (``Long.MIN_VALUE``:
            none), in partition-code order.
        ticks: number of periodic checks replayed.
    """

    event_watermark_ms: I64
    advance_pos: I64
    advance_ms: I64
    advance_time_ms: I64
    idle_periods: tuple[IdlePeriod, ...] = ()
    final_partition_watermarks_ms: tuple[int, ...] = ()
    ticks: int = 0
    _checked: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.advance_ms) > 1:
            assert bool(np.all(np.diff(self.advance_ms) > 0)), "the watermark went back"

    def with_end_of_input(self, n_events: int, time_ms: int) -> WatermarkTimeline:
        """This timeline followed by the ``Long.MAX_VALUE`` watermark of a bounded source's end."""
        if len(self.advance_ms) and int(self.advance_ms[-1]) == LONG_MAX:
            return self
        return WatermarkTimeline(
            event_watermark_ms=self.event_watermark_ms,
            advance_pos=np.append(self.advance_pos, n_events),
            advance_ms=np.append(self.advance_ms, np.int64(LONG_MAX)),
            advance_time_ms=np.append(self.advance_time_ms, time_ms),
            idle_periods=self.idle_periods,
            final_partition_watermarks_ms=self.final_partition_watermarks_ms,
            ticks=self.ticks,
        )


def periodic_ticks(arrival_ms: I64, config: FlinkConfig) -> I64:
    """Processing times of the periodic ``onPeriodicEmit`` calls: ``start + k * interval``, ``k >= 1``,
    up to ``run_until_ms`` (default: one interval after the last arrival). ``arrival_ms`` is sorted.

    Raises:
        EngineConfigError: more than :data:`MAX_TICKS` ticks (a long span at a short interval).
    """
    iv = config.watermark_interval_ms
    if len(arrival_ms) == 0 and (config.start_ms is None or config.run_until_ms is None):
        return _EMPTY.copy()
    start = config.start_ms if config.start_ms is not None else int(arrival_ms[0])
    until = config.run_until_ms if config.run_until_ms is not None else int(arrival_ms[-1]) + iv
    if until < start + iv:
        return _EMPTY.copy()
    k = (until - start) // iv
    if k > MAX_TICKS:
        raise EngineConfigError(
            f"the replay spans {until - start} ms of processing time: {k:,} periodic watermark ticks at "
            f"{iv} ms exceed {MAX_TICKS:,}; use a larger watermark interval or per-event watermarks"
        )
    return start + iv * np.arange(1, k + 1, dtype=np.int64)


def _advances(combined: I64, pos: I64, times: I64) -> tuple[I64, I64, I64]:
    """Where a running-max combined watermark strictly rises above its previous value (and MIN)."""
    prev = np.concatenate([[np.int64(LONG_MIN)], combined[:-1]]) if len(combined) else combined
    up = combined > prev
    return pos[up], combined[up], times[up]


def _event_watermarks(n: int, adv_pos: I64, adv_ms: I64) -> I64:
    """Watermark at each event: the last advance with ``pos <= i`` (before event ``i``); O(n)."""
    at = np.full(n + 1, LONG_MIN, dtype=np.int64)
    if len(adv_pos):
        np.maximum.at(at, adv_pos, adv_ms)  # advances are increasing: the max is the last at a position
    return np.maximum.accumulate(at)[:n]


def watermark_timeline(
    ts_ms: I64, part: I64, n_partitions: int, arrival_ms: I64 | None, config: FlinkConfig
) -> WatermarkTimeline:
    """The watermark timeline of events in processing order (vectorised with NumPy).

    Args:
        ts_ms: int64 event timestamps (ms), in processing order.
        part: int64 dense partition codes ``0 .. n_partitions - 1`` of each event.
        n_partitions: number of splits (each has its own generator).
        arrival_ms: int64 sorted processing times of the events; required for periodic emission and
            for idleness, ignored otherwise.
        config: the strategy.

    Per-event watermarks with idleness fall back to :func:`watermark_timeline_stepwise`.

    Raises:
        ValueError: periodic emission or idleness without arrival times.
    """
    n = len(ts_ms)
    delay = config.delay_ms
    if config.per_event_watermarks and config.idleness_ms is None:
        combined = np.full(n, LONG_MAX, dtype=np.int64) if n else _EMPTY.copy()
        finals: list[int] = []
        for p in range(n_partitions):
            arr = np.full(n, LONG_MIN, dtype=np.int64)
            sel = part == p
            arr[sel] = ts_ms[sel] - delay - 1  # a split with no event yet holds MIN
            arr = np.maximum.accumulate(arr) if n else arr
            combined = np.minimum(combined, arr)
            finals.append(int(arr[-1]) if n else LONG_MIN)
        combined = np.maximum.accumulate(combined) if n else combined
        times = arrival_ms if arrival_ms is not None else np.full(n, -1, dtype=np.int64)
        ap, am, at = _advances(combined, np.arange(1, n + 1, dtype=np.int64), times)
        return WatermarkTimeline(_event_watermarks(n, ap, am), ap, am, at, (), tuple(finals), 0)
    if config.per_event_watermarks:
        return watermark_timeline_stepwise(ts_ms, part, n_partitions, arrival_ms, config)
    if arrival_ms is None:
        raise ValueError("periodic watermarks need processing times (an arrival_time column)")
    ticks = periodic_ticks(arrival_ms, config)
    k = len(ticks)
    pos = np.searchsorted(arrival_ms, ticks, side="right").astype(np.int64)
    m = np.full(k, LONG_MAX, dtype=np.int64)
    any_active = np.zeros(k, dtype=np.bool_)
    top = np.full(k, LONG_MIN, dtype=np.int64)  # max over all splits' last watermarks
    idle_periods: list[IdlePeriod] = []
    finals = []
    timeout = config.idleness_ms
    for p in range(n_partitions):
        idx = np.flatnonzero(part == p)
        cm = np.maximum.accumulate(ts_ms[idx]) if len(idx) else _EMPTY
        cnt = np.searchsorted(idx, pos, side="left")  # events of p read before each tick
        wm = (
            np.where(cnt > 0, cm[np.maximum(cnt - 1, 0)] - delay - 1, np.int64(LONG_MIN))
            if len(idx)
            else np.full(k, LONG_MIN)
        )
        wm = np.asarray(wm, dtype=np.int64)
        if timeout is not None and k:
            act = np.diff(cnt, prepend=0) > 0
            ki = np.arange(k, dtype=np.int64)
            run_start = np.maximum.accumulate(np.where(act, ki, -1)) + 1
            run_start = np.minimum(run_start, k - 1)
            idle = ~act & (ticks - ticks[run_start] > timeout)
            idle_periods.extend(_periods(p, idle, ticks))
        else:
            idle = np.zeros(k, dtype=np.bool_)
        m = np.where(idle, m, np.minimum(m, wm))
        any_active |= ~idle
        # PartialWatermark keeps the last value the split emitted (none while idle)
        last = np.maximum.accumulate(np.where(idle, np.int64(LONG_MIN), wm)) if k else wm
        top = np.maximum(top, last)
        # the split's PartialWatermark keeps the last value it emitted (not idle ticks)
        emitted = wm[~idle]
        finals.append(int(emitted.max()) if len(emitted) else LONG_MIN)
    if timeout is not None:
        idle_periods.extend(_periods(None, ~any_active, ticks))
    idle_periods.sort(key=_period_order)
    # every split idle: Flink 2.2+ flushes the max of their watermarks (FLINK-38454); before, nothing moves
    cand = np.where(any_active, m, top if flushes_when_all_idle(config.flink_version) else np.int64(LONG_MIN))
    combined = np.maximum.accumulate(cand) if k else cand
    ap, am, at = _advances(combined, pos, ticks)
    return WatermarkTimeline(_event_watermarks(n, ap, am), ap, am, at, tuple(idle_periods), tuple(finals), k)


def _period_order(x: IdlePeriod) -> tuple[int, int]:
    return (-1 if x.partition is None else x.partition, x.from_ms)


def _periods(p: int | None, idle: BoolArr, ticks: I64) -> list[IdlePeriod]:
    if not idle.any():
        return []
    d = np.diff(idle.astype(np.int8), prepend=0, append=0)
    starts = np.flatnonzero(d == 1)
    ends = np.flatnonzero(d == -1)
    out = []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        out.append(IdlePeriod(p, int(ticks[s]), int(ticks[e]) if e < len(ticks) else None))
    return out


# --- a step-by-step mirror of the Flink classes (reference for tests; per-event + idleness) ---


class _Partial:
    """``CombinedWatermarkStatus.PartialWatermark``."""

    __slots__ = ("idle", "wm")

    def __init__(self) -> None:
        self.wm = LONG_MIN
        self.idle = False

    def set_watermark(self, w: int) -> bool:
        self.idle = False
        if w > self.wm:
            self.wm = w
            return True
        return False


class _Mux:
    """``WatermarkOutputMultiplexer`` + ``CombinedWatermarkStatus`` feeding the ``WatermarkEmitter``."""

    def __init__(self, n: int, flush_all_idle: bool = True) -> None:
        self.parts = [_Partial() for _ in range(n)]
        self.flush_all_idle = flush_all_idle  # FLINK-38454 (2.2+)
        self.combined = LONG_MIN
        self.all_idle = False
        self.emitted: list[tuple[int, int, int]] = []  # (pos, watermark, time)
        self.pos = 0
        self.now = -1

    def update(self) -> None:
        if not self.parts:
            return
        active = [x.wm for x in self.parts if not x.idle]
        self.all_idle = not active
        flushed = max(x.wm for x in self.parts) if self.flush_all_idle else LONG_MIN  # all idle (FLINK-38454)
        cand = min(active) if active else flushed
        if cand > self.combined:
            self.combined = cand
            if not self.emitted or self.combined > self.emitted[-1][1]:
                self.emitted.append((self.pos, self.combined, self.now))

    def immediate_emit(self, p: int, w: int) -> None:
        if self.parts[p].set_watermark(w) and w > self.combined:
            self.update()


def watermark_timeline_stepwise(
    ts_ms: I64, part: I64, n_partitions: int, arrival_ms: I64 | None, config: FlinkConfig
) -> WatermarkTimeline:
    """Same result as :func:`watermark_timeline`, computed event by event and tick by tick with one
    object per Flink class (slow; the reference the vectorised version is tested against)."""
    n = len(ts_ms)
    delay = config.delay_ms
    timeout = config.idleness_ms
    periodic_needed = not config.per_event_watermarks or timeout is not None
    if periodic_needed and arrival_ms is None:
        raise ValueError("periodic watermarks and idleness need processing times (an arrival_time column)")
    ticks = periodic_ticks(arrival_ms, config) if periodic_needed and arrival_ms is not None else _EMPTY
    mux = _Mux(n_partitions, flushes_when_all_idle(config.flink_version))
    max_ts = [LONG_MIN + delay + 1] * n_partitions
    # IdlenessTimer state per split
    counter = [0] * n_partitions
    last_counter = [0] * n_partitions
    start_inactive = [0] * n_partitions
    idle_now = [False] * n_partitions
    idle_from: list[int | None] = [None] * n_partitions
    all_idle_from: int | None = None
    periods: list[IdlePeriod] = []
    event_wm = np.empty(n, dtype=np.int64)
    ts = ts_ms.tolist()
    pt = part.tolist()
    arr = arrival_ms.tolist() if arrival_ms is not None else [-1] * n
    i = 0

    def run_event(j: int) -> None:
        p = pt[j]
        event_wm[j] = mux.combined
        max_ts[p] = max(max_ts[p], ts[j])
        mux.now = arr[j]
        mux.pos = j + 1
        if config.per_event_watermarks:
            mux.immediate_emit(p, max_ts[p] - delay - 1)
        counter[p] += 1
        idle_now[p] = False

    for t in ticks.tolist():
        while i < n and arr[i] <= t:
            run_event(i)
            i += 1
        mux.now = t
        mux.pos = i
        for p in range(n_partitions):
            is_idle = False
            if timeout is not None:
                if counter[p] != last_counter[p]:
                    last_counter[p] = counter[p]
                    start_inactive[p] = 0
                elif start_inactive[p] == 0:
                    start_inactive[p] = t
                else:
                    is_idle = t - start_inactive[p] > timeout
            if is_idle:
                if not idle_now[p]:
                    mux.parts[p].idle = True  # deferred markIdle
                    idle_now[p] = True
                if idle_from[p] is None:
                    idle_from[p] = t
            else:
                if idle_from[p] is not None:
                    periods.append(IdlePeriod(p, idle_from[p], t))  # type: ignore[arg-type]
                    idle_from[p] = None
                if not config.per_event_watermarks:
                    mux.parts[p].set_watermark(max_ts[p] - delay - 1)  # deferred emit
        mux.update()
        if mux.all_idle and all_idle_from is None:
            all_idle_from = t
        elif not mux.all_idle and all_idle_from is not None:
            periods.append(IdlePeriod(None, all_idle_from, t))
            all_idle_from = None
    while i < n:
        run_event(i)
        i += 1
    for p in range(n_partitions):
        if idle_from[p] is not None:
            periods.append(IdlePeriod(p, idle_from[p], None))  # type: ignore[arg-type]
    if all_idle_from is not None:
        periods.append(IdlePeriod(None, all_idle_from, None))
    ap = np.array([e[0] for e in mux.emitted], dtype=np.int64)
    am = np.array([e[1] for e in mux.emitted], dtype=np.int64)
    at = np.array([e[2] for e in mux.emitted], dtype=np.int64)
    periods.sort(key=_period_order)
    return WatermarkTimeline(event_wm, ap, am, at, tuple(periods), tuple(x.wm for x in mux.parts), len(ticks))
