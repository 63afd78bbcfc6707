"""The vectorised session-window path of the Flink mode against the element-by-element one.

``monitor.watermark.flink.operator._sessions`` settles the gap-connected runs it proves simple with
NumPy and sends the rest through ``_SessionKey`` (``MergingWindowSet`` + ``EventTimeTrigger``, element by
element), which the Flink differential tests check against a real Flink. Here every stream is replayed
both ways (``_SESSIONS_ELEMENT_BY_ELEMENT`` forces the reference path) and every output must be the
same: firings (window, count, watermark, late flag, key, seq, time), late elements, open windows.
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor.watermark import EventsTable, Session
from monitor.watermark.flink import LONG_MAX, FlinkConfig, FlinkReplay, replay_flink
from monitor.watermark.flink import operator as flink_operator

FIRING_COLUMNS = ("start_ms", "end_ms", "count", "watermark_ms", "late_firing", "key_codes", "seq", "time_ms")


def _events(seed: int, n: int) -> EventsTable:
    """``n`` events of up to 4 keys over 3 partitions: mostly in order with a lag, some far out of order
    (late); small gaps, delays and lags on a millisecond grid make the watermark meet window ends exactly;
    about one in three streams has a silent partition (idleness)."""
    rng = np.random.default_rng(seed)
    step = int(rng.choice([1, 1, 10, 50, 200]))
    event_ms = 1_000_000 + np.cumsum(rng.integers(0, 2 * step + 1, n))
    lag = rng.exponential(float(rng.choice([2, 10, 100, 1000, 3000])), n).astype(np.int64)
    late = rng.random(n) < float(rng.choice([0.0, 0.05, 0.3]))
    lag[late] += rng.integers(0, 20_000, int(late.sum()))
    arrival = event_ms + lag
    order = np.argsort(arrival, kind="stable")
    partition = rng.integers(0, 3, n)
    if rng.random() < 0.3:  # partition 2 falls silent halfway
        half = np.arange(n) >= n // 2
        partition[half & (partition == 2)] = 0
    keys = rng.integers(0, int(rng.integers(1, 5)), n)
    return EventsTable(
        event_time_us=event_ms[order] * 1000,
        valid=np.ones(n, dtype=np.bool_),
        source_codes=np.zeros(n, dtype=np.int32),
        source_names=("",),
        key_codes=keys[order].astype(np.int32),
        key_names=("a", "b", "c", "d"),
        arrival_ms=arrival[order],
        partition=partition[order].astype(np.int64),
    )


def _config(seed: int) -> FlinkConfig:
    rng = np.random.default_rng(10_000 + seed)
    return FlinkConfig(
        delay_ms=int(rng.choice([0, 1, 3, 100, 1000, 5000])),
        window=Session(int(rng.choice([1, 2, 5, 50, 300, 2000]))),
        allowed_lateness_ms=int(rng.choice([0, 0, 1, 4, 200, 3000])),
        idleness_ms=int(rng.choice([500, 3000])) if rng.random() < 0.4 else None,
        per_event_watermarks=bool(rng.random() < 0.3),
        end_of_input=bool(rng.random() < 0.5),
    )


def _replay(
    events: EventsTable, cfg: FlinkConfig, element_by_element: bool, mp: pytest.MonkeyPatch
) -> FlinkReplay:
    mp.setattr(flink_operator, "_SESSIONS_ELEMENT_BY_ELEMENT", element_by_element)
    return replay_flink(events, cfg)


def _assert_same(fast: FlinkReplay, ref: FlinkReplay) -> None:
    for col in FIRING_COLUMNS:
        assert getattr(fast.firings, col).tolist() == getattr(ref.firings, col).tolist(), col
    assert fast.late_rows.tolist() == ref.late_rows.tolist()
    assert fast.open_windows == ref.open_windows
    assert fast.summary == ref.summary


@pytest.mark.parametrize("seed", range(600))
def test_fast_sessions_equal_the_element_by_element_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events(seed, int(np.random.default_rng(seed).integers(1, 120)))
    cfg = _config(seed)
    ref = _replay(events, cfg, True, monkeypatch)
    fast = _replay(events, cfg, False, monkeypatch)
    _assert_same(fast, ref)


def _table(ts_ms: list[int], key: list[str]) -> EventsTable:
    return EventsTable.from_columns(np.asarray(ts_ms, dtype=np.int64) * 1000, key=key)


@pytest.mark.parametrize(
    ("b_ms", "expected"),
    [
        # watermark 108 when 105 comes: [100,110)'s timer (109) has not fired, 105 merges -> [100,115)
        (109, [("a", 100, 115, 2, LONG_MAX)]),
        # watermark 109: the timer fires first ([100,110) with 100 alone), 105 opens [105,115)
        (110, [("a", 100, 110, 1, 109), ("a", 105, 115, 1, LONG_MAX)]),
    ],
)
def test_a_session_fires_before_its_bridge_arrives_only_once_the_watermark_reaches_its_end(
    b_ms: int, expected: list[tuple[str, int, int, int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # gap 10, forMonotonousTimestamps (watermark = max - 1), per-event; key b only moves the watermark
    cfg = FlinkConfig(delay_ms=0, window=Session(10), per_event_watermarks=True, end_of_input=True)
    events = _table([100, b_ms, 105], ["a", "b", "a"])
    fast = _replay(events, cfg, False, monkeypatch)
    got = [
        (f["key"], f["start_ms"], f["end_ms"], f["count"], f["watermark_ms"]) for f in fast.firing_records()
    ]
    assert [g for g in got if g[0] == "a"] == expected
    _assert_same(fast, _replay(events, cfg, True, monkeypatch))


@pytest.mark.parametrize(
    ("b_ms", "expected_a", "late_rows", "slow_rows"),
    [
        # watermark 133: [112,135) (cleanup 134) is in flight when 104 comes: 104 merges into it
        (134, [(100, 116, 2, 119), (104, 135, 4, LONG_MAX)], [], [0, 1, 2, 3, 4, 6]),
        # watermark 134: [112,135) was cleaned up just before: 104 touches nothing, dropped as late
        (135, [(100, 116, 2, 119), (112, 135, 3, 134)], [6], []),
    ],
)
def test_a_late_element_joins_a_session_still_in_flight_through_an_earlier_late_element(
    b_ms: int,
    expected_a: list[tuple[int, int, int, int]],
    late_rows: list[int],
    slow_rows: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # gap 10, watermark = max - 1 per event. [100,116) fires at 119 (when 120 comes). 112 comes at
    # watermark 124: its own window is late but it touches [120,135), which becomes [112,135).
    # 104 (own window late, its neighbours' session [100,116) long gone) then meets [112,135) or not.
    cfg = FlinkConfig(delay_ms=0, window=Session(10), per_event_watermarks=True, end_of_input=True)
    events = _table([100, 106, 120, 125, 112, b_ms, 104], ["a", "a", "a", "a", "a", "b", "a"])
    fast = _replay(events, cfg, False, monkeypatch)
    got = [
        (f["start_ms"], f["end_ms"], f["count"], f["watermark_ms"])
        for f in fast.firing_records()
        if f["key"] == "a"
    ]
    assert got == expected_a
    assert fast.late_rows.tolist() == late_rows
    _assert_same(fast, _replay(events, cfg, True, monkeypatch))
    # which rows the vectorised path leaves to the element-by-element one
    ts = np.floor_divide(events.event_time_us, 1000)
    simple = flink_operator._simple_sessions(ts, events.key_codes.astype(np.int64), fast.timeline, 10, 0)
    assert simple.slow_positions.tolist() == slow_rows


@pytest.mark.parametrize(
    ("b_ms", "expected_a", "late_rows", "slow_rows"),
    [
        # watermark 121 when 104 comes: [113,123) (cleanup 122) is in flight: 104 merges into it
        (122, [(100, 115, 2, 114), (104, 123, 2, LONG_MAX)], [], [0, 1, 3, 5]),
        # watermark 122: [113,123) was cleaned up just before: 104 is dropped as late
        (123, [(100, 115, 2, 114), (113, 123, 1, 122)], [5], []),
    ],
)
def test_a_session_cut_off_by_a_firing_is_in_flight_until_its_own_cleanup(
    b_ms: int,
    expected_a: list[tuple[int, int, int, int]],
    late_rows: list[int],
    slow_rows: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # gap 10, watermark = max - 1 per event. 115 (key b) takes the watermark to 114: [100,115) fires
    # when 113 comes, which opens [113,123) although it is within the gap of 105.
    cfg = FlinkConfig(delay_ms=0, window=Session(10), per_event_watermarks=True, end_of_input=True)
    events = _table([100, 105, 115, 113, b_ms, 104], ["a", "a", "b", "a", "b", "a"])
    fast = _replay(events, cfg, False, monkeypatch)
    got = [
        (f["start_ms"], f["end_ms"], f["count"], f["watermark_ms"])
        for f in fast.firing_records()
        if f["key"] == "a"
    ]
    assert got == expected_a
    assert fast.late_rows.tolist() == late_rows
    _assert_same(fast, _replay(events, cfg, True, monkeypatch))
    ts = np.floor_divide(events.event_time_us, 1000)
    simple = flink_operator._simple_sessions(ts, events.key_codes.astype(np.int64), fast.timeline, 10, 0)
    assert simple.slow_positions.tolist() == slow_rows
