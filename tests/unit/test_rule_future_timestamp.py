"""Table tests of ``future_timestamp`` (rules.future.evaluate_future) and ``event_time_units``
(rules.future.evaluate_units); each row's comment says why its answer is right.

Defaults: skew 1h, jump_factor 50, min_jump 1h, jump_window 15m. ``spark(m, rows, wm, tmax)`` is the
batch at 12:00 + m minutes; watermarks and event times are minutes after 12:00 (2880 = two days).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from monitor.model import Sample, Scope, Severity
from rules.future import FutureParams, UnitsParams, evaluate_future, evaluate_units
from tests.rule_samples import EPOCH, T0, flink, history, recorded_case, spark

NOW = T0 + timedelta(minutes=30)
OLD = -1_000_000  # about 1.9 years before T0: a backfill of historical data


def _jump_then_drops() -> list[Sample]:
    out = [spark(m, 10, m - 10, m) for m in range(5)]
    out.append(spark(5, 10, -6, 2885))  # one row dated two days ahead
    out.append(spark(6, 10, 2875, 6, dropped=10))  # watermark jumped to tmax - 10 min; honest rows dropped
    out.append(spark(7, 10, 2875, 7, dropped=10))
    return out


# (case, samples, expected [(batch_id, scope labels)] of the findings)
FUTURE_TABLE: list[tuple[int, list[Sample], list[tuple[int | None, dict[str, str]]]]] = [
    # 1. batch 5's event-time max is 2 days ahead; the watermark follows in batch 6 and is still ahead at
    #    the newest batch 7 -> one finding naming batch 5 (the first of the stretch)
    (1, _jump_then_drops(), [(5, {})]),
    # 2. event-time max 59 min ahead of the batch time: within the 1 h skew (clock skew) -> nothing
    (2, [spark(m, 10, m - 10, m) for m in range(5)] + [spark(5, 10, -5, 64)], []),
    # 3. the history starts after the jump: only the watermark is ahead -> named at the first such batch
    (3, [spark(5, 0, 2875), spark(6, 4, 2875, 6, dropped=4)], [(5, {})]),
    # 4. there was a jump, but the query restarted from an older checkpoint and the newest batch is
    #    honest: the condition is not true now -> nothing (a naive "ever seen" rule fires forever)
    (4, [spark(0, 10, -10, 2880), spark(1, 10, 2870, 1), spark(2, 10, -8, 2), spark(3, 10, -7, 3)], []),
    # 5. a backfill of old data advancing 1 min per batch jumps by two days at batch 11 (still in the past,
    #    so no skew): 2880 min >= 50 x the usual 1 min and >= 1 h -> a jump, named at batch 11
    (
        5,
        [spark(m, 10, OLD + m, OLD + m + 10) for m in range(11)] + [spark(11, 10, OLD + 10 + 2880)],
        [(11, {})],
    ),
    # 6. a backfill advancing 2 h every batch: big advances but the usual ones -> nothing (a naive
    #    "advance > 1 h" rule fires every batch)
    (6, [spark(m, 10, OLD + 120 * m, OLD + 120 * m + 10) for m in range(12)], []),
    # 7. Flink: subtask 1's watermark is 3 days ahead of the poll time -> a finding for that subtask
    (
        7,
        [flink(m, 0, m - 1) for m in range(3)] + [flink(m, 1, 4320) for m in range(3)],
        [(None, {"source": "Source: clicks", "subtask": "1"})],
    ),
    # 8. an event time after 2200 is a unit mismatch (event_time_units), not a future timestamp
    (8, [spark(0, 10, -10, datetime(2500, 1, 1, tzinfo=UTC))], []),
    # 9. recorded (PySpark 4.3, backfill_future_row): 2024 event times replayed in 2026, one minute per
    #    data batch; batch 4 carries a row dated +24 h (max 2024-03-02T12:02 after 12:01:55), batch 5's
    #    watermark follows (+1 day), batch 6's rows continue at 12:03 and are all dropped. Every event time
    #    is years behind processing time, so the skew cannot see it: the leap beyond the data's own
    #    progression does, named at batch 4, the batch that carried the row
    (9, recorded_case("backfill_future_row"), [(4, {})]),
    # 10. the same with little history, at batch 6: only one increment (+1 min) before the leap, too few
    #     to call it unusual, but batch 6 fell back to the old progression: the row was an outlier
    (10, recorded_case("backfill_future_row", upto_batch=6), [(4, {})]),
    # 11. ... and at batch 5 (no rows since the leap): it may still be a fast backfill -> not yet
    (11, recorded_case("backfill_future_row", upto_batch=5), []),
    # 12. recorded backfill_fast: every data batch two hours further, none falling back: each advance is
    #     big (>= min_jump 1h) but the data keep up with it -> nothing (a naive leap rule fires every batch)
    (12, recorded_case("backfill_fast"), []),
]


@pytest.mark.parametrize(
    ("case", "samples", "expected"), FUTURE_TABLE, ids=[f"future-{c[0]}" for c in FUTURE_TABLE]
)
def test_future_timestamp(
    case: int, samples: list[Sample], expected: list[tuple[int | None, dict[str, str]]]
) -> None:
    found = evaluate_future(FutureParams(), history(samples), NOW)
    assert [(f.batch_id, f.scope.labels()) for f in found] == expected
    assert all(f.severity is Severity.CRITICAL and f.rule == "future_timestamp" for f in found)


def test_future_message_links_the_late_drop_surge() -> None:
    (finding,) = evaluate_future(FutureParams(), history(_jump_then_drops()), NOW)
    # batch 5 at 12:05; tmax 12:00 + 2885 min = 2026-12-01T12:05Z, 2 days ahead; batches 5-7 brought 30
    # rows of which batches 6 and 7 dropped 10 each
    assert finding.message.startswith(
        "batch 5 at 2026-11-29T12:05Z: event-time max 2026-12-01T12:05Z is 2 days ahead"
    )
    assert "Since then 20 of 30 input rows were dropped as late." in finding.message
    assert finding.details["dropped_since"] == 20


def test_jump_message() -> None:
    samples = FUTURE_TABLE[4][1]
    (finding,) = evaluate_future(FutureParams(), history(samples), NOW)
    # advance from OLD+10 to OLD+10+2880 minutes = 2 days, 2880 x the usual 1 min
    assert "the watermark jumped 2 days" in finding.message  # exactly 2 days: fmt_duration writes "2"
    assert "2880 times its usual per-batch advance of 1 min" in finding.message


def test_recorded_backfill_leap_message_says_how_far_and_what_followed() -> None:
    (finding,) = evaluate_future(FutureParams(), history(recorded_case("backfill_future_row")), NOW)
    assert finding.message.startswith(
        "batch 4 at 2026-12-01T09:43:36Z: event-time max 2024-03-02T12:02Z leapt 1 day beyond the data's "
        "own progression (newest event time before: 2024-03-01T12:01:55Z, usually +1 min per batch, beyond "
        "the watermark delay of 10 min)"
    )
    # batches 6-10 each dropped their 12 rows: 60 of the 60 rows after batch 4 (batch 5 had none)
    assert "The watermark followed in batch 5 +1 day (to 2024-03-02T11:52Z) and 60 of the 60 rows" in finding.message
    assert finding.details["leap_seconds"] == 86_405.0  # 2024-03-01T12:01:55 -> 2024-03-02T12:02:00


# (case, samples, expected [(batch_id, words in the message)])
UNITS_TABLE: list[tuple[int, list[Sample], list[tuple[int | None, str]]]] = [
    # 1. event time 1970-01-20 while rows flow: 1.7e9 epoch SECONDS read as milliseconds lands there
    (1, [spark(0, 10, None, datetime(1970, 1, 20, 16, tzinfo=UTC))], [(0, "seconds read as milliseconds")]),
    # 2. event time in 2500: epoch milliseconds read as seconds (or micros as millis) overshoot
    (2, [spark(0, 10, None, datetime(2500, 1, 1, tzinfo=UTC))], [(0, "milliseconds read as seconds")]),
    # 3. exactly 1970-01-01: Spark's null-event-time marker, not a unit problem (watermark_stall names it)
    (3, [spark(0, 10, -10, EPOCH, tmin=EPOCH)], []),
    # 4. a 1970 time in a batch without rows (no data): nothing flows, nothing to judge
    (4, [spark(0, 0, None, datetime(1970, 1, 20, tzinfo=UTC))], []),
    # 5. ordinary 2026 event times: nothing
    (5, [spark(m, 10, m - 10, m) for m in range(3)], []),
    # 6. a Flink subtask's watermark in 2300 (274 years of minutes after 2026): milliseconds read as seconds
    (6, [flink(0, 1, 274 * 525_960.0)], [(None, "milliseconds read as seconds")]),
    # 7. recorded (PySpark 4.3, epoch_units) at batch 4: timestamp_seconds over one epoch-millisecond
    #    value puts the row in year 56,135 (Spark prints +56135-05-22T09:20:00.000Z, beyond Python's 9999)
    (7, recorded_case("epoch_units", upto_batch=4), [(4, "event time beyond year 8999 is after 2200")]),
    # 8. ... and at the end: the row is gone but the watermark stays there (it never goes back): still
    #    named at batch 4, the batch that carried it
    (8, recorded_case("epoch_units"), [(4, "the watermark is beyond year 8999")]),
]


@pytest.mark.parametrize(
    ("case", "samples", "expected"), UNITS_TABLE, ids=[f"units-{c[0]}" for c in UNITS_TABLE]
)
def test_event_time_units(case: int, samples: list[Sample], expected: list[tuple[int | None, str]]) -> None:
    found = evaluate_units(UnitsParams(), history(samples), NOW)
    assert [f.batch_id for f in found] == [batch for batch, _ in expected]
    for finding, (_, phrase) in zip(found, expected, strict=True):
        assert phrase in finding.message
    assert all(f.rule == "event_time_units" and f.severity is Severity.CRITICAL for f in found)


def test_the_finding_names_the_run_of_the_batch_it_names() -> None:
    # A fresh-user trial saw an alert naming batch 6 with the run id of a later restart (which had no
    # batches). Run r1's batch 6 carries the 2099 row; the query restarts as r2 from a checkpoint after the
    # jump, so r2's batches still run with the future watermark. The finding names batch 6 and run r1.
    from monitor.model import Engine, JobRef

    r1, r2 = JobRef(Engine.SPARK, "q", "r1", "n"), JobRef(Engine.SPARK, "q", "r2", "n")
    future = datetime(2099, 1, 1, tzinfo=UTC)
    past_wm = datetime(2024, 1, 1, 12, 5, tzinfo=UTC)
    samples = [
        Sample(r1, T0, batch_id=5, watermark=past_wm, num_input_rows=6, event_time_max=past_wm),
        Sample(
            r1,
            T0 + timedelta(seconds=10),
            batch_id=6,
            watermark=past_wm,
            num_input_rows=3,
            event_time_max=future,
        ),
        Sample(
            r2,
            T0 + timedelta(seconds=20),
            batch_id=7,
            watermark=future - timedelta(minutes=10),
            num_input_rows=0,
        ),
    ]
    [finding] = evaluate_future(FutureParams(), history(samples), T0 + timedelta(minutes=1))
    assert (finding.batch_id, finding.job.run_id) == (6, "r1")


def test_flink_jump_is_named_at_the_source_and_per_poll() -> None:
    # a future-dated record (3 h ahead) reached source subtask 0 at 12:02; the window vertex (no
    # Scope.source) inherits the watermark and the job watermark follows
    samples: list[Sample] = []
    for m in range(5):
        wm = m - 1 if m < 2 else 180
        samples.append(flink(m, None, wm, 10))
        samples.append(flink(m, 0, wm, 10))
        samples.append(dataclasses.replace(flink(m, 1, wm, 10), scope=Scope(operator="w1", subtask=0)))
    found = evaluate_future(FutureParams(), history(samples), T0 + timedelta(minutes=5))
    assert [f.scope.labels() for f in found] == [{}, {"source": "Source: clicks", "subtask": "0"}]
    assert found[0].message.startswith("the poll at 2026-11-29T12:02Z: watermark 2026-11-29T15:00Z is 3 h ahead")
    assert found[1].message.startswith("job `sessions` vertex `Source: clicks` subtask 0: watermark/event time")
