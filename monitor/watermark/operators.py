"""The stateful operators: window aggregation (tumbling/sliding), session windows, deduplication.

Each operator processes one micro-batch given two watermarks (Spark 3.5+ ``WatermarkSupport``):

* ``late_wm_ms`` (``eventTimeWatermarkForLateEvents``): input rows matching
  ``time_column <= late_wm_ms * 1000`` (microseconds) are dropped before they touch state
  (``watermarkPredicateForDataForLateEvents`` / ``applyRemovingRowsOlderThanWatermark``);
* ``evict_wm_ms`` (``eventTimeWatermarkForEviction``): after the input is written, state whose time
  column is ``<= evict_wm_ms * 1000`` is removed (and, in append mode, emitted).

The compared column is the window struct's ``end`` for window aggregations (``GetStructField(window,
1)``), the session's end for session windows, and the event time itself for deduplication.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import Dedup, EngineConfigError, Session, Sliding, Tumbling, WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.results import JoinOutput, LateRows, Windows
from monitor.watermark.windowing import assign_windows

__all__ = ["OpResult", "Operator", "make_operator"]

I64 = npt.NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(eq=False)
class OpResult:
    """What an operator did in one batch (see :class:`monitor.watermark.BatchResult` for meanings)."""

    late: LateRows
    late_rows: I64  # distinct late row indices
    emitted: Windows
    output_rows: int
    duplicates_dropped: int
    state_rows: int
    state_rows_removed: int
    state_rows_updated: int
    dropped_by_watermark_metric: int | None
    emitted_end_us: I64 = field(default_factory=lambda: _EMPTY)  # end of each *final* result emitted
    passed_rows: I64 = field(default_factory=lambda: _EMPTY)  # dedup: row indices output, in order
    join: JoinOutput | None = None  # stream-stream joins: per-side figures


class Operator(Protocol):
    """One stateful operator of the replayed query."""

    def process(self, rows: I64, late_wm_ms: int, evict_wm_ms: int) -> OpResult:
        """Process the rows (indices into the events table, null event times included)."""
        ...

    def state_rows(self) -> int:
        """Rows currently in state."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """The state as plain Python data."""
        ...


def make_operator(events: EventsTable, config: WatermarkConfig) -> Operator:
    """Build the operator for ``config`` over ``events``."""
    if config.join is not None:
        from monitor.watermark.join import JoinOperator  # join imports this module

        return JoinOperator(events, config, config.join)
    w = config.window
    if isinstance(w, Tumbling | Sliding):
        return WindowAggregation(events, config, w)
    if isinstance(w, Session):
        return SessionWindowAggregation(events, config, w)
    assert config.dedup is not None
    return Deduplication(events, config, config.dedup)


def _late_rows(
    events: EventsTable,
    config: WatermarkConfig,
    idx: I64,
    start_us: I64 | None,
    end_us: I64 | None,
    lateness_us: I64,
) -> LateRows:
    if not config.keep_late_rows or len(idx) == 0:
        return LateRows()
    return LateRows(
        row_index=idx,
        event_time_us=events.event_time_us[idx],
        window_start_us=start_us,
        window_end_us=end_us,
        lateness_us=lateness_us,
        source_codes=events.source_codes[idx],
        key_codes=events.key_codes[idx],
        source_names=events.source_names,
        key_names=events.key_names,
    )


def _distinct_pairs(a: I64, b: I64) -> int:
    """Number of distinct (a[i], b[i]) pairs."""
    if len(a) == 0:
        return 0
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    change = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    return int(change.sum()) + 1


class WindowAggregation:
    """``groupBy(window(event_time, size[, slide])[, key]).count()`` (``StateStoreSaveExec``).

    Vectorised with NumPy: per batch, window starts by integer floor arithmetic, the late mask against
    ``late_wm``, ``np.unique`` counts merged into a sorted state array, eviction by a mask on window
    ends. State rows are (key, window) groups, as ``numRowsTotal`` counts them.
    """

    MAX_PAIRS = 1 << 24

    def __init__(self, events: EventsTable, config: WatermarkConfig, spec: Tumbling | Sliding) -> None:
        self._events = events
        self._config = config
        self._size_us = spec.size_ms * 1000
        self._slide_us = spec.slide_ms * 1000
        self._offset_us = spec.offset_ms * 1000
        self._k = -(-spec.size_ms // spec.slide_ms)  # ceil(size / slide) candidate windows per row
        self._by_key = config.group_by_key
        self._append = config.output_mode == "append"
        et = events.event_time_us[events.valid]
        if len(et):
            lo = int((int(et.min()) - self._offset_us) // self._slide_us) - self._k - 1
            hi = int((int(et.max()) - self._offset_us) // self._slide_us) + 1
        else:
            lo, hi = 0, 1
        self._base = lo  # window index (start in slides) of group id 0
        self._span = hi - lo + 1
        if self._by_key and self._span * len(events.key_names) >= 1 << 62:
            raise EngineConfigError(
                f"{len(events.key_names)} keys x {self._span} windows do not fit the vectorised state; "
                "use a larger slide or fewer keys"
            )
        self._gid: I64 = _EMPTY.copy()  # sorted group ids in state
        self._cnt: I64 = _EMPTY.copy()

    # group id <-> (key, window index)
    def _decode(self, gid: I64) -> tuple[I64, npt.NDArray[np.int32] | None]:
        if self._by_key:
            key = (gid // self._span).astype(np.int32)
            widx = gid % self._span + self._base
            return widx * self._slide_us + self._offset_us, key
        return (gid + self._base) * self._slide_us + self._offset_us, None

    def _expand(self, rows: I64) -> tuple[I64, I64]:
        """(window start us, row index) pairs: every window each row falls in (TimeWindowing)."""
        t = self._events.event_time_us[rows]
        return assign_windows(t, rows, self._size_us, self._slide_us, self._offset_us)

    def _merge(self, gid: I64) -> I64:
        """Add the rows' group ids to the state counts; return the distinct ids touched."""
        u, c = np.unique(gid, return_counts=True)
        c = c.astype(np.int64)
        pos: I64 = np.asarray(np.searchsorted(self._gid, u), dtype=np.int64)
        present: npt.NDArray[np.bool_]
        if len(self._gid):
            pos_c = np.minimum(pos, len(self._gid) - 1)
            present = (pos < len(self._gid)) & (self._gid[pos_c] == u)
        else:
            present = np.zeros(len(u), dtype=np.bool_)
        if present.any():
            self._cnt[pos[present]] += c[present]
        if not present.all():
            newm = ~present
            self._gid = np.insert(self._gid, pos[newm], u[newm])
            self._cnt = np.insert(self._cnt, pos[newm], c[newm])
        return u

    def process(self, rows: I64, late_wm_ms: int, evict_wm_ms: int) -> OpResult:
        ev = self._events
        rows = rows[ev.valid[rows]]  # window(): Filter(IsNotNull(event_time)), not counted as late
        late_us = late_wm_ms * 1000
        # Bound memory for wide sliding windows: expand at most MAX_PAIRS (row, window) pairs at a time.
        step = max(1, self.MAX_PAIRS // self._k)
        late_parts: list[tuple[I64, I64, I64]] = []  # (row, window start, group id)
        touched: list[I64] = []
        for i in range(0, len(rows), step):
            ws, r = self._expand(rows[i : i + step])
            widx = (ws - self._offset_us) // self._slide_us - self._base
            gid = ev.key_codes[r].astype(np.int64) * self._span + widx if self._by_key else widx
            late_mask = ws + self._size_us <= late_us
            if late_mask.any():
                late_parts.append((r[late_mask], ws[late_mask], gid[late_mask]))
                gid = gid[~late_mask]
            if len(gid):
                touched.append(self._merge(gid))
        metric = 0
        late = LateRows()
        late_distinct = _EMPTY
        if late_parts:
            lr = np.concatenate([x[0] for x in late_parts])
            lws = np.concatenate([x[1] for x in late_parts])
            lwe = lws + self._size_us
            late = _late_rows(ev, self._config, lr, lws, lwe, late_us - lwe)
            late_distinct = np.unique(lr) if self._k > 1 else lr
            # numRowsDroppedByWatermark: the late filter (StateStoreSaveExec) sees one merged row per
            # (window[, key]) group after partial aggregation -> shuffle -> PartialMerge, so Spark
            # counts distinct late groups of the batch, whatever the input partitioning.
            metric = len(np.unique(np.concatenate([x[2] for x in late_parts])))
        updated = 0
        emitted_gid: I64 = _EMPTY
        emitted_cnt: I64 = _EMPTY
        if touched:
            u = touched[0] if len(touched) == 1 else np.unique(np.concatenate(touched))
            updated = len(u)
            if not self._append:
                emitted_gid = u
                emitted_cnt = self._cnt[np.searchsorted(self._gid, u)]
        # eviction: windows whose end <= evict watermark
        removed = 0
        final_end: I64 = _EMPTY
        if len(self._gid):
            starts, _ = self._decode(self._gid)
            evict = starts + self._size_us <= evict_wm_ms * 1000
            removed = int(evict.sum())
            if removed:
                final_end = starts[evict] + self._size_us  # update mode: final once evicted
                if self._append:
                    emitted_gid = self._gid[evict]
                    emitted_cnt = self._cnt[evict]
                keep = ~evict
                self._gid = self._gid[keep]
                self._cnt = self._cnt[keep]
        if len(emitted_gid):
            es, ek = self._decode(emitted_gid)
            emitted = Windows(es, es + self._size_us, emitted_cnt, ek, ev.key_names)
        else:
            emitted = Windows()
        return OpResult(
            late=late,
            late_rows=late_distinct,
            emitted=emitted,
            output_rows=len(emitted),
            duplicates_dropped=0,
            state_rows=len(self._gid),
            state_rows_removed=removed,
            state_rows_updated=updated,
            dropped_by_watermark_metric=metric,
            emitted_end_us=final_end,
        )

    def state_rows(self) -> int:
        return len(self._gid)

    def snapshot(self) -> dict[str, Any]:
        starts, keys = self._decode(self._gid)
        out = []
        for i in range(len(self._gid)):
            item: dict[str, Any] = {
                "start_ms": int(starts[i]) // 1000,
                "end_ms": (int(starts[i]) + self._size_us) // 1000,
                "count": int(self._cnt[i]),
            }
            if keys is not None:
                item["key"] = self._events.key_names[int(keys[i])]
            out.append(item)
        return {"operator": "window_aggregation", "windows": out}


class SessionWindowAggregation:
    """``groupBy(key, session_window(event_time, gap)).count()`` in append mode.

    Semantics of ``SessionWindowStateStoreRestoreExec`` / ``MergingSessionsIterator`` /
    ``SessionWindowStateStoreSaveExec``: rows whose own session ``[t, t+gap)`` ends ``<= late_wm``
    are dropped; the rest are merged per key with the key's sessions in state (sorted by start; a
    session merges into the current one when its start ``<=`` the current end); the key's sessions in
    state are replaced by the merged ones (old sessions whose start disappeared count as removed);
    then sessions with ``end <= evict_wm`` are removed and emitted. Pure Python.
    """

    def __init__(self, events: EventsTable, config: WatermarkConfig, spec: Session) -> None:
        self._events = events
        self._config = config
        self._gap_us = spec.gap_ms * 1000
        self._state: dict[int, list[list[int]]] = {}  # key code -> sorted [start_us, end_us, count]

    def process(self, rows: I64, late_wm_ms: int, evict_wm_ms: int) -> OpResult:
        ev = self._events
        rows = rows[ev.valid[rows]]
        t = ev.event_time_us[rows]
        end = t + self._gap_us
        late_mask = end <= late_wm_ms * 1000
        lr = rows[late_mask]
        late = _late_rows(
            ev, self._config, lr, t[late_mask], end[late_mask], late_wm_ms * 1000 - end[late_mask]
        )
        # The late filter (SessionWindowStateStoreRestoreExec) reads the map-side partial aggregates,
        # grouped by (key, session [t, t+gap)) within each input partition, unmerged: one row per
        # distinct (partition, key, t). Differential seed 23: the same (key, t) late in two inputs
        # counted twice. Unknown (None) without a partition column.
        metric: int | None = None
        if ev.partition is not None:
            comb = ev.partition[lr] * (len(ev.key_names) + 1) + ev.key_codes[lr].astype(np.int64)
            metric = _distinct_pairs(comb, t[late_mask])
        ok = ~late_mask
        keys = ev.key_codes[rows[ok]]
        starts = t[ok]
        removed = 0
        updated = 0
        by_key: dict[int, list[int]] = {}
        for k, s in zip(keys.tolist(), starts.tolist(), strict=True):
            by_key.setdefault(k, []).append(s)
        for k, ss in by_key.items():
            old = self._state.get(k, [])
            items = [[s, s + self._gap_us, 1] for s in ss] + [list(x) for x in old]
            items.sort(key=lambda x: x[0])
            merged: list[list[int]] = []
            for it in items:
                if merged and it[0] <= merged[-1][1]:
                    cur = merged[-1]
                    cur[1] = max(cur[1], it[1])
                    cur[2] += it[2]
                else:
                    merged.append(list(it))
            new_starts = {m[0] for m in merged}
            removed += sum(1 for o in old if o[0] not in new_starts)
            updated += len(merged)
            self._state[k] = merged
        # eviction
        ev_us = evict_wm_ms * 1000
        e_start: list[int] = []
        e_end: list[int] = []
        e_cnt: list[int] = []
        e_key: list[int] = []
        for k in list(self._state):
            sess = self._state[k]
            keep = []
            for s in sess:
                if s[1] <= ev_us:
                    e_start.append(s[0])
                    e_end.append(s[1])
                    e_cnt.append(s[2])
                    e_key.append(k)
                else:
                    keep.append(s)
            if keep:
                self._state[k] = keep
            else:
                del self._state[k]
        removed += len(e_start)
        emitted = (
            Windows(
                np.asarray(e_start, dtype=np.int64),
                np.asarray(e_end, dtype=np.int64),
                np.asarray(e_cnt, dtype=np.int64),
                np.asarray(e_key, dtype=np.int32),
                ev.key_names,
            )
            if e_start
            else Windows()
        )
        return OpResult(
            late=late,
            late_rows=lr,
            emitted=emitted,
            output_rows=len(e_start),
            duplicates_dropped=0,
            state_rows=self.state_rows(),
            state_rows_removed=removed,
            state_rows_updated=updated,
            dropped_by_watermark_metric=metric,
            emitted_end_us=np.asarray(e_end, dtype=np.int64),
        )

    def state_rows(self) -> int:
        return sum(len(v) for v in self._state.values())

    def snapshot(self) -> dict[str, Any]:
        sessions = [
            {
                "key": self._events.key_names[k],
                "start_ms": s[0] // 1000,
                "end_ms": s[1] // 1000,
                "count": s[2],
            }
            for k in sorted(self._state)
            for s in self._state[k]
        ]
        return {"operator": "session_window_aggregation", "sessions": sessions}


class Deduplication:
    """``dropDuplicates`` / ``dropDuplicatesWithinWatermark`` on ``key`` (``StreamingDeduplicateExec``,
    ``StreamingDeduplicateWithinWatermarkExec``).

    Rows with ``event_time <= late_wm`` are dropped first (a null event time is never late: the
    predicate is null). In batch order, the first row of a state key passes and is written to state;
    later rows with that key are duplicates. After the batch, state is evicted: ``key_and_event_time``
    removes entries with ``event_time <= evict_wm`` (a null event time is never evicted);
    ``within_watermark`` removes entries with ``evict_wm * 1000 >= expiresAt`` where
    ``expiresAt = event_time_us + delay_us`` of the first row (a null event time reads as 0);
    ``key`` never evicts. Pure Python.
    """

    def __init__(self, events: EventsTable, config: WatermarkConfig, spec: Dedup) -> None:
        self._events = events
        self._config = config
        self._mode = spec.mode
        self._delay_us = config.delay_ms * 1000
        self._seen: set[Any] = set()
        self._expiry: dict[Any, int] = {}
        self._heap: list[tuple[int, Any]] = []

    def process(self, rows: I64, late_wm_ms: int, evict_wm_ms: int) -> OpResult:
        ev = self._events
        valid = ev.valid[rows]
        t = ev.event_time_us[rows]
        late_mask = valid & (t <= late_wm_ms * 1000)
        lr = rows[late_mask]
        late = _late_rows(ev, self._config, lr, None, None, late_wm_ms * 1000 - t[late_mask])
        ok = ~late_mask
        ok_rows = rows[ok]
        keys = ev.key_codes[ok_rows].tolist()
        times = t[ok].tolist()
        valids = valid[ok].tolist()
        passed = 0
        dups = 0
        mode = self._mode
        out_mask = np.zeros(len(ok_rows), dtype=np.bool_)
        for i, (k, tm, v) in enumerate(zip(keys, times, valids, strict=True)):
            if mode == "key":
                sk: Any = k
                if sk in self._seen:
                    dups += 1
                    continue
                self._seen.add(sk)
            elif mode == "key_and_event_time":
                sk = (k, tm if v else None)
                if sk in self._seen:
                    dups += 1
                    continue
                self._seen.add(sk)
                if v:
                    heapq.heappush(self._heap, (tm, sk))
            else:
                if k in self._expiry:
                    dups += 1
                    continue
                exp = (tm if v else 0) + self._delay_us
                self._expiry[k] = exp
                heapq.heappush(self._heap, (exp, k))
            passed += 1
            out_mask[i] = True
        removed = 0
        ev_us = evict_wm_ms * 1000
        if mode == "key_and_event_time":
            while self._heap and self._heap[0][0] <= ev_us:
                _, sk = heapq.heappop(self._heap)
                self._seen.discard(sk)
                removed += 1
        elif mode == "within_watermark":
            while self._heap and self._heap[0][0] <= ev_us:
                exp, k = heapq.heappop(self._heap)
                if self._expiry.get(k) == exp:
                    del self._expiry[k]
                    removed += 1
        return OpResult(
            late=late,
            late_rows=lr,
            emitted=Windows(),
            output_rows=passed,
            duplicates_dropped=dups,
            state_rows=self.state_rows(),
            state_rows_removed=removed,
            state_rows_updated=passed,
            dropped_by_watermark_metric=len(lr),
            passed_rows=ok_rows[out_mask],
        )

    def state_rows(self) -> int:
        return len(self._expiry) if self._mode == "within_watermark" else len(self._seen)

    def snapshot(self) -> dict[str, Any]:
        names = self._events.key_names
        if self._mode == "within_watermark":
            entries = [{"key": names[k], "expires_at_us": e} for k, e in sorted(self._expiry.items())]
        elif self._mode == "key":
            entries = [{"key": names[k]} for k in sorted(self._seen)]
        else:
            entries = [
                {"key": names[k], "event_time_us": tm}
                for k, tm in sorted(self._seen, key=lambda x: (x[0], -1 if x[1] is None else x[1]))
            ]
        return {"operator": "deduplication", "mode": self._mode, "entries": entries}
