"""Table test of ``no_progress`` (rules.progress.evaluate_no_progress, judged at the tick's clock) through
the registry (which skips a terminated query); each row's comment says why its answer is right.

Defaults: ``for`` 5m, intervals 10. Batches at 12:00 + m minutes (``spark(m, ...)``); ``now`` per row.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.model import Sample, SampleKind
from rules.config import RulesConfig
from rules.registry import Evaluator
from tests.rule_samples import SPARK, T0, flink, lifecycle, only_rules, spark

EVALUATOR = Evaluator(RulesConfig.model_validate(only_rules(no_progress={})))


def _seconds(n: int, every: int) -> list[Sample]:
    return [spark(i * every / 60, 5, -10, 0, batch=i) for i in range(n)]


# (case, samples, minutes after T0 of `now`, expected batch id named or None)
TABLE: list[tuple[int, list[Sample], float, int | None]] = [
    # 1. a batch every minute until 12:09, silent since: 11 min > max(5 min, 10 x 1 min) -> named, last batch 9
    (1, [spark(m, 5, m - 10, m) for m in range(10)], 20, 9),
    # 2. the same at 12:18: 9 min of silence is below ten trigger intervals -> not yet
    (2, [spark(m, 5, m - 10, m) for m in range(10)], 18, None),
    # 3. a 10 s trigger silent for 4 min: 24 intervals, but under the 5-min floor -> nothing yet
    (3, _seconds(20, 10), 20 * 10 / 60 + 4, None),
    # 4. ... and for 6 min: above the floor -> named
    (4, _seconds(20, 10), 20 * 10 / 60 + 6, 19),
    # 5. the query terminated cleanly after its last batch: silence is expected -> nothing
    (5, [spark(m, 5, m - 10, m) for m in range(10)] + [lifecycle(9, SampleKind.TERMINATED, "r1")], 60, None),
    # 6. idle but alive: Spark's QueryIdleEvent every 10 s (noDataProgressEventInterval) is a report
    (
        6,
        [spark(0, 5, -10, 0)]
        + [Sample(SPARK, T0 + timedelta(seconds=10 * i), SampleKind.IDLE, batch_id=0) for i in range(1, 120)],
        20,
        None,
    ),
    # 7. Flink polls that stop are collector errors (target_health), not this rule
    (7, [flink(m, None, m - 5, 10) for m in range(10)], 60, None),
]


@pytest.mark.parametrize(("case", "samples", "now_minute", "expected"), TABLE, ids=[f"np-{c[0]}" for c in TABLE])
def test_no_progress(case: int, samples: list[Sample], now_minute: float, expected: int | None) -> None:
    found = EVALUATOR.evaluate_job(samples, T0 + timedelta(minutes=now_minute), clock=True)
    assert [f.batch_id for f in found] == ([] if expected is None else [expected])
    assert all(f.rule == "no_progress" for f in found)


def test_not_judged_at_batch_time_and_message_names_the_last_batch() -> None:
    samples = [spark(m, 5, m - 10, m) for m in range(10)]
    # at the batch instants (scan, the daemon's replay) the clock rule is not run at all
    assert EVALUATOR.evaluate_job(samples, T0 + timedelta(hours=5)) == []
    (found,) = EVALUATOR.evaluate_job(samples, T0 + timedelta(minutes=20), clock=True)
    assert found.message.startswith(
        "no progress for 11 min; last batch 9 at 2026-11-29T12:09Z (it usually reports every 1 min)"
    )
