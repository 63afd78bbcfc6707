"""Table test of ``batch_running`` (rules.running, Spark 4.2+ ``QueryExecutionStartEvent``) through the
registry, judged at the tick's clock; each row's comment says why its answer is right.

Defaults: ``for`` 5m, durations 10. Micro-batch rows: batches at 12:00 + m minutes (m = 0..9), each
``batchDuration`` 8 s; a ``BATCH_STARTED`` sample (``started(m)``) is a trigger's start. Real-time rows:
batches every 5 min that last 5 min (``batchDuration`` 300000 ms), marked ``trigger: real_time``.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import Sample, SampleKind
from rules.config import RulesConfig
from rules.registry import Evaluator
from tests.rule_samples import SPARK, T0, lifecycle, only_rules, spark

EVALUATOR = Evaluator(RulesConfig.model_validate(only_rules(batch_running={}, no_progress={})))


def started(minute: float) -> Sample:
    return lifecycle(minute, SampleKind.BATCH_STARTED, "r1")


MICRO = [spark(m, 5, m - 10, m, duration_ms=8_000) for m in range(10)]
REAL_TIME = [
    dataclasses.replace(spark(5 * i, 500, 5 * i - 1, 5 * i, batch=i, duration_ms=300_000), extra={"trigger": "real_time"})
    for i in range(5)
]  # batches 0-4 start at 12:00 ... 12:20, each reported 5 min later

# (case, samples, minutes after T0 of `now`, expected (rule, batch id) findings)
TABLE: list[tuple[int, list[Sample], float, list[tuple[str, int]]]] = [
    # 1. batch 10 started 12:10 and runs 4 min: over 10 x 8 s but under the 5-min floor -> nothing
    (1, [*MICRO, started(10)], 14, []),
    # 2. ... and at 12:24 it has run 14 min -> batch_running names batch 10; no_progress stays quiet (the
    #    driver reported the start: this is one running batch, not a silent driver)
    (2, [*MICRO, started(10)], 24, [("batch_running", 10)]),
    # 3. the start of batch 9 carries batch 9's own timestamp and batch 9 reported: nothing is running; the
    #    silence since is no_progress's (11 min > max(5 min, 10 x 1 min))
    (3, [*MICRO[:9], started(9), MICRO[9]], 20, [("no_progress", 9)]),
    # 4. a trigger that ran no batch: the idle event carries the trigger's start -> finished, no batch runs;
    #    the 14 min of silence since the idle event are no_progress's
    (4, [*MICRO, started(10), Sample(SPARK, T0 + timedelta(minutes=10), SampleKind.IDLE, batch_id=9)], 24,
     [("no_progress", 9)]),
    # 5. the query terminated after the start: the registry judges nothing of a terminated query
    (5, [*MICRO, started(10), lifecycle(11, SampleKind.TERMINATED, "r1")], 24, []),
    # 6. real-time mode: batch 5 started 12:25 (when batch 4 ended) and runs 8 min: a batch lasts 5 min
    #    by design, 5 + 5 min is the limit -> nothing
    (6, [*REAL_TIME, started(25)], 33, []),
    # 7. ... 11 min: 6 min past its planned end -> named
    (7, [*REAL_TIME, started(25)], 36, [("batch_running", 5)]),
    # 8. real-time mode without start events: batch 4 (started 12:20) reported at 12:25; at 12:33 the next
    #    report is 3 min late, under `for` -> no no_progress (a micro-batch reading would say 13 min)
    (8, REAL_TIME, 33, []),
    # 9. ... at 12:37 the report of batch 5 is 7 min overdue (12 min since 12:25 > 5 min batch + 5 min)
    (9, REAL_TIME, 37, [("no_progress", 4)]),
]


@pytest.mark.parametrize(("case", "samples", "now_minute", "expected"), TABLE, ids=[f"br-{c[0]}" for c in TABLE])
def test_batch_running(case: int, samples: list[Sample], now_minute: float, expected: list[tuple[str, int]]) -> None:
    found = EVALUATOR.evaluate_job(samples, T0 + timedelta(minutes=now_minute), clock=True)
    assert [(f.rule, f.batch_id) for f in found] == expected


def test_message_says_what_runs_how_long_and_what_to_look_at() -> None:
    (found,) = EVALUATOR.evaluate_job([*MICRO, started(10)], T0 + timedelta(minutes=24), clock=True)
    assert found.message == (
        "batch 10 has been running for 14 min (started 2026-11-29T12:10Z) and has not finished; its batches "
        "usually take 8 s. Until it finishes the query reads no new data, its watermark does not move and "
        "nothing is written. In the Spark UI's Jobs page open the running job of batch 10 (its description "
        "names the query and `batch = <id>`) and its slowest stage: a task stuck on a slow or blocked sink or "
        "source, one skewed partition, or tasks waiting for lost executors. A thread dump of the driver "
        "(jstack) shows what the batch waits on."
    )
    assert found.details["running_seconds"] == 14 * 60
    assert found.details["limit_seconds"] == 5 * 60
    (rtm,) = EVALUATOR.evaluate_job([*REAL_TIME, started(25)], T0 + timedelta(minutes=36), clock=True)
    assert "in real-time mode each batch runs for 5 min" in rtm.message
    assert rtm.details["trigger"] == "real_time"


def test_not_judged_at_batch_time() -> None:
    assert EVALUATOR.evaluate_job([*MICRO, started(10)], T0 + timedelta(hours=5)) == []
