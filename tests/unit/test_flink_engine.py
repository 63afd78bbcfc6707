"""The engine's Flink mode on scripted streams (TestStream style), each expectation derived by hand
from the Flink 2.3.0 rules named in the test (``BoundedOutOfOrdernessWatermarks``,
``WatermarksWithIdleness``, ``WatermarkOutputMultiplexer``, ``WindowOperator``, ``EventTimeTrigger``,
``MergingWindowSet``). Times in ms. The same rules are checked against a real Flink by
``tests/differential/flink``.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from monitor.watermark import EngineConfigError, EventsTable, Session, Sliding, Tumbling
from monitor.watermark.flink import (
    LONG_MAX,
    LONG_MIN,
    FlinkConfig,
    IdlePeriod,
    WatermarkTimeline,
    periodic_ticks,
    replay_flink,
    watermark_timeline,
    watermark_timeline_stepwise,
)


def table(
    ts_ms: list[int],
    arrival: list[int] | None = None,
    partition: list[int] | None = None,
    key: list[str] | None = None,
) -> EventsTable:
    return EventsTable.from_columns(
        np.asarray(ts_ms, dtype=np.int64) * 1000, arrival_ms=arrival, partition=partition, key=key
    )


def firings(r: object) -> list[tuple[int, int, int, int, bool]]:
    """(start, end, count, watermark, late_firing) in emission order."""
    return [
        (f["start_ms"], f["end_ms"], f["count"], f["watermark_ms"], f["late_firing"])
        for f in r.firing_records()  # type: ignore[attr-defined]
    ]


def per_event(**kw: object) -> FlinkConfig:
    kw.setdefault("per_event_watermarks", True)
    kw.setdefault("end_of_input", True)
    return FlinkConfig(**kw)  # type: ignore[arg-type]


# --- BoundedOutOfOrdernessWatermarks -------------------------------------------------------------


def test_watermark_is_max_minus_delay_minus_one_and_min_value_before_the_first() -> None:
    r = replay_flink(table([1000, 12_000, 5000]), per_event(delay_ms=1000, window=Tumbling(10_000)))
    # the first event meets Long.MIN_VALUE; after 1000: 1000-1000-1 = -1; after 12000: 10999
    assert r.timeline.event_watermark_ms.tolist() == [LONG_MIN, -1, 10_999]
    # [0,10000) fires at 10999 >= 9999 with the one element read before; 5000 then finds it late
    assert firings(r) == [(0, 10_000, 1, 10_999, False), (10_000, 20_000, 1, LONG_MAX, False)]
    assert r.summary.late_records_dropped == 1
    assert r.late_rows.tolist() == [2]


def test_monotonous_timestamps_are_delay_zero() -> None:
    r = replay_flink(
        table([9999, 10_000]), per_event(delay_ms=0, window=Tumbling(10_000), end_of_input=False)
    )
    # after 9999 the watermark is 9998: [0,10000) (maxTimestamp 9999) waits; after 10000 it is 9999: fires
    assert r.timeline.advance_ms.tolist() == [9998, 9999]
    assert firings(r) == [(0, 10_000, 1, 9999, False)]
    assert r.open_windows == [("", 10_000, 20_000, 1)]


# --- periodic emission on processing time ----------------------------------------------------------


def test_periodic_ticks_start_plus_k_intervals_up_to_run_until() -> None:
    cfg = FlinkConfig(
        delay_ms=0, window=Tumbling(1000), watermark_interval_ms=200, start_ms=0, run_until_ms=1000
    )
    assert periodic_ticks(np.array([50, 900]), cfg).tolist() == [200, 400, 600, 800, 1000]
    dflt = FlinkConfig(delay_ms=0, window=Tumbling(1000))  # start: first arrival; until: last + interval
    # until 1300 + 200 = 1500: the tick at 1400 is the first after the last arrival
    assert periodic_ticks(np.array([1000, 1300]), dflt).tolist() == [1200, 1400]


def test_an_event_arriving_at_a_tick_is_read_before_it() -> None:
    cfg = FlinkConfig(delay_ms=0, window=Tumbling(10_000), watermark_interval_ms=200, start_ms=0)
    r = replay_flink(table([5000, 15_000], arrival=[100, 200]), cfg)
    # tick 200 sees both events: 15000 - 0 - 1 = 14999 fires [0,10000) at processing time 200
    assert firings(r) == [(0, 10_000, 1, 14_999, False)]
    assert r.firing_records()[0]["processing_time_ms"] == 200


def test_periodic_watermarks_need_arrival_times() -> None:
    with pytest.raises(EngineConfigError, match="arrival_time"):
        replay_flink(table([1, 2]), FlinkConfig(delay_ms=0, window=Tumbling(10)))


# --- splits, the min, idleness ----------------------------------------------------------------------


def _two_splits() -> EventsTable:
    # split 0: ts 1000..10000 at arrivals 50..950; split 1: ts 500 at arrival 50, then silent
    ts = [1000 + 1000 * j for j in range(10)] + [500]
    arrival = [50 + 100 * j for j in range(10)] + [50]
    return table(ts, arrival=arrival, partition=[0] * 10 + [1])


def test_a_silent_split_holds_the_min_until_the_end_of_input() -> None:
    cfg = FlinkConfig(
        delay_ms=0,
        window=Tumbling(5000),
        watermark_interval_ms=100,
        start_ms=0,
        run_until_ms=2000,
        end_of_input=True,
    )
    r = replay_flink(_two_splits(), cfg)
    assert r.timeline.advance_ms.tolist()[:1] == [499]  # min(split 0: 999, split 1: 499)
    assert firings(r) == [
        (0, 5000, 5, LONG_MAX, False),
        (5000, 10_000, 5, LONG_MAX, False),
        (10_000, 15_000, 1, LONG_MAX, False),
    ]


def test_with_idleness_the_silent_split_turns_idle_on_a_later_check_and_stops_holding() -> None:
    cfg = FlinkConfig(
        delay_ms=0,
        window=Tumbling(5000),
        watermark_interval_ms=100,
        start_ms=0,
        run_until_ms=2000,
        idleness_ms=300,
        end_of_input=True,
    )
    r = replay_flink(_two_splits(), cfg)
    # split 1 (last event at 50): check 100 sees activity, 200 starts the countdown, 500 is 300 after
    # (not more), 600 is 400 > 300: idle at 600, 550 ms after its last event (timeout + 2.5 intervals)
    assert IdlePeriod(1, 600, None) in r.summary.idle_periods
    # tick 600: split 0 read ts up to 6000 (arrival 550) -> 5999; [0,5000) had 1000..4000 and 500
    assert firings(r)[0] == (0, 5000, 5, 5999, False)
    assert r.firing_records()[0]["processing_time_ms"] == 600


def test_all_splits_idle_jumps_to_the_highest_split_watermark_then_freezes() -> None:
    # Flink 2.3.0 CombinedWatermarkStatus: all idle -> max over the splits (seen in the differential run)
    cfg = FlinkConfig(
        delay_ms=0,
        window=Tumbling(5000),
        watermark_interval_ms=100,
        start_ms=0,
        run_until_ms=1000,
        idleness_ms=300,
    )
    r = replay_flink(table([9000, 1000], arrival=[50, 50], partition=[0, 1]), cfg)
    assert r.timeline.advance_ms.tolist() == [999, 8999]
    assert r.timeline.advance_time_ms.tolist() == [100, 600]
    assert firings(r) == [(0, 5000, 1, 8999, False)]
    assert r.open_windows == [("", 5000, 10_000, 1)]
    assert IdlePeriod(None, 600, None) in r.summary.idle_periods


@pytest.mark.parametrize(
    ("version", "last_idle", "advances"),
    [
        # split 1 (ts 1000, watermark 999) goes idle last, at 900; split 0 (8999) at 600
        (None, 1, ([999, 8999], [100, 900])),  # 2.2+: all idle -> flush the max (FLINK-38454)
        ((2, 2), 1, ([999, 8999], [100, 900])),
        ((2, 1), 1, ([999], [100])),  # 2.0/2.1: stays where the last active split (999) left it
        ((2, 0), 1, ([999], [100])),
        # split 0 (8999) goes idle last: once split 1 is idle, 8999 is the min over the active one
        ((2, 1), 0, ([999, 8999], [100, 600])),
        ((2, 3), 0, ([999, 8999], [100, 600])),
    ],
)
def test_all_splits_idle_by_flink_version_and_which_split_went_idle_last(
    version: tuple[int, int] | None, last_idle: int, advances: tuple[list[int], list[int]]
) -> None:
    cfg = FlinkConfig(
        delay_ms=0,
        window=Tumbling(5000),
        watermark_interval_ms=100,
        start_ms=0,
        run_until_ms=1200,
        idleness_ms=300,
        flink_version=version,
    )
    ts = {0: 9000, 1: 1000}
    # both splits read one row at 50; the split going idle last reads a second (same time) at 350
    events = table([ts[0], ts[1], ts[last_idle]], arrival=[50, 50, 350], partition=[0, 1, last_idle])
    r = replay_flink(events, cfg)
    assert (r.timeline.advance_ms.tolist(), r.timeline.advance_time_ms.tolist()) == advances
    assert IdlePeriod(None, 900, None) in r.summary.idle_periods  # both idle from 900 either way
    # the step-by-step mirror of the Flink classes agrees
    step = watermark_timeline_stepwise(
        np.asarray([ts[0], ts[1], ts[last_idle]], dtype=np.int64),
        np.asarray([0, 1, last_idle], dtype=np.int64),
        2,
        np.asarray([50, 50, 350], dtype=np.int64),
        cfg,
    )
    assert (step.advance_ms.tolist(), step.advance_time_ms.tolist()) == advances


def test_flink_version_text_and_bounds() -> None:
    from monitor.versions import FlinkVersionError, flushes_when_all_idle, parse_flink_version

    assert parse_flink_version("2.1.1") == (2, 1) and parse_flink_version("2.3-SNAPSHOT") == (2, 3)
    assert flushes_when_all_idle(None) and flushes_when_all_idle((2, 2)) and not flushes_when_all_idle((2, 1))
    for bad in ("1.20.1", "two", "2"):
        with pytest.raises(FlinkVersionError, match="flink version"):
            parse_flink_version(bad)


def test_a_declared_partition_without_rows_holds_the_watermark_at_min() -> None:
    cfg = per_event(delay_ms=0, window=Tumbling(10), partitions=(0, 1), end_of_input=False)
    r = replay_flink(table([100, 200], partition=[0, 0]), cfg)
    assert r.summary.final_watermark_ms is None
    assert firings(r) == []


# --- WindowOperator + EventTimeTrigger -------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_ts", "third_added"),
    [(15_000, False), (14_999, True)],  # cleanup time = end - 1 + lateness = 14999
)
def test_allowed_lateness_refires_per_late_element_and_keeps_state_until_end_minus_one_plus_lateness(
    last_ts: int, third_added: bool
) -> None:
    cfg = per_event(delay_ms=0, window=Tumbling(10_000), allowed_lateness_ms=5000)
    r = replay_flink(table([1000, 10_000, 2000, last_ts, 3000]), cfg)
    got = firings(r)
    assert got[:2] == [(0, 10_000, 1, 9999, False), (0, 10_000, 2, 9999, True)]
    if third_added:  # watermark 14998 < cleanup 14999: 3000 still joins and re-fires with 3
        assert got[2] == (0, 10_000, 3, 14_998, True)
        assert r.summary.late_records_dropped == 0
    else:  # watermark 14999: the state is gone, 3000 + 5000 <= 14999: dropped
        assert r.summary.late_records_dropped == 1
        assert r.late_rows.tolist() == [4]
    assert got[-1] == (10_000, 20_000, 2, LONG_MAX, False)


def test_late_side_output_takes_the_dropped_elements_and_the_counter_stays_zero() -> None:
    cfg = per_event(delay_ms=0, window=Tumbling(10_000), late_side_output=True)
    r = replay_flink(table([1000, 10_000, 2000]), cfg)
    assert r.summary.late_records_dropped == 0
    assert r.summary.late_side_output_records == 1
    assert r.late_rows.tolist() == [2]
    assert r.late_row_watermarks_ms.tolist() == [9999]


def test_sliding_element_late_for_some_windows_joins_the_others_silently() -> None:
    cfg = per_event(delay_ms=0, window=Sliding(10_000, 5000))
    r = replay_flink(table([12_000, 7000]), cfg)
    # 7000 is in [0,10000) (maxTimestamp 9999 <= 11999: late, skipped) and [5000,15000) (added)
    assert r.summary.late_records_dropped == 0
    assert firings(r) == [(5000, 15_000, 2, LONG_MAX, False), (10_000, 20_000, 1, LONG_MAX, False)]


def test_sliding_with_gaps_an_element_between_windows_counts_only_when_late() -> None:
    cfg = per_event(delay_ms=0, window=Sliding(2000, 3000), end_of_input=False)
    r = replay_flink(table([2500, 10_001, 2500]), cfg)
    # windows [0,2000), [3000,5000), ...: 2500 is in none. First at MIN (not late): gone silently;
    # second at watermark 10000: skipped and 2500 <= 10000, so numLateRecordsDropped counts it
    assert r.summary.late_records_dropped == 1
    assert r.late_rows.tolist() == [2]
    assert firings(r) == []


def test_session_windows_merge_touching_sessions_and_a_late_own_session_joins_an_in_flight_one() -> None:
    cfg = per_event(delay_ms=0, window=Session(1000))
    r = replay_flink(table([1000, 2000, 5000, 4500, 3600, 2000]), cfg)
    got = firings(r)
    # 1000 + 2000: [1000,2000) and [2000,3000) touch -> [1000,3000); fires after 5000 (watermark 4999)
    assert got[0] == (1000, 3000, 2, 4999, False)
    # 4500 joins [5000,6000) -> [4500,6000); 3600's own [3600,4600) is late (4599 <= 4999) but touches
    # the in-flight session -> [3600,6000) with 3; the second 2000's [2000,3000) touches nothing: dropped
    assert got[1:] == [(3600, 6000, 3, LONG_MAX, False)]
    assert r.summary.late_records_dropped == 1
    assert r.late_rows.tolist() == [5]


def test_session_keys_are_independent() -> None:
    cfg = per_event(delay_ms=0, window=Session(1000))
    r = replay_flink(table([1000, 1500, 4000], key=["a", "b", "a"]), cfg)
    recs = sorted(
        (f["key"], f["start_ms"], f["end_ms"], f["count"], f["watermark_ms"]) for f in r.firing_records()
    )
    assert recs == [("a", 1000, 2000, 1, 3999), ("a", 4000, 5000, 1, LONG_MAX), ("b", 1500, 2500, 1, 3999)]


def test_the_watermark_never_goes_back() -> None:
    with pytest.raises(AssertionError, match="went back"):
        WatermarkTimeline(np.zeros(0, dtype=np.int64), np.array([1, 2]), np.array([5, 4]), np.array([0, 0]))


def test_config_validation_names_the_field() -> None:
    with pytest.raises(EngineConfigError, match="delay_ms"):
        FlinkConfig(delay_ms=-1, window=Tumbling(10))
    with pytest.raises(EngineConfigError, match="idleness_ms"):
        FlinkConfig(delay_ms=0, window=Tumbling(10), idleness_ms=0)
    with pytest.raises(EngineConfigError, match="Sliding"):
        FlinkConfig(delay_ms=0, window=Sliding(10, 0))


# --- the vectorised timeline equals the class-by-class mirror -------------------------------------


@pytest.mark.parametrize("seed", range(60))
def test_vectorised_watermark_timeline_equals_the_stepwise_mirror(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.randint(0, 80)
    parts = rnd.randint(1, 4)
    arrival = np.cumsum([rnd.choice([0, 30, 120, 700]) for _ in range(n)]).astype(np.int64) + 10_000
    ts = np.array([rnd.randint(0, 20_000) for _ in range(n)], dtype=np.int64)
    part = np.array([rnd.randrange(parts) for _ in range(n)], dtype=np.int64)
    cfg = FlinkConfig(
        delay_ms=rnd.choice([0, 100, 2000]),
        window=Tumbling(1000),
        idleness_ms=rnd.choice([None, 250, 1000]),
        watermark_interval_ms=rnd.choice([100, 200]),
        per_event_watermarks=rnd.random() < 0.3,
        start_ms=9_900,
        run_until_ms=int(arrival[-1]) + 3000 if n else 13_000,
    )
    a = watermark_timeline(ts, part, parts, arrival, cfg)
    b = watermark_timeline_stepwise(ts, part, parts, arrival, cfg)
    assert a.event_watermark_ms.tolist() == b.event_watermark_ms.tolist()
    assert a.advance_ms.tolist() == b.advance_ms.tolist()
    assert a.advance_pos.tolist() == b.advance_pos.tolist()
    assert a.idle_periods == b.idle_periods
    assert a.final_partition_watermarks_ms == b.final_partition_watermarks_ms


def test_a_span_too_long_for_the_interval_is_a_clear_error() -> None:
    cfg = FlinkConfig(delay_ms=0, window=Tumbling(1000), watermark_interval_ms=1)
    with pytest.raises(EngineConfigError, match="larger watermark interval"):
        periodic_ticks(np.array([0, 10**9]), cfg)
