"""The daemon's rule adapter: which findings hold at each job's newest batch.

Inputs are real recorded Spark progress lines (tests/live_eventlog.py) appended to an event log and read
back by the real event-log collector. The template batches' values are listed in tests/live_eventlog.py
(read off the recorded file by hand).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.spark.eventlog import EventLogCollector
from monitor.config import parse_config
from monitor.errors import ConfigError
from monitor.evaluation import evaluate, rule_timing
from monitor.model import Engine, Sample, Severity
from tests.live_eventlog import LiveEventLog

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


def _samples(
    tmp_path: Path, spark_fixtures: Path, runs: list[tuple[int, ...]], query_id: str | None = None
) -> tuple[str, list[Sample]]:
    log = LiveEventLog(tmp_path / "events" / "local-1.inprogress", spark_fixtures, T0, query_id=query_id)
    for templates in runs:
        log.start_run()
        log.batches(*templates)
    result = EventLogCollector([tmp_path / "events"]).poll(NOW)
    assert result.errors == ()
    return log.query_id, list(result.samples)


# (case, runs of recorded template batches, expected current rules)
CASES = [
    # 1. batches 0-3 all run with watermark 12:05 while batches 0-2 brought 6 rows each (18 rows in 3 data
    #    batches >= the default 3): a stall that reaches the newest batch.
    ("stall ongoing", [(4, 4, 4, 4)], {"watermark_stall"}),
    # 2. same, then a no-data batch whose watermark moved to 12:10: the stall ended before the newest batch.
    ("stall ended", [(4, 4, 4, 4, 5)], set()),
    # 3. only two data batches (0, 1) before the newest had a chance to move the watermark: below 3.
    ("too short for a stall", [(4, 4, 4)], set()),
    # 4. the recorded batch 6 carries a row dated 2099-01-01, 72 years after its trigger time (skew 1h).
    ("future jump", [(6,)], {"future_timestamp"}),
    # 5. then batch 7 runs with watermark 2098-12-31T23:50: still ahead, the same jump continues.
    ("watermark in the future", [(6, 7)], {"future_timestamp"}),
    # 6. a restart from a checkpoint before the jump: watermark 11:57, max 12:15 in 2024: within the skew.
    ("restart clears the jump", [(6, 7), (2,)], set()),
    # 7. the whole recorded history order (batches 0..11 over six runs): the last batch's watermark is
    #    2099-01-01T00:10, so the jump still holds; no stretch of equal watermarks exists.
    ("recorded sequence", [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11)], {"future_timestamp"}),
]


@pytest.mark.parametrize(("case", "runs", "expected"), CASES, ids=[c[0] for c in CASES])
def test_current_findings(
    tmp_path: Path, spark_fixtures: Path, case: str, runs: list[tuple[int, ...]], expected: set[str]
) -> None:
    query_id, samples = _samples(tmp_path, spark_fixtures, runs)
    findings = evaluate(parse_config({}).rules, {(Engine.SPARK, query_id): samples}, NOW)
    assert {f.rule for f in findings} == expected
    assert all(f.job.job_id == query_id for f in findings)
    # one alert identity per rule and job, whatever batch the finding names
    assert len({f.fingerprint() for f in findings}) == len(findings)


def test_fingerprint_is_stable_across_runs_and_batches(tmp_path: Path, spark_fixtures: Path) -> None:
    # the same query seen at the jump (batch 0) and two batches later in a new run: one alert identity
    query_id, first = _samples(tmp_path / "a", spark_fixtures, [(6,)])
    _, later = _samples(tmp_path / "b", spark_fixtures, [(6,), (7, 7)], query_id=query_id)
    [f1] = evaluate(parse_config({}).rules, {(Engine.SPARK, query_id): first}, NOW)
    [f2] = evaluate(parse_config({}).rules, {(Engine.SPARK, query_id): later}, NOW)
    assert f1.fingerprint() == f2.fingerprint()


def test_rule_parameters_and_overrides(tmp_path: Path, spark_fixtures: Path) -> None:
    query_id, samples = _samples(tmp_path, spark_fixtures, [(4, 4, 4)])
    by_job = {(Engine.SPARK, query_id): samples}
    # two data batches are enough with min_data_batches 2; severity overridden to critical
    loose = parse_config({"rules": {"watermark_stall": {"min_data_batches": 2, "severity": "critical"}}}).rules
    [finding] = evaluate(loose, by_job, NOW)
    assert (finding.rule, finding.severity) == ("watermark_stall", Severity.CRITICAL)
    # an override for this job name (recorded query name "wm_gt") raises the bar back to 3
    strict = parse_config(
        {
            "rules": {
                "watermark_stall": {"min_data_batches": 2},
                "overrides": [{"match": {"job_name": "wm_gt"}, "rule": "watermark_stall", "params": {"min_data_batches": 3}}],
            }
        }
    ).rules
    assert evaluate(strict, by_job, NOW) == []
    disabled = parse_config({"rules": {"future_timestamp": {"enabled": False}}}).rules
    _, future = _samples(tmp_path / "f", spark_fixtures, [(6,)])
    assert evaluate(disabled, {(Engine.SPARK, "x"): future}, NOW) == []


def test_rule_timing_and_bad_parameters() -> None:
    timing = rule_timing(parse_config({"rules": {"watermark_stall": {"for": "2m", "keep_firing_for": "30s"}}}).rules)
    assert timing("watermark_stall").for_duration == timedelta(minutes=2)
    assert timing("watermark_stall").keep_firing_for == timedelta(seconds=30)
    assert timing("future_timestamp").for_duration == timedelta(0)
    with pytest.raises(ConfigError, match=r"rules\.watermark_stall\.for"):
        rule_timing(parse_config({"rules": {"watermark_stall": {"for": 10}}}).rules)
    with pytest.raises(ConfigError, match=r"rules\.future_timestamp\.skew"):
        evaluate(parse_config({"rules": {"future_timestamp": {"skew": "1 parsec"}}}).rules, {}, NOW)
    with pytest.raises(ConfigError, match=r"rules\.future_timestamp: unknown parameter\(s\) skw"):
        evaluate(parse_config({"rules": {"future_timestamp": {"skw": "1h"}}}).rules, {(Engine.SPARK, "x"): []}, NOW)
