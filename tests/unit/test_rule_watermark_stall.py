"""Table test of ``watermark_stall`` (rules.stall.evaluate_stall): one numbered table; each row's comment
says why its answer is right. Default params: for 10m, min_rows 1, min_data_batches 3.

A Spark batch at minute m is ``spark(m, rows, wm, tmax)`` (watermark/event times in minutes after 12:00);
Spark reports in batch n the watermark computed from batches < n, so the flat stretch's last batch's rows
do not count. Flink polls' rows are already reflected in the same poll's watermark.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import Sample, SampleKind, Severity
from rules.stall import StallParams, evaluate_stall
from tests.rule_samples import EPOCH, SPARK, T0, flink, history, recorded_case, source, spark

NOW = T0 + timedelta(minutes=30)
#: the never-fed input of the recorded case, as Spark describes it in sources[]
NEVER_SEEN_B = "FileStreamSource[file:/tmp/tg-never_seen_input-_l6zv2qb/b]"


def _advancing_then_flat(flat_until: int, *, sources: bool) -> list[Sample]:
    # batches 0-2 advance (wm = previous tmax - 10 min), then from batch 3 the watermark stays at -8
    out = [spark(0, 10, -20, 0), spark(1, 10, -10, 1), spark(2, 10, -9, 2)]
    out += [spark(m, 10, -8, m) for m in range(3, flat_until + 1)]
    if sources:
        out += [source(m, "clicks", 10) for m in range(flat_until + 1)]
        out += [source(m, "impressions", 10 if m < 3 else 0) for m in range(flat_until + 1)]
    return out


def _flink_no_watermark() -> list[Sample]:
    out: list[Sample] = []
    for m in range(13):
        out.append(flink(m, None, None, 100))  # job: Long.MIN_VALUE -> None while rows flow
        out.append(flink(m, 0, m - 1, 100))  # subtask 0 has data and a watermark
        out.append(flink(m, 1, None, 0))  # subtask 1 never gets data: no watermark
    return out


def _flink_holding() -> list[Sample]:
    out: list[Sample] = []
    for m in range(13):
        out += [flink(m, None, -5, 100), flink(m, 0, m - 1, 100), flink(m, 1, -5, 0)]
    return out


# (case, samples, expected (cause, culprit labels) or None for no finding)
TABLE: list[tuple[int, list[Sample], tuple[str, dict[str, str] | None] | None]] = [
    # 1. flat from 12:03 to 12:14 (11 min >= 10) while 110 rows came in batches 3-13 whose event times
    #    ran to 12:13, far past watermark + 10 min delay; source `impressions` brought no rows since 12:03
    #    while `clicks` did -> Spark's min policy: `impressions` holds it
    (1, _advancing_then_flat(14, sources=True), ("input_holds_min", {"source": "impressions"})),
    # 2. the same without per-source samples: still a stall; the delay inferred from batch 2 (tmax 12:02,
    #    next watermark 11:52 -> 10 min) shows the event times passed watermark + delay, so the cause is
    #    not the delay; nothing names an input -> unknown
    (2, _advancing_then_flat(14, sources=False), ("unknown", None)),
    # 3. watermark flat 15 min but no rows at all: the source is quiet, NOT a stall (naive rule fires)
    (3, [spark(m, 0, -10) for m in range(16)], None),
    # 4. flat only 8 min (12:03-12:11) < for 10m: not yet
    (4, _advancing_then_flat(11, sources=False), None),
    # 5. watermark advances every batch: healthy
    (5, [spark(m, 10, m - 10, m) for m in range(15)], None),
    # 6. Spark query without withWatermark (watermark None): nothing to stall
    (6, [spark(m, 10, None, m) for m in range(15)], None),
    # 7. watermark still Spark's initial 1970 after 12 min of rows: `impressions` never had data and pins
    #    the min watermark at the epoch (a naive freshness rule would report a 56-year delay instead)
    (
        7,
        [spark(m, 10, EPOCH, m) for m in range(13)]
        + [source(m, "clicks", 10) for m in range(13)]
        + [source(m, "impressions", 0) for m in range(13)],
        ("never_seen_input", {"source": "impressions"}),
    ),
    # 8. rows arrive but every event time is null: Spark reports eventTime.min 1970 and no max (as in the
    #    recorded run's batches with null event times) -> event_times_null
    (8, [spark(m, 10, -30, None, tmin=EPOCH) for m in range(13)], ("event_times_null", None)),
    # 9. same with max also 1970 (all rows null): still event_times_null, not a unit problem
    (9, [spark(m, 10, -30, EPOCH, tmin=EPOCH) for m in range(13)], ("event_times_null", None)),
    # 10. batch 0 saw 12:00 and the watermark became 11:50 (delay 10 min); since then rows keep coming
    #     with event times up to 11:58 only: newest event <= watermark + delay, so the watermark cannot
    #     move -> the delay is larger than the span of the data arriving
    (
        10,
        [spark(0, 10, -20, 0)] + [spark(m, 10, -10, -2) for m in range(1, 13)],
        ("delay_exceeds_span", None),
    ),
    # 11. rows only in the LAST flat batch: their effect shows in the next batch -> no stall (naive fires)
    (11, [spark(m, 0, -10) for m in range(12)] + [spark(12, 9, -10, 5)], None),
    # 12. Flink: job watermark Long.MIN_VALUE (None) for 12 min while 1200 rows flowed; subtask 1 has no
    #     watermark beside subtask 0 which has one -> no_watermark, subtask 1 named
    (12, _flink_no_watermark(), ("no_watermark", {"source": "Source: clicks", "subtask": "1"})),
    # 13. Flink: job watermark flat at 11:55; subtask 0 advances to 12:11, subtask 1 stays at 11:55, the
    #     lowest -> subtask 1 holds the min (StatusWatermarkValve takes the minimum over channels)
    (13, _flink_holding(), ("input_holds_min", {"source": "Source: clicks", "subtask": "1"})),
    # 14. Flink rows unknown (the aggregated metrics endpoint answered []: None, not 0) -> rows cannot
    #     be claimed, no stall
    (14, [flink(m, None, -5, None) for m in range(13)], None),
    # 15. one data batch then the query goes idle (QueryIdleEvent, no batches): flat because nothing came
    (
        15,
        [spark(0, 5, -10, 0)]
        + [Sample(SPARK, T0 + timedelta(minutes=m), SampleKind.IDLE, batch_id=0) for m in range(1, 20)],
        None,
    ),
    # 16. recorded (PySpark 4.3, never_seen_input): two watermarked file sources unioned, input `b` never
    #     gets a file; batches 0-3 (4 s apart, 10 rows each from `a`) all report 1970 -> a stall at once
    #     (30 s, far below `for` 10m: a never-computed watermark after rows is no lull), naming `b`, whose
    #     sources[] entry has numInputRows 0 in every batch
    (16, recorded_case("never_seen_input", upto_batch=3), ("never_seen_input", {"source": NEVER_SEEN_B})),
    # 17. the same at batch 2: only batches 0-1 could have moved the watermark (2 < min_data_batches 3)
    (17, recorded_case("never_seen_input", upto_batch=2), None),
    # 18. the same query restarted twice with Trigger.AvailableNow (batches 8 and 9, one per run): per-input
    #     watermarks are not checkpointed, `b` still has no data, the watermark is 1970 again -> the stall
    #     holds at the restarted runs' batches too
    (18, recorded_case("never_seen_input", upto_batch=9), ("never_seen_input", {"source": NEVER_SEEN_B})),
]


@pytest.mark.parametrize(("case", "samples", "expected"), TABLE, ids=[f"stall-{c[0]}" for c in TABLE])
def test_watermark_stall(
    case: int, samples: list[Sample], expected: tuple[str, dict[str, str] | None] | None
) -> None:
    found = evaluate_stall(StallParams(), history(samples), NOW)
    if expected is None:
        assert found == []
        return
    assert len(found) == 1
    finding = found[0]
    assert finding.rule == "watermark_stall" and finding.severity is Severity.WARNING
    assert finding.scope.is_job()  # identity stays the job's while the cause is re-classified
    assert (finding.details["cause"], finding.details.get("culprit")) == expected
    assert finding.observed_at == NOW


def test_message_names_duration_rows_culprit_and_remedy() -> None:
    found = evaluate_stall(StallParams(), history(_advancing_then_flat(14, sources=True)), NOW)
    message = found[0].message
    # flat from 12:03 to 12:14 = 11 min; movers are batches 3..13: 11 batches x 10 rows
    assert message.startswith(
        "the watermark stayed at 2026-11-29T11:52Z for 11 min (since 2026-11-29T12:03Z)"
    )
    assert "while 110 rows arrived in 11 batches" in message
    assert "source `impressions` holds it" in message
    assert "multipleWatermarkPolicy=max" in message


def test_for_and_min_rows_params() -> None:
    samples = _advancing_then_flat(14, sources=False)
    # 11 min flat: a 15m `for` is not reached; 110 rows < min_rows 200
    assert evaluate_stall(StallParams.model_validate({"for": "15m"}), history(samples), NOW) == []
    assert evaluate_stall(StallParams(min_rows=200), history(samples), NOW) == []
    # an explicit delay of 30 min makes 12:13 <= 11:52 + 30 min: the delay exceeds the data's span
    found = evaluate_stall(StallParams.model_validate({"delay": "30m"}), history(samples), NOW)
    assert found[0].details["cause"] == "delay_exceeds_span"


def test_recorded_never_seen_input_names_the_input_and_the_remedies() -> None:
    (finding,) = evaluate_stall(StallParams(), history(recorded_case("never_seen_input", upto_batch=7)), NOW)
    assert f"source `{NEVER_SEEN_B}` has produced no rows (numInputRows 0 in every batch)" in finding.message
    assert "Spark's initial 1970-01-01" in finding.message and "70 rows arrived in 7 batches" in finding.message
    for remedy in ("feed that input", "drop it from the query", "spark.sql.streaming.multipleWatermarkPolicy=max",
                   "dropped as late", "Trigger.AvailableNow"):
        assert remedy in finding.message


def _with_splits(sample: Sample, splits: list[dict[str, object]]) -> Sample:
    return dataclasses.replace(sample, extra={**sample.extra, "splits": splits})


def _split(partition: int, wm_ms: int | None, *, active: float, idle: float = 0.0) -> dict[str, object]:
    return {"split": f"clicks-{partition}", "topic": "clicks", "partition": partition, "watermark_ms": wm_ms,
            "active_ms_per_s": active, "paused_ms_per_s": 0.0, "idle_ms_per_s": idle}  # fmt: skip


def test_flink_stall_names_the_kafka_partition_holding_it() -> None:
    # case 13's job (subtask 1 holds -5 min) on Flink 2.1+: subtask 1 reads partitions 1 and 3; partition 3
    # is read (activeTimeMsPerSecond 1000), partition 1 is marked idle (idleTimeMsPerSecond 1000: left out of
    # the subtask's minimum even with the lower watermark): partition 3 is named, and as it is read the remedy
    # is not withIdleness
    splits = [_split(1, 1704100000000, active=0.0, idle=1000.0), _split(3, 1704109500000, active=1000.0)]
    samples = [_with_splits(s, splits) if s.scope.subtask == 1 else s for s in _flink_holding()]
    (finding,) = evaluate_stall(StallParams(), history(samples), NOW)
    assert "source `Source: clicks` subtask 1, Kafka partition 3 of topic `clicks` (split `clicks-3`), holds it:" in (
        finding.message
    )
    assert finding.details["culprit_split"] == splits[1]
    assert "withIdleness does not help" in finding.message
    # without split metrics (Flink before 2.1) the subtask alone is named and the remedy is idleness
    (plain,) = evaluate_stall(StallParams(), history(_flink_holding()), NOW)
    assert "source `Source: clicks` subtask 1 holds it:" in plain.message and "culprit_split" not in plain.details
    assert "withIdleness(Duration" in plain.message
