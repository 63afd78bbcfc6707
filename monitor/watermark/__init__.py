"""The reference watermark engine: what-if replays of event streams through Spark's watermark rules.

Contract (stable; the differential tests against real PySpark call exactly this)
================================================================================

Build the input::

    events = EventsTable.from_records([
        {"event_time": "1970-01-01T00:01:40Z", "batch": 0},   # ISO string, aware datetime,
        {"event_time": 101_000_000, "batch": 1},              # or int epoch MICROseconds
        {"event_time": None, "batch": 1},                     # null: filtered, yet in eventTime stats
    ])
    # or EventsTable.from_columns(event_time_us=..., batch=..., arrival_ms=..., source=..., key=...,
    #                             partition=...), or monitor.watermark.io.load_events(path, time_unit=...)

Describe the query (all durations integer **ms**)::

    config = WatermarkConfig(delay_ms=10_000, window=Tumbling(size_ms=5_000))          # append, min
    config = WatermarkConfig(delay_ms=10_000, window=Sliding(10_000, 5_000), output_mode="update")
    config = WatermarkConfig(delay_ms=10_000, window=Session(gap_ms=5_000))            # per key, append
    config = WatermarkConfig(delay_ms=10_000, dedup=Dedup("within_watermark"))         # on `key`

Replay::

    result = replay(events, config)          # -> Replay
    for b in result.batches:                 # BatchResult, in batch-id order (data and no-data)
        b.batch_id, b.kind, b.watermark_ms, b.input_rows, b.late_row_count, b.state_rows
        [(w.start_ms, w.end_ms, w.count, w.key) for w in b.emitted.to_list()]
        [(r.row_index, r.event_time_us, r.window_end_ms, r.lateness_ms) for r in b.late_rows]
        b.event_time          # EventTimeStats(min_ms, max_ms, avg_ms, count) as the progress reports
    result.summary            # Summary: dropped rows/share/by source, latencies, peak state...
    result.to_json()          # {"batches": [...], "summary": {...}} (what `tidegauge whatif` prints)

Mapping to a Spark run (``withWatermark("event_time", delay)`` → ``groupBy(window(...)).count()`` or
``dropDuplicates…``), one ``BatchResult`` per ``QueryProgressEvent``:

* ``batch_id`` = ``progress.batchId``; ``kind == "no-data"`` when ``numInputRows == 0``.
* ``watermark_ms`` = ``progress.eventTime.watermark`` (the watermark the batch **ran with**);
  ``next_watermark_ms`` = the next batch's.
* ``input_rows`` = ``numInputRows``; ``event_time`` = ``eventTime.min/max/avg`` (``None``: absent).
* ``state_rows`` / ``state_rows_removed`` / ``state_rows_updated`` =
  ``stateOperators[0].numRowsTotal / numRowsRemoved / numRowsUpdated``.
* ``dropped_by_watermark_metric`` = ``stateOperators[0].numRowsDroppedByWatermark``: for window
  aggregations Spark counts distinct late (window[, key]) groups of the batch (the filter runs after
  partial aggregation and the post-shuffle merge), so it can be smaller than ``late_row_count``, the
  raw late rows; sessions: distinct late (input partition, key, event time), ``None`` without a
  ``partition`` column (the map-side partial aggregates reach the late filter unmerged); dedup: raw
  late rows.
* ``passed_rows`` (dedup) = indices of the rows the sink receives, in order.
* ``emitted`` = the rows the sink receives in that batch (``foreachBatch``), windows as
  ``[start_ms, end_ms)`` with ``count``.

Batch membership: an explicit ``batch`` column (each value one data batch, ascending; the engine is
assumed idle between feeds, as with ``processAllAvailable()`` after each file, so no-data batches can
run in between), or ``arrival_ms`` + ``WatermarkConfig.trigger_ms`` (``ProcessingTimeTrigger``), or all
rows at once. ``WatermarkConfig.max_rows_per_batch`` caps a data batch. See :mod:`monitor.watermark.plan`.

Semantics (Spark 3.5–4.x; checked against the Spark source and a PySpark 4.3.0 run, see the tests):

* Per-input watermark (``WatermarkTracker``): after a batch, each input that had rows moves to
  ``max(previous, floorDiv(max_event_time_us, 1000) - delay_ms)``; an input that never had a row
  counts as 0; the global watermark is their ``min`` (or ``max``) and never moves back.
* A batch drops rows late against the **previous** batch's watermark and evicts/emits against its
  own (``PropagateWatermarkSimulator``, ``allowMultiple=true``): a row can be in time although its
  window closes in the same batch (it is then counted in the emitted window).
* Late means ``window.end <= watermark_ms * 1000`` in microseconds (each sliding window separately;
  for session windows the row's own ``[t, t + gap)``; for dedup the event time itself).
* Null / unparseable event times are filtered by ``window()`` (not counted as late) but still enter
  the batch's ``EventTimeStats`` as 0 ms (``eventTime.min`` = 1970, ``avg`` pulled down) and count
  as "had rows" for the input's watermark.
* A no-data batch runs (own batch id) when the watermark advanced past the last batch's and no new
  data is available; it emits/evicts only.

WatermarkRuntime: :class:`WatermarkRuntime` runs batch by batch (``run_data_batch``, ``needs_no_data_batch``,
``run_no_data_batch``) and ``snapshot()`` returns its state as a plain dict. Errors:
:class:`EngineConfigError` (a :class:`monitor.errors.ConfigError`) for invalid configs or a config
that does not fit the events.

Chained stateful operators (Spark >= 3.4, ``statefulOperator.allowMultiple``): agg -> agg (windows of
windows over ``window_time``), dedup -> agg and join -> agg (``first=WatermarkConfig(join=StreamJoin(...))``,
the aggregations over the joined rows' left time, after the join's lowered output watermark) replay with
:func:`monitor.watermark.chain.replay_chain` (``ChainConfig(first=WatermarkConfig(...),
then=(ThenWindow(Tumbling(...)),))``): per-operator input/output watermarks as
``PropagateWatermarkSimulator`` computes them, late rows and state per operator, operators listed in
chain order and in Spark's ``stateOperators`` order (last operator first).

What-if helpers built on the replay: ``replay(..., keep=mask)`` replays with the ``False`` rows removed
by a ``filter`` before ``withWatermark``; :func:`monitor.watermark.diagnose.diagnose` traces every late
row to the row that moved the watermark it was dropped against and replays the fixes;
:func:`monitor.watermark.sweep.recommend_delay` reads the smallest delay meeting a completeness target
off the lateness distribution and confirms it by replay. Event times are int64 microseconds within
``±2^62`` (:data:`~monitor.watermark.events.MAX_ABS_EVENT_TIME_US`, about year ±146,000).

Stream-stream joins (:mod:`monitor.watermark.join`, Spark's ``StreamingSymmetricHashJoinExec``)::

    config = WatermarkConfig(delay_ms=10_000, sources=("left", "right"),
                             source_delays_ms={"left": 10_000, "right": 30_000},
                             join=StreamJoin("left", "right", "left_outer", lower_ms=10_000, upper_ms=5_000))
    # l.key = r.key AND l.t >= r.t - 10 s AND l.t <= r.t + 5 s; rows' ``source`` says the side
    for b in replay(events, config).batches:
        b.join.pairs()              # [(left row index or None, right row index or None), ...]
        b.join.null_padded_left_rows, b.join.late_left_rows, b.join.state_rows_left,
        b.join.evicted_left_rows, b.join.left_state_watermark_ms   # None: that state never shrinks
        b.state_rows, b.state_rows_removed, b.dropped_by_watermark_metric   # the join's
                                    # stateOperators entry: numRowsTotal / numRowsRemoved /
                                    # numRowsDroppedByWatermark (late rows of both sides)

Late rows per side against the previous batch's watermark; state value watermarks from the range
condition (``wm - X - 1`` ms for ``>=``); outer NULL rows when an unmatched row is evicted; no no-data
batch for a join without a range condition (its state never shrinks). Checked against PySpark 4.3.0
(tests/differential/joins_*, FINDINGS.md J1-J5) and Spark's join suites
(tests/unit/test_engine_join_suites.py).

Restarts and run kinds (:mod:`monitor.watermark.restart`)::

    replay_runs(events, config, [QueryRun("live", 2), QueryRun("once", 1), QueryRun("available_now", 3)])
    replay_restarting(events, config, restart_after=[12, 40], kind="live")   # -> RestartReplay
    restart_impact(with_restarts, replay(events, config))                    # what the restarts changed

A restart (``WatermarkRuntime.restart``) keeps the global watermark, the late filter's previous-batch
watermark and the state, loses the per-input watermarks (not checkpointed) and runs no no-data batch
before the new query's first batch; ``Trigger.Once`` runs never run one, ``Trigger.AvailableNow`` runs
one at the end of each run. Checked against PySpark 4.3.0 (tests/differential/restarts.py, FINDINGS.md R1-R5).

Flink mode: :mod:`monitor.watermark.flink` (``replay_flink(events, FlinkConfig(...))``) replays the same
``EventsTable`` through Flink 2.3's rules (per-split bounded-out-of-orderness watermarks, idleness,
``WindowOperator`` with allowed lateness); it shares the window specs, the input loading and the window
assignment (:mod:`monitor.watermark.windowing`) with the Spark mode.
"""

from monitor.watermark.config import (
    Dedup,
    EngineConfigError,
    Session,
    Sliding,
    Tumbling,
    WatermarkConfig,
    WindowSpec,
)
from monitor.watermark.events import BadRow, EventsTable
from monitor.watermark.join import StreamJoin
from monitor.watermark.plan import BatchPlan, plan_batches
from monitor.watermark.replay import replay
from monitor.watermark.results import (
    BatchCountStats,
    BatchResult,
    EventTimeStats,
    JoinOutput,
    LatencyStats,
    LateRow,
    LateRows,
    Replay,
    Summary,
    Window,
    Windows,
)
from monitor.watermark.runtime import WatermarkRuntime

__all__ = [
    "BadRow",
    "BatchCountStats",
    "BatchPlan",
    "BatchResult",
    "Dedup",
    "EngineConfigError",
    "EventTimeStats",
    "EventsTable",
    "JoinOutput",
    "LateRow",
    "LateRows",
    "LatencyStats",
    "Replay",
    "Session",
    "Sliding",
    "StreamJoin",
    "Summary",
    "Tumbling",
    "WatermarkConfig",
    "WatermarkRuntime",
    "Window",
    "WindowSpec",
    "Windows",
    "plan_batches",
    "replay",
]
