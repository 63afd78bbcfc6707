"""Table test of ``split_watermark`` (rules.splits.evaluate_splits) on hand-made Flink polls with split-level
watermarks (the shapes of ``collectors.flink.samples.split_extra``); the recorded real jobs are in
tests/unit/test_flink_splits.py. Watermarks in minutes after T0 (2026-11-29T12:00Z); each row's comment
says why its answer is right."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.model import Engine, JobRef, Sample, SampleKind, Scope
from rules.splits import SplitParams, evaluate_splits
from tests.rule_samples import FLINK, SPARK, T0, history

T0_MS = int(T0.timestamp() * 1000)


def _split(p: int, wm: float | None, *, active: float = 1000.0, paused: float = 0.0, idle: float = 0.0) -> dict[str, object]:
    return {"split": f"orders-{p}", "topic": "orders", "partition": p,
            "watermark_ms": None if wm is None else T0_MS + int(wm * 60_000),
            "active_ms_per_s": active, "paused_ms_per_s": paused, "idle_ms_per_s": idle}  # fmt: skip


def _poll(minute: float, subtask: int, splits: list[dict[str, object]], job: JobRef = FLINK) -> Sample:
    return Sample(job, T0 + timedelta(minutes=minute), SampleKind.GAUGE, "flink-rest",
                  scope=Scope(source="Source: orders", subtask=subtask, operator="v0"),
                  extra={"vertex": "Source: orders", "splits": splits})  # fmt: skip


def _two(splits0: list[dict[str, object]], splits1: list[dict[str, object]], *, before: bool = True) -> list[Sample]:
    out = [_poll(1, 0, splits0), _poll(1, 1, splits1)]
    return ([_poll(0, 0, splits0), _poll(0, 1, splits1)] if before else []) + out


# (case, samples, expected (check, named partition) or None)
TABLE: list[tuple[int, list[Sample], tuple[str, int] | None]] = [
    # 1. partition 3 trails partition 1 by 10 min (>= skew 5m) and is read: it holds the watermark
    (1, _two([_split(0, 0), _split(2, 0)], [_split(1, 0), _split(3, -10)]), ("split_behind", 3)),
    # 2. 4 min apart: under the skew, nothing
    (2, _two([_split(0, 0), _split(2, 0)], [_split(1, 0), _split(3, -4)]), None),
    # 3. the trailing partition is marked idle (idleTimeMsPerSecond 1000): left out of the minimum; the
    #    others are together -> nothing
    (3, _two([_split(0, 0), _split(2, 0)], [_split(1, 0), _split(3, -30, active=0, idle=1000)]), None),
    # 4. partitions 0 and 2 paused by alignment at both polls, partition 3 read and 9 min behind: alignment,
    #    naming partition 3
    (
        4,
        _two([_split(0, 0, active=0, paused=1000), _split(2, 0, active=0, paused=1000)], [_split(1, 0), _split(3, -9)]),
        ("alignment_paused", 3),
    ),
    # 5. paused at the newest poll only (the one before read it): a blip, not reported; no skew report either
    #    (partition 3 is 2 min behind)
    (
        5,
        [_poll(0, 0, [_split(0, 0)]), _poll(0, 1, [_split(3, -2)]),
         _poll(1, 0, [_split(0, 0, active=0, paused=1000)]), _poll(1, 1, [_split(3, -2)])],
        None,
    ),
    # 6. one poll only (a one-shot check with --interval 0s): the paused split is reported
    (6, _two([_split(0, 0, active=0, paused=1000)], [_split(3, -9)], before=False), ("alignment_paused", 3)),
    # 7. no split metrics (Flink before 2.1): nothing
    (7, [_poll(1, 0, []), _poll(1, 1, [])], None),
]


@pytest.mark.parametrize(("case", "samples", "expected"), TABLE, ids=[f"case{c}" for c, _, _ in TABLE])
def test_split_watermark_table(case: int, samples: list[Sample], expected: tuple[str, int] | None) -> None:
    findings = evaluate_splits(SplitParams(), history(samples), T0 + timedelta(minutes=2))
    if expected is None:
        assert findings == [], (case, [f.message for f in findings])
        return
    (finding,) = findings
    assert (finding.labels["check"], finding.details["holding_split"]["partition"]) == expected, case
    assert f"Kafka partition {expected[1]} of topic `orders`" in finding.message
    if expected[0] == "alignment_paused":
        assert "withIdleness" not in finding.message and "maxAllowedWatermarkDrift" in finding.message


def test_alignment_with_the_trailing_split_elsewhere_and_other_engines() -> None:
    # every split of the vertex paused: the group's slowest split is in another source
    both = _two([_split(0, 0, active=0, paused=1000)], [_split(1, 0, active=0, paused=1000)])
    (finding,) = evaluate_splits(SplitParams(), history(both), T0)
    assert "not in this vertex (another source of the same alignment group)" in finding.message
    assert finding.details["subtasks_fully_paused"] == [0, 1] and "holding_split" not in finding.details
    # a Spark job's samples are never read by this rule
    spark = [_poll(1, 0, [_split(0, 0)], job=SPARK), _poll(1, 1, [_split(3, -30)], job=SPARK)]
    assert spark[0].job.engine is Engine.SPARK
    assert evaluate_splits(SplitParams(), history(spark), T0) == []
