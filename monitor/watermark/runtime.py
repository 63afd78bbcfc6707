"""The replay runtime: watermark tracking, micro-batch loop and no-data batches.

Semantics follow Spark Structured Streaming 3.5–4.x:

* ``EventTimeWatermarkExec`` adds ``floorDiv(event_time_us, 1000)`` of every row it sees to the batch's
  ``EventTimeStats`` (null event times read as 0).
* ``WatermarkTracker.updateWatermark`` (after a batch): for each input whose operator saw rows,
  ``wm_i = max(wm_i, stats.max - delay_i)`` (the first value is taken as is); the global candidate is
  ``min`` (or ``max``, ``MultipleWatermarkPolicy``) over inputs, an input without a value counting as
  0; the global watermark only moves forward.
* ``MicroBatchExecution.constructNextBatch``: the next batch runs with the tracker's current
  watermark; when no new data is available and the last execution's stateful operator reports
  ``shouldRunAnotherBatch`` (the new watermark is greater than the one it evicted with), a no-data
  batch runs (``spark.sql.streaming.noDataMicroBatches.enabled``). It takes the next batch id.
* ``PropagateWatermarkSimulator`` (``spark.sql.streaming.statefulOperator.allowMultiple=true``, the
  default): a batch filters late rows against the **previous** batch's watermark and evicts state
  against its own (``getInputWatermarkForLateEvents(batchId) = watermark(batchId - 1)``, 0 for batch
  0). With ``allowMultiple=false`` (``UseSingleWatermarkPropagator``) both are the batch's own, as in every
  Spark before 3.4 (SPARK-40925; ``WatermarkConfig.spark_version``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.versions import late_filter_uses_previous_batch as late_filter_previous
from monitor.watermark.config import WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.operators import Operator, OpResult, make_operator
from monitor.watermark.results import BatchResult, EventTimeStats

__all__ = ["WatermarkRuntime"]

I64 = npt.NDArray[np.int64]


class WatermarkRuntime:
    """Step-by-step replay of one query over one events table.

    Use :meth:`run_data_batch` with the row indices of each data batch, :meth:`needs_no_data_batch`
    and :meth:`run_no_data_batch` between them; :meth:`snapshot` returns the state as plain data.
    :func:`monitor.watermark.replay` drives it from a :class:`~monitor.watermark.plan.BatchPlan`.

    Args:
        events: the events (row indices refer to it).
        config: the query.
        late_filter_uses_previous_batch: ``True`` models Spark's default
            ``spark.sql.streaming.statefulOperator.allowMultiple=true``; ``False`` models ``false``.
    """

    def __init__(
        self,
        events: EventsTable,
        config: WatermarkConfig,
        *,
        late_filter_uses_previous_batch: bool = True,
        keep: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        if config.sources:
            events = events.with_source_names(config.sources)
        self.events = events
        self.config = config
        # allowMultiple=false, or a Spark before 3.4 (SPARK-40925): late rows against the batch's own watermark
        self._late_prev = late_filter_uses_previous_batch and late_filter_previous(config.spark_version)
        self._op: Operator = make_operator(events, config)
        self._names = events.source_names
        self._delays = np.array([config.delay_for(s) for s in self._names], dtype=np.int64)
        self._source_wm: list[int | None] = [None] * len(self._names)
        self._wm = 0  # global watermark the next batch runs with (WatermarkTracker.globalWatermarkMs)
        self._last_batch_wm: int | None = None  # watermark the last executed batch ran with
        self._batch_id = 0
        self._ms = np.where(events.valid, np.floor_divide(events.event_time_us, 1000), 0)
        self._max_seen_us: int | None = None
        self._source_max_us: list[int | None] = [None] * len(self._names)
        if keep is not None and len(keep) != len(events):
            raise ValueError(f"keep has {len(keep)} entries for {len(events)} events")
        self._keep = keep
        self._last_op: OpResult | None = None
        self._ran_since_start = False  # MicroBatchExecutionContext.previousContext is set

    @property
    def watermark_ms(self) -> int:
        """The global watermark the next batch will run with."""
        return self._wm

    @property
    def last_operator_result(self) -> OpResult | None:
        """The operator's detailed result for the last batch (used by :func:`replay` for latencies)."""
        return self._last_op

    @property
    def next_batch_id(self) -> int:
        """The id the next batch will take."""
        return self._batch_id

    @property
    def max_event_time_seen_us(self) -> int | None:
        """The largest valid event time read so far (``None`` before any)."""
        return self._max_seen_us

    @property
    def event_time_clock_us(self) -> int | None:
        """The query's event-time clock: each input's largest event time so far, combined as the
        watermark combines the inputs (``min``/``max`` policy), so that the global watermark is this
        clock minus the delay (equal delays). Inputs without rows yet are left out (``None``: none
        has had rows). For one input it is :attr:`max_event_time_seen_us`. Output latencies in event
        time are measured against it: against the fastest input's time they would count the skew
        between inputs as latency of the delay.
        """
        seen = [v for v in self._source_max_us if v is not None]
        if not seen:
            return None
        return min(seen) if self.config.policy == "min" else max(seen)

    def needs_no_data_batch(self) -> bool:
        """Whether Spark would run a no-data batch now if no new data were available."""
        return (
            self.config.no_data_batches
            and self._ran_since_start
            and self._last_batch_wm is not None
            and self._wm > self._last_batch_wm
            # a stream-stream join without a state watermark never runs one (shouldRunAnotherBatch)
            and bool(getattr(self._op, "evicts_state", True))
        )

    def restart(self) -> dict[str, int | None]:
        """Stop the query after the last batch and start it again on the same checkpoint.

        Follows Spark's ``MicroBatchExecution.populateStartOffsets`` (3.5-4.x): the global watermark
        comes back from the checkpoint (``max`` of the offset log's ``batchWatermarkMs`` and the commit
        log's ``nextBatchWatermarkMs``: :attr:`watermark_ms` is kept), the late-row filter of the next
        batch reads the offset log of the batch before it (kept), operator state is restored (kept),
        but a new ``WatermarkTracker`` starts with no per-input watermark: each input counts as 0
        (``min`` policy: the global watermark cannot move until every input has had rows again) and its
        next rows set its watermark as is, even below the one it had. Until a batch has run in the new
        query there is no previous execution, so no no-data batch runs (``previousContext`` is empty).

        Returns:
            the per-input watermarks (epoch ms, ``None``: never set) the restart forgot, by input name.
        """
        lost = {n: w for n, w in zip(self._names, self._source_wm, strict=True)}
        self._source_wm = [None] * len(self._names)
        self._ran_since_start = False
        return lost

    def run_data_batch(self, rows: I64, processing_time_ms: int | None = None) -> BatchResult:
        """Run one data batch over ``rows`` (indices into the events).

        Raises:
            ValueError: ``max_future_skew_ms`` is set but ``processing_time_ms`` is ``None``.
        """
        return self._run(np.asarray(rows, dtype=np.int64), processing_time_ms, "data")

    def run_no_data_batch(self, processing_time_ms: int | None = None) -> BatchResult:
        """Run a batch without input (it only evicts / emits against the new watermark)."""
        return self._run(np.zeros(0, dtype=np.int64), processing_time_ms, "no-data")

    def _run(self, rows: I64, processing_time_ms: int | None, kind: str) -> BatchResult:
        ev = self.events
        cfg = self.config
        input_rows = len(rows)
        null_rows = int((~ev.valid[rows]).sum()) if input_rows else 0
        future = 0
        if cfg.max_future_skew_ms is not None and input_rows:
            if processing_time_ms is None:
                raise ValueError("max_future_skew_ms needs the batch's processing_time_ms")
            # filter(event_time <= current_timestamp() + skew): a null event time fails it too
            limit_us = (processing_time_ms + cfg.max_future_skew_ms) * 1000
            ok = ev.valid[rows] & (ev.event_time_us[rows] <= limit_us)
            future = int((ev.valid[rows] & ~ok).sum())
            rows = rows[ok]
        removed = 0
        if self._keep is not None and len(rows):
            kept = self._keep[rows]
            removed = int((ev.valid[rows] & ~kept).sum())
            rows = rows[kept]
        batch_wm = self._wm
        assert self._last_batch_wm is None or batch_wm >= self._last_batch_wm, "the watermark went back"
        late_wm = batch_wm
        if self._late_prev:
            late_wm = 0 if self._last_batch_wm is None else self._last_batch_wm
        stats, by_source = self._stats(rows)
        res = self._op.process(rows, late_wm, batch_wm)
        self._update_watermark(rows)
        self._last_batch_wm = batch_wm
        self._last_op = res
        self._ran_since_start = True
        bid = self._batch_id
        self._batch_id += 1
        return BatchResult(
            batch_id=bid,
            kind="data" if kind == "data" else "no-data",
            watermark_ms=batch_wm,
            late_watermark_ms=late_wm,
            next_watermark_ms=self._wm,
            processing_time_ms=processing_time_ms,
            input_rows=input_rows,
            null_time_rows=null_rows,
            future_filtered_rows=future,
            late_rows=res.late,
            late_row_count=len(res.late_rows),
            emitted=res.emitted,
            output_rows=res.output_rows,
            duplicates_dropped=res.duplicates_dropped,
            state_rows=res.state_rows,
            state_rows_removed=res.state_rows_removed,
            state_rows_updated=res.state_rows_updated,
            dropped_by_watermark_metric=res.dropped_by_watermark_metric,
            event_time=stats,
            event_time_by_source=by_source,
            source_watermarks_ms={n: w for n, w in zip(self._names, self._source_wm, strict=True)},
            passed_rows=res.passed_rows,
            row_filter_removed_rows=removed,
            join=res.join,
        )

    def _stats(self, rows: I64) -> tuple[EventTimeStats | None, dict[str, EventTimeStats]]:
        if len(rows) == 0:
            return None, {}
        ms = self._ms[rows]
        valid_rows = rows[self.events.valid[rows]]
        if len(valid_rows):
            t = self.events.event_time_us[valid_rows]
            m = int(t.max())
            if self._max_seen_us is None or m > self._max_seen_us:
                self._max_seen_us = m
            if len(self._names) == 1:
                self._raise_source_max(0, m)
            else:
                vc = self.events.source_codes[valid_rows]
                for c in np.unique(vc).tolist():
                    self._raise_source_max(int(c), int(t[vc == c].max()))
        if len(self._names) == 1:
            s = self._one_stats(ms)
            return s, {self._names[0]: s}
        codes = self.events.source_codes[rows]
        by: dict[str, EventTimeStats] = {}
        first: EventTimeStats | None = None
        for c in range(len(self._names)):  # plan order: the first input with rows is reported
            sel = ms[codes == c]
            if len(sel):
                st = self._one_stats(sel)
                by[self._names[c]] = st
                if first is None:
                    first = st
        return first, by

    def _raise_source_max(self, code: int, us: int) -> None:
        prev = self._source_max_us[code]
        if prev is None or us > prev:
            self._source_max_us[code] = us

    @staticmethod
    def _one_stats(ms: I64) -> EventTimeStats:
        n = len(ms)
        total = sum(int(x) for x in np.add.reduceat(ms, np.arange(0, n, 1 << 16))) if n else 0
        # exact mean, truncated toward zero as Spark's avg.toLong
        avg = abs(total) // n * (1 if total >= 0 else -1)
        return EventTimeStats(min_ms=int(ms.min()), max_ms=int(ms.max()), avg_ms=avg, count=n)

    def _update_watermark(self, rows: I64) -> None:
        if len(rows):
            ms = self._ms[rows]
            if len(self._names) == 1:
                self._bump(0, int(ms.max()))
            else:
                codes = self.events.source_codes[rows]
                for c in np.unique(codes).tolist():
                    self._bump(int(c), int(ms[codes == c].max()))
        values = [0 if w is None else w for w in self._source_wm]
        chosen = min(values) if self.config.policy == "min" else max(values)
        if chosen > self._wm:
            self._wm = chosen

    def _bump(self, code: int, max_ms: int) -> None:
        cand = max_ms - int(self._delays[code])
        prev = self._source_wm[code]
        if prev is None or cand > prev:
            self._source_wm[code] = cand

    def snapshot(self) -> dict[str, Any]:
        """The runtime's state as a plain dict (JSON-serialisable)."""
        return {
            "next_batch_id": self._batch_id,
            "watermark_ms": self._wm,
            "last_batch_watermark_ms": self._last_batch_wm,
            "source_watermarks_ms": {n: w for n, w in zip(self._names, self._source_wm, strict=True)},
            "state_rows": self._op.state_rows(),
            "state": self._op.snapshot(),
        }
