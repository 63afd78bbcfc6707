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

import heapq
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import Session, Sliding, Tumbling
from monitor.watermark.flink.config import LONG_MAX
from monitor.watermark.flink.watermarks import WatermarkTimeline
from monitor.watermark.windowing import assign_windows

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
    count) of windows still in state at the end.
    """

    firings: Firings
    late_events: I64
    open_windows: list[tuple[int, int, int, int]]


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
    n = len(ts)
    w = tl.event_watermark_ms
    size, slide = spec.size_ms, spec.slide_ms
    starts, ev = assign_windows(ts, np.arange(n, dtype=np.int64), size, slide, spec.offset_ms)
    max_ts = starts + (size - 1)
    cleanup = _cleanup(max_ts, lateness)
    ok = cleanup > w[ev]
    starts, ev, max_ts = starts[ok], ev[ok], max_ts[ok]
    added = np.bincount(ev, minlength=n) if n else _EMPTY
    skipped = added == 0
    elem_late = _cleanup(ts, lateness) <= w
    late_events = np.flatnonzero(skipped & elem_late).astype(np.int64)
    k = keys[ev]
    order = np.lexsort((ev, starts, k))
    s_start, s_ev, s_key, s_max = starts[order], ev[order], k[order], max_ts[order]
    m = len(order)
    if m == 0:
        return WindowOutcome(Firings(), late_events, [])
    new_group = np.ones(m, dtype=np.bool_)
    new_group[1:] = (s_start[1:] != s_start[:-1]) | (s_key[1:] != s_key[:-1])
    gstart = np.flatnonzero(new_group)
    gid = np.cumsum(new_group) - 1
    rank = np.arange(m, dtype=np.int64) - gstart[gid]  # 0-based position within the group
    g_max = s_max[gstart]
    g_first = s_ev[gstart]
    adv_ms, adv_pos, adv_t = tl.advance_ms, tl.advance_pos, tl.advance_time_ms
    # on-time firing: the first element registered a timer at maxTimestamp (it was after the watermark)
    has_timer = g_max > w[g_first]
    a = np.searchsorted(adv_ms, g_max, side="left")
    fires = has_timer & (a < len(adv_ms))
    fg = np.flatnonzero(fires)
    fa = a[fg]
    fpos = adv_pos[fa]
    # elements of the group read before that advance: group members with index < pos (sorted by ev)
    gend = np.append(gstart[1:], m)
    counts = np.empty(len(fg), dtype=np.int64)
    for_groups = gstart[fg]
    # members are sorted by event index inside a group: count = searchsorted within the slice
    if len(fg):
        # global trick: offset event indices by group so one searchsorted does all groups
        off = gid.astype(np.int64) * (n + 1)
        keyed = s_ev + off
        counts = np.searchsorted(keyed, fpos + off[for_groups], side="left") - for_groups
    on = Firings(
        start_ms=s_start[for_groups],
        end_ms=s_start[for_groups] + size,
        count=counts.astype(np.int64),
        watermark_ms=adv_ms[fa],
        late_firing=np.zeros(len(fg), dtype=np.bool_),
        key_codes=s_key[for_groups],
        seq=2 * fpos,
        time_ms=adv_t[fa],
    )
    # late firings: every element added while maxTimestamp <= watermark
    lf = np.flatnonzero(s_max <= w[s_ev])
    late = Firings(
        start_ms=s_start[lf],
        end_ms=s_start[lf] + size,
        count=rank[lf] + 1,
        watermark_ms=w[s_ev[lf]],
        late_firing=np.ones(len(lf), dtype=np.bool_),
        key_codes=s_key[lf],
        seq=2 * s_ev[lf] + 1,
        time_ms=np.full(len(lf), -1, dtype=np.int64),
    )
    firings = _concat_sorted([on, late])
    final_wm = int(adv_ms[-1]) if len(adv_ms) else None
    g_clean = _cleanup(g_max, lateness)
    still = np.ones(len(gstart), dtype=np.bool_) if final_wm is None else g_clean > final_wm
    sizes = gend - gstart
    open_windows = [
        (int(s_key[gstart[i]]), int(s_start[gstart[i]]), int(s_start[gstart[i]]) + size, int(sizes[i]))
        for i in np.flatnonzero(still).tolist()
    ]
    return WindowOutcome(firings, late_events, open_windows)


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
    """One key's in-flight session windows and event-time timers (``MergingWindowSet`` + timer service)."""

    def __init__(
        self,
        key: int,
        lateness: int,
        tl: WatermarkTimeline,
        out: list[tuple[int, int, int, int, bool, int, int, int]],
    ) -> None:
        self.key = key
        self.lateness = lateness
        self.adv_ms = tl.advance_ms
        self.adv_pos = tl.advance_pos
        self.adv_t = tl.advance_time_ms
        self.out = out
        self.windows: dict[tuple[int, int], int] = {}  # (start, end) -> count
        self.timers: set[tuple[int, int, int]] = set()  # (timestamp, start, end)
        self.heap: list[tuple[int, int, int]] = []

    def cleanup_of(self, end: int) -> int:
        mt = end - 1
        return LONG_MAX if mt > LONG_MAX - self.lateness else mt + self.lateness

    def register(self, t: int, s: int, e: int) -> None:
        if (t, s, e) not in self.timers:
            self.timers.add((t, s, e))
            heapq.heappush(self.heap, (t, s, e))

    def fire_until(self, limit: int | None) -> None:
        """Fire the timers with ``timestamp <= limit`` in timestamp order (``InternalTimerServiceImpl``)."""
        heap = self.heap
        while heap and limit is not None and heap[0][0] <= limit:
            t, s, e = heapq.heappop(heap)
            if (t, s, e) not in self.timers:
                continue  # deleted
            self.timers.discard((t, s, e))
            if (s, e) not in self.windows:
                continue
            a = int(np.searchsorted(self.adv_ms, t, side="left"))
            if t == e - 1:  # EventTimeTrigger.onEventTime: FIRE at maxTimestamp
                self.out.append(
                    (
                        2 * int(self.adv_pos[a]),
                        s,
                        e,
                        self.windows[(s, e)],
                        False,
                        self.key,
                        int(self.adv_ms[a]),
                        int(self.adv_t[a]),
                    )
                )
            if t == self.cleanup_of(e):
                del self.windows[(s, e)]

    def element(self, idx: int, t0: int, gap: int, cur: int) -> bool:
        """Process element ``idx`` (timestamp ``t0``) at watermark ``cur``; False when it was skipped."""
        windows = self.windows
        self.fire_until(cur)
        ns, ne = t0, t0 + gap
        merged = [sw for sw in windows if sw[0] <= ne and sw[1] >= ns]
        if merged:
            rs = min(ns, *(m[0] for m in merged))
            re_ = max(ne, *(m[1] for m in merged))
            r = (rs, re_)
            if not (len(merged) == 1 and merged[0] == r):
                # MergeFunction.merge (the merged window cannot be late: in-flight windows never are)
                assert self.cleanup_of(re_) > cur, "merged session window would be late"
                if re_ - 1 > cur:  # EventTimeTrigger.onMerge
                    self.register(re_ - 1, rs, re_)
                total = 0
                for m in merged:
                    self.timers.discard((m[1] - 1, m[0], m[1]))
                    self.timers.discard((self.cleanup_of(m[1]), m[0], m[1]))
                    total += windows.pop(m)
                windows[r] = total
        else:
            r = (ns, ne)
            if self.cleanup_of(ne) <= cur:  # a late new window: retired at once, element skipped
                return False
            windows[r] = 0
        windows[r] += 1
        if r[1] - 1 <= cur:
            self.out.append((2 * idx + 1, r[0], r[1], windows[r], True, self.key, cur, -1))
        else:
            self.register(r[1] - 1, r[0], r[1])
        c = self.cleanup_of(r[1])
        if c != LONG_MAX:
            self.register(c, r[0], r[1])
        return True


