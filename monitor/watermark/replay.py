"""``replay(events, config)``: plan the batches, run them, summarise."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.plan import BatchPlan, plan_batches
from monitor.watermark.results import BatchCountStats, BatchResult, LatencyStats, Replay, Summary
from monitor.watermark.runtime import WatermarkRuntime

__all__ = ["Drive", "drive_live", "replay"]

I64 = npt.NDArray[np.int64]
_NONE = np.zeros(0, dtype=np.int64)

#: Runs the plan's batches on the runtime and hands each result to the callback, in batch-id order.
Drive = Callable[[WatermarkRuntime, BatchPlan, Callable[[BatchResult], None]], None]


def drive_live(rt: WatermarkRuntime, plan: BatchPlan, record: Callable[[BatchResult], None]) -> None:
    """One query that runs from the first batch to the last: each data batch of ``plan``, then a
    no-data batch where the plan is idle after it and Spark would run one
    (``MicroBatchExecution.constructNextBatch``)."""
    for j in range(len(plan)):
        record(rt.run_data_batch(plan.rows(j), plan.times_ms[j]))
        if plan.idle_after[j] and rt.needs_no_data_batch():
            record(rt.run_no_data_batch(plan.idle_time_ms[j]))


def replay(
    events: EventsTable,
    config: WatermarkConfig,
    *,
    plan: BatchPlan | None = None,
    late_filter_uses_previous_batch: bool = True,
    keep: npt.NDArray[np.bool_] | None = None,
    drive: Drive = drive_live,
) -> Replay:
    """Replay ``events`` through the query described by ``config``, as Spark would run it.

    Args:
        events: the input rows.
        config: query, watermark and trigger.
        plan: a precomputed :func:`~monitor.watermark.plan.plan_batches` result (sweeps reuse one plan).
        late_filter_uses_previous_batch: Spark's default
            ``spark.sql.streaming.statefulOperator.allowMultiple=true`` (see :mod:`.runtime`).
        keep: optional bool per event: ``False`` rows are removed by a ``filter`` placed before
            ``withWatermark`` (they are read, count in ``input_rows``, and never reach the watermark);
            what-if uses it to replay "without these rows".
        drive: how the query runs the plan (default :func:`drive_live`, one query from start to end;
            :mod:`monitor.watermark.restart` passes one that stops and restarts it).

    Returns:
        :class:`~monitor.watermark.Replay` with one :class:`~monitor.watermark.BatchResult` per batch
        (data and no-data, in batch-id order) and a :class:`~monitor.watermark.Summary`.

    Raises:
        EngineConfigError: the config does not fit the events (e.g. a trigger without arrival times).
    """
    if plan is None:
        plan = plan_batches(events, config)
    rt = WatermarkRuntime(
        events, config, late_filter_uses_previous_batch=late_filter_uses_previous_batch, keep=keep
    )
    events = rt.events
    batches: list[BatchResult] = []
    fin_end: list[I64] = []
    fin_batch: list[int] = []
    max_seen: list[int] = []  # the event-time clock (us) after each batch, by batch index
    late_by_source = np.zeros(len(events.source_names), dtype=np.int64)
    dropped = 0

    def record(b: BatchResult) -> None:
        nonlocal dropped
        batches.append(b)
        op = rt.last_operator_result
        assert op is not None
        if len(op.emitted_end_us):
            fin_end.append(op.emitted_end_us)
            fin_batch.append(len(batches) - 1)
        seen = rt.event_time_clock_us
        max_seen.append(np.iinfo(np.int64).min if seen is None else seen)
        if len(op.late_rows):
            dropped += len(op.late_rows)
            late_by_source[:] += np.bincount(
                events.source_codes[op.late_rows], minlength=len(events.source_names)
            )

    drive(rt, plan, record)

    # latencies of final results
    proc: list[I64] = []
    evt: list[I64] = []
    nb: list[I64] = []
    # never moves back (as the watermark): an input's first rows may be behind the others'
    seen_arr = np.maximum.accumulate(np.asarray(max_seen, dtype=np.int64)) if max_seen else _NONE
    times_known = all(b.processing_time_ms is not None for b in batches) and bool(batches)
    for ends, bi in zip(fin_end, fin_batch, strict=True):
        b = batches[bi]
        if times_known:
            assert b.processing_time_ms is not None
            proc.append(b.processing_time_ms - ends // 1000)
        evt.append((seen_arr[bi] - ends) // 1000)
        first = np.searchsorted(seen_arr, ends, side="left")
        nb.append((bi - first).astype(np.int64))  # batch ids are the batch indices

    def cat(parts: list[I64]) -> I64:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    valid = events.valid
    input_rows = len(events)
    future = sum(b.future_filtered_rows for b in batches)
    null_rows = int((~valid).sum())
    removed = sum(b.row_filter_removed_rows for b in batches)
    with_time = input_rows - null_rows - future - removed
    summary = Summary(
        delay_ms=config.delay_ms,
        input_rows=input_rows,
        rows_with_time=with_time,
        null_time_rows=null_rows,
        bad_rows=len(events.bad_rows),
        dropped_rows=dropped,
        dropped_share=(dropped / with_time) if with_time > 0 else 0.0,
        dropped_by_source={
            events.source_names[i]: int(c) for i, c in enumerate(late_by_source.tolist()) if c
        },
        future_filtered_rows=future,
        duplicates_dropped=sum(b.duplicates_dropped for b in batches),
        windows_emitted=sum(b.output_rows if config.dedup is not None else len(b.emitted) for b in batches),
        latency=LatencyStats.of(cat(proc)) if times_known else None,
        event_time_latency=LatencyStats.of(cat(evt)),
        latency_batches=BatchCountStats.of(cat(nb)),
        peak_state_rows=max((b.state_rows for b in batches), default=0),
        final_state_rows=batches[-1].state_rows if batches else 0,
        batches=len(batches),
        no_data_batches=sum(1 for b in batches if b.kind == "no-data"),
        final_watermark_ms=rt.watermark_ms,
        row_filter_removed_rows=removed,
    )
    return Replay(batches=batches, summary=summary)
