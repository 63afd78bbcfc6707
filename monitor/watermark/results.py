"""What a replay returns: one :class:`BatchResult` per micro-batch and a :class:`Summary`.

Large per-row outputs (late rows, emitted windows) are kept column-wise in NumPy arrays
(:class:`LateRows`, :class:`Windows`) and turned into small records only when iterated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "BatchCountStats",
    "BatchResult",
    "EventTimeStats",
    "JoinOutput",
    "LateRow",
    "LateRows",
    "LatencyStats",
    "Replay",
    "Summary",
    "Window",
    "Windows",
]

I64 = npt.NDArray[np.int64]
BatchKind = Literal["data", "no-data"]

_EMPTY = np.zeros(0, dtype=np.int64)


def _us_to_ms(us: int) -> int:
    return us // 1000


@dataclass(frozen=True, slots=True)
class LateRow:
    """One input row dropped by the watermark (for sliding windows: one (row, window) pair).

    Attributes:
        row_index: index of the row in the :class:`~monitor.watermark.EventsTable`.
        event_time_us: its event time (epoch microseconds).
        window_start_ms / window_end_ms: the window it was late for (``None`` for deduplication; for
            session windows the row's own session ``[t, t + gap)``).
        lateness_ms: how far the late-filter watermark was past the compared time
            (``watermark_ms - window_end_ms``; for dedup ``watermark_ms*1000 - event_time_us`` in ms,
            floored). ``0`` means exactly at the boundary (Spark's test is ``<=``).
        source: the input the row came from (``""`` when there is one unnamed input).
        key: the row's ``key`` (``""`` when absent).
    """

    row_index: int
    event_time_us: int
    window_start_ms: int | None
    window_end_ms: int | None
    lateness_ms: int
    source: str
    key: str


@dataclass(frozen=True, eq=False)
class LateRows:
    """Late rows of one batch, column-wise. Iterating yields :class:`LateRow`.

    ``row_index`` may repeat for sliding windows (one entry per late (row, window) pair).
    ``window_start_us`` / ``window_end_us`` are ``-1``-filled (and reported as ``None``) for dedup.
    """

    row_index: I64 = field(default_factory=lambda: _EMPTY)
    event_time_us: I64 = field(default_factory=lambda: _EMPTY)
    window_start_us: I64 | None = None
    window_end_us: I64 | None = None
    lateness_us: I64 = field(default_factory=lambda: _EMPTY)
    source_codes: npt.NDArray[np.int32] | None = None
    key_codes: npt.NDArray[np.int32] | None = None
    source_names: tuple[str, ...] = ("",)
    key_names: tuple[str, ...] = ("",)

    def __len__(self) -> int:
        return len(self.row_index)

    @property
    def distinct_rows(self) -> int:
        """Number of distinct input rows among the entries."""
        if len(self.row_index) == 0:
            return 0
        return len(np.unique(self.row_index))

    def __iter__(self) -> Iterator[LateRow]:
        for i in range(len(self.row_index)):
            ws = None if self.window_start_us is None else _us_to_ms(int(self.window_start_us[i]))
            we = None if self.window_end_us is None else _us_to_ms(int(self.window_end_us[i]))
            yield LateRow(
                row_index=int(self.row_index[i]),
                event_time_us=int(self.event_time_us[i]),
                window_start_ms=ws,
                window_end_ms=we,
                lateness_ms=int(self.lateness_us[i]) // 1000,
                source=self.source_names[int(self.source_codes[i])] if self.source_codes is not None else "",
                key=self.key_names[int(self.key_codes[i])] if self.key_codes is not None else "",
            )

    def to_list(self) -> list[LateRow]:
        """All entries as records."""
        return list(self)


@dataclass(frozen=True, slots=True)
class Window:
    """One emitted aggregate: window ``[start_ms, end_ms)`` (of ``key`` when grouped) and its row count."""

    start_ms: int
    end_ms: int
    count: int
    key: str | None = None


@dataclass(frozen=True, eq=False)
class Windows:
    """Windows emitted by one batch, column-wise (microseconds). Iterating yields :class:`Window`."""

    start_us: I64 = field(default_factory=lambda: _EMPTY)
    end_us: I64 = field(default_factory=lambda: _EMPTY)
    count: I64 = field(default_factory=lambda: _EMPTY)
    key_codes: npt.NDArray[np.int32] | None = None
    key_names: tuple[str, ...] = ("",)

    def __len__(self) -> int:
        return len(self.start_us)

    def __iter__(self) -> Iterator[Window]:
        for i in range(len(self.start_us)):
            yield Window(
                start_ms=_us_to_ms(int(self.start_us[i])),
                end_ms=_us_to_ms(int(self.end_us[i])),
                count=int(self.count[i]),
                key=None if self.key_codes is None else self.key_names[int(self.key_codes[i])],
            )

    def to_list(self) -> list[Window]:
        """All windows as records, sorted by (key, start)."""
        return sorted(self, key=lambda w: (w.key or "", w.start_ms, w.end_ms))


@dataclass(frozen=True, eq=False)
class JoinOutput:
    """What a stream-stream join (:mod:`monitor.watermark.join`) did in one batch.

    Attributes:
        left_rows / right_rows: the output rows as pairs of event indices, ``-1`` for the NULL side
            of an outer row (left semi: ``right_rows`` is all ``-1``, the left row is output).
        joined_rows: output rows that joined both sides (left semi: left rows output).
        null_padded_left_rows / null_padded_right_rows: outer rows output for unmatched left / right
            rows removed from state this batch.
        late_left_rows / late_right_rows: rows dropped as late on each side.
        state_rows_left / state_rows_right: rows in each side's state after the batch.
        evicted_left_rows / evicted_right_rows: state rows removed by each side's state watermark.
        semi_matched_removed_rows: left semi only: stored left rows output and removed from state
            because a right row matched them (PySpark 4.3.0 keeps no matched left row).
        left_state_watermark_ms / right_state_watermark_ms: the state value watermarks of the batch
            (rows with ``t <= wm`` are removed); ``None``: no range condition bounds that side, its
            state never shrinks.
    """

    left_rows: I64
    right_rows: I64
    joined_rows: int
    null_padded_left_rows: int
    null_padded_right_rows: int
    late_left_rows: int
    late_right_rows: int
    state_rows_left: int
    state_rows_right: int
    evicted_left_rows: int
    evicted_right_rows: int
    left_state_watermark_ms: int | None
    right_state_watermark_ms: int | None
    semi_matched_removed_rows: int = 0

    def pairs(self) -> list[tuple[int | None, int | None]]:
        """The output rows as ``(left index or None, right index or None)``, in output order."""
        return [
            (None if a < 0 else a, None if b < 0 else b)
            for a, b in zip(self.left_rows.tolist(), self.right_rows.tolist(), strict=True)
        ]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (counts and state watermarks; no row list)."""
        return {
            "joined_rows": self.joined_rows,
            "null_padded_left_rows": self.null_padded_left_rows,
            "null_padded_right_rows": self.null_padded_right_rows,
            "late_left_rows": self.late_left_rows,
            "late_right_rows": self.late_right_rows,
            "state_rows_left": self.state_rows_left,
            "state_rows_right": self.state_rows_right,
            "evicted_left_rows": self.evicted_left_rows,
            "evicted_right_rows": self.evicted_right_rows,
            "left_state_watermark_ms": self.left_state_watermark_ms,
            "right_state_watermark_ms": self.right_state_watermark_ms,
            "semi_matched_removed_rows": self.semi_matched_removed_rows,
        }


@dataclass(frozen=True, slots=True)
class EventTimeStats:
    """A batch's ``eventTime`` stats as Spark's progress reports them (``EventTimeStats``).

    Spark adds ``floorDiv(event_time_us, 1000)`` of **every** row reaching ``EventTimeWatermarkExec``,
    including rows whose event time is null, which read as ``0`` (1970-01-01): so nulls pull
    ``min_ms`` to 0 and ``avg_ms`` down, and count in ``count``. ``avg_ms`` is truncated to an integer
    as the progress does (``avg.toLong``); Spark's running mean is a double merged across partitions,
    so it may differ from this exact mean by 1 ms.
    """

    min_ms: int
    max_ms: int
    avg_ms: int
    count: int


@dataclass(frozen=True, eq=False)
class BatchResult:
    """One micro-batch of the replay.

    Attributes:
        batch_id: Spark ``batchId`` (no-data batches take ids too).
        kind: ``"data"`` or ``"no-data"`` (a batch Spark ran on its own to advance the watermark).
        watermark_ms: the watermark the batch ran with (progress ``eventTime.watermark``); state is
            evicted / windows are closed against it.
        late_watermark_ms: the watermark rows were filtered against: the previous batch's watermark
            (Spark 3.5+ ``PropagateWatermarkSimulator.getInputWatermarkForLateEvents``; 0 for batch 0).
        next_watermark_ms: the global watermark after this batch (what the next batch runs with).
        processing_time_ms: when the batch ran (trigger time, or the latest arrival of its rows),
            ``None`` when unknown.
        input_rows: rows read (``numInputRows``), including null-time and future-filtered rows.
        null_time_rows: rows whose event time is null/unparseable (filtered by the window, not counted
            as dropped; for dedup they pass through).
        future_filtered_rows: rows removed by the ``max_future_skew_ms`` filter.
        late_rows: the rows dropped as late (column-wise; see :class:`LateRows`).
        late_row_count: distinct input rows late in this batch (for sliding windows: late for at
            least one of their windows).
        emitted: windows output by this batch (append: closed windows; update: changed windows).
        output_rows: rows the stateful operator output (windows for aggregations, passing rows for
            dedup).
        duplicates_dropped: rows dropped as duplicates (dedup only).
        state_rows: rows in state after the batch (``numRowsTotal``).
        state_rows_removed: state rows removed in the batch (``numRowsRemoved``).
        state_rows_updated: state rows written in the batch (``numRowsUpdated``).
        dropped_by_watermark_metric: reproduction of ``numRowsDroppedByWatermark``. For window
            aggregations Spark filters late rows after partial aggregation, the shuffle and the
            ``PartialMerge`` aggregate, so it counts distinct late (window[, key]) groups of the batch,
            which can be fewer than ``late_row_count``. Session windows filter the map-side partial
            aggregates before any merge: distinct late (input partition, key, event time), ``None``
            when the events have no ``partition`` column. Dedup: raw late rows.
        event_time: the batch's reported ``eventTime`` stats (first input, in plan order, with rows),
            ``None`` for a batch without rows.
        event_time_by_source: the same stats for every input that had rows.
        source_watermarks_ms: each input's operator watermark after the batch (``None``: no row yet).
        passed_rows: dedup only: indices (into the events) of the rows output, in output order.
        row_filter_removed_rows: rows removed by the replay's row filter (``replay(keep=...)``,
            a ``filter`` before ``withWatermark``); like future-filtered rows they count in
            ``input_rows`` and never reach the watermark.
        join: stream-stream joins only: the join's own per-side figures (:class:`JoinOutput`).
    """

    batch_id: int
    kind: BatchKind
    watermark_ms: int
    late_watermark_ms: int
    next_watermark_ms: int
    processing_time_ms: int | None
    input_rows: int
    null_time_rows: int
    future_filtered_rows: int
    late_rows: LateRows
    late_row_count: int
    emitted: Windows
    output_rows: int
    duplicates_dropped: int
    state_rows: int
    state_rows_removed: int
    state_rows_updated: int
    dropped_by_watermark_metric: int | None
    event_time: EventTimeStats | None
    event_time_by_source: dict[str, EventTimeStats]
    source_watermarks_ms: dict[str, int | None]
    passed_rows: I64 = field(default_factory=lambda: _EMPTY)
    row_filter_removed_rows: int = 0
    join: JoinOutput | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the shape ``tidegauge whatif --format json`` prints per batch)."""
        extra: dict[str, Any] = {} if self.join is None else {"join": self.join.to_json()}
        return extra | {
            "batch_id": self.batch_id,
            "kind": self.kind,
            "watermark_ms": self.watermark_ms,
            # Spark's initial 0 (progress: 1970-01-01T00:00:00.000Z) before any watermark, as scan flags it
            "watermark_is_placeholder": self.watermark_ms == 0,
            "late_watermark_ms": self.late_watermark_ms,
            "next_watermark_ms": self.next_watermark_ms,
            "processing_time_ms": self.processing_time_ms,
            "input_rows": self.input_rows,
            "null_time_rows": self.null_time_rows,
            "future_filtered_rows": self.future_filtered_rows,
            "late_rows": self.late_row_count,
            "emitted": [
                {"start_ms": w.start_ms, "end_ms": w.end_ms, "count": w.count}
                | ({"key": w.key} if w.key is not None else {})
                for w in self.emitted.to_list()
            ],
            "output_rows": self.output_rows,
            "duplicates_dropped": self.duplicates_dropped,
            "state_rows": self.state_rows,
            "state_rows_removed": self.state_rows_removed,
            "state_rows_updated": self.state_rows_updated,
            "dropped_by_watermark_metric": self.dropped_by_watermark_metric,
            "event_time": None
            if self.event_time is None
            else {
                "min_ms": self.event_time.min_ms,
                "max_ms": self.event_time.max_ms,
                "avg_ms": self.event_time.avg_ms,
                "count": self.event_time.count,
            },
        }


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Distribution of a latency over emitted windows, in ms (``None`` fields: nothing emitted)."""

    count: int
    p50_ms: int | None
    p95_ms: int | None
    max_ms: int | None

    @classmethod
    def of(cls, values: npt.NDArray[np.int64]) -> LatencyStats:
        """Nearest-rank percentiles of ``values`` (ms)."""
        if len(values) == 0:
            return cls(0, None, None, None)
        s = np.sort(values)
        n = len(s)

        def rank(p: float) -> int:
            return int(s[max(0, int(np.ceil(p * n)) - 1)])

        return cls(n, rank(0.50), rank(0.95), int(s[-1]))

    def to_json(self) -> dict[str, int | None]:
        """JSON-ready dict."""
        return {"count": self.count, "p50_ms": self.p50_ms, "p95_ms": self.p95_ms, "max_ms": self.max_ms}


@dataclass(frozen=True, slots=True)
class BatchCountStats:
    """Distribution of a number of micro-batches over emitted windows (``None`` fields: nothing emitted)."""

    count: int
    p50_batches: int | None
    p95_batches: int | None
    max_batches: int | None

    @classmethod
    def of(cls, values: npt.NDArray[np.int64]) -> BatchCountStats:
        """Nearest-rank percentiles of ``values`` (batch counts)."""
        s = LatencyStats.of(values)
        return cls(s.count, s.p50_ms, s.p95_ms, s.max_ms)

    def to_json(self) -> dict[str, int | None]:
        """JSON-ready dict."""
        return {
            "count": self.count,
            "p50_batches": self.p50_batches,
            "p95_batches": self.p95_batches,
            "max_batches": self.max_batches,
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """Totals over a replay.

    Attributes:
        delay_ms: the (default) watermark delay replayed.
        input_rows: all rows.
        rows_with_time: rows with a valid event time that reached the watermark operator (not
            future-filtered nor removed by a row filter); the denominator of ``dropped_share``.
        null_time_rows / bad_rows: null/unparseable event times (``bad_rows`` ⊆ null: unparseable).
        dropped_rows: distinct rows dropped as late (for sliding windows: late for at least one window).
        dropped_share: ``dropped_rows / rows_with_time`` (0.0 when there are none).
        dropped_by_source: dropped rows per input name.
        future_filtered_rows: rows removed by the future-skew filter.
        duplicates_dropped: dedup only.
        windows_emitted: emitted window results (append: final windows; update: updates); for a dedup,
            the rows it passed on (the first of each key).
        latency: processing-time latency of final results (emitting batch's processing time minus
            window end), when processing times are known; else ``None``. In update mode a window's
            result is final in the batch that evicts it (its last update was already sent).
        event_time_latency: how far the query's event-time clock had moved past a window's end when it
            was emitted (the event-time cost of the delay; always available for windows). The clock is
            each input's largest event time combined by the watermark policy
            (:attr:`~monitor.watermark.WatermarkRuntime.event_time_clock_us`): with one input, the
            stream's max event time; with several under ``min``, the slowest input's, so the skew
            between inputs is not counted as latency of the delay.
        latency_batches: batches between the batch in which that clock first passed a window's end
            and the batch that emitted it.
        peak_state_rows: max ``state_rows`` over batches.
        final_state_rows: state rows after the last batch.
        batches / no_data_batches: counts.
        final_watermark_ms: global watermark after the last batch.
        row_filter_removed_rows: rows removed by ``replay(keep=...)``.
    """

    delay_ms: int
    input_rows: int
    rows_with_time: int
    null_time_rows: int
    bad_rows: int
    dropped_rows: int
    dropped_share: float
    dropped_by_source: dict[str, int]
    future_filtered_rows: int
    duplicates_dropped: int
    windows_emitted: int
    latency: LatencyStats | None
    event_time_latency: LatencyStats
    latency_batches: BatchCountStats
    peak_state_rows: int
    final_state_rows: int
    batches: int
    no_data_batches: int
    final_watermark_ms: int
    row_filter_removed_rows: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the ``summary`` of ``tidegauge whatif --format json``)."""
        return {
            "delay_ms": self.delay_ms,
            "input_rows": self.input_rows,
            "rows_with_time": self.rows_with_time,
            "null_time_rows": self.null_time_rows,
            "bad_rows": self.bad_rows,
            "dropped_rows": self.dropped_rows,
            "dropped_share": self.dropped_share,
            "dropped_by_source": dict(self.dropped_by_source),
            "future_filtered_rows": self.future_filtered_rows,
            "duplicates_dropped": self.duplicates_dropped,
            "windows_emitted": self.windows_emitted,
            "latency": None if self.latency is None else self.latency.to_json(),
            "event_time_latency": self.event_time_latency.to_json(),
            "latency_batches": self.latency_batches.to_json(),
            "peak_state_rows": self.peak_state_rows,
            "final_state_rows": self.final_state_rows,
            "batches": self.batches,
            "no_data_batches": self.no_data_batches,
            "final_watermark_ms": self.final_watermark_ms,
            "row_filter_removed_rows": self.row_filter_removed_rows,
        }


@dataclass(frozen=True, eq=False)
class Replay:
    """The result of :func:`monitor.watermark.replay`: the batches in order and their summary."""

    batches: list[BatchResult]
    summary: Summary

    def to_json(self) -> dict[str, Any]:
        """``{"batches": [...], "summary": {...}}``."""
        return {"batches": [b.to_json() for b in self.batches], "summary": self.summary.to_json()}
