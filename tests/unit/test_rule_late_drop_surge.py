"""Table test of ``late_drop_surge`` (rules.late.evaluate_late_surge); each row's comment says why.
Defaults: window 10m, max_share 1 %, min_dropped 1, skew 1h. Batches one minute apart from 12:00."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import Sample, Severity
from rules.late import LateSurgeParams, evaluate_late_surge
from tests.rule_samples import T0, history, recorded_case, spark

NOW = T0 + timedelta(minutes=30)


def run(n: int, dropped: dict[int, int | None], rows: int = 100, wm_ahead: bool = False) -> list[Sample]:
    return [spark(m, rows, 4320 if wm_ahead else m - 10, m, dropped=dropped.get(m, 0)) for m in range(n)]


# (case, samples, expected (dropped, rows) or None)
TABLE: list[tuple[int, list[Sample], tuple[int, int] | None]] = [
    # 1. 10 of 1000 rows in the last 10 min = exactly 1 %: not ABOVE the threshold
    (1, run(10, {8: 5, 9: 5}), None),
    # 2. 11 of 1000 = 1.1 % > 1 %: a surge
    (2, run(10, {8: 5, 9: 6}), (11, 1000)),
    # 3. 50 rows dropped at 12:00, none since; the window (12:10-12:20) holds none: the surge is over
    #    (a naive "ever dropped" rule keeps firing)
    (3, run(21, {0: 50}), None),
    # 4. drop counts unknown (no stateful operator reports them): unknown is not a surge, nor zero
    (4, run(10, dict.fromkeys(range(10))), None),
    # 5. a foreachBatch running two actions doubles the operator's counts: 30 "dropped" of 20 rows is
    #    reported as measured (share 150 %), not clipped
    (5, run(1, {0: 30}, rows=20), (30, 20)),
    # 6. recorded (PySpark 4.3, backfill_future_row): batches 6-10 each drop their 12 rows; the 10-min
    #    window (batch times 4 s apart) holds all 11 batches: 60 dropped of 12+0+12+0+13+0+12*5 = 97 rows
    (6, recorded_case("backfill_future_row"), (60, 97)),
]


@pytest.mark.parametrize(("case", "samples", "expected"), TABLE, ids=[f"late-{c[0]}" for c in TABLE])
def test_late_drop_surge(case: int, samples: list[Sample], expected: tuple[int, int] | None) -> None:
    found = evaluate_late_surge(LateSurgeParams(), history(samples), NOW)
    assert [(f.details["dropped"], f.details["rows"]) for f in found] == (
        [] if expected is None else [expected]
    )
    assert all(f.rule == "late_drop_surge" and f.severity is Severity.WARNING for f in found)


def test_message_names_cause() -> None:
    (honest,) = evaluate_late_surge(LateSurgeParams(), history(run(10, {8: 5, 9: 6})), NOW)
    assert honest.message.startswith(
        "11 of 1000 input rows (1.1%) were dropped as late by the watermark in the last 10 min"
    )
    # honest lateness on Spark: the Spark remedy (withWatermark), no Flink setting
    assert "If they matter, raise the withWatermark delay to cover how late they arrive" in honest.message
    assert "sideOutputLateData" not in honest.message and "forBoundedOutOfOrderness" not in honest.message
    # the watermark 3 days ahead of the batch time from batch 0 on: the cause is a future event time, not
    # lateness; the drops name batch 0 and get the jump's remedy, never a longer delay
    (future,) = evaluate_late_surge(LateSurgeParams(), history(run(10, {9: 50}, wm_ahead=True)), NOW)
    assert (
        "50 rows dropped at batch 9 because at batch 0 at 2026-11-29T12:00Z the watermark was 3 days ahead of its "
        "observation time (a row with a future event time came before; see future_timestamp): they are behind a "
        "watermark a mis-dated row set, not late. A longer delay does not help: filter rows whose event time is "
        "implausibly far ahead before withWatermark" in future.message
    )
    assert "restart from a checkpoint taken before batch 0" in future.message
    assert future.details["caused_by"]["batch_id"] == 0 and future.details["caused_by"]["kind"] == "skew"


def test_recorded_drops_are_linked_to_the_batch_that_moved_the_watermark() -> None:
    # batch 4 carried a row dated +24 h, batch 5's watermark jumped +1 day: the drops of batches 6-10 (12
    # each, all after it) are its doing, and a longer delay would not help (backfill: the skew to
    # processing time cannot see it)
    (found,) = evaluate_late_surge(LateSurgeParams(), history(recorded_case("backfill_future_row")), NOW)
    assert (
        "60 rows dropped at 5 batches from batch 6 to batch 10 because batch 4 at 2026-12-01T09:43:36Z carried a mis-dated row (event time "
        "2024-03-02T12:02Z, 1 day beyond the data's own progression) that moved the watermark (see "
        "future_timestamp)" in found.message
    )
    assert "A longer delay does not help" in found.message and "raise the withWatermark delay" not in found.message
    assert found.details["caused_by"] == {
        "rule": "future_timestamp",
        "kind": "leap",
        "batch_id": 4,
        "at": "2026-12-01T09:43:36Z",
        "event_time": "2024-03-02T12:02Z",
        "jump_seconds": 86405.0,  # 2024-03-02T12:02:00 - 2024-03-01T12:01:55, the newest event time before
    }


def test_flink_surge_names_the_window_subtask_and_what_the_counter_hides() -> None:
    from monitor.model import Scope
    from tests.rule_samples import flink

    samples = []
    for m in range(5):
        samples.append(dataclasses.replace(flink(m, None, m - 1, 100), dropped_by_watermark=5))
        samples.append(
            dataclasses.replace(
                flink(m, 0, m - 1, 100),
                scope=Scope(operator="w1", subtask=0),
                dropped_by_watermark=5,
                extra={"vertex": "window-2s -> discard: Writer"},
            )
        )
    (found,) = evaluate_late_surge(LateSurgeParams(), history(samples), T0 + timedelta(minutes=5))
    # 25 of 500 rows over the 5 polls: 5 % > 1 %
    assert found.message.startswith("25 of 500 input rows (5.0%) were dropped as late by the watermark")
    assert "(5 polls, threshold 1.0%)" in found.message
    assert (
        "Dropped by WindowOperator at vertex `window-2s -> discard: Writer` subtask 0 (25)." in found.message
    )
    assert "with a late side output numLateRecordsDropped stays 0" in found.message
    assert "sliding windows silently skip" in found.message


def test_unknown_input_rows_are_not_counted_as_zero_rows() -> None:
    # a Flink poll whose source vertex came from the metric store's old fetch: 20 late drops counted at the
    # window, the source's row count unknown (not "20 of 0 input rows", which Flink did not say)
    from tests.rule_samples import flink

    samples = [flink(0, None, -1, 100), dataclasses.replace(flink(1, None, 0, 0), num_input_rows=None, dropped_by_watermark=20)]
    (found,) = evaluate_late_surge(LateSurgeParams(), history(samples), T0 + timedelta(minutes=1))
    assert found.message.startswith("20 rows (input row count unknown) were dropped as late by the watermark")
    # with the count known, the share is measured against it
    known = [samples[0], dataclasses.replace(samples[1], num_input_rows=50)]
    (found,) = evaluate_late_surge(LateSurgeParams(), history(known), T0 + timedelta(minutes=1))
    assert found.message.startswith("20 of 50 input rows (40.0%)")  # the poll without a drop count is left out
