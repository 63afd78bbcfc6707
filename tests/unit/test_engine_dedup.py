"""Streaming deduplication: dropDuplicates with/without event time, dropDuplicatesWithinWatermark.

Real runs: PySpark 4.3.0, local[1], file source one file per batch, processAllAvailable() after each,
``withWatermark("event_time", "10 seconds")``; progress quoted as (numRowsTotal, numRowsUpdated,
numRowsRemoved, numRowsDroppedByWatermark). Times in seconds (engine_stream.py).
"""

from __future__ import annotations

from monitor.watermark import Dedup, WatermarkConfig, replay
from tests.unit.engine_stream import stream


def k(key: str, t: int | None) -> dict[str, object]:
    return {"t": t, "key": key}


def metrics(r: object) -> list[tuple[str, int, int, int, int, int | None]]:
    return [
        (
            b.kind,
            b.watermark_ms // 1000,
            b.state_rows,
            b.state_rows_updated,
            b.state_rows_removed,
            b.dropped_by_watermark_metric,
        )
        for b in r.batches  # type: ignore[attr-defined]
    ]


def passed(r: object) -> list[int]:
    return [b.output_rows for b in r.batches]  # type: ignore[attr-defined]


BATCHES_C = (
    [k("a", 100), k("a", 101), k("b", 102)],
    [k("a", 105), k("c", 95), k("b", 125)],
    [k("a", 130), k("b", 131), k("a", 114)],
)


def test_dedup_within_watermark_real_run() -> None:
    # Real run: 0 (2,2,0,0) out a@01:40 b@01:42 | 1 nd 01:32 | 2 (3,1,0,0) out c@01:35 |
    #   3 nd 01:55 (0,0,3,0) | 4 (2,2,0,1) out a@02:10 b@02:11 | 5 nd 02:01 (2,0,0,0).
    # Hand: expiresAt = first row's time + 10 s: a 110, b 112, c 105 -> all <= 115 at batch 3.
    # Batch 4: 114 s <= late wm 115 -> dropped before dedup.
    r = replay(stream(*BATCHES_C), WatermarkConfig(delay_ms=10_000, dedup=Dedup("within_watermark")))
    assert metrics(r) == [
        ("data", 0, 2, 2, 0, 0),
        ("no-data", 92, 2, 0, 0, 0),
        ("data", 92, 3, 1, 0, 0),
        ("no-data", 115, 0, 0, 3, 0),
        ("data", 115, 2, 2, 0, 1),
        ("no-data", 121, 2, 0, 0, 0),
    ]
    assert passed(r) == [2, 0, 1, 0, 2, 0]
    # which rows passed (indices in stream order: a100=0 a101=1 b102=2 a105=3 c95=4 b125=5 a130=6 ...)
    assert [b.passed_rows.tolist() for b in r.batches] == [[0, 2], [], [4], [], [6, 7], []]
    # duplicates: a@101 (batch 0); a@105 and b@125 match state entries a and b (batch 2)
    assert [b.duplicates_dropped for b in r.batches] == [1, 0, 2, 0, 0, 0]


def test_dedup_on_key_and_event_time_evicts_by_event_time_real_run() -> None:
    # Real run: batches [a100 a100 b102] [a100 c89 b102 b91] [a130] [b102]:
    #   0 (2,2,0,0) out a@01:40 b@01:42 | 1 nd 01:32 | 2 (2,0,0,2) | 3 (3,1,0,0) out a@02:10 |
    #   4 nd 02:00 (1,0,2,0) | 5 (1,0,0,1).
    # Hand: batch 2's max 102 - 10 = 92 does not move the watermark, so batch 3 follows without a
    # no-data batch; c@89 and b@91 are <= 92 (late).
    events = stream(
        [k("a", 100), k("a", 100), k("b", 102)],
        [k("a", 100), k("c", 89), k("b", 102), k("b", 91)],
        [k("a", 130)],
        [k("b", 102)],
    )
    r = replay(events, WatermarkConfig(delay_ms=10_000, dedup=Dedup("key_and_event_time")))
    assert metrics(r) == [
        ("data", 0, 2, 2, 0, 0),
        ("no-data", 92, 2, 0, 0, 0),
        ("data", 92, 2, 0, 0, 2),
        ("data", 92, 3, 1, 0, 0),
        ("no-data", 120, 1, 0, 2, 0),
        ("data", 120, 1, 0, 0, 1),
    ]
    assert passed(r) == [2, 0, 0, 1, 0, 0]


def test_dedup_without_event_time_never_evicts_but_still_drops_late_rows() -> None:
    # Real run (dropDuplicates(["k"]), batches C): 0 (2,2,0,0) | 1 nd | 2 (3,1,0,0) out c |
    #   3 nd 01:55 (3,0,0,0) | 4 (3,0,0,1) | 5 nd (3,0,0,0): state only grows; a@114 is late.
    r = replay(stream(*BATCHES_C), WatermarkConfig(delay_ms=10_000, dedup=Dedup("key")))
    assert metrics(r) == [
        ("data", 0, 2, 2, 0, 0),
        ("no-data", 92, 2, 0, 0, 0),
        ("data", 92, 3, 1, 0, 0),
        ("no-data", 115, 3, 0, 0, 0),
        ("data", 115, 3, 0, 0, 1),
        ("no-data", 121, 3, 0, 0, 0),
    ]
    assert passed(r) == [2, 0, 1, 0, 0, 0]


def test_dedup_null_event_time_is_never_late_and_never_evicted() -> None:
    # The late predicate `event_time <= wm` is null for a null time (row kept); with event time in
    # the key, (b, null) stays in state forever; within-watermark reads null as 0: expiresAt = delay.
    events = stream([k("a", 100), k("b", None)], [k("b", None), k("c", 200)])
    r = replay(events, WatermarkConfig(delay_ms=10_000, dedup=Dedup("key_and_event_time")))
    assert [b.output_rows for b in r.batches] == [2, 0, 1, 0]
    assert r.batches[-1].state_rows == 2  # (b, null) and (c, 200); (a, 100) went at wm 90
    r2 = replay(events, WatermarkConfig(delay_ms=10_000, dedup=Dedup("within_watermark")))
    # b's entry expires at 0 + 10 s: evicted by the no-data batch at wm 90, so the second b passes.
    assert [b.output_rows for b in r2.batches] == [2, 0, 2, 0]


def test_dedup_late_rows_report_lateness_against_event_time() -> None:
    r = replay(stream([k("a", 100)], [k("b", 85)]), WatermarkConfig(delay_ms=10_000, dedup=Dedup("key")))
    late = r.batches[2].late_rows.to_list()
    assert [(x.key, x.window_end_ms, x.lateness_ms) for x in late] == [("b", None, 5_000)]
