"""Table test of ``freshness`` (rules.freshness.evaluate_freshness): ``now - watermark`` above ``target``.
NOW is 12:30; watermarks are minutes after 12:00."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import Sample
from rules.freshness import FreshnessParams, evaluate_freshness
from tests.rule_samples import EPOCH, T0, flink, history, spark

NOW = T0 + timedelta(minutes=30)


def _rtm(minute: float, wm: float) -> Sample:
    """A batch of a query in real-time mode (as the event-log collector marks it) lasting 10 minutes."""
    return dataclasses.replace(spark(minute, 10, wm, minute, duration_ms=600_000), extra={"trigger": "real_time"})


# (case, samples, params, expected seconds behind or None)
TABLE: list[tuple[int, list[Sample], dict[str, object], float | None]] = [
    # 1. watermark 12:10, 20 min behind 12:30 > target 15 min
    (1, [spark(0, 10, 10, 20)], {"target": "15m"}, 1200.0),
    # 2. watermark 12:20: 10 min behind, within 15 min
    (2, [spark(0, 10, 20, 25)], {"target": "15m"}, None),
    # 3. no target configured: the rule is off (no default suits every job)
    (3, [spark(0, 10, 10, 20)], {}, None),
    # 4. Spark's initial 1970 watermark: not computed yet, not a 56-year delay
    (4, [spark(0, 10, EPOCH, 20)], {"target": "15m"}, None),
    # 5. Flink without a job-level watermark: min of the subtasks' newest (12:00 and 12:25) -> 30 min
    (5, [flink(0, 0, 0), flink(0, 1, 25)], {"target": "15m"}, 1800.0),
    # 6. one Flink subtask at Long.MIN_VALUE (None): freshness unknown -> nothing (stall/idle rules say why)
    (6, [flink(0, 0, 0), flink(0, 1, None)], {"target": "15m"}, None),
    # 7. real-time mode, 10-min batches: batch 1 started 12:10 with watermark 12:09 and reported 12:20;
    #    at 12:30 it is 21 min behind, but Spark runs batch 2 since 12:20 with a newer watermark it reports
    #    only at its end: one batch (10 min) is not counted -> 11 min, within 15 min
    (7, [_rtm(0, -1), _rtm(10, 9)], {"target": "15m"}, None),
    # 8. ... the same watermark with a 5-min target: 21 - 10 = 11 min > 5 min -> reported (raw 21 min)
    (8, [_rtm(0, -1), _rtm(10, 9)], {"target": "5m"}, 1260.0),
    # 9. the same batches without the real-time mark (a micro-batch query): 21 min > 15 min -> reported
    (9, [spark(0, 10, -1, 0, duration_ms=600_000), spark(10, 10, 9, 10, duration_ms=600_000)], {"target": "15m"},
     1260.0),
]


@pytest.mark.parametrize(
    ("case", "samples", "params", "expected"), TABLE, ids=[f"fresh-{c[0]}" for c in TABLE]
)
def test_freshness(
    case: int, samples: list[Sample], params: dict[str, object], expected: float | None
) -> None:
    found = evaluate_freshness(FreshnessParams.model_validate(params), history(samples), NOW)
    assert [f.details["behind_seconds"] for f in found] == ([] if expected is None else [expected])
    assert all(f.rule == "freshness" for f in found)


def test_real_time_message_says_what_is_not_counted() -> None:
    (found,) = evaluate_freshness(FreshnessParams.model_validate({"target": "5m"}), history([_rtm(0, -1), _rtm(10, 9)]), NOW)
    assert found.message.startswith(
        "the watermark 2026-11-29T12:09Z is 21 min behind processing time (target 5 min; the query runs in "
        "real-time mode, where Spark reports the watermark once per 10 min batch, at its end, so 10 min of this "
        "is not counted): results after it are not final yet."
    )
    assert found.details["unreported_seconds"] == 600.0
