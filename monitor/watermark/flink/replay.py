"""``replay_flink(events, config)``: order the events, build the watermark timeline, run the windows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.watermark.events import EventsTable
from monitor.watermark.flink.config import LONG_MAX, LONG_MIN, FlinkConfig
from monitor.watermark.flink.operator import Firings, WindowOutcome, run_windows
from monitor.watermark.flink.watermarks import (
    IdlePeriod,
    WatermarkTimeline,
    periodic_ticks,
    watermark_timeline,
)

__all__ = ["FlinkReplay", "FlinkSummary", "replay_flink"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class FlinkSummary:
    """Totals of a Flink-mode replay (JSON field names in parentheses are the same).

    Attributes:
        input_rows: rows read; rows_without_time: rows with a null/unparseable event time (left out:
            Flink's timestamp assigner would fail on them).
        late_records_dropped: the window operator's ``numLateRecordsDropped`` (0 with a side output).
        late_side_output_records: elements sent to the late side output (0 without one).
        late_elements: elements whose windows were all late (either of the two above).
        firings / late_firings: window firings in total / caused by late elements.
        windows_fired: distinct (key, window) pairs that fired at least once.
        open_windows: windows still in state at the end.
        watermark_advances: watermark values the window operator received (end of input included).
        final_watermark_ms: the last watermark (``None``: never one; ``Long.MAX_VALUE``: end of input).
        partitions: number of splits (one generator each).
        idle_periods: idle periods of single partitions and of all of them (event time frozen), in
            processing time; JSON ``{"scope": "partition" | "all_partitions", "partition", "from_ms",
            "until_ms"}`` (``partition`` null for all of them).
        ticks: periodic emissions replayed.
        firing_delay_ms: on-time firings, processing time of the firing minus the window's end
            (``{"count", "p50", "p95", "max"}``; meaningful when event time tracks processing time;
            ``None`` without arrival times).
    """

    input_rows: int
    rows_without_time: int
    late_records_dropped: int
    late_side_output_records: int
    late_elements: int
    late_share: float
    firings: int
    late_firings: int
    windows_fired: int
    open_windows: int
    watermark_advances: int
    final_watermark_ms: int | None
    partitions: int
    idle_periods: tuple[IdlePeriod, ...]
    all_partitions_idle_ms: int
    ticks: int
    delay_ms: int
    firing_delay_ms: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain-data form (idle periods as dicts)."""
        return {
            "input_rows": self.input_rows,
            "rows_without_time": self.rows_without_time,
            "late_records_dropped": self.late_records_dropped,
            "late_side_output_records": self.late_side_output_records,
            "late_elements": self.late_elements,
            "late_share": self.late_share,
            "firings": self.firings,
            "late_firings": self.late_firings,
            "windows_fired": self.windows_fired,
            "open_windows": self.open_windows,
            "watermark_advances": self.watermark_advances,
            "final_watermark_ms": self.final_watermark_ms,
            "partitions": self.partitions,
            "idle_periods": [
                {
                    "scope": "all_partitions" if p.partition is None else "partition",
                    "partition": p.partition,
                    "from_ms": p.from_ms,
                    "until_ms": p.until_ms,
                }
                for p in self.idle_periods
            ],
            "all_partitions_idle_ms": self.all_partitions_idle_ms,
            "ticks": self.ticks,
            "delay_ms": self.delay_ms,
            "firing_delay_ms": self.firing_delay_ms,
        }


@dataclass(frozen=True, eq=False)
class FlinkReplay:
    """The result of :func:`replay_flink`.

    Attributes:
        firings: every window firing in emission order (:class:`~monitor.watermark.flink.operator.Firings`).
        late_rows: row indices (into the events table) of the elements dropped as late / sent to the
            late side output, in processing order.
        late_row_watermarks_ms: the watermark each of those met.
        timeline: the watermark timeline (per processed event and per advance).
        order: row indices of the processed events (valid event times), in processing order.
        open_windows: (key, start_ms, end_ms, count) still in state at the end.
        summary: :class:`FlinkSummary`.
        key_names: names of the key codes.
        partition_values: the partition value of each partition code.
        state_windows: (key, window) pairs in the window operator's state after each watermark advance
            of ``timeline`` (``None`` for session windows: merging state is not tracked over time).
    """

    firings: Firings
    late_rows: I64
    late_row_watermarks_ms: I64
    timeline: WatermarkTimeline
    order: I64
    open_windows: list[tuple[str, int, int, int]]
    summary: FlinkSummary
    key_names: tuple[str, ...]
    partition_values: tuple[int, ...]
    state_windows: I64 | None = None

    def firing_records(self) -> list[dict[str, Any]]:
        """Firings as JSON-ready dicts (``start_ms``, ``end_ms``, ``count``, ``watermark_ms``,
        ``late_firing``, ``key``, ``processing_time_ms``)."""
        f = self.firings
        cols = (
            f.start_ms.tolist(),
            f.end_ms.tolist(),
            f.count.tolist(),
            f.watermark_ms.tolist(),
            f.late_firing.tolist(),
            f.key_codes.tolist(),
            f.time_ms.tolist(),
        )
        return [
            {
                "start_ms": s,
                "end_ms": e,
                "count": c,
                "watermark_ms": wm,
                "late_firing": lf,
                "key": self.key_names[k],
                "processing_time_ms": None if t < 0 else t,
            }
            for s, e, c, wm, lf, k, t in zip(*cols, strict=True)
        ]

    def to_json(self) -> dict[str, Any]:
        """``{"firings": [...], "summary": {...}, "open_windows": [...]}``."""
        return {
            "firings": self.firing_records(),
            "summary": self.summary.to_json(),
            "open_windows": [
                {"key": k, "start_ms": s, "end_ms": e, "count": c} for k, s, e, c in self.open_windows
            ],
        }


def _firing_delay(f: Firings) -> dict[str, int]:
    on = ~f.late_firing & (f.time_ms >= 0)
    d = f.time_ms[on] - f.end_ms[on]
    if not len(d):
        return {"count": 0, "p50": 0, "p95": 0, "max": 0}
    p50, p95 = np.percentile(d, [50, 95], method="higher")
    return {"count": len(d), "p50": int(p50), "p95": int(p95), "max": int(d.max())}


def _distinct_windows(f: Firings) -> int:
    """Number of distinct (key, start, end) windows among the firings (a window fires once on time and
    again for each late firing). One lexsort: ``np.unique(..., axis=1)`` is ten times slower."""
    if not len(f):
        return 0
    o = np.lexsort((f.end_ms, f.start_ms, f.key_codes))
    k, s, e = f.key_codes[o], f.start_ms[o], f.end_ms[o]
    return 1 + int(np.count_nonzero((k[1:] != k[:-1]) | (s[1:] != s[:-1]) | (e[1:] != e[:-1])))


def _dense_codes(pv: I64, declared: I64) -> tuple[I64, I64]:
    """Sorted distinct partition values (with the declared ones) and each row's code into them."""
    if (
        len(pv)
        and int(pv.min()) >= 0
        and int(pv.max()) < (1 << 20)
        and (len(declared) == 0 or int(declared.min()) >= 0)
    ):
        top = max(int(pv.max()), int(declared.max()) if len(declared) else 0) + 1
        present = np.bincount(pv, minlength=top) > 0
        if len(declared):
            present[declared] = True
        values = np.flatnonzero(present).astype(np.int64)
        lookup = np.cumsum(present) - 1
        return values, lookup[pv].astype(np.int64)
    values = np.unique(np.concatenate([pv, declared]))
    return values, np.searchsorted(values, pv).astype(np.int64)


def replay_flink(events: EventsTable, config: FlinkConfig) -> FlinkReplay:
    """Replay ``events`` through the Flink job described by ``config``.

    Processing order is the ``arrival_ms`` order (stable: ties keep file order), or the file order
    without arrival times. Event times are floored to milliseconds (Flink timestamps are ms). The
    ``partition`` column selects the split (one watermark generator each); the ``key`` column is the
    ``keyBy`` key. Rows with a null event time are left out (counted in ``rows_without_time``).

    Raises:
        EngineConfigError: periodic emission or idleness without an ``arrival_time`` column.
    """
    from monitor.watermark.config import EngineConfigError

    all_valid = bool(events.valid.all())
    valid_rows = np.arange(len(events), dtype=np.int64) if all_valid else np.flatnonzero(events.valid)
    arrival_all = events.arrival_ms
    needs_time = not config.per_event_watermarks or config.idleness_ms is not None
    if needs_time and arrival_all is None:
        raise EngineConfigError(
            "periodic watermarks (and idleness) run on processing time: the events need an arrival_time "
            "column, or use per-event watermarks"
        )
    arrival: I64 | None = None
    if arrival_all is not None:
        arr_valid = arrival_all if all_valid else arrival_all[valid_rows]
        if len(arr_valid) < 2 or bool(np.all(arr_valid[1:] >= arr_valid[:-1])):
            order, arrival = valid_rows, arr_valid  # already in arrival order (the usual file)
        else:
            o = np.argsort(arr_valid, kind="stable")
            order, arrival = valid_rows[o], arr_valid[o]
    else:
        order = valid_rows
    identity = all_valid and (order is valid_rows)
    ts = np.floor_divide(events.event_time_us if identity else events.event_time_us[order], 1000)
    declared = np.asarray(config.partitions, dtype=np.int64)
    if events.partition is not None:
        pv = events.partition if identity else events.partition[order]
        values, part = _dense_codes(pv, declared)
    else:
        values = np.unique(np.append(declared, 0))
        part = np.full(len(order), int(np.searchsorted(values, 0)), dtype=np.int64)
    tl = watermark_timeline(ts, part, len(values), arrival, config)
    if config.end_of_input:
        if arrival is not None:
            ticks = periodic_ticks(arrival, config) if needs_time else np.zeros(0, dtype=np.int64)
            end_t = int(max(ticks[-1] if len(ticks) else LONG_MIN, arrival[-1] if len(arrival) else LONG_MIN))
        else:
            end_t = -1
        tl = tl.with_end_of_input(len(order), end_t)
    keys = (events.key_codes if identity else events.key_codes[order]).astype(np.int64)
    outcome: WindowOutcome = run_windows(ts, keys, tl, config.window, config.allowed_lateness_ms)
    f = outcome.firings
    if arrival is not None and len(f):
        late_ix = (f.seq - 1) // 2
        t = np.where(f.late_firing, arrival[np.clip(late_ix, 0, max(len(arrival) - 1, 0))], f.time_ms)
        f = Firings(f.start_ms, f.end_ms, f.count, f.watermark_ms, f.late_firing, f.key_codes, f.seq, t)
    late_ev = outcome.late_events
    n_late = len(late_ev)
    final = int(tl.advance_ms[-1]) if len(tl.advance_ms) else None
    distinct = _distinct_windows(f)
    all_idle = 0
    for p in tl.idle_periods:
        if p.partition is None:
            end = p.until_ms if p.until_ms is not None else (config.run_until_ms or p.from_ms)
            all_idle += max(0, end - p.from_ms)
    summary = FlinkSummary(
        input_rows=len(events),
        rows_without_time=len(events) - len(valid_rows),
        late_records_dropped=0 if config.late_side_output else n_late,
        late_side_output_records=n_late if config.late_side_output else 0,
        late_elements=n_late,
        late_share=n_late / len(order) if len(order) else 0.0,
        firings=len(f),
        late_firings=int(f.late_firing.sum()) if len(f) else 0,
        windows_fired=distinct,
        open_windows=len(outcome.open_windows),
        watermark_advances=len(tl.advance_ms),
        final_watermark_ms=None if final is None or final == LONG_MIN else final,
        partitions=len(values),
        idle_periods=tl.idle_periods,
        all_partitions_idle_ms=all_idle,
        ticks=tl.ticks,
        delay_ms=config.delay_ms,
        firing_delay_ms=_firing_delay(f) if arrival is not None else None,
    )
    names = events.key_names
    return FlinkReplay(
        firings=f,
        late_rows=order[late_ev] if config.keep_late_rows else np.zeros(0, dtype=np.int64),
        late_row_watermarks_ms=tl.event_watermark_ms[late_ev]
        if config.keep_late_rows
        else np.zeros(0, dtype=np.int64),
        timeline=tl,
        order=order,
        open_windows=[(names[k], s, e, c) for k, s, e, c in outcome.open_windows],
        summary=summary,
        key_names=names,
        partition_values=tuple(int(v) for v in values.tolist()),
        state_windows=outcome.state_windows,
    )


__all__ += ["LONG_MAX", "LONG_MIN"]
