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

Values are copied from the suite. Not translated: "join -> window agg", "join on time interval ->
window agg, append mode, should fail", "join with range join on non-time intervals -> window agg",
the two "stream-stream time interval left outer join -> ..." tests (stream-stream joins are another
branch's scope) and "aggregation -> stream deduplication, append mode" (the chain engine models window
aggregations after the first operator, not a deduplication).

The last case is not from the suite: a recorded PySpark 4.3.0 run of the first case's query with
``spark.sql.streaming.statefulOperator.allowMultiple=false`` (tests/differential/FINDINGS.md C3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from monitor.watermark import Dedup, EngineConfigError, EventsTable, Session, Tumbling, WatermarkConfig
from monitor.watermark.chain import ChainConfig, ThenWindow, replay_chain


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
