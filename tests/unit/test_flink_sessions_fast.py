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
from monitor.watermark.flink import FlinkConfig, FlinkReplay, replay_flink
from monitor.watermark.flink import operator as flink_operator

FIRING_COLUMNS = ("start_ms", "end_ms", "count", "watermark_ms", "late_firing", "key_codes", "seq", "time_ms")


def _events(seed: int, n: int) -> EventsTable:
    """``n`` events of up to 4 keys over 3 partitions: mostly in order with a lag, some far out of order
    (late), some bursts on one key; about one in three streams has a silent partition (idleness)."""
    rng = np.random.default_rng(seed)
    step = int(rng.choice([1, 10, 50, 200]))
    event_ms = 1_000_000 + np.cumsum(rng.integers(0, 2 * step + 1, n))
    lag = rng.exponential(float(rng.choice([100, 1000, 3000])), n).astype(np.int64)
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
        delay_ms=int(rng.choice([0, 100, 1000, 5000])),
        window=Session(int(rng.choice([1, 50, 300, 2000]))),
        allowed_lateness_ms=int(rng.choice([0, 0, 200, 3000])),
        idleness_ms=int(rng.choice([500, 3000])) if rng.random() < 0.4 else None,
        per_event_watermarks=bool(rng.random() < 0.3),
        end_of_input=bool(rng.random() < 0.5),
    )


def _replay(events: EventsTable, cfg: FlinkConfig, element_by_element: bool, mp: pytest.MonkeyPatch) -> FlinkReplay:
    mp.setattr(flink_operator, "_SESSIONS_ELEMENT_BY_ELEMENT", element_by_element)
    return replay_flink(events, cfg)


def _assert_same(fast: FlinkReplay, ref: FlinkReplay) -> None:
    for col in FIRING_COLUMNS:
        assert getattr(fast.firings, col).tolist() == getattr(ref.firings, col).tolist(), col
    assert fast.late_rows.tolist() == ref.late_rows.tolist()
    assert fast.open_windows == ref.open_windows
    assert fast.summary == ref.summary


@pytest.mark.parametrize("seed", range(300))
def test_fast_sessions_equal_the_element_by_element_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events(seed, int(np.random.default_rng(seed).integers(1, 120)))
    cfg = _config(seed)
    ref = _replay(events, cfg, True, monkeypatch)
    fast = _replay(events, cfg, False, monkeypatch)
    _assert_same(fast, ref)
