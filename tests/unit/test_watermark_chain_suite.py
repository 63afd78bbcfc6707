"""Spark's ``MultiStatefulOperatorsSuite`` (apache/spark, sql/core/src/test/scala/org/apache/spark/sql/
streaming/MultiStatefulOperatorsSuite.scala) translated into tables and run against the chain engine
(:func:`monitor.watermark.chain.replay_chain`).

Each case names the suite's test. Each step is one ``AddData`` (one data batch; the engine then runs the
no-data batch Spark runs on its own, as ``processAllAvailable`` does) followed by the suite's checks:

- ``answer``: ``CheckNewAnswer`` rows (``(window start s[, end s], count[, sum])``) emitted by the step's
  batches;
- ``state``: ``assertNumStateRows``: ``numRowsTotal`` per operator of the step's LAST batch, in Spark's
  ``stateOperators`` order (last operator first);
- ``dropped``: ``assertNumRowsDroppedByWatermark``: ``numRowsDroppedByWatermark`` per operator of the
  step's data batch (the suite filters out batches without input), same order.

Values are copied from the suite. The two "stream-stream time interval left outer join -> ..." tests
are the join cases 5 and 6 (:data:`JOIN_CASES`). Not translated: "join -> window agg, append mode"
(its join condition is ``eventTime1 = eventTime2``: an event-time column in the equi-join key gives a
state *key* watermark, which the engine does not model; its range-condition equivalent keeps the rows
at the watermark, 2 join state rows where the suite has 0), "join on time interval -> window agg,
append mode, should fail" and "join with range join on non-time intervals -> window agg" (conditions
over columns that are not the joined inputs' event times; the engine joins on a key plus an
event-time range) and "aggregation -> stream deduplication, append mode" (the chain engine models
window aggregations after the first operator, not a deduplication).

The last case is not from the suite: a recorded PySpark 4.3.0 run of the first case's query with
``spark.sql.streaming.statefulOperator.allowMultiple=false`` (tests/differential/FINDINGS.md C3).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.watermark import Dedup, EngineConfigError, EventsTable, Session, Tumbling, WatermarkConfig
from monitor.watermark.chain import (
    ChainConfig,
    ThenWindow,
    join_as_optimized,
    join_output_watermark_ms,
    replay_chain,
)
from monitor.watermark.join import StreamJoin


@dataclass(frozen=True)
class Step:
    values: tuple[int, ...]  # AddData(inputData, ...): event time = value seconds
    answer: tuple[tuple[int, ...], ...]
    state: tuple[int, ...]
    dropped: tuple[int, ...]


@dataclass(frozen=True)
class Case:
    number: int
    test: str  # the suite's test name (or the recording)
    config: ChainConfig
    steps: tuple[Step, ...]
    with_end: bool = False  # answer rows carry the window end
    with_sum: bool = True  # answer rows carry sum


def _r(a: int, b: int) -> tuple[int, ...]:
    return tuple(range(a, b + 1))


AGG_AGG = ChainConfig(WatermarkConfig(0, window=Tumbling(5_000)), (ThenWindow(Tumbling(10_000)),))

CASES = (
    Case(
        1,
        "MultiStatefulOperatorsSuite: window agg -> window agg, append mode",
        AGG_AGG,
        (
            Step(_r(10, 21), ((10, 2, 10),), state=(0, 1), dropped=(0, 0)),
            Step(_r(10, 29), (), state=(1, 1), dropped=(0, 2)),
            Step((30, 31), ((20, 2, 12),), state=(0, 1), dropped=(0, 0)),
        ),
    ),
    Case(
        2,
        "MultiStatefulOperatorsSuite: agg -> agg -> agg, append mode",
        ChainConfig(
            WatermarkConfig(0, window=Tumbling(5_000)),
            (ThenWindow(Tumbling(10_000)), ThenWindow(Tumbling(20_000))),
        ),
        (
            Step(_r(0, 37), ((0, 20, 2, 20),), state=(1, 1, 1), dropped=(0, 0, 0)),
            Step(_r(30, 60), ((20, 40, 2, 23), (40, 60, 2, 20)), state=(0, 0, 1), dropped=(0, 0, 1)),
        ),
        with_end=True,
    ),
    Case(
        3,
        "MultiStatefulOperatorsSuite: stream deduplication -> aggregation, append mode",
        # dropDuplicates("value", "eventTime") with eventTime = value: the key is the value
        ChainConfig(
            WatermarkConfig(10_000, dedup=Dedup("key_and_event_time")), (ThenWindow(Tumbling(5_000)),)
        ),
        (Step(_r(1, 15), ((0, 4),), state=(3, 10), dropped=(0, 0)),),
        with_sum=False,
    ),
    Case(
        4,
        "recorded PySpark 4.3.0: case 1's query with statefulOperator.allowMultiple=false",
        ChainConfig(AGG_AGG.first, AGG_AGG.then, allow_multiple=False),
        (
            # the no-data batch: op2 drops [10, 20) (window_time 14.999999 and 19.999999, end 20 <= 21)
            Step(_r(10, 21), (), state=(0, 1), dropped=(0, 0)),
            Step(_r(10, 29), (), state=(1, 1), dropped=(0, 2)),
            # the no-data batch: [25, 30)'s row for [20, 30) is late at op2; [20, 30) closes with 1 row
            Step((30, 31), ((20, 1, 7),), state=(0, 1), dropped=(0, 0)),
        ),
    ),
)


def _events(case: Case) -> EventsTable:
    times: list[int] = []
    batch: list[int] = []
    key: list[str] = []
    for i, step in enumerate(case.steps):
        for v in step.values:
            times.append(v * 1_000_000)
            batch.append(i)
            key.append(str(v))
    return EventsTable.from_columns(times, batch=batch, key=key)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"case{c.number}")
def test_multi_stateful_operators_suite_case(case: Case) -> None:
    result = replay_chain(_events(case), case.config)
    by_step: list[list[Any]] = [[] for _ in case.steps]
    step = -1
    for b in result.batches:
        if b.batch.kind == "data":
            step += 1
        by_step[step].append(b)
    for i, (want, got) in enumerate(zip(case.steps, by_step, strict=True)):
        rows = []
        for b in got:
            for j, w in enumerate(b.emitted):
                row = (w.start_ms // 1000,) + ((w.end_ms // 1000,) if case.with_end else ()) + (w.count,)
                rows.append(row + ((int(b.emitted_sums[j]),) if case.with_sum else ()))
        where = f"case {case.number} ({case.test}), step {i + 1}"
        assert sorted(rows) == sorted(want.answer), where
        assert tuple(op.state_rows for op in got[-1].state_operators) == want.state, where
        data = got[0]
        assert data.batch.kind == "data"
        assert tuple(op.dropped_by_watermark_metric for op in data.state_operators) == want.dropped, where


def test_operator_watermarks_follow_the_propagation_rules() -> None:
    """Case 1, step 2's data batch (batch 2, global watermark 21 s): every operator filters late rows
    against the previous batch's input watermark and evicts against this batch's; with
    allowMultiple=false both are this batch's."""
    events = _events(CASES[0])
    multi = replay_chain(events, AGG_AGG).batches[2]
    single = replay_chain(events, ChainConfig(AGG_AGG.first, AGG_AGG.then, allow_multiple=False)).batches[2]
    assert [
        (o.late_watermark_ms, o.eviction_watermark_ms, o.output_watermark_ms) for o in multi.operators
    ] == [(21_000, 21_000, 21_000)] * 2
    # batch 2 is a data batch right after the no-data batch 1 (which already ran with 21 s)
    first = replay_chain(events, AGG_AGG).batches[1]
    assert [(o.late_watermark_ms, o.eviction_watermark_ms) for o in first.operators] == [(0, 21_000)] * 2
    assert [(o.late_watermark_ms, o.eviction_watermark_ms) for o in single.operators] == [
        (21_000, 21_000)
    ] * 2
    assert [o.name for o in multi.state_operators] == ["window_aggregation", "window_aggregation"]