def _sessions(ts: I64, keys: I64, tl: WatermarkTimeline, gap: int, lateness: int) -> WindowOutcome:
    """Per key, element by element (``MergingWindowSet`` + ``EventTimeTrigger``); pure Python."""
    n = len(ts)
    w = tl.event_watermark_ms.tolist()
    final_wm = int(tl.advance_ms[-1]) if len(tl.advance_ms) else None
    out: list[tuple[int, int, int, int, bool, int, int, int]] = []  # seq, start, end, count, late, key, wm, t
    late_events: list[int] = []
    open_windows: list[tuple[int, int, int, int]] = []
    order = np.lexsort((np.arange(n), keys))
    ks = keys[order].tolist()
    evs = order.tolist()
    tss = ts.tolist()
    i = 0
    while i < n:
        key = ks[i]
        j = i
        while j < n and ks[j] == key:
            j += 1
        state = _SessionKey(key, lateness, tl, out)
        for x in range(i, j):
            e_idx = evs[x]
            cur = w[e_idx]
            if not state.element(e_idx, tss[e_idx], gap, cur):
                t0 = tss[e_idx]
                if (t0 + lateness if t0 <= LONG_MAX - lateness else LONG_MAX) <= cur:  # isElementLate
                    late_events.append(e_idx)
        state.fire_until(final_wm)
        for (s, e), c in sorted(state.windows.items()):
            open_windows.append((key, s, e, c))
        i = j
    out.sort(key=lambda f: (f[0], f[2], f[5], f[1]))
    late_arr = np.array(sorted(late_events), dtype=np.int64)
    if not out:
        return WindowOutcome(Firings(), late_arr, open_windows)
    cols = list(zip(*out, strict=True))
    firings = Firings(
        start_ms=np.array(cols[1], dtype=np.int64),
        end_ms=np.array(cols[2], dtype=np.int64),
        count=np.array(cols[3], dtype=np.int64),
        watermark_ms=np.array(cols[6], dtype=np.int64),
        late_firing=np.array(cols[4], dtype=np.bool_),
        key_codes=np.array(cols[5], dtype=np.int64),
        seq=np.array(cols[0], dtype=np.int64),
        time_ms=np.array(cols[7], dtype=np.int64),
    )
    return WindowOutcome(firings, late_arr, open_windows)
