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
    cols: list[tuple[int | bool, ...]] = list(zip(*out, strict=True)) if out else [()] * 8
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
            cur, t0 = curs[x], tss[x]
            is_late = (t0 + lateness if t0 <= LONG_MAX - lateness else LONG_MAX) <= cur  # isElementLate
            if not state.element(evs[x], t0, gap, cur) and is_late:
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


#: Rounds of the joiner fixpoint (each round admits the drop candidates whose witness joined the round
#: before); candidates still open after the last round are checked as skipped elements (or go slow).
_JOIN_ROUNDS = 16
_NONE = np.iinfo(np.int64).max


def _in_range(sorted_c: I64, c: I64, lo_off: int, hi_off: int) -> tuple[I64, I64]:
    """Index bounds ``[lo, hi)`` of the values of ``sorted_c`` in ``[c + lo_off, c + hi_off]``."""
    return (
        np.searchsorted(sorted_c, c + lo_off, side="left").astype(np.int64),
        np.searchsorted(sorted_c, c + hi_off, side="right").astype(np.int64),
    )


def _range_min(a: I64, lo: I64, hi: I64) -> I64:
    """``min(a[lo[q]:hi[q]])`` for each query ``q``; ``_NONE`` for an empty range (``hi <= lo``).

    Short ranges (at most 32 values) are scanned offset by offset (work: the sum of the lengths); longer
    ones use a sparse table built level by level (``O(len(a) log L)`` for ``L = max(hi - lo)``), each
    query answered at its level by two overlapping power-of-two blocks.
    """
    res = np.full(len(lo), _NONE, dtype=np.int64)
    length = hi - lo
    q = np.flatnonzero(length > 0)
    if not len(q):
        return res
    lo, length = lo[q], length[q]
    top_len = int(length.max())
    if top_len <= 32:
        out = a[lo]
        act = np.arange(len(q))
        for j in range(1, top_len):
            act = act[length[act] > j]
            out[act] = np.minimum(out[act], a[lo[act] + j])
        res[q] = out
        return res
    level = np.zeros(len(q), dtype=np.int64)
    for k in range(1, top_len.bit_length()):
        level[length >= (1 << k)] = k
    table = a
    top = int(level.max())
    for k in range(top + 1):
        at = np.flatnonzero(level == k)
        if len(at):
            res[q[at]] = np.minimum(table[lo[at]], table[lo[at] + length[at] - (1 << k)])
        if k < top:
            table = np.minimum(table[: len(table) - (1 << k)], table[(1 << k) :])
    return res