def test_dedup_chain_lists_the_aggregation_first_as_spark_does() -> None:
    result = replay_chain(_events(CASES[2]), CASES[2].config)
    assert [o.name for o in result.batches[0].state_operators] == ["window_aggregation", "deduplication"]
    assert [o.name for o in result.batches[0].operators] == ["deduplication", "window_aggregation"]
    assert [o.spark_name for o in result.batches[0].state_operators] == ["stateStoreSave", "dedupe"]
    within = ChainConfig(WatermarkConfig(10_000, dedup=Dedup("within_watermark")), CASES[2].config.then)
    first = replay_chain(_events(CASES[2]), within).batches[0]
    assert [o.spark_name for o in first.state_operators] == ["stateStoreSave", "dedupeWithinWatermark"]


@pytest.mark.parametrize(
    ("first", "then", "message"),
    [
        (WatermarkConfig(0, window=Tumbling(5_000)), (), "at least one operator"),
        (WatermarkConfig(0, window=Session(5_000)), (ThenWindow(Tumbling(10_000)),), "tumbling/sliding"),
        (
            WatermarkConfig(0, window=Tumbling(5_000), output_mode="update"),
            (ThenWindow(Tumbling(10_000)),),
            "append",
        ),
        (
            WatermarkConfig(0, window=Tumbling(5_000)),
            (ThenWindow(Tumbling(10_000), True),),
            "does not output a key",
        ),
    ],
)
def test_chain_config_rejects_what_spark_rejects_or_the_engine_does_not_model(
    first: WatermarkConfig, then: tuple[ThenWindow, ...], message: str
) -> None:
    with pytest.raises(EngineConfigError, match=message):
        ChainConfig(first, then)


