"""Watermark tracking, no-data batches and late filtering (Spark 3.5–4.x rules).

Scripted streams: one list per data batch, times in seconds since the epoch (see engine_stream.py).
Expected values are worked out by hand from the rules in the comments. Where a case was also run on
real PySpark 4.3.0 (local[1], file source, one JSON file per batch, ``processAllAvailable()`` after
each file, ``withWatermark("event_time", "10 seconds")``, ``groupBy(window(event_time, "5 seconds"))
.count()`` append, ``foreachBatch`` sink), the observed progress is quoted in the comment.
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor.watermark import EventsTable, Tumbling, WatermarkConfig, WatermarkRuntime, replay
from tests.unit.engine_stream import SEC_US, emitted_s, stream, summary_rows

W5 = Tumbling(size_ms=5_000)


def cfg(**kw: object) -> WatermarkConfig:
    base: dict[str, object] = {"delay_ms": 10_000, "window": W5}
    base.update(kw)
    return WatermarkConfig(**base)  # type: ignore[arg-type]


def test_watermark_after_batch_is_max_event_time_minus_delay_and_applies_to_next_batch() -> None:
    # batch 0 runs with watermark 0 (initial); its max event time 100 s gives 100 - 10 = 90 s, which is
    # the watermark of the next batch (here the no-data batch 1 Spark runs because 90 > 0).
    r = replay(stream([100]), cfg())
    assert [(b.batch_id, b.kind, b.watermark_ms, b.next_watermark_ms) for b in r.batches] == [
        (0, "data", 0, 90_000),
        (1, "no-data", 90_000, 90_000),
    ]


def test_real_run_no_data_batches_and_late_rows_match_pyspark() -> None:
    # Real PySpark 4.3.0 run (exp1, noDataMicroBatches enabled), progress per batch:
    #   0 in=1 wm=00:00 state=1 | 1 in=0 wm=01:30 | 2 in=3 wm=01:30 dropped=1 min=00:00 avg=01:01.333
    #   3 in=0 wm=01:31 | 4 in=3 wm=01:31 state=3 dropped=1 | 5 in=0 wm=01:50 state=1 removed=2,
    #   sink got [01:40,01:45)=2 and [01:45,01:50)=1 in batch 5.
    # Hand: b2 filters against b1's wm 90: 83 s is in [80,85) whose end 85 <= 90 -> late.
    #       b4 filters against b3's wm 91: 84 s -> [80,85), 85 <= 91 -> late.
    events = stream([100], [101, 83, None], [84, 120, 107])
    r = replay(events, cfg())
    assert summary_rows(r.batches) == [
        (0, "data", 0, 1, 0, 1),
        (1, "no-data", 90, 0, 0, 1),
        (2, "data", 90, 3, 1, 1),
        (3, "no-data", 91, 0, 0, 1),
        (4, "data", 91, 3, 1, 3),
        (5, "no-data", 110, 0, 0, 1),
    ]
    assert emitted_s(r.batches[5]) == [(100, 105, 2), (105, 110, 1)]
    assert r.batches[5].state_rows_removed == 2


def test_no_data_batch_runs_whenever_the_watermark_advances_even_with_nothing_to_evict() -> None:
    # Batch 3 of the real run above: the watermark moved 90 -> 91 s while the only window in state
    # ends at 105 s; Spark still ran a no-data batch (StateStoreSaveExec.shouldRunAnotherBatch only
    # compares the new watermark with the one it last evicted with).
    r = replay(stream([100], [101]), cfg())
    assert [(b.kind, b.watermark_ms) for b in r.batches] == [
        ("data", 0),
        ("no-data", 90_000),
        ("data", 90_000),
        ("no-data", 91_000),
    ]
    assert r.batches[3].state_rows_removed == 0


def test_no_data_batch_not_run_when_watermark_does_not_move() -> None:
    # batch 1's max (95 s) gives 85 s < 90 s: no advance, so no no-data batch after it.
    r = replay(stream([100], [95]), cfg())
    assert [b.kind for b in r.batches] == ["data", "no-data", "data"]


def test_no_data_batches_disabled_late_filter_uses_previous_data_batch_watermark() -> None:
    # Real PySpark run with spark.sql.streaming.noDataMicroBatches.enabled=false (exp1 false):
    #   0 in=1 wm=00:00 | 1 in=3 wm=01:30 state=1 removed=1 dropped=0, sink [01:20,01:25)=1 |
    #   2 in=3 wm=01:31 state=3 dropped=1.
    # Batch 1 runs with wm 90 s but filters late rows against batch 0's wm (0): the row at 83 s is
    # kept, written to state and its window [80,85) (end 85 <= 90) is emitted in the same batch.
    r = replay(stream([100], [101, 83, None], [84, 120, 107]), cfg(no_data_batches=False))
    assert summary_rows(r.batches) == [
        (0, "data", 0, 1, 0, 1),
        (1, "data", 90, 3, 0, 1),
        (2, "data", 91, 3, 1, 3),
    ]
    assert r.batches[1].late_watermark_ms == 0
    assert emitted_s(r.batches[1]) == [(80, 85, 1)]
    assert r.batches[1].state_rows_removed == 1


def test_late_filter_with_allow_multiple_false_uses_the_batch_watermark() -> None:
    # UseSingleWatermarkPropagator (statefulOperator.allowMultiple=false): late and eviction use the
    # batch's own watermark, so with no-data batches off the 83 s row in batch 1 (wm 90) is late.
    events = stream([100], [101, 83])
    r = replay(events, cfg(no_data_batches=False), late_filter_uses_previous_batch=False)
    assert r.batches[1].late_watermark_ms == 90_000
    assert r.batches[1].late_row_count == 1


def test_watermark_never_moves_back() -> None:
    # batch 1 has a larger max (120 -> 110), batch 3 an older one (50 -> 40): the watermark stays 110.
    r = replay(stream([100], [120], [50]), cfg())
    wms = [b.watermark_ms for b in r.batches]
    assert wms == sorted(wms)
    assert r.summary.final_watermark_ms == 110_000
    assert r.batches[-1].source_watermarks_ms == {"": 110_000}


def test_input_that_never_had_a_row_holds_min_policy_at_epoch() -> None:
    # Real PySpark run (exp2 multi_min): union of two file sources, each withWatermark 10 s.
    #   0 s1:100 -> wm 00:00 | 1 s1:120,50 -> wm 00:00 (s2 has no row: counts as 0) |
    #   2 s2:110 -> wm 00:00 | 3 no-data wm 01:40, sink [00:50,00:55)=1 | 4 s1:111 s2:140 wm 01:40 |
    #   5 no-data wm 01:50, sink [01:40,01:45)=1.
    events = stream(
        [{"t": 100, "source": "s1"}],
        [{"t": 120, "source": "s1"}, {"t": 50, "source": "s1"}],
        [{"t": 110, "source": "s2"}],
        [{"t": 111, "source": "s1"}, {"t": 140, "source": "s2"}],
    )
    r = replay(events, cfg())
    assert [(b.batch_id, b.kind, b.watermark_ms // 1000) for b in r.batches] == [
        (0, "data", 0),
        (1, "data", 0),
        (2, "data", 0),
        (3, "no-data", 100),
        (4, "data", 100),
        (5, "no-data", 110),
    ]
    assert emitted_s(r.batches[3]) == [(50, 55, 1)]
    assert emitted_s(r.batches[5]) == [(100, 105, 1)]
    assert r.batches[1].source_watermarks_ms == {"s1": 110_000, "s2": None}


def test_declared_source_without_rows_holds_the_watermark_forever() -> None:
    # WatermarkConfig.sources declares an input "late" that never sends: min(90, 0) = 0 always.
    r = replay(stream([{"t": 100, "source": "s1"}], [{"t": 200, "source": "s1"}]), cfg(sources=("late",)))
    assert all(b.watermark_ms == 0 for b in r.batches)
    assert r.summary.no_data_batches == 0


def test_max_policy_follows_the_fastest_input() -> None:
    # max(s1 90, s2 never = 0) = 90 after batch 0; s2's row at 85 s is then late under max
    # (window [85,90) ends 90 <= 90) but would not be under min.
    events = stream([{"t": 100, "source": "s1"}], [{"t": 85, "source": "s2"}])
    r_max = replay(events, cfg(policy="max"))
    assert [b.watermark_ms // 1000 for b in r_max.batches] == [0, 90, 90]
    assert r_max.summary.dropped_rows == 1
    assert r_max.summary.dropped_by_source == {"s2": 1}
    r_min = replay(events, cfg(policy="min"))
    assert r_min.summary.dropped_rows == 0


def test_only_inputs_with_rows_in_the_batch_update_their_watermark() -> None:
    # per-source delays: s1 10 s, s2 30 s. Batch 0 only s1 (100 -> 90), batch 1 only s2 (100 -> 70).
    events = stream([{"t": 100, "source": "s1"}], [{"t": 100, "source": "s2"}])
    r = replay(events, cfg(source_delays_ms={"s2": 30_000}, policy="max"))
    assert r.batches[0].source_watermarks_ms == {"s1": 90_000, "s2": None}
    assert r.batches[-1].source_watermarks_ms == {"s1": 90_000, "s2": 70_000}


def test_window_ending_exactly_at_the_watermark_is_late() -> None:
    # wm after batch 0 = 95 - 10 = 85 s. Row at 80 s: window [80,85), end 85 <= 85 -> late (Spark's
    # predicate is LessThanOrEqual(window.end, watermark * 1000)). Row at 85 s: [85,90) not late.
    r = replay(stream([95], [80, 85]), cfg())
    b = r.batches[2]
    assert b.late_watermark_ms == 85_000
    late = b.late_rows.to_list()
    assert [(x.event_time_us // SEC_US, x.window_end_ms, x.lateness_ms) for x in late] == [(80, 85_000, 0)]


def test_late_comparison_is_in_microseconds() -> None:
    # Window ends are microsecond timestamps compared with watermark_ms * 1000. A row 1 us before the
    # window end (84.999999 s) is in [80,85): late once wm >= 85 s; a row exactly at 85 s is not.
    events = EventsTable.from_columns(
        np.array([95 * SEC_US, 85 * SEC_US - 1, 85 * SEC_US], dtype=np.int64), batch=[0, 1, 1]
    )
    r = replay(events, cfg())
    assert [x.row_index for x in r.batches[2].late_rows] == [1]


def test_watermark_uses_floor_division_of_microseconds() -> None:
    # EventTimeWatermarkExec adds microsToMillis(t) = Math.floorDiv(t, 1000): 100.0009999 s -> 100000 ms;
    # -0.0015 s (before 1970) -> floorDiv(-1500, 1000) = -2 ms, so its max gives -2 - 10000.
    ev = EventsTable.from_columns(np.array([100 * SEC_US + 999], dtype=np.int64))
    assert replay(ev, cfg()).batches[0].next_watermark_ms == 90_000
    neg = EventsTable.from_columns(np.array([-1500], dtype=np.int64))
    rt = WatermarkRuntime(neg, cfg())
    b = rt.run_data_batch(np.array([0]))
    assert b.event_time is not None and b.event_time.max_ms == -2
    assert b.source_watermarks_ms == {"": -10_002}
    assert rt.watermark_ms == 0  # the global watermark never goes below its initial 0


def test_null_event_times_are_filtered_not_counted_late_but_pull_min_and_avg() -> None:
    # Real run batch 2 above: rows 101 s, 83 s, null -> eventTime min 1970-01-01T00:00:00,
    # avg 00:01:01.333 = (101000 + 83000 + 0) / 3 = 61333 ms (truncated), max 00:01:41.
    r = replay(stream([100], [101, 83, None]), cfg())
    b = r.batches[2]
    assert b.null_time_rows == 1
    assert b.late_row_count == 1  # only the 83 s row
    assert b.event_time is not None
    assert (b.event_time.min_ms, b.event_time.max_ms, b.event_time.avg_ms, b.event_time.count) == (
        0,
        101_000,
        61_333,
        3,
    )
    assert r.summary.null_time_rows == 1
    assert r.summary.rows_with_time == 3


def test_batch_of_only_null_times_still_counts_as_rows_for_its_input() -> None:
    # Spark reads a null as 0 ms in EventTimeStats (count > 0), so the input's watermark becomes
    # 0 - delay; the global watermark stays 0 (it never goes back).
    r = replay(stream([None]), cfg())
    assert r.batches[0].source_watermarks_ms == {"": -10_000}
    assert r.batches[0].next_watermark_ms == 0


def test_event_time_stats_are_reported_for_the_first_input_with_rows() -> None:
    # Real multi_min run, batch 4 (s1:111, s2:140): progress eventTime min=max=avg=01:51 (s1 only;
    # ProgressReporter takes headOption over the EventTimeWatermarkExec operators with rows).
    events = stream(
        [{"t": 100, "source": "s1"}],
        [{"t": 111, "source": "s1"}, {"t": 140, "source": "s2"}],
    )
    b = replay(events, cfg()).batches[1]
    assert b.event_time is not None and b.event_time.max_ms == 111_000
    assert b.event_time_by_source["s2"].max_ms == 140_000


def test_no_data_batch_has_no_event_time_stats() -> None:
    r = replay(stream([100]), cfg())
    assert r.batches[1].event_time is None
    assert r.batches[1].input_rows == 0


def test_runtime_snapshot_is_plain_data() -> None:
    rt = WatermarkRuntime(stream([100, 103]), cfg())
    rt.run_data_batch(np.array([0, 1]))
    snap = rt.snapshot()
    assert snap == {
        "next_batch_id": 1,
        "watermark_ms": 93_000,
        "last_batch_watermark_ms": 0,
        "source_watermarks_ms": {"": 93_000},
        "state_rows": 1,
        "state": {
            "operator": "window_aggregation",
            "windows": [{"start_ms": 100_000, "end_ms": 105_000, "count": 2}],
        },
    }
    assert rt.needs_no_data_batch()


def test_future_skew_filter_removes_rows_before_the_watermark() -> None:
    # Trigger 10 s; two rows arrive at 95 s (batch fired at 100 s), one at 125 s (batch at 130 s; the
    # idle tick at 110 s runs a no-data batch). One row is dated 2099 (a future timestamp): without the
    # filter it jumps the watermark and the 96 s row is late at 130 s; with max_future_skew 1h it is
    # removed (event_time > 100 s + 1 h) and nothing is late.
    far = 4_070_908_800  # 2099-01-01 in seconds
    events = EventsTable.from_columns(
        np.array([90 * SEC_US, far * SEC_US, 96 * SEC_US], dtype=np.int64),
        arrival_ms=[95_000, 95_000, 125_000],
    )
    no_filter = replay(events, cfg(trigger_ms=10_000))
    assert no_filter.summary.dropped_rows == 1
    with_filter = replay(events, cfg(trigger_ms=10_000, max_future_skew_ms=3_600_000))
    assert with_filter.summary.future_filtered_rows == 1
    assert with_filter.summary.dropped_rows == 0
    assert with_filter.batches[0].input_rows == 2  # numInputRows counts rows before the filter


def test_watermark_assertion_guards_the_runtime() -> None:
    rt = WatermarkRuntime(stream([100]), cfg())
    rt.run_data_batch(np.array([0]))
    rt._wm = -5  # corrupt the state on purpose
    with pytest.raises(AssertionError, match="went back"):
        rt.run_no_data_batch()