def _simple_sessions(ts: I64, keys: I64, tl: WatermarkTimeline, gap: int, lateness: int) -> _FastSessions:
    """Vectorised session windows for the gap-connected runs that provably behave simply.

    Follows ``WindowOperator.processElement`` with a ``MergingWindowSet`` (``EventTimeSessionWindows``,
    ``EventTimeTrigger``) as :class:`_SessionKey` does, for the runs where the outcome has a closed form.
    Per key, elements sorted by timestamp are cut into *runs* (consecutive differences ``> gap`` cut):
    windows never span two runs. With ``cur`` the watermark when an element is processed, an element is
    a *drop candidate* when its own window ``[t, t + gap)`` is late (``t + gap - 1 + allowedLateness <=
    cur``), else *on time*; a window in flight touches an element exactly when one of its elements
    lies within ``gap`` of it. A run is simple, and settled here, when:

    * every on-time element has ``cur < t + gap - 1`` (with ``allowedLateness > 0`` an element between
      its window's ``maxTimestamp`` and cleanup would fire late: not simple);
    * on-time elements are cut into *clusters* where consecutive ones are more than ``gap`` apart, and
      after an element ``i`` whose window fires and is cleaned up before the first on-time element of
      ``(t_i, t_i + gap]`` (its *bridge*) arrives: watermark at the bridge ``>= t_i + gap - 1 +
      allowedLateness`` (every on-time element at or below ``t_i`` has come by then: a later one would
      find its own window late). Within a cluster no partial window fires: for each element ``i`` but
      the cluster's top, the first member of the cluster in ``(t_i, t_i + gap]`` to arrive, if after
      ``i``, comes while the watermark is ``< t_i + gap - 1``. Then every window in flight while the
      cluster arrives is a union of its members ending above the watermark, and the cluster ends as one
      window ``[min t, max t + gap)``;
    * a drop candidate *joins* the cluster of the next on-time element above it when a member of that
      cluster in ``(t, t + gap]`` came before it and the cluster's window has not fired
      (``cur < end - 1``): it merges into that in-flight window without moving its end, possibly
      moving its start down (found by a fixpoint: joiners are witnesses for later ones). It touches no
      other cluster's window: clusters whose top is below it were cleaned up before it came (its own
      window is late), and members of the clusters above within gap come only after its cluster fired.
      Any other drop candidate must touch nothing in flight: no member within ``gap`` of it came before
      it while its cluster is not cleaned up (``cur < end - 1 + allowedLateness``). It is skipped, and
      a late element when ``t + allowedLateness <= cur`` (``isElementLate``).

    A simple cluster's window ``[min(t of members), max t + gap)`` holds its members when its timer at
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
    pos_bits = max(1, (n - 1).bit_length())
    if n_keys * span + gap + lateness >= 1 << 62 or t_max >= LONG_MAX - gap - lateness - 2 or int(keys.min()) < 0:
        return _FastSessions(Firings(), _EMPTY, [], np.arange(n, dtype=np.int64))
    # sorted by (key, timestamp, position): one int64; keys end up more than 2 * gap apart (in place
    # where possible: at 10M events every temporary is 80 MB)
    c = ts - t_min
    c += keys * span
    if n_keys * span < 1 << (62 - pos_bits):
        c <<= pos_bits
        c |= np.arange(n, dtype=np.int64)
        c.sort()
        o = c & ((1 << pos_bits) - 1)
        c >>= pos_bits
    else:
        o = np.argsort(c, kind="stable")
        c = c[o]
    t, cur = ts[o], w[o]
    drop = t + (gap - 1 + lateness) <= cur  # own window late when processed
    run_first = np.flatnonzero(np.diff(c) > gap) + 1
    run_first = np.concatenate((np.zeros(1, dtype=np.int64), run_first))
    bad = [_EMPTY]  # sorted indices whose run goes slow
    if lateness:  # on time, yet past maxTimestamp: a late firing
        bad.append(np.flatnonzero(~drop & (cur >= t + (gap - 1))))
    idx_on = np.flatnonzero(~drop)
    idx_d = np.flatnonzero(drop)
    m = len(idx_on)
    if m == 0:  # no window is ever created: every element is skipped
        late = idx_d[t[idx_d] + lateness <= cur[idx_d]]
        return _FastSessions(Firings(), o[late], [], _EMPTY)
    cn, tn, posn, curn = c[idx_on], t[idx_on], o[idx_on], cur[idx_on]
    step = np.diff(cn)
    repeats = m > 1 and bool((step == 0).any())
    # cut after an element whose window is fired and cleaned up before its bridge arrives (the next
    # element coming later, at a watermark past that, is necessary: the bridge comes no later than it)
    later = posn[1:] > posn[:-1]
    wm_past = curn[1:] - tn[:-1]  # watermark at the next element's arrival minus this timestamp
    k = np.flatnonzero((step > 0) & (step <= gap) & later & (wm_past >= gap - 1 + lateness))
    hi = np.searchsorted(cn, cn[k] + gap, side="right")
    bridge = _range_min(posn, k + 1, hi)
    cut = step > gap
    cut[k[w[bridge] >= tn[k] + (gap - 1 + lateness)]] = True
    cl_first = np.flatnonzero(np.concatenate(([True], cut)))

    def cl_id(i: I64) -> I64:  # the cluster of on-time elements i
        return np.searchsorted(cl_first, i, side="right") - 1

    n_cl = len(cl_first)
    cl_last = np.append(cl_first[1:], m) - 1
    cl_c_hi = cn[cl_last]
    cl_end = tn[cl_last] + gap
    cl_ext_start = tn[cl_first].copy()
    # joiners (fixpoint): a member of the cluster above in (t, t + gap] came before
    cd, td, posd, curd = c[idx_d], t[idx_d], o[idx_d], cur[idx_d]
    nxt = np.searchsorted(cn, cd, side="right")  # first on-time element above
    join_cl = cl_id(np.minimum(nxt, m - 1))
    cand = np.flatnonzero((nxt < m) & (curd < cl_end[join_cl] - 1))
    lo, hi = _in_range(cn, cd[cand], 1, gap)
    first_on = _range_min(posn, lo, hi)
    joined = np.zeros(len(idx_d), dtype=np.bool_)
    witness = first_on
    for _ in range(_JOIN_ROUNDS):
        new = (witness < posd[cand]) & ~joined[cand]
        if not new.any():
            break
        joined[cand[new]] = True
        jx = np.flatnonzero(joined)
        lo, hi = _in_range(cd[jx], cd[cand], 1, gap)
        witness = np.minimum(first_on, _range_min(posd[jx], lo, hi))
    jx = np.flatnonzero(joined)
    cj, pj, jcl = cd[jx], posd[jx], join_cl[jx]
    np.minimum.at(cl_ext_start, jcl, td[jx])
    # no partial window fires: the first member of the cluster in (t_i, t_i + gap] to come, if after i,
    # comes before the watermark reaches t_i + gap - 1 (checked where the next value's element says so)
    if not repeats:  # the next value is the next element
        k = np.flatnonzero(~cut & later & (wm_past >= gap - 1))
        nd = k + 1
    else:  # the next on-time element with a higher timestamp: past the last of this timestamp
        last_of_value = np.flatnonzero(np.append(step != 0, True))
        nd_all = np.repeat(last_of_value + 1, np.diff(np.concatenate(([-1], last_of_value))))[:-1]
        k = np.flatnonzero(nd_all < m)
        nd = nd_all[k]
        keep = (cl_id(nd) == cl_id(k)) & (posn[nd] > posn[k]) & (curn[nd] >= tn[k] + (gap - 1))
        k, nd = k[keep], nd[keep]
    cap = cl_c_hi[cl_id(k)]
    hi = np.searchsorted(cn, np.minimum(cn[k] + gap, cap), side="right")
    lo2, hi2 = _in_range(cj, cn[k], 1, gap)
    hi2 = np.minimum(hi2, np.searchsorted(cj, cap, side="right"))
    bridge = np.minimum(_range_min(posn, nd, hi), _range_min(pj, lo2, hi2))
    bad.append(idx_on[k[(bridge > posn[k]) & (w[np.minimum(bridge, n - 1)] >= tn[k] + (gap - 1))]])
    # (a joiner touches no other cluster's window: a drop candidate comes after every cluster whose top
    # is below it was cleaned up, cur >= t + gap - 1 + lateness > top + gap - 1 + lateness; members of
    # higher clusters within gap above it come after its cluster fired -- they are past its cut, or drop
    # candidates above its top -- and a joiner comes before that.)
    # The others are skipped: no member within gap came before whose cluster is still in flight. Within
    # a key clusters ascend with the timestamp and so do their cleanup times: the members in flight at
    # the element's arrival are a suffix of the on-time elements and one of the joiners
    sk = np.flatnonzero(~joined)
    c_sk, p_sk = cd[sk], posd[sk]
    cur_c = c_sk - td[sk] + curd[sk]  # the watermark on the element's key's axis
    live_cl = np.searchsorted(cl_c_hi + (gap - 1 + lateness), cur_c, side="right")
    live_on = np.append(cl_first, m)[live_cl]
    live_j = np.searchsorted(cl_c_hi[jcl] + (gap - 1 + lateness), cur_c, side="right")
    lo, hi = _in_range(cn, c_sk, -gap, gap)
    lo2, hi2 = _in_range(cj, c_sk, -gap, gap)
    came = np.minimum(
        _range_min(posn, np.maximum(lo, live_on), hi), _range_min(pj, np.maximum(lo2, live_j), hi2)
    )
    bad.append(idx_d[sk[came < p_sk]])
    # runs with a bad element go slow
    bad_idx = np.concatenate(bad)
    run_of_d = np.searchsorted(run_first, idx_d, side="right") - 1
    cl_run = np.searchsorted(run_first, idx_on[cl_first], side="right") - 1
    bad_run = np.zeros(len(run_first), dtype=np.bool_)
    bad_run[np.searchsorted(run_first, bad_idx, side="right") - 1] = True
    slow_positions = _EMPTY
    if bad_run.any():
        r = np.flatnonzero(bad_run)
        starts = run_first[r]
        lens = np.append(run_first, n)[r + 1] - starts
        offs = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        slow_positions = np.sort(o[np.repeat(starts, lens) + offs])
    # skipped elements of simple runs are late when t + allowedLateness <= cur (isElementLate)
    late = idx_d[~joined & ~bad_run[run_of_d]]
    late_events = o[late[t[late] + lateness <= cur[late]]]
    count = np.diff(np.append(cl_first, m)) + np.bincount(jcl, minlength=n_cl)
    g = np.flatnonzero(~bad_run[cl_run])
    g_key = keys[posn[cl_first[g]]]
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
