"""Delay sweeps and the target-completeness recommendation."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.watermark import EngineConfigError, EventsTable, Tumbling, WatermarkConfig
from monitor.watermark.sweep import recommend_delay, sweep

SEC_US = 1_000_000


def events() -> EventsTable:
    # One batch per row, in this order (seconds): 100, 110, 103, 120, 104, 130.
    # Late-filter watermarks per data batch with delay d (previous batch's watermark; a no-data batch
    # runs between data batches when the watermark moved): batch of 103 s filters against 110 - d,
    # of 104 s against 120 - d. 103 s is in [100,105) (late iff 105 <= 110 - d, i.e. d <= 5 s);
    # 104 s likewise late iff 105 <= 120 - d, i.e. d <= 15 s.
    t = [100, 110, 103, 120, 104, 130]
    return EventsTable.from_columns(np.array([x * SEC_US for x in t], dtype=np.int64), batch=list(range(6)))


def cfg() -> WatermarkConfig:
    return WatermarkConfig(delay_ms=0, window=Tumbling(5_000))


def test_sweep_dropped_rows_per_delay() -> None:
    out = sweep(events(), cfg(), [0, 5_000, 6_000, 15_000, 16_000])
    assert [s.dropped_rows for s in out] == [2, 2, 1, 1, 0]
    assert [s.delay_ms for s in out] == [0, 5_000, 6_000, 15_000, 16_000]


def test_recommend_reads_the_smallest_delay_off_the_lateness_to_the_millisecond() -> None:
    # 100% completeness: no drop allowed. 104 s is late iff 105 <= 120 - d (ms granularity), so the
    # smallest delay keeping it is 15.001 s: not a delay on any ladder (the old 1 s bisection said 16 s).
    rec = recommend_delay(events(), cfg(), 100.0)
    assert rec.delay_ms == 15_001
    assert rec.estimated_ms == 15_001 and rec.confirmed
    assert rec.summary.dropped_rows == 0
    # the replays agree: 15.000 s still drops the 104 s row, 15.001 s drops nothing
    assert [s.dropped_rows for s in sweep(events(), cfg(), [15_000, 15_001])] == [1, 0]
    # 80% allows 1 of 6 rows: 103 s must be kept, 5.001 s does it.
    rec80 = recommend_delay(events(), cfg(), 80.0, candidates_ms=[0, 60_000])
    assert (rec80.allowed_rows, rec80.delay_ms, rec80.smallest_candidate_ms) == (1, 5_001, 60_000)


def test_recommend_finds_the_delay_even_when_no_candidate_meets_the_target() -> None:
    rec = recommend_delay(events(), cfg(), 100.0, candidates_ms=[0, 1_000])
    assert rec.smallest_candidate_ms is None
    assert rec.delay_ms == 15_001


def test_recommend_confirms_by_replay_where_the_shift_is_inexact() -> None:
    # All times before the delay: the watermark is floored at 0, so the lateness at delay 0 overstates
    # what a delay must cover; the confirming replays settle on the true minimum.
    t = [10, 1, 20, 2, 30, 3]
    ev = EventsTable.from_columns(np.array([x * SEC_US for x in t], dtype=np.int64), batch=list(range(6)))
    rec = recommend_delay(ev, WatermarkConfig(delay_ms=0, window=Tumbling(1_000)), 100.0)
    assert rec.confirmed
    passing, failing = sweep(
        ev, WatermarkConfig(delay_ms=0, window=Tumbling(1_000)), [rec.delay_ms, rec.delay_ms - 1]
    )
    assert passing.dropped_rows == 0 and failing.dropped_rows > 0


def test_target_must_be_a_percentage() -> None:
    with pytest.raises(EngineConfigError):
        recommend_delay(events(), cfg(), 0.0)
