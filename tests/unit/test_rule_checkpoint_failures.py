"""Table test of ``checkpoint_failures`` (rules.checkpoints); NOW is 12:30, window 15m (from 12:15 back
to the poll before it). Flink polls one minute apart; the attempt runs from 12:00 unless a row says."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import Sample
from rules.checkpoints import CheckpointParams, evaluate_checkpoints
from tests.rule_samples import T0, flink, history, spark

NOW = T0 + timedelta(minutes=30)
RUNNING_12_00 = int(T0.timestamp() * 1000)


def poll(minute: int, failed: int | None, *, running_since: int = RUNNING_12_00, run: str = "j1") -> Sample:
    s = flink(minute, None, minute - 1, 10)
    return dataclasses.replace(
        s,
        job=dataclasses.replace(s.job, run_id=run),
        checkpoints_failed=failed,
        extra={
            "running_since_ms": running_since,
            "checkpoint_failure": "Checkpoint expired before completing.",
        },
    )


TABLE: list[tuple[int, list[Sample], int | None]] = [
    # 1. counts.failed 1 throughout: the failed trigger of the job start, nothing since -> nothing
    (1, [poll(m, 1) for m in range(14, 31)], None),
    # 2. 1 -> 3 at 12:20 within one attempt: two checkpoints failed
    (2, [poll(m, 1 if m < 20 else 3) for m in range(14, 31)], 2),
    # 3. the rise happened at 12:05, before the window (12:15 and the poll before): no longer current
    (3, [poll(m, 1 if m < 5 else 3) for m in range(0, 31)], None),
    # 4. a restart at 12:20 (RUNNING again at 12:20) counted its own start failure: not a checkpoint failure
    (
        4,
        [poll(m, 1) for m in range(14, 20)]
        + [poll(m, 2, running_since=RUNNING_12_00 + 20 * 60_000) for m in range(20, 31)],
        None,
    ),
    # 5. resubmitted at 12:20 (new job id j2, its own count starting at 1): not a failure either
    (5, [poll(m, 3) for m in range(14, 20)] + [poll(m, 1, run="j2") for m in range(20, 31)], None),
    # 6. counts unknown (the /checkpoints request failed) between 1 and 2: the rise 1 -> 2 still counts once
    (6, [poll(14, 1), poll(20, None), poll(25, 2), poll(30, 2)], 1),
]


@pytest.mark.parametrize(("case", "samples", "expected"), TABLE, ids=[f"ckpt-{c[0]}" for c in TABLE])
def test_checkpoint_failures(case: int, samples: list[Sample], expected: int | None) -> None:
    found = evaluate_checkpoints(CheckpointParams(), history(samples), NOW)
    assert [f.details["failed"] for f in found] == ([] if expected is None else [expected])


def test_message_quotes_the_failure_and_spark_is_not_judged() -> None:
    (found,) = evaluate_checkpoints(CheckpointParams(), history([poll(14, 1), poll(20, 3)]), NOW)
    assert found.message.startswith(
        "2 checkpoints failed in the last 15 min (first seen at 2026-11-29T12:20Z)"
    )
    assert "The latest failure: Checkpoint expired before completing." in found.message
    spark_samples = [dataclasses.replace(spark(m, 5), checkpoints_failed=m) for m in range(20, 30)]
    assert evaluate_checkpoints(CheckpointParams(), history(spark_samples), NOW) == []
