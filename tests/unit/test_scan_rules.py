"""Table tests of the scan detectors (rules/). One numbered table per detector; each row's comment says why
its expected answer is right, including rows where a naive rule would be wrong.

A row is a list of batches ``(batch_id, rows, watermark minute, event-time max minute, dropped, state rows,
state rows removed)`` one minute apart from 12:00 on 2024-01-01; ``None`` means unknown.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.model import Engine, JobRef, Sample, SampleKind, Scope, Severity
from rules.future import FutureConfig, detect_future_timestamps
from rules.late import LateConfig, detect_late_rows
from rules.scan_rules import ScanRulesConfig, run_scan_rules
from rules.stall import StallConfig, detect_watermark_stalls
from rules.state_growth import StateGrowthConfig, detect_state_growth

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
JOB = JobRef(Engine.SPARK, "q1", run_id="r1", name="clicks")
Row = tuple[int, int | None, float | None, float | None, int | None, int | None, int | None]
# Spark's "no watermark computed yet" value 1970-01-01T00:00Z, in minutes from T0 (2024-01-01T12:00Z):
# 1704110400 s since the epoch / 60 = 28401840 min
PH = -28_401_840.0


def _at(minute: float | None) -> datetime | None:
    return None if minute is None else T0 + timedelta(minutes=minute)


def batches(rows: list[Row]) -> list[Sample]:
    out = []
    for i, (batch_id, n, wm, tmax, dropped, state, removed) in enumerate(rows):
        out.append(
            Sample(
                job=JOB,
                observed_at=T0 + timedelta(minutes=i),
                batch_id=batch_id,
                num_input_rows=n,
                watermark=_at(wm),
                event_time_max=_at(tmax),
                dropped_by_watermark=dropped,
                state_rows_total=state,
                state_rows_removed=removed,
            )
        )
    return out


def idle(minute: int) -> Sample:
    return Sample(job=JOB, observed_at=T0 + timedelta(minutes=minute), kind=SampleKind.IDLE, batch_id=3)


# --- watermark stall -------------------------------------------------------------------------------------
# (case, batches, expected (first batch, last batch) of each finding)
STALL_TABLE: list[tuple[int, list[Row], list[tuple[int, int]]]] = [
    # 1. watermark flat at -10 over batches 0-3 while 0, 1, 2 each brought rows: their rows should have
    #    moved the watermark seen by batches 1-3 -> stall named at the last flat batch
    (1, [(0, 5, -10, 0, 0, None, None), (1, 5, -10, 0, 0, None, None), (2, 5, -10, 0, 0, None, None),
         (3, 5, -10, 0, 0, None, None)], [(0, 3)]),
    # 2. same watermark but only no-data batches (Spark runs them to evict state): NOT a stall
    (2, [(0, 0, -10, None, 0, None, None), (1, 0, -10, None, 0, None, None), (2, 0, -10, None, 0, None, None),
         (3, 0, -10, None, 0, None, None)], []),
    # 3. watermark advances every batch while rows arrive: healthy
    (3, [(0, 5, -10, 0, 0, None, None), (1, 5, -9, 1, 0, None, None), (2, 5, -8, 2, 0, None, None),
         (3, 5, -7, 3, 0, None, None)], []),
    # 4. no watermark at all (query without withWatermark): nothing to stall
    (4, [(0, 5, None, 0, 0, None, None), (1, 5, None, 0, 0, None, None), (2, 5, None, 0, 0, None, None),
         (3, 5, None, 0, 0, None, None)], []),
    # 5. rows only in the LAST flat batch: their effect shows in the next batch, not seen yet -> no stall
    #    (a naive "flat watermark and rows > 0" rule would fire here)
    (5, [(0, 0, -10, None, 0, None, None), (1, 0, -10, None, 0, None, None), (2, 0, -10, None, 0, None, None),
         (3, 9, -10, 5, 0, None, None)], []),
    # 6. only two data batches failed to move it (threshold is 3): not yet
    (6, [(0, 5, -10, 0, 0, None, None), (1, 5, -10, 0, 0, None, None), (2, 0, -10, None, 0, None, None)], []),
    # 7. flat with data, then it moves, then flat again with data: two separate stalls
    (7, [(0, 1, -10, 0, 0, None, None), (1, 1, -10, 0, 0, None, None), (2, 1, -10, 0, 0, None, None),
         (3, 1, -10, 0, 0, None, None), (4, 1, -5, 0, 0, None, None), (5, 1, -5, 0, 0, None, None),
         (6, 1, -5, 0, 0, None, None), (7, 1, -5, 0, 0, None, None)], [(0, 3), (4, 7)]),
    # 8. Spark's 1970 placeholder over data batches: no watermark computed yet, not a watermark that
    #    stayed flat (a naive rule reports "the watermark stayed at 1970-01-01")
    (8, [(0, 5, PH, None, 0, None, None), (1, 5, PH, None, 0, None, None), (2, 5, PH, None, 0, None, None),
         (3, 5, PH, None, 0, None, None)], []),
]


@pytest.mark.parametrize(("case", "rows", "expected"), STALL_TABLE, ids=[f"stall-{c[0]}" for c in STALL_TABLE])
def test_watermark_stall(case: int, rows: list[Row], expected: list[tuple[int, int]]) -> None:
    found = detect_watermark_stalls(StallConfig(), batches(rows))
    assert [(f.details["first_batch_id"], f.batch_id) for f in found] == expected
    assert all(f.severity is Severity.WARNING and f.rule == "watermark_stall" for f in found)


def test_idle_query_is_not_a_stall() -> None:
    # 8. one data batch, then the query goes idle: Spark emits QueryIdleEvent (batch id repeats) and no
    #    batch runs; the watermark is flat because nothing arrived -> no finding
    history = batches([(3, 5, -10, 0, 0, None, None)]) + [idle(m) for m in range(1, 20)]
    assert detect_watermark_stalls(StallConfig(), history) == []


# --- future timestamp ------------------------------------------------------------------------------------
# batch times are T0 + i minutes; skew 1 h = 60 minutes
FUTURE_TABLE: list[tuple[int, list[Row], list[int | None]]] = [
    # 1. batch 1 brings an event-time max 2 days ahead; batch 2's watermark jumped: one finding, batch 1
    (1, [(0, 5, -10, 0, 0, None, None), (1, 5, -9, 2880, 0, None, None), (2, 0, 2870, None, 0, None, None),
         (3, 5, 2870, 3, 2, None, None)], [1]),
    # 2. event-time max 59 min ahead: inside the 1 h skew (clock skew between hosts) -> nothing
    (2, [(0, 5, -10, 59, 0, None, None), (1, 0, 49, None, 0, None, None)], []),
    # 3. the history starts after the jump: only the watermark is ahead -> named at the first such batch
    (3, [(5, 0, 2870, None, 0, None, None), (6, 4, 2870, 6, 4, None, None)], [5]),
    # 4. two separate jumps with an honest batch between them (a restart from an older checkpoint): two
    (4, [(0, 5, -10, 500, 0, None, None), (1, 5, -9, 1, 0, None, None), (2, 5, -8, 900, 0, None, None)], [0, 2]),
    # 5. no event-time stats (no watermark): nothing
    (5, [(0, 5, None, None, 0, None, None)], []),
]


@pytest.mark.parametrize(("case", "rows", "expected"), FUTURE_TABLE, ids=[f"future-{c[0]}" for c in FUTURE_TABLE])
def test_future_timestamp(case: int, rows: list[Row], expected: list[int | None]) -> None:
    found = detect_future_timestamps(FutureConfig(skew=timedelta(hours=1)), batches(rows))
    assert [f.batch_id for f in found] == expected
    assert all(f.severity is Severity.CRITICAL for f in found)


def test_future_message_names_cause_batch_and_remedy() -> None:
    found = detect_future_timestamps(FutureConfig(), batches(FUTURE_TABLE[0][1]))
    # batch 1 at 12:01, event-time max 12:00 + 2880 min = 2024-01-03T12:00Z (2 days ahead); batch 2's
    # watermark 12:00 + 2870 min = 2024-01-03T11:50Z
    message = found[0].message
    assert message.startswith("batch 1: event-time max 2024-01-03T12:00Z is 2.0 days ahead")
    assert "jumps to 2024-01-03T11:50Z in batch 2" in message
    assert "filter rows with event_time > now + 1 h before withWatermark" in message


# --- late rows dropped -----------------------------------------------------------------------------------
LATE_TABLE: list[tuple[int, list[Row], list[tuple[int | None, int]]]] = [
    # 1. drops in batches 1 and 3 -> one finding each, plus a total (2 batches) of 3 rows
    (1, [(0, 5, -10, 0, 0, None, None), (1, 5, -9, 1, 1, None, None), (2, 5, -8, 2, 0, None, None),
         (3, 5, -7, 3, 2, None, None)], [(1, 1), (3, 2), (None, 3)]),
    # 2. a single dropping batch: no separate total (it would repeat the batch finding)
    (2, [(0, 5, -10, 0, 4, None, None)], [(0, 4)]),
    # 3. dropped unknown (None, no stateful operator) or zero: nothing — unknown is not "0 dropped" nor ">0"
    (3, [(0, 5, -10, 0, None, None, None), (1, 5, -9, 0, 0, None, None)], []),
]


@pytest.mark.parametrize(("case", "rows", "expected"), LATE_TABLE, ids=[f"late-{c[0]}" for c in LATE_TABLE])
def test_late_rows(case: int, rows: list[Row], expected: list[tuple[int | None, int]]) -> None:
    found = detect_late_rows(LateConfig(), batches(rows))
    assert [(f.batch_id, f.details["dropped_by_watermark"]) for f in found] == expected


def test_late_rows_after_future_watermark_name_the_cause() -> None:
    # batch 1's watermark is 2 days ahead of its time: the drop is caused by the future watermark
    found = detect_late_rows(LateConfig(), batches([(0, 5, -10, 0, 0, None, None), (1, 5, 2870, 3, 5, None, None)]))
    assert "future event time moved it there" in found[0].message


# --- state growth ----------------------------------------------------------------------------------------
GROWTH_TABLE: list[tuple[int, list[Row], list[int]]] = [
    # 1. state 10 -> 40, never a removal, watermark stepped 3 times (-10 -> -9 -> -8 -> -7): the key has no
    #    event time (e.g. groupBy("user")) -> finding at batch 3
    (1, [(0, 5, -10, 0, 0, 10, 0), (1, 5, -9, 1, 0, 20, 0), (2, 5, -8, 2, 0, 30, 0), (3, 5, -7, 3, 0, 40, 0)], [3]),
    # 2. same growth but windows are evicted (removed > 0): a window aggregation working -> nothing
    (2, [(0, 5, -10, 0, 0, 10, 0), (1, 5, -9, 1, 0, 20, 3), (2, 5, -8, 2, 0, 30, 3), (3, 5, -7, 3, 0, 40, 3)], []),
    # 3. state grows while the watermark is flat: nothing is old enough to evict yet -> nothing
    (3, [(0, 5, -10, 0, 0, 10, 0), (1, 5, -10, 0, 0, 20, 0), (2, 5, -10, 0, 0, 30, 0), (3, 5, -10, 0, 0, 40, 0)], []),
    # 4. only ONE watermark step without removal (the real fixture's batches 0-2: a 5-min window is not
    #    closed by a step that stays inside it) -> nothing; a naive "grew + watermark moved" rule fires here
    (4, [(0, 5, -60, 0, 0, 2, 0), (1, 0, -10, None, 0, 2, 0), (2, 5, -10, 5, 0, 5, 0)], []),
    # 5. removal counts unknown (None): cannot tell eviction from none -> nothing
    (5, [(0, 5, -10, 0, 0, 10, None), (1, 5, -9, 1, 0, 20, None), (2, 5, -8, 2, 0, 30, None),
         (3, 5, -7, 3, 0, 40, None)], []),
    # 6. as case 1 but batch 0 shows Spark's 1970 placeholder: placeholder -> -9 is the first watermark, not
    #    an advance, so only 2 steps (-9 -> -8 -> -7) -> nothing (a naive rule counts 3 and fires)
    (6, [(0, 5, PH, 0, 0, 10, 0), (1, 5, -9, 1, 0, 20, 0), (2, 5, -8, 2, 0, 30, 0), (3, 5, -7, 3, 0, 40, 0)], []),
    # 7. case 6 plus one more real step: 3 real advances -> finding at batch 4, "from" the first real watermark
    (7, [(0, 5, PH, 0, 0, 10, 0), (1, 5, -9, 1, 0, 20, 0), (2, 5, -8, 2, 0, 30, 0), (3, 5, -7, 3, 0, 40, 0),
         (4, 5, -6, 4, 0, 50, 0)], [4]),
]


@pytest.mark.parametrize(("case", "rows", "expected"), GROWTH_TABLE, ids=[f"growth-{c[0]}" for c in GROWTH_TABLE])
def test_state_growth(case: int, rows: list[Row], expected: list[int]) -> None:
    found = detect_state_growth(StateGrowthConfig(), batches(rows))
    assert [f.batch_id for f in found] == expected


def test_rules_ignore_source_scope_and_lifecycle_samples() -> None:
    # per-source samples repeat the batch id with their own rows; lifecycle samples have no batch: the
    # detectors only look at query-scope progress, so adding them changes nothing
    base = batches(STALL_TABLE[0][1])
    noise = [
        Sample(job=JOB, observed_at=s.observed_at, batch_id=s.batch_id, scope=Scope(source="kafka"), num_input_rows=5)
        for s in base
    ] + [Sample(job=JOB, observed_at=T0, kind=SampleKind.STARTED)]
    assert [f.rule for f in run_scan_rules(ScanRulesConfig(), base + noise)] == ["watermark_stall"]


def test_state_growth_message_starts_from_the_first_real_watermark() -> None:
    rows: list[Row] = [(0, 5, PH, 0, 0, 10, 0), (1, 5, -9, 1, 0, 20, 0), (2, 5, -8, 2, 0, 30, 0),
                       (3, 5, -7, 3, 0, 40, 0), (4, 5, -6, 4, 0, 50, 0)]
    (found,) = detect_state_growth(StateGrowthConfig(), batches(rows))
    # -9 min from 12:00 = 11:51; -6 min = 11:54
    assert "advanced 3 times, from 2024-01-01T11:51Z to 2024-01-01T11:54Z" in found.message
    assert "1970" not in found.message
