"""Spark 4.2+ batch starts (``StreamingQueryListener.QueryExecutionStartEvent``) read from an event log and
judged by ``batch_running``.

The installed PySpark 4.3.0 does not have the event (its ``StreamingQueryListener`` posts Started, Progress,
Idle and Terminated only), so no recording of it exists: the log here is the recorded real Spark 4.3.0 log
``real-4.3.0/eventlog_trimmed.jsonl`` (query ``wm_gt``, batches 0-11 over six runs) with one start event
written before each progress, in the shape Spark 4.2's ``QueryExecutionStartEvent.jsonValue`` writes
(``sql/api/.../streaming/StreamingQueryListener.scala``: ``id``, ``runId``, ``name``, ``timestamp``, the
trigger's start, which is the ``timestamp`` its progress carries). The last batch's progress and the
query's termination are cut: batch 11 started and never finished.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from collectors.spark.eventlog import EventLogCollector
from collectors.spark.progress import EVENT_EXECUTION_START, EVENT_PROGRESS, EVENT_TERMINATED
from monitor.model import SampleKind
from rules.config import RulesConfig
from rules.registry import Evaluator
from tests.rule_samples import only_rules

EVALUATOR = Evaluator(RulesConfig.model_validate(only_rules(batch_running={}, no_progress={})))
#: batch 11's start (its progress timestamp in the recording)
BATCH_11_START = datetime(2026, 11, 29, 11, 32, 50, 792000, tzinfo=UTC)


def _log_with_starts(spark_fixtures: Path, out: Path, *, cut_last: bool) -> Path:
    lines: list[str] = []
    source = (spark_fixtures / "eventlog_trimmed.jsonl").read_text().splitlines()
    for line in source:
        event = json.loads(line)
        if event["Event"] == EVENT_PROGRESS:
            p = event["progress"]
            start = {"Event": EVENT_EXECUTION_START, "id": p["id"], "runId": p["runId"], "name": p["name"],
                     "timestamp": p["timestamp"]}  # fmt: skip
            lines.append(json.dumps(start, separators=(",", ":")))
        lines.append(line)
    if cut_last:
        last_progress = max(i for i, line in enumerate(lines) if EVENT_PROGRESS in line)
        lines = [
            line for i, line in enumerate(lines) if i != last_progress and not (i > last_progress and EVENT_TERMINATED in line)
        ]
    path = out / "local-1795951957158"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_start_events_are_read_as_batch_starts(spark_fixtures: Path, tmp_path: Path) -> None:
    log = _log_with_starts(spark_fixtures, tmp_path, cut_last=False)
    result = EventLogCollector([log]).poll(BATCH_11_START + timedelta(minutes=1))
    assert not result.errors
    starts = [s for s in result.samples if s.kind is SampleKind.BATCH_STARTED]
    batches = [s for s in result.samples if s.kind is SampleKind.PROGRESS and s.scope.is_job()]
    assert len(starts) == len(batches) == 12
    # each start carries its batch's own instant and run
    assert [(s.observed_at, s.job.run_id) for s in starts] == [(b.observed_at, b.job.run_id) for b in batches]
    assert {s.job.name for s in starts} == {"wm_gt"}
    # every batch reported and the query terminated: nothing is running, nothing is silent
    samples = sorted(result.samples, key=lambda s: s.observed_at)
    assert EVALUATOR.evaluate_job(samples, BATCH_11_START + timedelta(hours=1), clock=True) == []


def test_a_batch_that_started_and_never_finished(spark_fixtures: Path, tmp_path: Path) -> None:
    log = _log_with_starts(spark_fixtures, tmp_path, cut_last=True)
    result = EventLogCollector([log]).poll(BATCH_11_START + timedelta(minutes=1))
    assert not result.errors
    samples = sorted(result.samples, key=lambda s: s.observed_at)
    # 4 min in: under the 5-min floor (the query's batches take ~0.45 s: 10 of them is 4.5 s)
    assert EVALUATOR.evaluate_job(samples, BATCH_11_START + timedelta(minutes=4), clock=True) == []
    (found,) = EVALUATOR.evaluate_job(samples, BATCH_11_START + timedelta(minutes=14), clock=True)
    assert found.rule == "batch_running" and found.batch_id == 11
    # the median of the recorded batchDuration of batches 0-10 (3504, 649, 613, 522, 458, 419, 439, 370, 565,
    # 442, 447 ms)
    assert found.details["usual_batch_seconds"] == 0.458
    assert found.message.startswith(
        "batch 11 has been running for 14 min (started 2026-11-29T11:32:50.792Z) and has not finished; its "
        "batches usually take under a second. Until it finishes the query reads no new data"
    )
