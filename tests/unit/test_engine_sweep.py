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


def test_recommend_smallest_delay_meeting_target_by_bisection() -> None:
    # 100% completeness: no drop allowed -> d >= 16 s; the ladder's first pass is 30 s, bisection
    # between 10 s and 30 s at 1 s resolution finds 16 s.
    rec = recommend_delay(events(), cfg(), 100.0)
    assert rec.delay_ms == 16_000
    assert rec.smallest_candidate_ms == 30_000
    assert rec.summary.dropped_rows == 0
    # 80% allows 1 of 6: d >= 6 s.
    assert recommend_delay(events(), cfg(), 80.0, candidates_ms=[0, 60_000]).delay_ms == 6_000


def test_recommend_reports_when_no_candidate_meets_target() -> None:
    rec = recommend_delay(events(), cfg(), 100.0, candidates_ms=[0, 1_000])
    assert rec.delay_ms is None
    assert rec.summary.delay_ms == 1_000


def test_target_must_be_a_percentage() -> None:
    with pytest.raises(EngineConfigError):
        recommend_delay(events(), cfg(), 0.0)
