"""Checks the Spark side of the differential harness against answers derived by hand.

If the harness recorded the wrong thing (a batch id off by one, the watermark of the wrong batch, a
doubled metric), the differential test would compare the engine with garbage. These three small
scenarios pin what the harness must see; every expected value is derived in the comments from Spark's
documented rules, not copied from a run:

- watermark of an input = max event time seen (floored to ms) - its delay; the global watermark is
  the min/max over inputs (an input with no rows yet counts as 0); batch N runs with the watermark
  computed at the end of batch N-1; Spark runs a no-data batch after a batch that moved it;
- a window is late/evicted when ``end <= watermark``; a dedup row is late when
  ``event_time <= watermark``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.differential.scenarios import DedupSpec, EventRow, InputSpec, Scenario, WindowSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.differential.spark_runner import SparkBatch

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

S = 1_000_000  # microseconds per second
T0_US = 1_767_225_600 * S  # 2026-01-01T00:00:00Z
T0_MS = T0_US // 1_000


def at(seconds: str) -> str:
    """``"12.000500"`` -> ``2026-01-01T00:00:12.000500Z`` (seconds below one minute, or ``MM:SS.f``)."""
    minutes, _, secs = seconds.rpartition(":")
    whole, _, frac = secs.partition(".")
    return f"2026-01-01T00:{int(minutes or 0):02d}:{int(whole):02d}.{frac.ljust(6, '0')}Z"


def rows(*items: tuple[str, str | None]) -> tuple[EventRow, ...]:
    return tuple(EventRow(None if t is None else at(t), key) for key, t in items)


def run(spark: SparkSession, scenario: Scenario) -> list[SparkBatch]:
    from tests.differential.spark_runner import run_scenario

    return run_scenario(spark, scenario).batches


def test_tumbling_append_no_data_batches_and_partial_aggregate_drop_count(spark: SparkSession) -> None:
    scenario = Scenario(
        seed=-1,
        inputs=(
            InputSpec(
                "in0",
                5_000,
                (
                    rows(("a", "01"), ("a", "04"), ("a", "12.000500"), ("a", None)),
                    rows(("a", "02"), ("a", "20")),
                    rows(("a", "03"), ("a", "03.5"), ("a", "21")),
                ),
            ),
        ),
        operation=WindowSpec("tumbling", 10_000, None, by_key=False),
        output_mode="append",
        policy="min",
    )
    batches = run(spark, scenario)
    # batch 0 (step 0, wm 0): [0,10) gets 01, 04; [10,20) gets 12.0005; the null row has no window.
    #   max 12.000500 -> 12000 ms -> wm 7000.
    # batch 1 (no-data, wm 7000): nothing has end <= 7 s; Spark still runs it because wm moved.
    # batch 2 (step 1, wm 7000): 02 not late ([0,10) ends at 10 > 7) -> [0,10) = 3; 20 -> [20,30) = 1.
    #   max 20 s -> wm 15000.
    # batch 3 (no-data, wm 15000): [0,10) closes (10 <= 15): emitted with count 3, removed 1.
    # batch 4 (step 2, wm 15000): 03 and 03.5 are late for [0,10); both in the one input partition,
    #   merged by the partial aggregate before the state operator -> numRowsDroppedByWatermark 1.
    #   21 -> [20,30) = 2. max 21 s -> wm 16000.
    # batch 5 (no-data, wm 16000): [10,20) ends at 20 > 16: nothing closes.
    w = T0_US
    assert [(b.batch_id, b.data_step) for b in batches] == [
        (0, 0),
        (1, None),
        (2, 1),
        (3, None),
        (4, 2),
        (5, None),
    ]
    assert [b.watermark_ms for b in batches] == [
        0,
        T0_MS + 7_000,
        T0_MS + 7_000,
        T0_MS + 15_000,
        T0_MS + 15_000,
        T0_MS + 16_000,
    ]
    assert [b.emitted for b in batches] == [(), (), (), ((w, w + 10 * S, None, 3),), (), ()]
    assert [b.state_rows_total for b in batches] == [2, 2, 3, 2, 2, 2]
    assert [b.state_rows_removed for b in batches] == [0, 0, 0, 1, 0, 0]
    assert [b.rows_dropped_by_watermark for b in batches] == [0, 0, 0, 0, 1, 0]
    assert [b.num_input_rows for b in batches] == [4, 0, 2, 0, 3, 0]


def test_dedup_with_event_time_two_inputs_max_policy_delay_zero_equal_and_sub_ms(spark: SparkSession) -> None:
    scenario = Scenario(
        seed=-2,
        inputs=(
            InputSpec(
                "in0",
                0,
                (
                    rows(("k1", "10"), ("k1", "10"), ("k2", None)),
                    rows(("k1", "10"), ("k1", "10.000500")),
                ),
            ),
            InputSpec("in1", 2_000, (rows(("k1", "09")), rows(("k3", "05")))),
        ),
        operation=DedupSpec("with_event_time"),
        output_mode="append",
        policy="max",
    )
    batches = run(spark, scenario)
    # batch 0 (wm 0): in0 k1@10 passes, its twin is a duplicate, k2@null passes (null is not late);
    #   in1 k1@09 passes (different event time). State 3. in0 wm 10000-0, in1 wm 9000-2000;
    #   max policy -> 10000 ms.
    # batch 1 (no-data, wm 10 s): evicts (k1,10) (10 <= 10) and (k1,9); (k2,null) stays. State 1.
    # batch 2 (wm 10 s): k1@10.000000 is late at delay 0 (10 <= 10); k1@10.000500 is not
    #   (10.0005 s > 10.000 s) and passes; in1 k3@05 is late. Dropped 2. State 2.
    #   in0's max 10.0005 s floors to 10000 ms: the watermark does not move, so no no-data batch.
    assert [(b.batch_id, b.data_step) for b in batches] == [(0, 0), (1, None), (2, 1)]
    assert [b.watermark_ms for b in batches] == [0, T0_MS + 10_000, T0_MS + 10_000]
    assert batches[0].emitted == (("k1", T0_US + 9 * S), ("k1", T0_US + 10 * S), ("k2", None))
    assert batches[1].emitted == ()
    assert batches[2].emitted == (("k1", T0_US + 10 * S + 500),)
    assert [b.state_rows_total for b in batches] == [3, 1, 2]
    assert [b.rows_dropped_by_watermark for b in batches] == [0, 0, 2]


def test_min_policy_with_silent_input_holds_watermark_at_zero(spark: SparkSession) -> None:
    scenario = Scenario(
        seed=-3,
        inputs=(
            InputSpec(
                "in0", 0, (rows(("a", "01"), ("a", "02"), ("b", "07")), rows(("a", "03"), ("a", "01:40")))
            ),
            InputSpec("in1", 0, ((), ())),
        ),
        operation=WindowSpec("tumbling", 5_000, None, by_key=True),
        output_mode="update",
        policy="min",
    )
    batches = run(spark, scenario)
    # in1 never has a row: Spark's WatermarkTracker puts 0 for it, so under "min" the global
    # watermark stays 0 and no no-data batch ever runs. Update mode emits every changed window.
    # batch 0: [0,5) a = 2, [5,10) b = 1.  batch 1: [0,5) a = 3, [100,105) a = 1.  State 2, then 3.
    assert [(b.batch_id, b.data_step) for b in batches] == [(0, 0), (1, 1)]
    assert [b.watermark_ms for b in batches] == [0, 0]
    assert batches[0].emitted == ((T0_US, T0_US + 5 * S, "a", 2), (T0_US + 5 * S, T0_US + 10 * S, "b", 1))
    assert batches[1].emitted == ((T0_US, T0_US + 5 * S, "a", 3), (T0_US + 100 * S, T0_US + 105 * S, "a", 1))
    assert [b.state_rows_total for b in batches] == [2, 3]


def test_window_drop_metric_counts_late_groups_after_the_shuffle_not_per_input(spark: SparkSession) -> None:
    scenario = Scenario(
        seed=-4,
        inputs=(
            InputSpec("in0", 0, (rows(("a", "15")), rows(("a", "01")))),
            InputSpec("in1", 0, ((), rows(("a", "02")))),
        ),
        operation=WindowSpec("tumbling", 10_000, None, by_key=False),
        output_mode="append",
        policy="max",
    )
    batches = run(spark, scenario)
    # batch 0 (wm 0): [10,20) = 1. in0 wm 15 s, in1 has no row yet (0); max policy -> 15 s.
    # batch 1 (no-data, wm 15 s): [10,20) ends at 20 > 15, nothing closes.
    # batch 2 (wm 15 s): in0's 01 and in1's 02 are both late for [0,10). They are in two different
    #   input partitions (one per union child), so each partial aggregate holds one [0,10) row; the
    #   metric is 1, not 2, because Spark's streaming aggregation merges the partial rows after the
    #   shuffle (HashAggregate PartialMerge) before StateStoreRestoreExec filters late rows: it counts
    #   distinct late groups of the batch. in1's watermark (2 s) does not move the max: no no-data batch.
    assert [(b.batch_id, b.data_step) for b in batches] == [(0, 0), (1, None), (2, 1)]
    assert [b.watermark_ms for b in batches] == [0, T0_MS + 15_000, T0_MS + 15_000]
    assert [b.rows_dropped_by_watermark for b in batches] == [0, 0, 1]
    assert [b.state_rows_total for b in batches] == [1, 1, 1]


def test_session_drop_metric_counts_partial_rows_per_input_partition(spark: SparkSession) -> None:
    scenario = Scenario(
        seed=-5,
        inputs=(
            InputSpec("in0", 0, (rows(("a", "20")), rows(("a", "05"), ("a", "05"), ("a", "07")))),
            InputSpec("in1", 0, ((), rows(("a", "05")))),
        ),
        operation=WindowSpec("session", 2_000, None, by_key=True),
        output_mode="append",
        policy="max",
    )
    batches = run(spark, scenario)
    # batch 0 (wm 0): session a [20,22). in0 wm 20 s, in1 none (0); max -> 20 s.
    # batch 1 (no-data, wm 20 s): [20,22) ends at 22 > 20: stays.
    # batch 2 (wm 20 s): every row is late (each row's own session [t, t+2 s) ends <= 20 s).
    #   Session aggregation has no shuffle-side merge before SessionWindowStateStoreRestoreExec's
    #   late filter: it sees the map-side partial rows, one per (key, session start) per input
    #   partition: in0 {(a,05), (a,07)} + in1 {(a,05)} = 3 (raw rows: 4; distinct groups: 2).
    assert [(b.batch_id, b.data_step) for b in batches] == [(0, 0), (1, None), (2, 1)]
    assert [b.watermark_ms for b in batches] == [0, T0_MS + 20_000, T0_MS + 20_000]
    assert [b.rows_dropped_by_watermark for b in batches] == [0, 0, 3]
    assert [b.state_rows_total for b in batches] == [1, 1, 1]
    assert [b.emitted for b in batches] == [(), (), ()]


@pytest.mark.parametrize(("first_delay_ms", "k1_passes_again"), [(0, True), (10_000, False)])
def test_dedup_within_watermark_expiry_uses_the_first_union_inputs_delay(
    spark: SparkSession,
    first_delay_ms: int,
    k1_passes_again: bool,
) -> None:
    fast = InputSpec("fast", 0, (rows(("k2", "10")), rows(("k1", "15"))))
    slow = InputSpec("slow", 10_000, (rows(("k1", "10")), ()))
    scenario = Scenario(
        seed=-6,
        inputs=(fast, slow) if first_delay_ms == 0 else (slow, fast),
        operation=DedupSpec("within_watermark"),
        output_mode="append",
        policy="max",
    )
    batches = run(spark, scenario)
    # batch 0 (wm 0): k1@10 (slow) and k2@10 (fast) pass. Watermarks: fast 10 s - 0, slow 10 s - 10 s;
    #   max policy -> 10 s. Each state entry expires at event_time + delay, and the delay is the one on
    #   the union's output column, i.e. the FIRST union input's, for rows of every input.
    # batch 1 (no-data, wm 10 s): first = fast (0 s): both entries expire at 10 s <= 10 s, removed;
    #   first = slow (10 s): both expire at 20 s, kept.
    # batch 2 (wm 10 s): k1@15 is not late (15 > 10); it passes only if k1's entry was removed.
    # batch 3 (no-data, wm 15 s): first = fast: k1@15 expires at 15 s -> removed; else nothing (20 s).
    assert [(b.batch_id, b.data_step) for b in batches] == [(0, 0), (1, None), (2, 1), (3, None)]
    assert batches[0].emitted == (("k1", T0_US + 10 * S), ("k2", T0_US + 10 * S))
    if k1_passes_again:
        assert [b.state_rows_total for b in batches] == [2, 0, 1, 0]
        assert batches[2].emitted == (("k1", T0_US + 15 * S),)
    else:
        assert [b.state_rows_total for b in batches] == [2, 2, 2, 2]
        assert batches[2].emitted == ()
