"""Table test of ``freshness`` (rules.freshness.evaluate_freshness): ``now - watermark`` above ``target``.
NOW is 12:30; watermarks are minutes after 12:00."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.model import Sample
from rules.freshness import FreshnessParams, evaluate_freshness
from tests.rule_samples import EPOCH, T0, flink, history, spark

NOW = T0 + timedelta(minutes=30)

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
