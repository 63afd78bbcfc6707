"""Window aggregations: tumbling, sliding, session; append and update; state and the dropped metric.

Times in seconds (engine_stream.py); delay 10 s unless said. Cases marked "real run" were run on
PySpark 4.3.0 (local[1], file source, one file per batch, processAllAvailable() after each file,
shuffle partitions 1); the observed progress (numRowsTotal, numRowsUpdated, numRowsRemoved,
numRowsDroppedByWatermark) and sink rows are quoted.
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor.watermark import (
    EngineConfigError,
    EventsTable,
    Session,
    Sliding,
    Tumbling,
    WatermarkConfig,
    replay,
)
from tests.unit.engine_stream import SEC_US, emitted_s, stream, summary_rows


def state_metrics(r: object) -> list[tuple[int, int, int, int | None]]:
    return [
        (b.state_rows, b.state_rows_updated, b.state_rows_removed, b.dropped_by_watermark_metric)
        for b in r.batches  # type: ignore[attr-defined]
    ]


def test_sliding_windows_real_run() -> None:
    # Real run (window 10 s, slide 5 s, append), batches [100,103] [112,96,99,null] [125,101]:
    #   0 (2,2,0,0) | 1 nd wm 01:33 | 2 (5,4,0,0) | 3 nd wm 01:42 (4,0,1), sink [01:30,01:40)=2 |
    #   4 (6,4,0,0) | 5 nd wm 01:55 (3,0,3), sink [01:35,01:45)=5 [01:40,01:50)=3 [01:45,01:55)=1.
    # Hand: each row is in [s-5k, s-5k+10) for the two 5 s-aligned starts <= t; 96 and 99 are in
    # [90,100) and [95,105) (ends 100, 105 > late wm 93: in time).
    events = stream([100, 103], [112, 96, 99, None], [125, 101])
    r = replay(events, WatermarkConfig(delay_ms=10_000, window=Sliding(10_000, 5_000)))
    assert [(b.kind, b.watermark_ms // 1000) for b in r.batches] == [
        ("data", 0),
        ("no-data", 93),
        ("data", 93),
        ("no-data", 102),
        ("data", 102),
        ("no-data", 115),
    ]
    assert [(s, u, rm) for s, u, rm, _ in state_metrics(r)] == [
        (2, 2, 0),
        (2, 0, 0),
        (5, 4, 0),
        (4, 0, 1),
        (6, 4, 0),
        (3, 0, 3),
    ]
    assert emitted_s(r.batches[3]) == [(90, 100, 2)]
    assert emitted_s(r.batches[5]) == [(95, 105, 5), (100, 110, 3), (105, 115, 1)]


def test_sliding_window_row_late_for_one_window_counts_in_the_other() -> None:
    # wm after batch 0 = 110 - 10 = 100. Row 97 s: windows [90,100) (end 100 <= 100: late) and
    # [95,105) (in time). It is one late (row, window) pair and one late row; [95,105) gets it (and
    # is emitted once the 130 s row moves the watermark to 120).
    r = replay(stream([110], [97], [130]), WatermarkConfig(delay_ms=10_000, window=Sliding(10_000, 5_000)))
    b = r.batches[2]
    assert [(x.window_start_ms, x.window_end_ms) for x in b.late_rows] == [(90_000, 100_000)]
    assert b.late_row_count == 1
    assert r.summary.dropped_rows == 1
    final = [w for bb in r.batches for w in emitted_s(bb)]
    assert (95, 105, 1) in final


def test_sliding_window_size_not_multiple_of_slide_keeps_only_windows_containing_the_row() -> None:
    # size 10 s, slide 4 s: ceil(10/4) = 3 candidates; row 100 s: last start 100, candidates
    # [100,110) [96,106) [92,102); all contain 100. Row 103 s: last start 100: [100,110) [96,106)
    # contain it, [92,102) does not (TimeWindowing's filter start <= t < end).
    # Delay 0: the no-data batch at wm 103 closes [92,102) only.
    r = replay(stream([100, 103]), WatermarkConfig(delay_ms=0, window=Sliding(10_000, 4_000)))
    assert [emitted_s(b) for b in r.batches] == [[], [(92, 102, 1)]]
    assert r.batches[-1].state_rows == 2
    r2 = replay(stream([100, 103], [200]), WatermarkConfig(delay_ms=0, window=Sliding(10_000, 4_000)))
    final = sorted(w for b in r2.batches for w in emitted_s(b))
    assert final == [(92, 102, 1), (96, 106, 2), (100, 110, 2)]


def test_tumbling_window_start_before_1970_is_floor_aligned_and_late_from_batch_0() -> None:
    # Spark 3.4+ TimeWindowing: start = t - floorMod(t - offset, slide). t = -7 s, size 5 s ->
    # [-10, -5). (The pre-3.4 formula gave [-5, 0), which does not contain t.) Batch 0 filters late
    # rows against watermark 0 (getInputWatermarkForLateEvents(-1) = 0), so a window ending before
    # 1970 is already late in the first batch.
    events = EventsTable.from_columns(np.array([-7 * SEC_US], dtype=np.int64))
    r = replay(events, WatermarkConfig(delay_ms=0, window=Tumbling(5_000)))
    assert [(x.window_start_ms, x.window_end_ms, x.lateness_ms) for x in r.batches[0].late_rows] == [
        (-10_000, -5_000, 5_000)
    ]


def test_window_offset_shifts_window_starts() -> None:
    # window(event_time, "5 seconds", startTime="2 seconds"): 100 s is in [97, 102).
    r = replay(
        stream([100]), WatermarkConfig(delay_ms=0, window=Tumbling(5_000, offset_ms=2_000), output_mode="update")
    )
    assert emitted_s(r.batches[0]) == [(97, 102, 1)]


def test_update_mode_real_run() -> None:
    # Real run (update mode, tumbling 5 s), batches [100] [101,83,null] [84,120,107]:
    #   0 (1,1,0,0) sink [01:40,01:45)=1 | 1 nd | 2 (1,1,0,1) sink [01:40,01:45)=2 | 3 nd |
    #   4 (3,2,0,1) sink [01:45,01:50)=1 [02:00,02:05)=1 | 5 nd wm 01:50 (1,0,2,0), nothing sent.
    r = replay(
        stream([100], [101, 83, None], [84, 120, 107]),
        WatermarkConfig(delay_ms=10_000, window=Tumbling(5_000), output_mode="update"),
    )
    assert [(s, u, rm) for s, u, rm, _ in state_metrics(r)] == [
        (1, 1, 0),
        (1, 0, 0),
        (1, 1, 0),
        (1, 0, 0),
        (3, 2, 0),
        (1, 0, 2),
    ]
    assert [emitted_s(b) for b in r.batches] == [
        [(100, 105, 1)],
        [],
        [(100, 105, 2)],
        [],
        [(105, 110, 1), (120, 125, 1)],
        [],
    ]


def test_append_mode_emits_each_window_once_when_the_watermark_passes_its_end() -> None:
    r = replay(stream([100, 101], [106], [130]), WatermarkConfig(delay_ms=5_000, window=Tumbling(5_000)))
    emitted = [(b.batch_id, emitted_s(b)) for b in r.batches if len(b.emitted)]
    # wm after [106] = 101 (no: 106-5 = 101 < 105) ; after [130] = 125 closes [100,105) and [105,110)
    assert emitted == [(5, [(100, 105, 2), (105, 110, 1)])]
    assert summary_rows(r.batches)[-1] == (5, "no-data", 125, 0, 0, 1)  # [130,135) stays


def test_group_by_key_keeps_one_state_row_per_key_and_window() -> None:
    events = stream(
        [{"t": 100, "key": "a"}, {"t": 101, "key": "b"}, {"t": 102, "key": "a"}],
        [{"t": 120, "key": "b"}],
    )
    r = replay(events, WatermarkConfig(delay_ms=5_000, window=Tumbling(5_000), group_by_key=True))
    assert r.batches[0].state_rows == 2  # (a,[100,105)) and (b,[100,105))
    out = [(w.key, w.start_ms // 1000, w.count) for b in r.batches for w in b.emitted.to_list()]
    assert out == [("a", 100, 2), ("b", 100, 1)]


def test_dropped_metric_counts_distinct_late_groups_not_raw_rows() -> None:
    # Real run (metric_partial): batch 2 read two files in one task with rows 80,81,82,83 (all in
    # [80,85), late vs wm 90) and 120: numRowsDroppedByWatermark = 1 while 4 raw rows were late.
    # The late filter runs in StateStoreSaveExec after partial aggregation -> shuffle -> PartialMerge,
    # so it sees one row per (window[, key]) group of the batch.
    events = stream([100], [80, 81, 82, 83, 120])
    r = replay(events, WatermarkConfig(delay_ms=10_000, window=Tumbling(5_000)))
    b = r.batches[2]
    assert (b.late_row_count, b.dropped_by_watermark_metric) == (4, 1)
    assert (b.state_rows, b.state_rows_updated) == (2, 1)  # real run: (2, 1, 0, 1)
    # Input partitioning does not matter (differential finding D1/S3: one late row for the same window
    # in each of two inputs gave Spark 1): the partition column is ignored.
    events2 = stream([{"t": 100, "partition": 0}], [{"t": 80, "partition": 0}, {"t": 82, "partition": 1}])
    b2 = replay(events2, WatermarkConfig(delay_ms=10_000, window=Tumbling(5_000))).batches[2]
    assert (b2.late_row_count, b2.dropped_by_watermark_metric) == (2, 1)


def test_dropped_metric_for_sliding_windows_counts_distinct_late_windows() -> None:
    # Shape of differential seed 22 (Spark said 5): sliding 6 s / 2 s, delay 0, wm 100 s after batch 0.
    # Row 94.911 s is in windows starting 90, 92, 94 (ends 96, 98, 100: all <= 100, late); row 94 s in
    # the same three; row 91 s in 86, 88, 90. Late (row, window) pairs: 9; rows: 3; windows: 5.
    r = replay(stream([100], [94.911, 94, 91]), WatermarkConfig(delay_ms=0, window=Sliding(6_000, 2_000)))
    b = r.batches[2]
    assert (len(b.late_rows), b.late_row_count, b.dropped_by_watermark_metric) == (9, 3, 5)


def test_session_windows_real_run() -> None:
    # Real run (session_window gap 5 s grouped by k, append), batches
    #   [a100 a103 b101] [a107 a96 b115] [a108 a130]:
    #   0 (2,2,0,0) | 1 nd 01:33 | 2 (3,3,1,0) | 3 nd 01:45 | 4 (4,2,0,0) |
    #   5 nd 02:00 (1,0,3,0), sink b[01:41,01:46)=1 b[01:55,02:00)=1 a[01:36,01:53)=5.
    # Hand, batch 2: a's state [100,108) merges with [96,101) and [107,112) into [96,112) (start 100
    # disappears: 1 removed); b gets a second session [115,120): 3 sessions, 3 updated.
    events = stream(
        [{"t": 100, "key": "a"}, {"t": 103, "key": "a"}, {"t": 101, "key": "b"}],
        [{"t": 107, "key": "a"}, {"t": 96, "key": "a"}, {"t": 115, "key": "b"}],
        [{"t": 108, "key": "a"}, {"t": 130, "key": "a"}],
    )
    r = replay(events, WatermarkConfig(delay_ms=10_000, window=Session(5_000)))
    assert [(b.kind, b.watermark_ms // 1000) for b in r.batches] == [
        ("data", 0),
        ("no-data", 93),
        ("data", 93),
        ("no-data", 105),
        ("data", 105),
        ("no-data", 120),
    ]
    assert [(s, u, rm) for s, u, rm, _ in state_metrics(r)] == [
        (2, 2, 0),
        (2, 0, 0),
        (3, 3, 1),
        (3, 0, 0),
        (4, 2, 0),
        (1, 0, 3),
    ]
    out = sorted((w.key, w.start_ms // 1000, w.end_ms // 1000, w.count) for w in r.batches[5].emitted)
    assert out == [("a", 96, 113, 5), ("b", 101, 106, 1), ("b", 115, 120, 1)]


def test_session_merges_when_next_start_equals_current_end() -> None:
    # MergingSessionsIterator merges when start <= current end: 100 s -> [100,105); 105 s starts at 105.
    r = replay(
        stream([{"t": 100, "key": "a"}, {"t": 105, "key": "a"}], [{"t": 200, "key": "a"}]),
        WatermarkConfig(delay_ms=0, window=Session(5_000)),
    )
    out = [(w.start_ms // 1000, w.end_ms // 1000, w.count) for b in r.batches for w in b.emitted]
    assert out == [(100, 110, 2)]


def test_session_row_is_late_by_its_own_session_end() -> None:
    # wm after batch 0 = 120 - 10 = 110. Row 104 s: own session [104,109), 109 <= 110 -> late, even
    # though a session [108,...) of the same key would have absorbed it. Row 106 s: [106,111) in time.
    events = stream([{"t": 120, "key": "a"}], [{"t": 104, "key": "a"}, {"t": 106, "key": "a"}])
    r = replay(events, WatermarkConfig(delay_ms=10_000, window=Session(5_000)))
    b = r.batches[2]
    assert [(x.event_time_us // SEC_US, x.window_end_ms, x.lateness_ms) for x in b.late_rows] == [
        (104, 109_000, 1_000)
    ]


def test_session_windows_reject_update_mode() -> None:
    with pytest.raises(EngineConfigError, match="append"):
        WatermarkConfig(delay_ms=0, window=Session(5_000), output_mode="update")


def test_config_needs_exactly_one_stateful_operator() -> None:
    with pytest.raises(EngineConfigError, match="exactly one"):
        WatermarkConfig(delay_ms=0)
    with pytest.raises(EngineConfigError, match="slide"):
        WatermarkConfig(delay_ms=0, window=Sliding(5_000, 10_000))


def test_session_dropped_metric_counts_per_input_partition() -> None:
    # Differential seed 23 (real Spark): the same late (key, time) in two inputs (= two input
    # partitions) counted twice: the session late filter reads the map-side partial aggregates
    # unmerged. wm after batch 0 = 120 - 10 = 110; rows a@100 (p0), a@100 (p1), b@101 (p1) are late
    # (100 + 5 <= 110): 3 late rows, distinct (partition, key, t) = 3; same rows in one partition: 2.
    def ev(parts: list[int]) -> EventsTable:
        return stream(
            [{"t": 120, "key": "a", "partition": 0}],
            [
                {"t": 100, "key": "a", "partition": parts[0]},
                {"t": 100, "key": "a", "partition": parts[1]},
                {"t": 101, "key": "b", "partition": parts[2]},
            ],
        )

    cfg = WatermarkConfig(delay_ms=10_000, window=Session(5_000))
    assert replay(ev([0, 1, 1]), cfg).batches[2].dropped_by_watermark_metric == 3
    assert replay(ev([0, 0, 0]), cfg).batches[2].dropped_by_watermark_metric == 2
    no_partition = stream([{"t": 120, "key": "a"}], [{"t": 100, "key": "a"}])
    assert replay(no_partition, cfg).batches[2].dropped_by_watermark_metric is None


def test_wide_sliding_windows_are_expanded_in_chunks_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # window 60 s sliding 1 s: every row is in 60 windows. Processing 4 (row, window) pairs at a time
    # (a tiny chunk) must give the same batches as one pass.
    from monitor.watermark.operators import WindowAggregation

    events = stream([100, 101, 130, 99], [150, 95, 160], [200])
    cfg = WatermarkConfig(delay_ms=5_000, window=Sliding(60_000, 1_000), group_by_key=False)
    whole = replay(events, cfg)
    monkeypatch.setattr(WindowAggregation, "MAX_PAIRS", 4)
    chunked = replay(events, cfg)
    assert [b.to_json() for b in chunked.batches] == [b.to_json() for b in whole.batches]
    assert sum(len(b.late_rows) for b in whole.batches) > 0