def test_raw_late_rows_per_operator_over_the_run() -> None:
    """Case 1: the suite's comments list "[10, 15) 5 - late, [15, 20) 5 - late" at op1 in step 2 (10 raw
    rows, 2 groups in numRowsDroppedByWatermark); op2 drops none. With allowMultiple=false op2 also drops
    the operator-1 windows [10, 15), [15, 20) and [25, 30) (case 4)."""
    events = _events(CASES[0])
    assert replay_chain(events, AGG_AGG).dropped_rows_by_operator == (10, 0)
    single = ChainConfig(AGG_AGG.first, AGG_AGG.then, allow_multiple=False)
    assert replay_chain(events, single).dropped_rows_by_operator == (10, 3)


@dataclass(frozen=True)
class JoinStep:
    # MultiAddData(input1, ...): (key, event time "YYYY-MM-DD HH:MM:SS.fff")
    left: tuple[tuple[str, str], ...]
    right: tuple[tuple[str, str], ...]  # MultiAddData(input2, ...)
    answer: tuple[tuple[str, str, int], ...]  # CheckNewAnswer: (window start, window end, cnt)


@dataclass(frozen=True)
class JoinCase:
    number: int
    test: str
    config: ChainConfig
    steps: tuple[JoinStep, ...]


JOIN_CASES = (
    JoinCase(
        5,
        "MultiStatefulOperatorsSuite: stream-stream time interval left outer join -> aggregation, append mode",
        # left.eventTime BETWEEN right.eventTime - INTERVAL 40 seconds AND right.eventTime + INTERVAL 30
        # seconds, leftOuter; withWatermark 2 minutes / 4 minutes; groupBy(window(left.eventTime, 30 s))
        ChainConfig(
            WatermarkConfig(
                120_000,
                join=StreamJoin("left", "right", "left_outer", lower_ms=40_000, upper_ms=30_000),
                sources=("left", "right"),
                source_delays_ms={"left": 120_000, "right": 240_000},
            ),
            (ThenWindow(Tumbling(30_000)),),
        ),
        (
            JoinStep(
                left=(
                    ("abc", "2020-01-01 00:00:00.000"),  # has no join partner
                    ("abc", "2020-01-02 00:00:00.000"),  # joined with A
                    ("abc", "2020-01-02 01:00:00.000"),  # joined with B
                ),
                right=(
                    ("abc", "2020-01-02 00:00:10.000"),  # A
                    ("abc", "2020-01-02 00:59:59.000"),  # B
                    ("abc", "2020-01-02 02:00:00.000"),  # C
                ),
                answer=(
                    ("2020-01-01 00:00:00.000", "2020-01-01 00:00:30.000", 1),
                    ("2020-01-02 00:00:00.000", "2020-01-02 00:00:30.000", 1),
                ),
            ),
            JoinStep(
                left=(("abc", "2020-01-05 00:00:00.000"),),  # joined with D
                right=(("abc", "2020-01-05 00:00:10.000"),),  # D
                answer=(("2020-01-02 01:00:00.000", "2020-01-02 01:00:30.000", 1),),
            ),
        ),
    ),
    JoinCase(
        6,
        "MultiStatefulOperatorsSuite: stream-stream time interval left outer join (left side condition) -> "
        "time window aggregation",
        # tb1.id == tb2.id AND tb1.ts + interval 5 minutes > tb2.ts (= tb1.ts > tb2.ts - 5 minutes),
        # leftOuter; withWatermark 1 hour on both; groupBy(window(tb1.ts, 5 minutes)).count()
        ChainConfig(
            WatermarkConfig(
                3_600_000,
                join=StreamJoin("left", "right", "left_outer", lower_ms=300_000, lower_strict=True),
                sources=("left", "right"),
            ),
            (ThenWindow(Tumbling(300_000)),),
        ),
        (
            JoinStep(
                left=(
                    ("1", "2022-01-01 01:30:55.888"),
                    ("2", "2022-01-01 03:30:55.888"),
                    ("4", "2022-01-01 05:30:55.888"),
                ),
                right=(
                    ("1", "2022-01-01 01:31:55.888"),
                    ("3", "2022-01-01 02:40:55.888"),
                    ("6", "2022-01-01 05:30:55.888"),
                ),
                answer=(
                    ("2022-01-01 01:30:00.000", "2022-01-01 01:35:00.000", 1),
                    ("2022-01-01 03:30:00.000", "2022-01-01 03:35:00.000", 1),
                ),
            ),
        ),
    ),
)


