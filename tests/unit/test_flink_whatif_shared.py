"""The Flink what-if pieces shared by the CLI and the dashboard (monitor/watermark/flink/whatif.py) and the
window state per watermark advance, on small per-event streams derived by hand (times in ms; the
watermark after an element is ``max - delay - 1``, ``BoundedOutOfOrdernessWatermarks``; a window
``[s, e)`` leaves the ``WindowOperator``'s state when the watermark reaches ``e - 1 + allowedLateness``)."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.watermark import EngineConfigError, EventsTable
from monitor.watermark.flink import replay_flink
from monitor.watermark.flink.whatif import (
    FlinkWhatifError,
    check_flink_events,
    recommend_flink_delay,
    sweep_flink,
    watermark_mover,
)
from monitor.watermark.whatif_config import flink_config


def table(ts_ms: list[int], **cols: object) -> EventsTable:
    return EventsTable.from_columns(np.asarray(ts_ms, dtype=np.int64) * 1000, **cols)  # type: ignore[arg-type]


def test_check_flink_events_names_the_file_and_column() -> None:
    with pytest.raises(FlinkWhatifError, match=r"e\.csv has a 'source' column"):
        check_flink_events(table([1, 2], source=["a", "b"]), "e.csv")
    check_flink_events(table([1, 2], partition=[0, 1]), "e.csv")  # partitions are splits: fine


# Stream 1000, 12000, 2000, 25000, 11000 (one key), delay 1000, tumbling 10 s, per event:
#   after 1000 -> wm -1; after 12000 -> 10999: [0,10000) fires and leaves state; 2000 is late (9999 <= 10999);
#   after 25000 -> 23999: [10000,20000) fires; 11000 is late. Advances: -1, 10999, 23999.
TS = [1000, 12_000, 2000, 25_000, 11_000]


def per_event(**kw: object) -> object:
    if "gap_ms" not in kw:
        kw.setdefault("size_ms", 10_000)
    return flink_config(delay_ms=kw.pop("delay_ms", 1000), per_event_watermarks=True, **kw)  # type: ignore[arg-type]


def test_state_windows_after_each_advance() -> None:
    r = replay_flink(table(TS), per_event())  # type: ignore[arg-type]
    assert r.timeline.advance_ms.tolist() == [-1, 10_999, 23_999]
    # -1: [0,10000) in state; 10999: [0,10000) cleaned, [10000,20000) in state; 23999: [20000,30000) only
    assert r.state_windows is not None and r.state_windows.tolist() == [1, 1, 1]
    # allowed lateness 5 s: [0,10000) stays until 14999, so after 10999 both windows are in state;
    # 2000 is then not late (a late firing), and after 23999 [10000,20000) (cleanup 24999) stays too
    r2 = replay_flink(table(TS), per_event(allowed_lateness_ms=5000))  # type: ignore[arg-type]
    assert r2.state_windows is not None and r2.state_windows.tolist() == [1, 2, 2]
    assert r2.summary.late_elements == 0


def test_sessions_have_no_state_series() -> None:
    r = replay_flink(table(TS), per_event(gap_ms=3000))  # type: ignore[arg-type]
    assert r.state_windows is None


def test_watermark_mover_is_the_largest_step_and_the_element_behind_it() -> None:
    r = replay_flink(table(TS), per_event())  # type: ignore[arg-type]
    m = watermark_mover(table(TS), r)
    # steps: -1 -> 10999 (+11000), 10999 -> 23999 (+13000): the second, set by 25000 (row 3)
    assert m is not None and (m.from_ms, m.to_ms, m.row) == (10_999, 23_999, 3)


def test_sweep_and_recommendation() -> None:
    cfg = per_event()
    # delay 1000: 2 late (above); 11000: after 25000 wm 13999, 11000 meets [10000,20000) open -> only 2000
    # (after 12000 wm 999 < 9999: not late either) -> 0 late; 0 ms: after 12000 wm 11999 -> 2000 late,
    # after 25000 wm 24999 -> 11000 late: 2.
    got = sweep_flink(table(TS), cfg, [0, 1000, 11_000])  # type: ignore[arg-type]
    assert [(s.delay_ms, s.late_elements) for s in got] == [(0, 2), (1000, 2), (11_000, 0)]
    assert recommend_flink_delay(got, 99.0) == 11_000  # 1 % of 5 rows: 0 late allowed
    assert recommend_flink_delay(got, 60.0) == 0  # 40 % of 5 rows: 2 late allowed
    assert recommend_flink_delay(got[:2], 99.0) is None
    with pytest.raises(EngineConfigError, match="target completeness"):
        recommend_flink_delay(got, 0)
