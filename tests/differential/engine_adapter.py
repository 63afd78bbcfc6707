"""Replays a :class:`~tests.differential.scenarios.Scenario` through the reference watermark engine
(:mod:`monitor.watermark`) and reduces the result to :class:`~tests.differential.compare.BatchView`.

The events table mirrors what Spark reads: one row per input row, in the order of the step files
(``Scenario.step_rows``), with

- ``batch`` = the step (explicit micro-batches; the engine may run a no-data batch between two steps,
  as ``processAllAvailable()`` lets Spark do),
- ``source`` = the input name (every input declared up front in ``WatermarkConfig.sources``, so an input
  that never gets a row still holds the ``min`` policy at 0, as in Spark's ``WatermarkTracker``),
- ``partition`` = the input's index: in the Spark plan every input is a ``filter`` over the same file
  scan, one file per step, so each input is exactly one partition of the ``Union`` feeding the
  partial aggregate, which is what ``numRowsDroppedByWatermark`` counts after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from monitor.watermark import (
    Dedup,
    EventsTable,
    LateRows,
    Replay,
    Session,
    Sliding,
    Tumbling,
    WatermarkConfig,
    replay,
)
from tests.differential.compare import BatchView
from tests.differential.scenarios import DedupSpec, Scenario, WindowSpec

_DEDUP_MODES = {
    "with_event_time": "key_and_event_time",
    "without_event_time": "key",
    "within_watermark": "within_watermark",
}


def engine_config(scenario: Scenario) -> WatermarkConfig:
    """The :class:`WatermarkConfig` equivalent to the scenario's Spark query."""
    operation = scenario.operation
    window: Any = None
    dedup: Dedup | None = None
    group_by_key = False
    if isinstance(operation, WindowSpec):
        if operation.kind == "tumbling":
            window = Tumbling(size_ms=operation.size_ms)
        elif operation.kind == "sliding":
            assert operation.slide_ms is not None
            window = Sliding(size_ms=operation.size_ms, slide_ms=operation.slide_ms)
        else:
            window = Session(gap_ms=operation.size_ms)
        group_by_key = operation.by_key and operation.kind != "session"
    elif isinstance(operation, DedupSpec):
        dedup = Dedup(mode=_DEDUP_MODES[operation.kind])  # type: ignore[arg-type]
    return WatermarkConfig(
        delay_ms=scenario.inputs[0].delay_ms,
        window=window,
        dedup=dedup,
        group_by_key=group_by_key,
        output_mode=scenario.output_mode,
        policy=scenario.policy,
        sources=tuple(spec.name for spec in scenario.inputs),
        source_delays_ms={spec.name: spec.delay_ms for spec in scenario.inputs},
    )


def engine_events(scenario: Scenario, arrival_ms_of_step: Sequence[int] | None = None) -> EventsTable:
    """The scenario's rows as an engine :class:`EventsTable` (file order, step = batch);
    ``arrival_ms_of_step``: an ``arrival_ms`` per step (the rows of a step arrive together)."""
    index_of = {spec.name: i for i, spec in enumerate(scenario.inputs)}
    times: list[int | None] = []
    batch: list[int] = []
    source: list[str | None] = []
    key: list[str | None] = []
    partition: list[int] = []
    for step in range(scenario.step_count):
        for name, row in scenario.step_rows(step):
            times.append(row.event_time_us)
            batch.append(step)
            source.append(name)
            key.append(row.key)
            partition.append(index_of[name])
    arrival = None if arrival_ms_of_step is None else [arrival_ms_of_step[b] for b in batch]
    return EventsTable.from_columns(
        times, batch=batch, source=source, key=key, partition=partition, arrival_ms=arrival
    )


def engine_views(scenario: Scenario, arrival_ms_of_step: Sequence[int] | None = None) -> list[BatchView]:
    """Runs the engine on the scenario (with :func:`engine_events`'s ``arrival_ms_of_step``) and returns
    one :class:`BatchView` per batch it ran."""
    result = replay(engine_events(scenario, arrival_ms_of_step), engine_config(scenario))
    return replay_views(scenario, result)


def replay_views(scenario: Scenario, result: Replay) -> list[BatchView]:
    """One :class:`BatchView` per batch of an engine replay of ``scenario`` (its data batches read the
    steps in order)."""
    flat_rows = [
        (row.key, row.event_time_us)
        for step in range(scenario.step_count)
        for _, row in scenario.step_rows(step)
    ]
    operation = scenario.operation
    is_window = isinstance(operation, WindowSpec)
    fixed_windows = isinstance(operation, WindowSpec) and operation.kind != "session"
    by_key = isinstance(operation, WindowSpec) and operation.by_key
    views: list[BatchView] = []
    step = 0
    for batch in result.batches:
        data_step: int | None = None
        if batch.kind == "data":
            data_step = step
            step += 1
        emitted: tuple[tuple[Any, ...], ...] | None = None
        if not is_window:
            # Dedup: the rows passed, as Spark's sink sees them: (key, event_time_us or None).
            emitted = _sorted([flat_rows[int(i)] for i in batch.passed_rows])
        else:
            windows = batch.emitted
            rows: list[tuple[Any, ...]] = []
            for i in range(len(windows)):
                row_key = None if windows.key_codes is None else windows.key_names[int(windows.key_codes[i])]
                rows.append(
                    (int(windows.start_us[i]), int(windows.end_us[i]), row_key, int(windows.count[i]))
                )
            emitted = _sorted(rows)
        views.append(
            BatchView(
                batch_id=batch.batch_id,
                data_step=data_step,
                watermark_ms=batch.watermark_ms,
                emitted=emitted,
                output_rows=batch.output_rows,
                state_rows_total=batch.state_rows,
                state_rows_removed=batch.state_rows_removed,
                rows_dropped_by_watermark=batch.dropped_by_watermark_metric,
                late_rows=batch.late_row_count,
                late_groups=_late_groups(batch.late_rows, by_key) if fixed_windows else None,
                event_time_min_ms=None if batch.event_time is None else batch.event_time.min_ms,
                event_time_max_ms=None if batch.event_time is None else batch.event_time.max_ms,
                event_time_avg_ms=None if batch.event_time is None else batch.event_time.avg_ms,
            )
        )
    return views


def _late_groups(late: LateRows, by_key: bool) -> int:
    """Distinct groups among the engine's late (row, window) entries: (window start, window end),
    plus the key when the query groups by it."""
    return len({(row.window_start_ms, row.window_end_ms, row.key if by_key else None) for row in late})


def _sorted(rows: list[tuple[Any, ...]]) -> tuple[tuple[Any, ...], ...]:
    """Rows in the order ``spark_runner`` sorts Spark's (None before any value in each column)."""
    return tuple(sorted(rows, key=lambda r: tuple((v is not None, v) for v in r)))