def _us(text: str) -> int:
    """``Timestamp.valueOf(text)`` in the suite's UTC session, as epoch microseconds."""
    return int(datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp() * 1_000_000)


def _join_events(case: JoinCase) -> EventsTable:
    times: list[int] = []
    batch: list[int] = []
    source: list[str] = []
    key: list[str] = []
    for i, step in enumerate(case.steps):
        for side, rows in (("left", step.left), ("right", step.right)):
            for k, t in rows:
                times.append(_us(t))
                batch.append(i)
                source.append(side)
                key.append(k)
    return EventsTable.from_columns(times, batch=batch, source=source, key=key)


@pytest.mark.parametrize("case", JOIN_CASES, ids=lambda c: f"case{c.number}")
def test_multi_stateful_operators_suite_join_case(case: JoinCase) -> None:
    result = replay_chain(_join_events(case), case.config)
    by_step: list[list[Any]] = [[] for _ in case.steps]
    step = -1
    for b in result.batches:
        if b.batch.kind == "data":
            step += 1
        by_step[step].append(b)
    for i, (want, got) in enumerate(zip(case.steps, by_step, strict=True)):
        rows = [
            (int(b.emitted.start_us[j]), int(b.emitted.end_us[j]), int(b.emitted.count[j]))
            for b in got
            for j in range(len(b.emitted))
        ]
        expected = [(_us(a), _us(e), n) for a, e, n in want.answer]
        assert sorted(rows) == sorted(expected), f"case {case.number} ({case.test}), step {i + 1}"
        assert [o.name for o in got[0].state_operators] == ["window_aggregation", "join"]
        assert [o.spark_name for o in got[0].state_operators] == ["stateStoreSave", "symmetricHashJoin"]


