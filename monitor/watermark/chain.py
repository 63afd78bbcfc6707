"""Chained stateful operators: agg -> agg (windows of windows), dedup -> agg and join -> agg, as Spark >= 3.4
runs them.

Spark (``spark.sql.streaming.statefulOperator.allowMultiple=true``, the default since 3.4) lets a
streaming query stack stateful operators in append mode, for example::

    df.withWatermark("event_time", "10 seconds")
      .groupBy(window("event_time", "5 seconds")).agg(count("*").alias("count"))      # operator 1
      .groupBy(window(window_time("window"), "10 seconds"))                             # operator 2
      .agg(count("*").alias("count"), sum("count").alias("sum"))

    df.withWatermark("event_time", "10 seconds")
      .dropDuplicates(["key", "event_time"])                                            # operator 1
      .groupBy(window("event_time", "5 seconds")).count()                               # operator 2

    l.join(r, "lkey = rkey AND lt >= rt - INTERVAL 1 HOUR AND lt <= rt + INTERVAL 1 HOUR")  # operator 1
      .groupBy(window("lt", "10 minutes")).count()                                      # operator 2

Semantics (``WatermarkPropagator.scala``, ``MultiStatefulOperatorsSuite``, checked against a
PySpark 4.3.0 run, see ``tests/differential/FINDINGS.md`` C1-C8 and, for join -> agg, JA1-JA6):

* ``PropagateWatermarkSimulator`` walks the physical plan bottom-up each batch: an
  ``EventTimeWatermarkExec`` outputs the global watermark of the batch (``WatermarkTracker``, over
  every input, ``min``/``max`` policy); a stateful operator's **input** watermark is the minimum of
  its children's output watermarks, and its **output** watermark is
  ``produceOutputWatermark(input)``, which for aggregations and deduplications is the input itself
  (only stream-stream joins lower it). So in a chain of aggregations and deduplications every
  operator's input watermark equals the global watermark of the batch.
* A stream-stream join as operator 1 (``StreamingSymmetricHashJoinExec.produceOutputWatermark``)
  outputs the minimum of its input watermark and its defined state value watermarks (left
  ``wm - lower - 1 ms``, right ``wm - upper - 1 ms``, :class:`~monitor.watermark.join.StreamJoin`;
  a left semi join's right one excluded), :func:`join_output_watermark_ms`. The operators after it
  filter late rows against the join's output watermark of the previous batch and evict against that
  of the current one (an input watermark below 0 counts as 0,
  ``PropagateWatermarkSimulator.getInputWatermark``). They read the joined rows' left event time and
  left key (``window(lt)``; a row without a left side has no window and is filtered, not late).
  Spark optimizes the join under ``window(lt)`` (:func:`join_as_optimized`): a right outer join runs
  as an inner join and a full outer join as a left outer join (``EliminateOuterJoin``), and a key-only
  join's right event time is pruned, so right rows are never late there.
* Each operator filters late rows against its input watermark of the **previous** batch
  (``getInputWatermarkForLateEvents(batchId) = inputWatermark(batchId - 1)``, 0 for batch 0) and
  evicts against that of the current batch. With ``allowMultiple=false``
  (``UseSingleWatermarkPropagator``) both are the current batch's global watermark.
* ``window_time(window)`` is ``window.end - 1`` microsecond: operator 2 places each window operator 1
  emits (in append mode: when it closes, ``end <= watermark``) at that time. Emitted in batch ``N``
  means ``end`` in ``(wm[N-1], wm[N]]``, so with ``allowMultiple=true`` the row is never late for
  operator 2; it lands in a window that closes in the same batch when that window's end is
  ``<= wm[N]`` too. Rows are late only at the first operator.
* Late rows are counted per operator (``stateOperators[i].numRowsDroppedByWatermark``: distinct late
  groups for aggregations, raw rows for deduplication); the progress lists the operators **from the
  sink down** (``executedPlan.collect`` is top-down): ``stateOperators[0]`` is the last operator.
* A no-data batch runs when the global watermark moved (any operator's
  ``shouldRunAnotherBatch``: each sees the same new input watermark).

Contract::

    config = ChainConfig(
        first=WatermarkConfig(delay_ms=0, window=Tumbling(5_000)),       # inputs, watermark, operator 1
        then=(ThenWindow(Tumbling(10_000)), ThenWindow(Tumbling(20_000))),
    )
    result = replay_chain(events, config)        # -> ChainReplay
    for b in result.batches:                     # one per batch, data and no-data
        b.batch                                  # operator 1's BatchResult (watermark, input rows...)
        [(op.name, op.state_rows, op.dropped_by_watermark_metric) for op in b.operators]  # chain order
        b.state_operators                        # the same, in Spark's progress order (sink first)
        [(w.start_ms, w.end_ms, w.count) for w in b.emitted], b.emitted_sums            # last operator

Errors: :class:`~monitor.watermark.config.EngineConfigError` for a chain Spark would reject or the
engine does not model (the message says which).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.watermark.config import EngineConfigError, Sliding, Tumbling, WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.join import JoinType, StreamJoin
from monitor.watermark.operators import Operator, OpResult, make_operator
from monitor.watermark.plan import BatchPlan, plan_batches
from monitor.watermark.results import BatchResult, Windows
from monitor.watermark.runtime import WatermarkRuntime
from monitor.watermark.windowing import assign_windows

__all__ = [
    "ChainBatch",
    "ChainConfig",
    "ChainReplay",
    "OperatorBatch",
    "ThenWindow",
    "join_as_optimized",
    "join_output_watermark_ms",
    "replay_chain",
]

I64 = npt.NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class ThenWindow:
    """A window aggregation over the previous operator's output, in append mode.

    After a stream-stream join: ``groupBy(window(lt, ...)[, lkey])`` over the joined rows (the left
    side's event time and key; ``sum`` is the joined row count).

    After a window aggregation: ``groupBy(window(window_time("window"), size[, slide])[, key])
    .agg(count("*"), sum("count"))`` (a window's time is its ``end - 1 us``). After a deduplication:
    ``groupBy(window("event_time", ...)[, key]).count()`` over the rows it passed (``sum`` is then the
    row count too).

    Attributes:
        window: :class:`Tumbling` or :class:`Sliding` (ms).
        group_by_key: also group by ``key``; needs the previous operator to carry ``key`` (a
            deduplication, or a window aggregation grouped by key).
    """

    window: Tumbling | Sliding
    group_by_key: bool = False


@dataclass(frozen=True, slots=True)
class ChainConfig:
    """A chain of stateful operators.

    Attributes:
        first: the inputs, their watermarks (delays, policy, sources, trigger) and operator 1: a
            tumbling/sliding window aggregation in ``output_mode="append"``, a deduplication or a
            stream-stream join (``first.join``).
        then: the window aggregations after it, in order (at least one).
        allow_multiple: ``spark.sql.streaming.statefulOperator.allowMultiple`` (default ``True``,
            ``PropagateWatermarkSimulator``); ``False`` models ``UseSingleWatermarkPropagator``.

    Raises:
        EngineConfigError: an empty ``then``, a session window or update mode in ``first`` (Spark
            rejects update mode with several aggregations), or ``group_by_key`` after an operator
            that does not carry the key.
    """

    first: WatermarkConfig
    then: tuple[ThenWindow, ...]
    allow_multiple: bool = True

    def __post_init__(self) -> None:
        if not self.then:
            raise EngineConfigError("a chain needs at least one operator in 'then'")
        f = self.first
        if f.window is not None and not isinstance(f.window, Tumbling | Sliding):
            raise EngineConfigError("chain: operator 1 must be a tumbling/sliding window or a dedup")
        if f.window is not None and f.output_mode != "append":
            raise EngineConfigError(
                "chain: operator 1 must use output_mode='append' (Spark rejects several aggregations "
                "in update mode)"
            )
        carries_key = f.dedup is not None or f.join is not None or f.group_by_key
        for i, stage in enumerate(self.then, start=2):
            if not isinstance(stage.window, Tumbling | Sliding):
                raise EngineConfigError(f"chain: operator {i} must be a tumbling or sliding window")
            if stage.group_by_key and not carries_key:
                raise EngineConfigError(
                    f"chain: operator {i} groups by key but operator {i - 1} does not output a key"
                )
            carries_key = stage.group_by_key


@dataclass(frozen=True, slots=True)
class OperatorBatch:
    """What one operator did in one batch (Spark's ``StateOperatorProgress`` plus the watermarks).

    Attributes:
        name: ``"window_aggregation"``, ``"deduplication"`` or ``"join"``.
        spark_name: Spark's ``operatorName`` (``stateStoreSave``, ``dedupe``, ``dedupeWithinWatermark``,
            ``symmetricHashJoin``).
        late_watermark_ms: input watermark rows were filtered against (``eventTimeWatermarkForLateEvents``).
        eviction_watermark_ms: input watermark state was evicted against (``eventTimeWatermarkForEviction``).
        output_watermark_ms: the watermark it passes on (``produceOutputWatermark``: equal to the input
            for aggregations and deduplications; a join's is lowered by its range condition).
        input_rows: rows reaching the operator (the previous operator's output rows; after a join,
            the joined rows that have a left side).
        late_row_count: distinct input rows dropped as late.
        dropped_by_watermark_metric: ``numRowsDroppedByWatermark`` (aggregations: distinct late
            groups; dedup: raw rows).
        state_rows / state_rows_removed / state_rows_updated: ``numRowsTotal`` / ``numRowsRemoved`` /
            ``numRowsUpdated``.
        output_rows: rows it emitted downstream.
    """

    name: str
    spark_name: str
    late_watermark_ms: int
    eviction_watermark_ms: int
    output_watermark_ms: int
    input_rows: int
    late_row_count: int
    dropped_by_watermark_metric: int | None
    state_rows: int
    state_rows_removed: int
    state_rows_updated: int
    output_rows: int


@dataclass(frozen=True, eq=False)
class ChainBatch:
    """One micro-batch of a chain.

    Attributes:
        batch: operator 1's :class:`BatchResult` (batch id, kind, global watermark, input rows, event
            time stats; its state/late fields are operator 1's).
        operators: one :class:`OperatorBatch` per operator, in chain order (source side first).
        emitted: windows the last operator output (the rows the sink receives), ``count`` per window.
        emitted_sums: how many operator-1 input rows each emitted window stands for (aligned with
            ``emitted``): ``sum("count")`` at operator 2, ``sum("sum")`` at later ones (the
            ``MultiStatefulOperatorsSuite`` queries). After a deduplication: rows passed; after a
            join: joined rows.
    """

    batch: BatchResult
    operators: tuple[OperatorBatch, ...]
    emitted: Windows
    emitted_sums: I64 = field(default_factory=lambda: _EMPTY)

    @property
    def state_operators(self) -> tuple[OperatorBatch, ...]:
        """The operators in the order of Spark's ``progress.stateOperators`` (the last operator first)."""
        return tuple(reversed(self.operators))


@dataclass(frozen=True, eq=False)
class ChainReplay:
    """All batches of a chain replay, in batch-id order, and the late rows per operator."""

    batches: list[ChainBatch]

    @property
    def dropped_rows_by_operator(self) -> tuple[int, ...]:
        """Distinct late input rows per operator over the run, in chain order."""
        if not self.batches:
            return ()
        n = len(self.batches[0].operators)
        return tuple(sum(b.operators[i].late_row_count for b in self.batches) for i in range(n))


def _window_universe(parent: EventsTable, spec: Tumbling | Sliding, by_key: bool) -> EventsTable:
    """Every (window[, key]) group a window aggregation over ``parent`` can emit, as the next operator's
    input rows: event time ``window_time = end - 1 us``, the key when grouped by it. Sorted by
    (key, start); row ``i`` is group ``i``."""
    rows = np.flatnonzero(parent.valid).astype(np.int64)
    starts, r = assign_windows(
        parent.event_time_us[rows], rows, spec.size_ms * 1000, spec.slide_ms * 1000, spec.offset_ms * 1000
    )
    keys = parent.key_codes[r].astype(np.int64) if by_key else np.zeros(len(r), dtype=np.int64)
    pairs = np.unique(np.stack([keys, starts], axis=1), axis=0) if len(r) else np.zeros((0, 2), np.int64)
    return EventsTable(
        event_time_us=(pairs[:, 1] + spec.size_ms * 1000 - 1).astype(np.int64),
        valid=np.ones(len(pairs), dtype=np.bool_),
        source_codes=np.zeros(len(pairs), dtype=np.int32),
        source_names=("",),
        key_codes=pairs[:, 0].astype(np.int32),
        key_names=parent.key_names if by_key else ("",),
    )


class _Stage:
    """One operator after the first: a window aggregation over a fixed table of its possible input
    rows (the groups the previous operator can emit), fed the rows emitted in each batch."""

    def __init__(self, rows_table: EventsTable, first: WatermarkConfig, stage: ThenWindow) -> None:
        self.table = rows_table
        self.spec = stage.window
        self.by_key = stage.group_by_key
        self.op: Operator = make_operator(
            rows_table,
            WatermarkConfig(
                delay_ms=first.delay_ms,
                window=stage.window,
                group_by_key=stage.group_by_key,
                output_mode="append",
                keep_late_rows=first.keep_late_rows,
            ),
        )
        self._sums: dict[tuple[int, int], int] = {}  # (key code, window start us) -> summed weights

    def process(self, rows: I64, weights: I64, late_wm_ms: int, evict_wm_ms: int) -> tuple[OpResult, I64]:
        """Run the batch; ``weights``: rows each input row stands for. Returns the operator's result and
        the summed weights per emitted window."""
        res = self.op.process(rows, late_wm_ms, evict_wm_ms)
        ok = self.table.valid[rows]
        starts, r = assign_windows(
            self.table.event_time_us[rows[ok]],
            np.arange(len(rows), dtype=np.int64)[ok],
            self.spec.size_ms * 1000,
            self.spec.slide_ms * 1000,
            self.spec.offset_ms * 1000,
        )
        in_time = starts + self.spec.size_ms * 1000 > late_wm_ms * 1000  # the operator's late rule
        keys = self.table.key_codes[rows[r]] if self.by_key else np.zeros(len(r), dtype=np.int32)
        for k, s, w in zip(
            keys[in_time].tolist(), starts[in_time].tolist(), weights[r[in_time]].tolist(), strict=True
        ):
            self._sums[(k, s)] = self._sums.get((k, s), 0) + w
        em = res.emitted
        ek = em.key_codes.tolist() if em.key_codes is not None else [0] * len(em)
        sums = np.asarray(
            [self._sums.pop((k, s)) for k, s in zip(ek, em.start_us.tolist(), strict=True)], dtype=np.int64
        )
        return res, sums


def _lookup(table: EventsTable, emitted: Windows, size_ms: int) -> I64:
    """Row indices in a :func:`_window_universe` table (sorted by (key, time)) of the emitted windows."""
    if len(emitted) == 0:
        return _EMPTY
    keys = (
        emitted.key_codes.astype(np.int64)
        if emitted.key_codes is not None
        else np.zeros(len(emitted), np.int64)
    )
    times = emitted.start_us + size_ms * 1000 - 1
    # (key, time) -> one sortable int64: key * (number of distinct times) + rank of the time
    distinct_times = np.unique(table.event_time_us)
    n = len(distinct_times)
    table_code = table.key_codes.astype(np.int64) * n + np.searchsorted(distinct_times, table.event_time_us)
    rank = np.minimum(np.searchsorted(distinct_times, times), n - 1)
    code = keys * n + rank
    idx: I64 = np.minimum(np.searchsorted(table_code, code), len(table_code) - 1).astype(np.int64)
    found = (table.key_codes[idx] == keys) & (table.event_time_us[idx] == times)
    assert bool(found.all()), "an emitted window outside the precomputed groups"
    return idx


def join_output_watermark_ms(join: StreamJoin, input_watermark_ms: int) -> int:
    """The input watermark of the operator after a stream-stream join, in ms.

    ``StreamingSymmetricHashJoinExec.produceOutputWatermark``: the minimum of the input watermark and
    the left and right state value watermarks that the range condition defines
    (:meth:`StreamJoin.left_state_watermark_ms`, :meth:`StreamJoin.right_state_watermark_ms`); for a
    left semi join the right state watermark plays no part (observed with PySpark 4.3.0,
    tests/differential/FINDINGS.md JA3: its output holds left rows only).
    ``PropagateWatermarkSimulator.getInputWatermark`` clamps the result at 0 (so a batch whose global
    watermark is 0 gives every operator 0).
    """
    bounds = [
        w
        for w in (
            join.left_state_watermark_ms(input_watermark_ms),
            None if join.join_type == "left_semi" else join.right_state_watermark_ms(input_watermark_ms),
            input_watermark_ms,
        )
        if w is not None
    ]
    return max(0, min(bounds))


#: ``EliminateOuterJoin``: ``window(lt)`` filters ``isnotnull(lt)`` right above the join, which rejects
#: every row without a left side, so the optimizer drops the right side's outer-ness.
_OUTER_ELIMINATED: dict[str, JoinType] = {"right_outer": "inner", "full_outer": "left_outer"}


def join_as_optimized(join: StreamJoin) -> StreamJoin:
    """The join Spark runs when window aggregations over the left event time follow it.

    Two optimizer effects (tests/differential/FINDINGS.md JA1, JA2):

    * ``EliminateOuterJoin``: the ``isnotnull(lt)`` filter of ``window(lt)`` rejects the rows a right
      or full outer join pads with a NULL left side, so a right outer join runs as an inner join and
      a full outer join as a left outer join (no NULL-padded right rows, no right rows kept in state
      only to be output padded);
    * column pruning: a key-only join reads the right event time nowhere, so it is pruned below the
      join and right rows are never late (:attr:`StreamJoin.right_time_pruned`).
    """
    out = dataclasses.replace(join, join_type=_OUTER_ELIMINATED.get(join.join_type, join.join_type))
    if not join.evicts_state:
        out = dataclasses.replace(out, right_time_pruned=True)
    return out


def _operator_batch(
    res: OpResult,
    names: tuple[str, str],
    late_wm: int,
    evict_wm: int,
    input_rows: int,
    output_wm: int | None = None,
) -> OperatorBatch:
    return OperatorBatch(
        name=names[0],
        spark_name=names[1],
        late_watermark_ms=late_wm,
        eviction_watermark_ms=evict_wm,
        output_watermark_ms=evict_wm if output_wm is None else output_wm,
        input_rows=input_rows,
        late_row_count=len(res.late_rows),
        dropped_by_watermark_metric=res.dropped_by_watermark_metric,
        state_rows=res.state_rows,
        state_rows_removed=res.state_rows_removed,
        state_rows_updated=res.state_rows_updated,
        output_rows=res.output_rows,
    )


def replay_chain(events: EventsTable, config: ChainConfig, *, plan: BatchPlan | None = None) -> ChainReplay:
    """Replay ``events`` through a chain of stateful operators as Spark >= 3.4 runs it.

    Operator 1 runs in :class:`~monitor.watermark.WatermarkRuntime` (inputs, global watermark, no-data
    batches); each later operator receives the rows the one before it emitted in the same batch and
    runs with the watermarks :class:`ChainConfig` ``allow_multiple`` gives it (module docstring).

    Args:
        events: the input rows (``batch`` / ``arrival_ms`` decide the micro-batches, as for
            :func:`~monitor.watermark.replay`).
        config: the chain.
        plan: a precomputed batch plan.

    Returns:
        :class:`ChainReplay`, one :class:`ChainBatch` per batch.

    Raises:
        EngineConfigError: the config does not fit the events.
    """
    first = config.first
    if first.join is not None:
        first = dataclasses.replace(first, join=join_as_optimized(first.join))
    if plan is None:
        plan = plan_batches(events, first)
    rt = WatermarkRuntime(events, first, late_filter_uses_previous_batch=config.allow_multiple)
    events = rt.events
    stages: list[_Stage] = []
    parent = events
    parent_window: Tumbling | Sliding | None = (
        first.window if isinstance(first.window, Tumbling | Sliding) else None
    )
    parent_by_key = first.group_by_key
    parent_window1 = parent_window
    for stage in config.then:
        table = parent if parent_window is None else _window_universe(parent, parent_window, parent_by_key)
        stages.append(_Stage(table, first, stage))
        parent, parent_window, parent_by_key = table, stage.window, stage.group_by_key
    names1 = ("window_aggregation", "stateStoreSave")
    if first.dedup is not None:
        within = first.dedup.mode == "within_watermark"
        names1 = ("deduplication", "dedupeWithinWatermark" if within else "dedupe")
    join = first.join
    if join is not None:
        names1 = ("join", "symmetricHashJoin")
    batches: list[ChainBatch] = []
    prev_join_out_wm = 0  # the join's output watermark of the previous batch (0 before batch 0)

    def chain(b: BatchResult) -> None:
        nonlocal prev_join_out_wm
        res = rt.last_operator_result
        assert res is not None
        # produceOutputWatermark is the input watermark for aggregations and dedup: every later
        # operator runs with operator 1's input watermarks (PropagateWatermarkSimulator); a join
        # passes on its lowered output watermark.
        late_wm, evict_wm = b.late_watermark_ms, b.watermark_ms
        out_wm = evict_wm
        if join is not None:
            out_wm = join_output_watermark_ms(join, b.watermark_ms)
            if config.allow_multiple:
                late_wm, evict_wm = prev_join_out_wm, out_wm
            prev_join_out_wm = out_wm
        ops = [_operator_batch(res, names1, b.late_watermark_ms, b.watermark_ms, b.input_rows, out_wm)]
        if join is not None:
            assert res.join is not None
            left = res.join.left_rows
            rows = left[left >= 0]  # a row without a left side has no window(lt): filtered, not late
            weights = np.ones(len(rows), dtype=np.int64)
        elif first.dedup is not None:
            rows, weights = res.passed_rows, np.ones(len(res.passed_rows), dtype=np.int64)
        else:
            assert parent_window1 is not None
            rows, weights = _lookup(stages[0].table, res.emitted, parent_window1.size_ms), res.emitted.count
        emitted, sums = Windows(), _EMPTY
        for i, st in enumerate(stages):
            r, sums = st.process(rows, weights, late_wm, evict_wm)
            ops.append(
                _operator_batch(r, ("window_aggregation", "stateStoreSave"), late_wm, evict_wm, len(rows))
            )
            emitted = r.emitted
            if i + 1 < len(stages):
                rows, weights = _lookup(stages[i + 1].table, emitted, st.spec.size_ms), sums
        batches.append(ChainBatch(batch=b, operators=tuple(ops), emitted=emitted, emitted_sums=sums))

    def needs_no_data_batch() -> bool:
        if rt.needs_no_data_batch():
            return True
        # a join without a state watermark never asks for one, the aggregation after it does when
        # its input (= the global) watermark moved (IncrementalExecution.shouldRunAnotherBatch: any)
        last_wm = batches[-1].batch.watermark_ms if batches else None
        return (
            join is not None and first.no_data_batches and last_wm is not None and rt.watermark_ms > last_wm
        )

    for j in range(len(plan)):
        chain(rt.run_data_batch(plan.rows(j), plan.times_ms[j]))
        if plan.idle_after[j] and needs_no_data_batch():
            chain(rt.run_no_data_batch(plan.idle_time_ms[j]))
    return ChainReplay(batches=batches)
