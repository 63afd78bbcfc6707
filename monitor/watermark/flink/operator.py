"""Flink's ``WindowOperator`` with ``EventTimeTrigger``: which windows fire when, with which counts.

Semantics (Flink 2.3 ``WindowOperator``, ``EventTimeTrigger``, ``MergingWindowSet``, ``TimeWindow``):

* A window ``[start, end)`` has ``maxTimestamp = end - 1``; its cleanup time is
  ``maxTimestamp + allowedLateness``. A window is *late* when ``cleanup <= currentWatermark``.
* ``processElement``: for each assigned window that is not late, the element is added to the window's
  state and ``EventTimeTrigger.onElement`` runs: if ``maxTimestamp <= currentWatermark`` the window
  fires at once (a *late firing*, with all the window's elements so far), else a timer is registered at
  ``maxTimestamp``; a cleanup timer is registered at the cleanup time. Late windows are skipped
  silently (a sliding-window element late for some of its windows only is not added to those, and not
  counted anywhere). An element all of whose windows were skipped and with
  ``timestamp + allowedLateness <= currentWatermark`` goes to the late side output
  (``sideOutputLateData``) or, without one, is counted in ``numLateRecordsDropped``. (An element in
  the gap between windows of ``slide > size`` sliding windows has no window: skipped, and counted
  only if late.)
* Event-time timers fire when the watermark reaches them (``timestamp <= watermark``), in timestamp
  order: the trigger timer at ``maxTimestamp`` fires the window (the *on-time firing*); the cleanup
  timer drops its state. With ``allowedLateness = 0`` both are the same timer.
* Session windows (``EventTimeSessionWindows``, a ``MergingWindowAssigner``): an element starts the
  window ``[t, t + gap)``, which merges with every in-flight window of the key it intersects
  (``start <= other.end && end >= other.start``: touching windows merge); the merged window replaces
  them (their timers are deleted, ``onMerge`` registers the merged window's timer if its
  ``maxTimestamp`` is after the watermark), and lateness is judged on the merged window: an element
  whose own session is late still joins an in-flight session it touches.

The watermark the operator sees comes from :mod:`monitor.watermark.flink.watermarks`; a firing's
``watermark_ms`` is the operator's current watermark when it fires.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import Session, Sliding, Tumbling
from monitor.watermark.flink.config import LONG_MAX
from monitor.watermark.flink.watermarks import WatermarkTimeline
from monitor.watermark.windowing import assign_window_indices

__all__ = ["Firings", "WindowOutcome", "run_windows"]

I64 = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]
_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Firings:
    """Window firings, column-wise, in emission order.

    Attributes:
        start_ms, end_ms: the window ``[start, end)``.
        count: elements in the window's state when it fired.
        watermark_ms: the operator's watermark at the firing (``Long.MAX_VALUE`` at end of input).
        late_firing: True for a firing caused by an element arriving after the watermark passed
            ``end - 1`` (within the allowed lateness); False for the timer firing.
        key_codes: the key of each firing (codes into the events' ``key_names``).
        seq: emission position: ``2 * pos`` for a firing during the watermark advance after ``pos``
            events, ``2 * i + 1`` for a late firing while processing event ``i``.
        time_ms: processing time of the firing (the tick or the element's arrival; ``-1`` unknown).
    """

    start_ms: I64 = field(default_factory=lambda: _EMPTY)
    end_ms: I64 = field(default_factory=lambda: _EMPTY)
    count: I64 = field(default_factory=lambda: _EMPTY)
    watermark_ms: I64 = field(default_factory=lambda: _EMPTY)
    late_firing: BoolArr = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    key_codes: I64 = field(default_factory=lambda: _EMPTY)
    seq: I64 = field(default_factory=lambda: _EMPTY)
    time_ms: I64 = field(default_factory=lambda: _EMPTY)

    def __len__(self) -> int:
        return len(self.start_ms)


@dataclass(frozen=True, eq=False)
class WindowOutcome:
    """What the window operator did over the whole replay.

    ``firings``; ``late_events``: processing-order indices of the elements dropped as late (all their
    windows late; side output or ``numLateRecordsDropped``); ``open_windows``: (key code, start, end,
    count) of windows still in state at the end; ``state_windows``: int64, for each watermark advance of
    the timeline, the (key, window) pairs in state just after it (its firings and cleanup timers done);
    ``None`` for merging (session) windows, whose state is not tracked over time.
    """

    firings: Firings
    late_events: I64
    open_windows: list[tuple[int, int, int, int]]
    state_windows: I64 | None = None


def _cleanup(max_ts: I64, lateness: int) -> I64:
    """``WindowOperator.cleanupTime``: ``maxTimestamp + allowedLateness``, ``Long.MAX_VALUE`` on overflow."""
    if lateness == 0:
        return max_ts
    over = max_ts > LONG_MAX - lateness
    return np.where(over, np.int64(LONG_MAX), max_ts + np.where(over, 0, lateness))


def run_windows(
    ts_ms: I64, key_codes: I64, tl: WatermarkTimeline, spec: Tumbling | Sliding | Session, lateness_ms: int
) -> WindowOutcome:
    """Run the window operator over events in processing order.

    Args:
        ts_ms: int64 element timestamps (ms), processing order.
        key_codes: int64 ``keyBy`` key of each element.
        tl: the watermark timeline of the same events.
        spec: the window assigner.
        lateness_ms: ``allowedLateness``.
    """
    if isinstance(spec, Session):
        return _sessions(ts_ms, key_codes, tl, spec.gap_ms, lateness_ms)
    return _non_merging(ts_ms, key_codes, tl, spec, lateness_ms)


def _non_merging(
    ts: I64, keys: I64, tl: WatermarkTimeline, spec: Tumbling | Sliding, lateness: int
) -> WindowOutcome:
    """Tumbling/sliding windows, vectorised: O(n) bincounts over dense (key, window) group ids.

    Within one (key, window) group ``maxTimestamp`` is fixed and the watermark at each element only
    grows, so the elements added while ``maxTimestamp > watermark`` (they register the on-time timer)
    are a prefix of the group, and every later element added is a late firing. The on-time firing
    happens at the first watermark advance reaching ``maxTimestamp`` and counts exactly that prefix.
    """
    n = len(ts)
    w = tl.event_watermark_ms
    size, slide, offset = spec.size_ms, spec.slide_ms, spec.offset_ms
    tumbling = size == slide
    widx, ev = assign_window_indices(ts, np.arange(n, dtype=np.int64), size, slide, offset)
    starts = widx * slide + offset
    max_ts = starts + (size - 1)
    w_ev = w if tumbling else w[ev]
    ok = _cleanup(max_ts, lateness) > w_ev
    if tumbling:
        # the element's only window is late -> the element is late (its timestamp <= maxTimestamp)
        late_events = np.flatnonzero(~ok).astype(np.int64)
    else:
        added = np.bincount(ev[ok], minlength=n) if n else _EMPTY
        elem_late = _cleanup(ts, lateness) <= w
        late_events = np.flatnonzero((added == 0) & elem_late).astype(np.int64)
    if not ok.all():
        starts, ev, max_ts, w_ev, widx = starts[ok], ev[ok], max_ts[ok], w_ev[ok], widx[ok]
    m = len(ev)
    if m == 0:
        return WindowOutcome(Firings(), late_events, [], np.zeros(len(tl.advance_ms), dtype=np.int64))
    # dense group ids: key * span + window index (compacted with np.unique when that space is large)
    w0 = int(widx.min())
    span = int(widx.max()) - w0 + 1
    k = keys[ev]
    n_keys = int(k.max()) + 1
    if n_keys * span <= max(4 * m, 1 << 16):
        g = k * span + (widx - w0)
        n_groups = n_keys * span
        g_key = np.repeat(np.arange(n_keys, dtype=np.int64), span)
        g_start = np.tile(np.arange(w0, w0 + span, dtype=np.int64), n_keys) * slide + offset
    else:
        uniq, g = np.unique(k * span + (widx - w0), return_inverse=True)
        g = g.astype(np.int64)
        n_groups = len(uniq)
        g_key = uniq // span
        g_start = (uniq % span + w0) * slide + offset
    g_max = g_start + (size - 1)
    prefix = max_ts > w_ev  # added before the watermark reached maxTimestamp
    pc = np.bincount(g[prefix], minlength=n_groups)
    total = np.bincount(g, minlength=n_groups)
    adv_ms, adv_pos, adv_t = tl.advance_ms, tl.advance_pos, tl.advance_time_ms
    timer_groups = np.flatnonzero(pc > 0)
    a = np.searchsorted(adv_ms, g_max[timer_groups], side="left")
    fires = a < len(adv_ms)
    fg, fa = timer_groups[fires], a[fires]
    on = Firings(
        start_ms=g_start[fg],
        end_ms=g_start[fg] + size,
        count=pc[fg],
        watermark_ms=adv_ms[fa],
        late_firing=np.zeros(len(fg), dtype=np.bool_),
        key_codes=g_key[fg],
        seq=2 * adv_pos[fa],
        time_ms=adv_t[fa],
    )
    # late firings: the rest of each group, in element order; count = prefix + rank + 1
    lf = np.flatnonzero(~prefix)
    if len(lf):
        lg, le = g[lf], ev[lf]
        o = np.lexsort((le, lg))
        lg, le, lw = lg[o], le[o], w_ev[lf][o]
        first = np.ones(len(lg), dtype=np.bool_)
        first[1:] = lg[1:] != lg[:-1]
        run_start = np.maximum.accumulate(np.where(first, np.arange(len(lg)), 0))
        rank = np.arange(len(lg)) - run_start
        late = Firings(
            start_ms=g_start[lg],
            end_ms=g_start[lg] + size,
            count=pc[lg] + rank + 1,
            watermark_ms=lw,
            late_firing=np.ones(len(lg), dtype=np.bool_),
            key_codes=g_key[lg],
            seq=2 * le + 1,
            time_ms=np.full(len(lg), -1, dtype=np.int64),
        )
        firings = _concat_sorted([on, late])
    else:
        firings = _concat_sorted([on])
    final_wm = int(adv_ms[-1]) if len(adv_ms) else None
    present = np.flatnonzero(total > 0)
    if final_wm is not None:
        present = present[_cleanup(g_max[present], lateness) > final_wm]
    open_windows = [
        (int(g_key[i]), int(g_start[i]), int(g_start[i]) + size, int(total[i])) for i in present.tolist()
    ]
    return WindowOutcome(firings, late_events, open_windows, _state_per_advance(g, ev, g_max, n_groups, tl, lateness))


def _state_per_advance(g: I64, ev: I64, g_max: I64, n_groups: int, tl: WatermarkTimeline, lateness: int) -> I64:
    """Windows in state after each advance: a (key, window) is in state from its first added element
    until its cleanup timer (``maxTimestamp + allowedLateness``) fires at the first advance reaching it."""
    n_adv = len(tl.advance_ms)
    first = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, g, ev)
    used = np.flatnonzero(first < np.iinfo(np.int64).max)
    opened = np.searchsorted(tl.advance_pos, first[used], side="right")  # first advance after it
    closed = np.searchsorted(tl.advance_ms, _cleanup(g_max[used], lateness), side="left")
    delta = np.bincount(opened, minlength=n_adv + 1)[: n_adv + 1] - np.bincount(closed, minlength=n_adv + 1)[: n_adv + 1]
    return np.cumsum(delta)[:n_adv].astype(np.int64)


def _concat_sorted(parts: list[Firings]) -> Firings:
    cols = {
        name: np.concatenate([getattr(p, name) for p in parts])
        for name in (
            "start_ms",
            "end_ms",
            "count",
            "watermark_ms",
            "late_firing",
            "key_codes",
            "seq",
            "time_ms",
        )
    }
    # emission order; within one watermark advance timers fire by timestamp (ties: key, start)
    order = np.lexsort((cols["start_ms"], cols["key_codes"], cols["end_ms"], cols["seq"]))
    return Firings(**{k: v[order] for k, v in cols.items()})


class _SessionKey:
    """One key's in-flight session windows and event-time timers (``MergingWindowSet`` + timer service).

    Windows are kept sorted by start in parallel lists (in-flight windows never intersect or touch, so
    their ends are sorted too and ``bisect`` finds the ones a new window touches). Timers are a heap of
    ``(timestamp, start, end)`` validated when popped: a timer of a window that was merged away or
    cleaned up no longer matches a window; per window one trigger and one cleanup registration (with
    ``allowedLateness = 0`` they are the same timer).
    """

    __slots__ = (
        "adv_ms",
        "adv_pos",
        "adv_t",
        "clean",
        "counts",
        "ends",
        "heap",
        "key",
        "lateness",
        "out",
        "starts",
        "trig",
    )

    def __init__(
        self,
        key: int,
        lateness: int,
        adv: tuple[list[int], list[int], list[int]],
        out: list[tuple[int, int, int, int, bool, int, int, int]],
    ) -> None:
        self.key = key
        self.lateness = lateness
        self.adv_ms, self.adv_pos, self.adv_t = adv
        self.out = out
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.counts: list[int] = []
        self.trig: dict[int, bool] = {}  # window start -> trigger timer registered
        self.clean: dict[int, bool] = {}  # window start -> cleanup timer registered
        self.heap: list[tuple[int, int, int]] = []

    def cleanup_of(self, end: int) -> int:
        mt = end - 1
        return LONG_MAX if mt > LONG_MAX - self.lateness else mt + self.lateness

    def fire_until(self, limit: int | None) -> None:
        """Fire the timers with ``timestamp <= limit`` in timestamp order (``InternalTimerServiceImpl``)."""
        heap = self.heap
        starts, ends = self.starts, self.ends
        while heap and limit is not None and heap[0][0] <= limit:
            t, s, e = heapq.heappop(heap)
            i = bisect.bisect_left(starts, s)
            if i == len(starts) or starts[i] != s or ends[i] != e:
                continue  # the window was merged away or cleaned up: its timers were deleted
            if t == e - 1 and self.trig.get(s):  # EventTimeTrigger.onEventTime: FIRE at maxTimestamp
                self.trig[s] = False
                a = bisect.bisect_left(self.adv_ms, t)
                self.out.append(
                    (
                        2 * self.adv_pos[a],
                        s,
                        e,
                        self.counts[i],
                        False,
                        self.key,
                        self.adv_ms[a],
                        self.adv_t[a],
                    )
                )
            if t == self.cleanup_of(e) and self.clean.get(s):  # clearAllState
                del starts[i], ends[i], self.counts[i]
                self.trig.pop(s, None)
                self.clean.pop(s, None)

    def _register(self, flags: dict[int, bool], t: int, s: int, e: int, push: bool = True) -> None:
        if not flags.get(s):
            flags[s] = True
            if push:
                heapq.heappush(self.heap, (t, s, e))

    def element(self, idx: int, t0: int, gap: int, cur: int) -> bool:
        """Process element ``idx`` (timestamp ``t0``) at watermark ``cur``; False when it was skipped."""
        self.fire_until(cur)
        starts, ends, counts = self.starts, self.ends, self.counts
        ns, ne = t0, t0 + gap
        hi = bisect.bisect_right(starts, ne)  # windows [0, hi) start <= ne
        lo = bisect.bisect_left(ends, ns)  # windows [lo, ..) end >= ns
        if lo < hi:
            rs = ns if ns < starts[lo] else starts[lo]
            re_ = ne if ne > ends[hi - 1] else ends[hi - 1]
            if not (hi - lo == 1 and starts[lo] == rs and ends[lo] == re_):
                # MergeFunction.merge (the merged window cannot be late: in-flight windows never are)
                assert self.cleanup_of(re_) > cur, "merged session window would be late"
                total = sum(counts[lo:hi])
                for j in range(lo, hi):  # triggerContext.clear() + deleteCleanupTimer of merged windows
                    self.trig.pop(starts[j], None)
                    self.clean.pop(starts[j], None)
                del starts[lo:hi], ends[lo:hi], counts[lo:hi]
                starts.insert(lo, rs)
                ends.insert(lo, re_)
                counts.insert(lo, total)
                if re_ - 1 > cur:  # EventTimeTrigger.onMerge
                    self._register(self.trig, re_ - 1, rs, re_)
            i = lo
        else:
            if self.cleanup_of(ne) <= cur:  # a late new window: retired at once, element skipped
                return False
            i = lo
            starts.insert(i, ns)
            ends.insert(i, ne)
            counts.insert(i, 0)
        counts[i] += 1
        s, e = starts[i], ends[i]
        if e - 1 <= cur:  # EventTimeTrigger.onElement: FIRE now (a late firing)
            self.out.append((2 * idx + 1, s, e, counts[i], True, self.key, cur, -1))
        else:
            self._register(self.trig, e - 1, s, e)
        c = self.cleanup_of(e)
        if c != LONG_MAX:  # registerCleanupTimer (the same timer as the trigger's when lateness is 0)
            self._register(self.clean, c, s, e, push=self.lateness != 0)
        return True


#: Tests only: True sends every session element through :class:`_SessionKey` (the reference path).
_SESSIONS_ELEMENT_BY_ELEMENT = False


def _sessions(ts: I64, keys: I64, tl: WatermarkTimeline, gap: int, lateness: int) -> WindowOutcome:
    """Session windows (``EventTimeSessionWindows`` + ``EventTimeTrigger`` in ``WindowOperator`` with its
    ``MergingWindowSet``): the vectorised fast path of :func:`_simple_sessions` for the gap-connected
    runs it proves simple, :class:`_SessionKey` element by element for the rest.

    Runs of one key whose timestamps are gap-connected (sorted, consecutive differences ``<= gap``) are
    independent: a session window only ever holds elements of one such run, so its windows never touch
    another run's, and the firings of a subset of the runs are those of the whole input restricted to
    them (a timer's firing is recorded at the first watermark advance reaching it, whenever it is popped).
    """
    n = len(ts)
    if _SESSIONS_ELEMENT_BY_ELEMENT or n == 0:
        slow = np.arange(n, dtype=np.int64)
        fast = None
    else:
        fast = _simple_sessions(ts, keys, tl, gap, lateness)
        slow = fast.slow_positions
    out: list[tuple[int, int, int, int, bool, int, int, int]] = []  # seq, start, end, count, late, key, wm, t
    late_events: list[int] = []
    open_windows: list[tuple[int, int, int, int]] = []
    if len(slow):
        _sessions_element_by_element(ts, keys, tl, gap, lateness, slow, out, late_events, open_windows)
    cols = list(zip(*out, strict=True)) if out else [[]] * 8
    slow_firings = Firings(
        start_ms=np.array(cols[1], dtype=np.int64),
        end_ms=np.array(cols[2], dtype=np.int64),
        count=np.array(cols[3], dtype=np.int64),
        watermark_ms=np.array(cols[6], dtype=np.int64),
        late_firing=np.array(cols[4], dtype=np.bool_),
        key_codes=np.array(cols[5], dtype=np.int64),
        seq=np.array(cols[0], dtype=np.int64),
        time_ms=np.array(cols[7], dtype=np.int64),
    )
    late_arr = np.array(late_events, dtype=np.int64)
    if fast is None:
        firings = _concat_sorted([slow_firings])
        late_arr = np.sort(late_arr)
    else:
        firings = _concat_sorted([slow_firings, fast.firings])
        late_arr = np.sort(np.concatenate([late_arr, fast.late_events]))
        open_windows.extend(fast.open_windows)
        open_windows.sort(key=lambda w: (w[0], w[1]))
    if not len(firings):
        firings = Firings()
    return WindowOutcome(firings, late_arr, open_windows)


def _sessions_element_by_element(
    ts: I64,
    keys: I64,
    tl: WatermarkTimeline,
    gap: int,
    lateness: int,
    subset: I64,
    out: list[tuple[int, int, int, int, bool, int, int, int]],
    late_events: list[int],
    open_windows: list[tuple[int, int, int, int]],
) -> None:
    """The elements at processing positions ``subset`` (whole gap-connected runs), per key in processing
    order, through :class:`_SessionKey`; appends to ``out``, ``late_events`` and ``open_windows``."""
    w = tl.event_watermark_ms
    final_wm = int(tl.advance_ms[-1]) if len(tl.advance_ms) else None
    adv = (tl.advance_ms.tolist(), tl.advance_pos.tolist(), tl.advance_time_ms.tolist())
    order = subset[np.lexsort((subset, keys[subset]))]
    ks = keys[order].tolist()
    evs = order.tolist()
    tss = ts[order].tolist()
    curs = w[order].tolist()
    m = len(evs)
    i = 0
    while i < m:
        key = ks[i]
        j = i
        while j < m and ks[j] == key:
            j += 1
        state = _SessionKey(key, lateness, adv, out)
        for x in range(i, j):
            cur = curs[x]
            t0 = tss[x]
            if not state.element(evs[x], t0, gap, cur):
                if (t0 + lateness if t0 <= LONG_MAX - lateness else LONG_MAX) <= cur:  # isElementLate
                    late_events.append(evs[x])
        state.fire_until(final_wm)
        for s, e, c in zip(state.starts, state.ends, state.counts, strict=True):
            open_windows.append((key, s, e, c))
        i = j


@dataclass(frozen=True, eq=False)
class _FastSessions:
    """What :func:`_simple_sessions` settled: ``firings``, ``late_events`` (processing positions),
    ``open_windows`` of the simple runs, and ``slow_positions``: the elements of the other runs (sorted)."""

    firings: Firings
    late_events: I64
    open_windows: list[tuple[int, int, int, int]]
    slow_positions: I64


#: Rounds of the joiner fixpoint (each round admits the drop candidates whose witness joined the round before).
_JOIN_ROUNDS = 16


def _in_range(sorted_c: I64, c: I64, lo_off: int, hi_off: int) -> tuple[I64, I64]:
    """Index bounds ``[lo, hi)`` of the values of ``sorted_c`` in ``[c + lo_off, c + hi_off]``."""
    return (
        np.searchsorted(sorted_c, c + lo_off, side="left").astype(np.int64),
        np.searchsorted(sorted_c, c + hi_off, side="right").astype(np.int64),
    )


def _range_min(a: I64, lo: I64, hi: I64) -> I64:
    """``min(a[lo[q]:hi[q]])`` for each query ``q`` (each ``hi > lo``): a sparse table built level by level
    (``O(len(a) log L)`` for ``L = max(hi - lo)``), each query answered at its level by two overlapping
    power-of-two blocks."""
    res = np.empty(len(lo), dtype=np.int64)
    if not len(lo):
        return res
    length = hi - lo
    level = np.zeros(len(lo), dtype=np.int64)
    for k in range(1, int(length.max()).bit_length()):
        level[length >= (1 << k)] = k
    table = a
    top = int(level.max())
    for k in range(top + 1):
        q = np.flatnonzero(level == k)
        if len(q):
            res[q] = np.minimum(table[lo[q]], table[hi[q] - (1 << k)])
        if k < top:
            table = np.minimum(table[: len(table) - (1 << k)], table[(1 << k) :])
    return res


def _simple_sessions(ts: I64, keys: I64, tl: WatermarkTimeline, gap: int, lateness: int) -> _FastSessions:
    """Vectorised session windows for the gap-connected runs that provably behave simply.

    Follows ``WindowOperator.processElement`` with a ``MergingWindowSet`` (``EventTimeSessionWindows``,
    ``EventTimeTrigger``) as :class:`_SessionKey` does, for the runs where the outcome has a closed form.
    Per key, elements sorted by timestamp are cut into *runs* (consecutive differences ``> gap`` cut).
    With ``cur`` the watermark when an element is processed, an element is a *drop candidate* when its
    own window ``[t, t + gap)`` is late (``t + gap - 1 + allowedLateness <= cur``), else *on time*. On-time
    elements are cut into *clusters* the same way. A run is simple, and settled here, when:

    * every on-time element has ``cur < t + gap - 1`` (with ``allowedLateness > 0`` an element between
      its window's ``maxTimestamp`` and cleanup would fire late: not simple);
    * no partial cluster fires before it is complete: for each on-time element ``i``, the first on-time
      element in ``(t_i, t_i + gap]`` to arrive (its *bridge*), if it arrives after ``i``, arrives while
      the watermark is still ``< t_i + gap - 1`` (before the timer of a window ending at ``t_i + gap``).
      Then every window in flight during a cluster's arrival is a union of its elements whose end is
      above the watermark, and the cluster ends as one window ``[min t, max t + gap)``;
    * each drop candidate either *joins* a cluster -- it lies in the cluster's span, an on-time element of
      the cluster in ``(t, t + gap]`` arrived before it (so it merges into an in-flight window of the
      cluster without moving its end) and it arrives before the cluster's window fires (``cur < end - 1``)
      -- or touches no in-flight window: for each cluster whose span it touches, it arrives before the
      cluster's first element or after its cleanup (``cur >= end - 1 + allowedLateness``); it is then
      skipped and is a late element (``isElementLate``).

    A simple cluster's window ``[min t, max t + gap)`` holds its elements and joiners when its timer at
    ``end - 1`` fires on time at the first watermark advance reaching it (seq and time of that advance),
    and is cleared at the first advance reaching ``end - 1 + allowedLateness``; otherwise it is open at the
    end. Everything else (and inputs whose ``key * span + t`` or ``t + gap + allowedLateness`` would not fit
    in int64) is returned as ``slow_positions`` for :class:`_SessionKey`.
    """
    n = len(ts)
    w = tl.event_watermark_ms
    t_min, t_max = int(ts.min()), int(ts.max())
    n_keys = int(keys.max()) + 1
    span = t_max - t_min + 2 * gap + 2
    if n_keys * span >= 1 << 62 or t_max >= LONG_MAX - gap - lateness - 2 or int(keys.min()) < 0:
        return _FastSessions(Firings(), _EMPTY, [], np.arange(n, dtype=np.int64))
    # sorted by (key, timestamp): one int64, keys more than 2 * gap apart
    comp = keys * span + (ts - t_min)
    o = np.argsort(comp)  # ties in any order: nothing below depends on it
    c, t, cur = comp[o], ts[o], w[o]
    drop = t + (gap - 1 + lateness) <= cur  # own window late when processed
    on = ~drop
    run_id = np.zeros(n, dtype=np.int64)
    np.cumsum(np.diff(c) > gap, out=run_id[1:])
    bad_run = np.zeros(int(run_id[-1]) + 1, dtype=np.bool_)
    if lateness:  # on time, yet past maxTimestamp: a late firing
        bad_run[run_id[on & (cur >= t + (gap - 1))]] = True
    idx_on = np.flatnonzero(on)
    idx_d = np.flatnonzero(drop)
    m = len(idx_on)
    if m == 0:  # no window is ever created: every element is skipped
        late = idx_d[t[idx_d] + lateness <= cur[idx_d]]
        return _FastSessions(Firings(), np.sort(o[late]), [], _EMPTY)
    cn, tn, posn = c[idx_on], t[idx_on], o[idx_on]
    # clusters: gap-connected runs of on-time elements, also cut after an element whose window fires
    # and is cleaned up before the first on-time element of (t, t + gap] arrives (then every on-time
    # element at or below t has arrived: a later one would find its own window late)
    step = np.diff(cn)
    lo, hi = _in_range(cn, cn[:-1], 1, gap)
    q = np.flatnonzero(hi > lo)
    bridge = _range_min(posn, lo[q], hi[q])
    cut = step > gap
    cut[q] |= (bridge > posn[q]) & (w[bridge] >= tn[q] + (gap - 1 + lateness)) & (step[q] > 0)
    cl_id = np.zeros(m, dtype=np.int64)
    np.cumsum(cut, out=cl_id[1:])
    cl_first = np.flatnonzero(np.concatenate(([True], cut)))
    n_cl = len(cl_first)
    cl_last = np.append(cl_first[1:], m) - 1
    cl_first_pos = np.minimum.reduceat(posn, cl_first)
    cl_c_lo, cl_c_hi = cn[cl_first], cn[cl_last]
    cl_end = tn[cl_last] + gap
    cl_ext_start = tn[cl_first].copy()
    cl_run = run_id[idx_on[cl_first]]
    # joiners: drop candidates with an earlier member in (t, t + gap] before the cluster above fires
    cd, td, posd, curd = c[idx_d], t[idx_d], o[idx_d], cur[idx_d]
    nxt = np.searchsorted(cn, cd, side="right")  # first on-time element above
    join_cl = cl_id[np.minimum(nxt, m - 1)]
    cand = (nxt < m) & (curd < cl_end[join_cl] - 1)
    joined = np.zeros(len(idx_d), dtype=np.bool_)
    member = on.copy()
    for _ in range(_JOIN_ROUNDS):
        q = np.flatnonzero(cand & ~joined)
        if not len(q):
            break
        idx_m = np.flatnonzero(member)
        lo, hi = _in_range(c[idx_m], cd[q], 1, gap)
        has = hi > lo
        q, lo, hi = q[has], lo[has], hi[has]
        new = q[_range_min(o[idx_m], lo, hi) < posd[q]]
        if not len(new):
            break
        joined[new] = True
        member[idx_d[new]] = True
    jx = np.flatnonzero(joined)
    np.minimum.at(cl_ext_start, join_cl[jx], td[jx])
    idx_m = np.flatnonzero(member)
    cm, pm = c[idx_m], o[idx_m]
    # no partial window fires: the first member to arrive in (t_i, t_i + gap] (the bridge) of an on-time
    # element i, if later than i, comes while the watermark is below t_i + gap - 1
    q = np.arange(m)
    lo, hi = _in_range(cm, cn, 1, gap)
    hi = np.minimum(hi, np.searchsorted(cm, cl_c_hi[cl_id], side="right"))  # its cluster's members only
    has = hi > lo
    q, lo, hi = q[has], lo[has], hi[has]
    bridge = _range_min(pm, lo, hi)
    early = (bridge > posn[q]) & (w[bridge] >= tn[q] + (gap - 1))
    bad_run[cl_run[cl_id[q[early]]]] = True
    ok = np.ones(len(idx_d), dtype=np.bool_)
    # a joiner touches no other cluster's window in flight: the cluster below, the one after its own
    below = cl_id[np.maximum(nxt - 1, 0)]
    after = np.minimum(join_cl + 1, n_cl - 1)
    for cl, touch in (
        (below, (nxt > 0) & (cl_c_hi[below] + gap >= cd)),
        (after, (join_cl + 1 < n_cl) & (cl_ext_start[after] - td <= gap)),
    ):
        in_flight = (posd > cl_first_pos[cl]) & (curd < cl_end[cl] - 1 + lateness)
        ok &= ~(joined & touch & (cl != join_cl) & (cl_run[cl] == run_id[idx_d]) & in_flight)
    # the others are skipped: each member within gap that came before must have been cleaned up by then
    m_cl = np.empty(n, dtype=np.int64)
    m_cl[idx_on] = cl_id
    m_cl[idx_d[jx]] = join_cl[jx]
    q = np.flatnonzero(~joined)
    lo, hi = _in_range(cm, cd[q], -gap, gap)
    has = hi > lo
    q, lo, hi = q[has], lo[has], hi[has]
    came = _range_min(pm, lo, hi) < posd[q]
    q, lo, hi = q[came], lo[came], hi[came]
    m_cleanup = cl_end[m_cl[idx_m]] - 1 + lateness
    ok[q[-_range_min(-m_cleanup, lo, hi) > curd[q]]] = False
    bad_run[run_id[idx_d[~ok]]] = True
    slow_sorted = bad_run[run_id]
    slow_positions = np.sort(o[slow_sorted])
    # skipped elements of simple runs are late when t + allowedLateness <= cur (isElementLate)
    late = idx_d[~joined & ~slow_sorted[idx_d]]
    late_events = o[late[t[late] + lateness <= cur[late]]]
    count = np.diff(np.append(cl_first, m)) + np.bincount(join_cl[jx], minlength=n_cl)
    g = np.flatnonzero(~bad_run[cl_run])
    g_key = keys[o[idx_on[cl_first[g]]]]
    g_start, g_end, g_count = cl_ext_start[g], cl_end[g], count[g]
    adv_ms = tl.advance_ms
    a = np.searchsorted(adv_ms, g_end - 1, side="left")
    fires = a < len(adv_ms)
    fa = a[fires]
    firings = Firings(
        start_ms=g_start[fires],
        end_ms=g_end[fires],
        count=g_count[fires],
        watermark_ms=adv_ms[fa],
        late_firing=np.zeros(len(fa), dtype=np.bool_),
        key_codes=g_key[fires],
        seq=2 * tl.advance_pos[fa],
        time_ms=tl.advance_time_ms[fa],
    )
    final_wm = int(adv_ms[-1]) if len(adv_ms) else None
    still = np.ones(len(g), dtype=np.bool_) if final_wm is None else g_end - 1 + lateness > final_wm
    open_windows = list(
        zip(
            g_key[still].tolist(),
            g_start[still].tolist(),
            g_end[still].tolist(),
            g_count[still].tolist(),
            strict=True,
        )
    )
    return _FastSessions(firings, late_events, open_windows, slow_positions)