def test_join_output_watermark_per_operator_as_the_suite_comments_list() -> None:
    """Case 5's comments: step 1's no-data batch runs with the global watermark 2020-01-02 00:58:00
    (left 00:58:00, right 01:56:00, min); the join (op1) has input watermarks (0, 00:58:00) and outputs
    00:57:20 less the state watermark's 1 ms (the comments round it; FINDINGS.md J4: l.t >= r.t - 40 s
    keeps left rows above wm - 40 s - 1 ms); the aggregation (op2) filters late rows against 0 and
    evicts against the join's output. Step 2's data batch: op2 (00:57:19.999, 00:57:19.999); its
    no-data batch (global 2020-01-04 23:56:10): op2 (00:57:19.999, 2020-01-04 23:55:29.999).
    allowMultiple=false: every operator runs with the global watermark for both."""
    events = _join_events(JOIN_CASES[0])
    batches = replay_chain(events, JOIN_CASES[0].config).batches
    wm1, ow1 = _us("2020-01-02 00:58:00.000") // 1000, _us("2020-01-02 00:57:19.999") // 1000
    wm2, ow2 = _us("2020-01-04 23:56:10.000") // 1000, _us("2020-01-04 23:55:29.999") // 1000
    marks = [
        [(o.late_watermark_ms, o.eviction_watermark_ms, o.output_watermark_ms) for o in b.operators]
        for b in batches
    ]
    assert [b.batch.kind for b in batches] == ["data", "no-data", "data", "no-data"]
    assert marks[0] == [(0, 0, 0), (0, 0, 0)]
    assert marks[1] == [(0, wm1, ow1), (0, ow1, ow1)]
    assert marks[2] == [(wm1, wm1, ow1), (ow1, ow1, ow1)]
    assert marks[3] == [(wm1, wm2, ow2), (ow1, ow2, ow2)]
    assert batches[1].state_operators[0].state_rows == 1  # op2's "-- state row": [01:00:00, 01:00:30)
    single = JOIN_CASES[0].config
    one = replay_chain(events, ChainConfig(single.first, single.then, allow_multiple=False)).batches[3]
    assert [(o.late_watermark_ms, o.eviction_watermark_ms) for o in one.operators] == [(wm2, wm2)] * 2


@pytest.mark.parametrize(
    ("join", "input_ms", "output_ms"),
    [
        (StreamJoin("l", "r", lower_ms=40_000, upper_ms=30_000), 100_000, 59_999),  # min of 59.999, 69.999
        (StreamJoin("l", "r", lower_ms=40_000, upper_ms=50_000), 100_000, 49_999),
        (StreamJoin("l", "r", lower_ms=40_000, lower_strict=True), 100_000, 60_000),
        (StreamJoin("l", "r", upper_ms=-2_000, upper_strict=True), 100_000, 100_000),  # 102 s: ahead of input
        (StreamJoin("l", "r", "left_semi", lower_ms=0, lower_strict=True, upper_ms=5_000), 22_272, 22_272),
        (StreamJoin("l", "r"), 100_000, 100_000),  # key-only: the input watermark
        (StreamJoin("l", "r", lower_ms=40_000), 10_000, 0),  # below 0: getInputWatermark's max(wm, 0)
        (StreamJoin("l", "r", lower_ms=40_000), 0, 0),
    ],
)
def test_join_output_watermark(join: StreamJoin, input_ms: int, output_ms: int) -> None:
    assert join_output_watermark_ms(join, input_ms) == output_ms


def test_the_join_runs_as_spark_optimizes_it_under_a_window_of_the_left_time() -> None:
    """FINDINGS.md JA1/JA2: EliminateOuterJoin and the pruned right event time of a key-only join."""
    rng = {"lower_ms": 1_000, "upper_ms": 1_000}
    assert join_as_optimized(StreamJoin("l", "r", "full_outer", **rng)).join_type == "left_outer"
    assert join_as_optimized(StreamJoin("l", "r", "right_outer", **rng)).join_type == "inner"
    for kind in ("inner", "left_outer", "left_semi"):
        assert join_as_optimized(StreamJoin("l", "r", kind, **rng)) == StreamJoin("l", "r", kind, **rng)
    assert join_as_optimized(StreamJoin("l", "r")).right_time_pruned
    with pytest.raises(EngineConfigError, match="key-only"):
        StreamJoin("l", "r", lower_ms=1_000, right_time_pruned=True).validate()
