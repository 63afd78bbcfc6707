"""Batch planning: explicit batch column, processing-time trigger, row caps; latency bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.watermark import EngineConfigError, EventsTable, Tumbling, WatermarkConfig, plan_batches, replay
from tests.unit.engine_stream import SEC_US


def cfg(**kw: object) -> WatermarkConfig:
    base: dict[str, object] = {"delay_ms": 10_000, "window": Tumbling(5_000)}
    base.update(kw)
    return WatermarkConfig(**base)  # type: ignore[arg-type]


def table(times_s: list[int], **cols: object) -> EventsTable:
    return EventsTable.from_columns(np.array([t * SEC_US for t in times_s], dtype=np.int64), **cols)  # type: ignore[arg-type]


def test_explicit_batch_column_groups_rows_in_ascending_batch_order_keeping_file_order() -> None:
    ev = table([1, 2, 3, 4], batch=[5, 2, 5, 2])
    p = plan_batches(ev, cfg())
    assert [p.rows(j).tolist() for j in range(len(p))] == [[1, 3], [0, 2]]
    assert p.idle_after == [True, True]
    assert p.times_ms == [None, None]


def test_explicit_batches_take_processing_time_from_latest_arrival() -> None:
    ev = table([1, 2, 3], batch=[0, 0, 1], arrival_ms=[1_000, 4_000, 9_000])
    assert plan_batches(ev, cfg()).times_ms == [4_000, 9_000]


def test_trigger_batch_reads_rows_that_arrived_before_the_trigger() -> None:
    # Trigger 10 s fires at 10, 20, 30 s ... A row arriving at 10.000 s is read at 20 s (strictly
    # before the trigger), one at 9.999 s at 10 s. Ticks 10 and 20 are consecutive (no idle tick);
    # after 20 s nothing arrives until 35 s: the tick at 30 s is idle (a no-data batch may run there).
    ev = table([1, 2, 3, 4], arrival_ms=[9_999, 10_000, 35_000, 12_000])
    p = plan_batches(ev, cfg(trigger_ms=10_000))
    assert [p.rows(j).tolist() for j in range(len(p))] == [[0], [1, 3], [2]]
    assert p.times_ms == [10_000, 20_000, 40_000]
    assert p.idle_after == [False, True, True]
    assert p.idle_time_ms == [20_000, 30_000, 50_000]


def test_idle_trigger_tick_runs_the_no_data_batch_at_that_time() -> None:
    # Rows at 100 s arrive at 1 s (batch at 10 s); then nothing until 25 s (batch at 30 s). The idle
    # tick at 20 s runs a no-data batch with the new watermark 90 s.
    ev = table([100, 101], arrival_ms=[1_000, 25_000])
    r = replay(ev, cfg(trigger_ms=10_000))
    assert [(b.kind, b.processing_time_ms, b.watermark_ms) for b in r.batches] == [
        ("data", 10_000, 0),
        ("no-data", 20_000, 90_000),
        ("data", 30_000, 90_000),
        ("no-data", 40_000, 91_000),
    ]


def test_max_rows_per_batch_leaves_a_backlog_so_no_no_data_batch_runs_in_between() -> None:
    ev = table([100, 101, 102, 200, 201], arrival_ms=[1_000] * 5)
    p = plan_batches(ev, cfg(trigger_ms=10_000, max_rows_per_batch=2))
    assert [p.rows(j).tolist() for j in range(len(p))] == [[0, 1], [2, 3], [4]]
    assert p.times_ms == [10_000, 20_000, 30_000]
    assert p.idle_after == [False, False, True]
    r = replay(ev, cfg(trigger_ms=10_000, max_rows_per_batch=2))
    assert [b.kind for b in r.batches] == ["data", "data", "data", "no-data"]


def test_max_rows_per_batch_splits_an_explicit_batch() -> None:
    ev = table([1, 2, 3], batch=[0, 0, 0])
    p = plan_batches(ev, cfg(max_rows_per_batch=2))
    assert [p.rows(j).tolist() for j in range(len(p))] == [[0, 1], [2]]
    assert p.idle_after == [False, True]


def test_without_batch_or_trigger_all_rows_form_one_batch() -> None:
    p = plan_batches(table([3, 1, 2]), cfg())
    assert [p.rows(j).tolist() for j in range(len(p))] == [[0, 1, 2]]


def test_trigger_needs_arrival_times_and_arrival_times_need_a_trigger() -> None:
    with pytest.raises(EngineConfigError, match="arrival_time"):
        plan_batches(table([1]), cfg(trigger_ms=1_000))
    with pytest.raises(EngineConfigError, match="trigger"):
        plan_batches(table([1], arrival_ms=[5]), cfg())
    with pytest.raises(EngineConfigError, match="arrival_time"):
        plan_batches(table([1]), cfg(max_future_skew_ms=1_000))


def test_processing_time_latency_is_emitting_batch_time_minus_window_end() -> None:
    # Window [100,105) closes when wm >= 105 s, i.e. after a row >= 115 s; that row arrives at 118 s,
    # read at trigger 120 s; the no-data batch at the idle tick 130 s emits it: 130 - 105 = 25 s.
    ev = table([100, 116], arrival_ms=[101_000, 118_000])
    r = replay(ev, cfg(trigger_ms=10_000))
    assert r.summary.latency is not None
    assert (r.summary.latency.count, r.summary.latency.p50_ms) == (1, 25_000)
    # event-time latency: the stream's max event time (116 s) was 11 s past the end when emitted
    assert r.summary.event_time_latency.p50_ms == 11_000


def test_explicit_batches_with_arrival_times_are_idle_only_when_the_next_batch_had_not_arrived() -> None:
    # batch 1's first row arrived at 4 s, before batch 0 ran (its last row at 5 s): data waited, not
    # idle. Batch 2 arrives at 9 s, after batch 1 ran at 6 s: idle. The last batch is always idle.
    ev = table([1, 2, 3, 4], batch=[0, 1, 1, 2], arrival_ms=[5_000, 4_000, 6_000, 9_000])
    p = plan_batches(ev, cfg())
    assert p.idle_after == [False, True, True]
    assert (p.basis, p.labels) == ("arrival_time", [0, 1, 2])


def test_explicit_batch_arriving_at_the_same_instant_waits() -> None:
    # two files of one burst (the same arrival): the second is there when the first batch ends
    ev = table([1, 2], batch=[0, 1], arrival_ms=[7_000, 7_000])
    assert plan_batches(ev, cfg()).idle_after == [False, True]


def test_explicit_batches_without_arrival_times_follow_the_assumption_named() -> None:
    ev = table([1, 2, 3], batch=[4, 7, 9])
    caught_up = plan_batches(ev, cfg())
    assert (caught_up.idle_after, caught_up.basis, caught_up.labels) == ([True, True, True], "caught_up", [4, 7, 9])
    backlog = plan_batches(ev, cfg(backlog=True))
    assert (backlog.idle_after, backlog.basis) == ([False, False, True], "backlog")


def test_backlog_replay_runs_no_no_data_batch_between_batches() -> None:
    # windows of 5 s, delay 10 s: rows at 100 s, 120 s, 103 s. Caught up, the no-data batch after 120 s
    # runs with 110 s before 103 s arrives, so 103 s's batch filters against 110 s: late. As a backlog, 103 s's
    # batch runs right after 120 s's with 110 s for eviction but filters late rows against the previous
    # batch's watermark (90 s): kept. It does not move the watermark, so no no-data batch follows it.
    ev = table([100, 120, 103], batch=[0, 1, 2])
    live = replay(ev, cfg())
    assert [b.kind for b in live.batches] == ["data", "no-data", "data", "no-data", "data"]
    assert live.summary.dropped_rows == 1
    back = replay(ev, cfg(backlog=True))
    assert [b.kind for b in back.batches] == ["data", "data", "data"]
    assert back.summary.dropped_rows == 0
