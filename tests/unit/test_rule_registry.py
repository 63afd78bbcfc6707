"""rules.registry: parameter validation (errors name ``rules.<name>.<param>``), per-job overrides,
severity/enabled, lifecycle timing, ``tidegauge config check``, and a full evaluation of the recorded real
Spark 4.3.0 event log read through the real parser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.spark.eventlog import EventLogCollector
from monitor.cli import command_app
from monitor.errors import ConfigError
from monitor.model import CollectorError, Engine, JobRef, Sample, SampleKind, Severity
from rules.config import RulesConfig
from rules.registry import RULES, evaluate, rule_timing, validate
from tests.rule_samples import SPARK, T0, source, spark

NOW = T0 + timedelta(minutes=30)


def rules(data: dict[str, object]) -> RulesConfig:
    return RulesConfig.model_validate(data)


def stalled(job: JobRef = SPARK) -> list[Sample]:
    # watermark flat at 11:52 from 12:03 to 12:14 while 10 rows/batch arrive (see test_rule_watermark_stall #2)
    out = [spark(0, 10, -20, 0, job=job), spark(1, 10, -10, 1, job=job), spark(2, 10, -9, 2, job=job)]
    return out + [spark(m, 10, -8, m, job=job) for m in range(3, 15)]


# (case, rules section, expected ConfigError text)
BAD: list[tuple[int, dict[str, object], str]] = [
    # 1. a rule that does not exist: named, with the list of rules
    (1, {"watermark_stal": {"for": "10m"}}, "rules.watermark_stal: unknown rule (rules are: batch_running, checkpoint_failures, consumer_lag,"),
    # 2. a parameter the rule does not have
    (
        2,
        {"watermark_stall": {"for": "10m", "min_row": 3}},
        "rules.watermark_stall.min_row: unknown parameter",
    ),
    # 3. a bare number where a duration is needed: its unit would be a guess
    (3, {"future_timestamp": {"skew": 3600}}, "rules.future_timestamp.skew: expected a duration with a unit"),
    # 4. an unparseable duration (Spark's "5 minutes" spelling parses; a made-up unit does not)
    (4, {"idle_source": {"for": "5 parsecs"}}, "rules.idle_source.for: duration: unknown unit 'parsecs'"),
    # 5. out of range
    (
        5,
        {"late_drop_surge": {"max_share": -1}},
        "rules.late_drop_surge.max_share: Input should be greater than or equal to 0",
    ),
    # 5b. a share of 1 or more can never be exceeded: the rule could never fire
    (
        5,
        {"late_drop_surge": {"max_share": 5}},
        "rules.late_drop_surge.max_share: Input should be less than 1",
    ),
    # 6. an override for an unknown rule
    (
        6,
        {"overrides": [{"match": {"job_name": "x"}, "rule": "nope", "params": {}}]},
        "rules.overrides[0].rule: unknown rule 'nope'",
    ),
    # 7. an override whose params are invalid for its rule (checked merged over the base params)
    (
        7,
        {"overrides": [{"match": {"job_name": "x"}, "rule": "state_growth", "params": {"metric": "cells"}}]},
        "rules.state_growth.metric: Input should be 'rows' or 'bytes'",
    ),
    # 8. an override matching on a label that jobs do not have
    (
        8,
        {"overrides": [{"match": {"team": "x"}, "rule": "freshness", "params": {}}]},
        "rules.overrides[0].match.team: unknown key",
    ),
    # 9. a severity that does not exist
    (
        9,
        {"consumer_lag": {"severity": "urgent"}},
        "rules.consumer_lag.severity: Input should be 'info', 'warning' or 'critical'",
    ),
]


@pytest.mark.parametrize(("case", "data", "expected"), BAD, ids=[f"bad-{c[0]}" for c in BAD])
def test_invalid_params_name_rule_and_param(case: int, data: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(rules(data))
    assert expected in str(info.value)
    with pytest.raises(ConfigError):  # evaluate validates too, even without any history
        evaluate(rules(data), {}, NOW)


def test_every_rule_accepts_its_defaults_and_common_keys() -> None:
    data = {name: {"enabled": True, "severity": "info", "keep_firing_for": "1m"} for name in RULES}
    validate(rules(data))
    # thirteen batch-time rules (consumer_lag_seconds, rebalance_churn and freshness_slo among them),
    # checkpoint_failures, no_progress, batch_running (Spark 4.2+ batch starts), the cross-job
    # pipeline_freshness and pipeline_slo, and late_rows_dropped (Flink's cumulative numLateRecordsDropped)
    # and join_state_unbounded (a stream-stream join without an event-time range), split_watermark (Flink
    # split-level watermarks)
    assert len(RULES) == 21


def test_override_applies_only_to_matching_jobs() -> None:
    other = JobRef(Engine.SPARK, "q2", run_id="r9", name="orders")
    history = {"q1": stalled(), "q2": stalled(other)}
    config = rules(
        {
            "overrides": [
                {"match": {"job_name": "clicks"}, "rule": "watermark_stall", "params": {"for": "30m"}}
            ]
        }
    )
    found = [f for f in evaluate(config, history, NOW) if f.rule == "watermark_stall"]
    # the 11-min stall meets the default 10m for `orders` but not the 30m override for `clicks`
    assert [f.job.job_id for f in found] == ["q2"]


def test_severity_override_and_enabled() -> None:
    history = {(Engine.SPARK, "q1"): stalled()}  # the daemon's key type works as well
    (found,) = [
        f
        for f in evaluate(rules({"watermark_stall": {"severity": "critical"}}), history, NOW)
        if f.rule == "watermark_stall"
    ]
    assert found.severity is Severity.CRITICAL
    assert [
        f
        for f in evaluate(rules({"watermark_stall": {"enabled": False}}), history, NOW)
        if f.rule == "watermark_stall"
    ] == []


def test_fingerprints_are_stable_across_ticks() -> None:
    history = {"q1": stalled() + [source(m, "clicks", 10) for m in range(15)]}
    first = evaluate(rules({}), history, NOW)
    later = evaluate(rules({}), history, NOW + timedelta(minutes=1))
    assert [f.fingerprint() for f in first] == [f.fingerprint() for f in later]


def test_unreachable_targets_come_from_errors() -> None:
    errors = [
        CollectorError("flink-rest", "http://jm:8081", "refused", NOW - timedelta(seconds=s))
        for s in (10, 40)
    ]
    found = evaluate(rules({}), {}, NOW, errors=errors)
    assert [(f.rule, f.labels["check"]) for f in found] == [("target_health", "unreachable")]


def test_rule_timing() -> None:
    timing = rule_timing(
        rules({"watermark_stall": {"for": "10m", "keep_firing_for": "5m"}, "future_timestamp": {"for": "2m"}})
    )
    # watermark_stall measures `for` on the history itself: the lifecycle must not wait again
    assert timing("watermark_stall").for_duration == timedelta(0)
    assert timing("watermark_stall").keep_firing_for == timedelta(minutes=5)
    # future_timestamp's condition is instantaneous: `for` is the lifecycle's pending time
    assert timing("future_timestamp").for_duration == timedelta(minutes=2)
    assert timing("unknown_rule").for_duration == timedelta(0)


def test_config_check_validates_rules(tmp_path: Path) -> None:
    path = tmp_path / "tidegauge.yaml"
    path.write_text("rules:\n  watermark_stall: {for: 10m, min_rowz: 2}\n")
    result = CliRunner().invoke(command_app(), ["config", "check", "-c", str(path)])
    assert result.exit_code != 0
    assert f"{path}: rules.watermark_stall.min_rowz: unknown parameter" in str(result.exception)
    path.write_text("rules:\n  watermark_stall: {for: 10m, min_rows: 2}\n  freshness: {target: 15m}\n")
    result = CliRunner().invoke(command_app(), ["config", "check", "-c", str(path)])
    assert result.exit_code == 0, result.output


def test_recorded_real_spark_event_log(spark_fixtures: Path) -> None:
    poll = EventLogCollector([spark_fixtures / "eventlog_v2_fixture"]).poll(datetime(2030, 1, 1, tzinfo=UTC))
    assert poll.errors == ()
    by_job: dict[tuple[Engine, str], list[Sample]] = {}
    for sample in poll.samples:
        by_job.setdefault((sample.job.engine, sample.job.job_id), []).append(sample)
    (samples,) = by_job.values()
    newest = max(s.observed_at for s in samples)  # 11:32:51.258, the last run's start/stop
    # the log ends with the last run's QueryTerminatedEvent (no exception): a terminated query's
    # conditions no longer hold, only its restarts (target_health) are still reported
    assert [f.rule for f in evaluate(rules({}), by_job, newest)] == ["target_health"]
    # judged at batch 11 (11:32:50.792, before its run terminated), as the daemon saw it live
    at_11 = max(s.observed_at for s in samples if s.batch_id == 11)
    live = [s for s in samples if s.observed_at < at_11 or (s.observed_at == at_11 and s.kind is not SampleKind.TERMINATED)]
    by_job = {(Engine.SPARK, samples[0].job.job_id): live}
    found = evaluate(rules({}), by_job, at_11)
    assert [f.rule for f in found] == ["future_timestamp", "late_drop_surge", "target_health"]
    future, late, health = found
    # batch 6 brought the 2099-01-01 row (eventTime.max) and every later batch stays ahead: the stretch
    # starts there; batches 6-11 brought 3+0+3+0+1+0 = 7 rows and batch 8 dropped 2 of them
    assert future.batch_id == 6 and future.severity is Severity.CRITICAL
    assert "Since then 2 of 7 input rows were dropped as late." in future.message
    # all 12 batches lie within the 10-min window: dropped 1 (batch 2) + 2 (batch 4) + 2 (batch 8) = 5 of
    # 5+6+6+3+3+1 = 24 input rows; the newest watermark (2099) is ahead, so the cause named is the future time
    assert (late.details["dropped"], late.details["rows"]) == (5, 24)
    # linked to batch 6's 2099 row (the skew stretch begins there), with its remedy
    assert "because batch 6 at 2026-11-29T11:32:48.289Z carried a mis-dated row (event time 2099-01-01T00:00Z" in late.message
    assert "restart from a checkpoint taken before batch 6" in late.message
    # six runs of the same query id up to batch 11, each started after the previous one terminated: 5
    # restarts (the seventh run starts, and stops without a batch, after batch 11)
    assert health.labels["check"] == "restarted" and health.details["restarts"] == 5
    # the watermark stalls nowhere (the log spans 10 s, far below for 10m), and the never-computed 1970
    # watermark of batch 0 is not reported as a 56-year freshness delay even with a target
    with_target = evaluate(rules({"freshness": {"target": "1h"}}), by_job, at_11)
    assert [f.rule for f in with_target] == ["future_timestamp", "late_drop_surge", "target_health"]


def test_for_zero_still_sees_the_batches_a_stall_needs() -> None:
    # `for: 0s` makes watermark_stall's own window empty, yet it counts `min_data_batches` (3) batches with
    # rows: four batches one second apart, same watermark, 6 rows each -> a stall at the newest batch.
    # (A lookback derived only from `for` kept just the newest batch and found nothing.)
    from monitor.config import parse_config
    from rules.registry import evaluate
    from tests.rule_samples import only_rules

    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    job = JobRef(Engine.SPARK, "q", "r", "n")
    wm = datetime(2024, 1, 1, 12, 5, tzinfo=UTC)
    samples = [
        Sample(job, t0 + timedelta(seconds=i), batch_id=i, watermark=wm, num_input_rows=6) for i in range(4)
    ]
    cfg = parse_config({"rules": only_rules(watermark_stall={"for": "0s"})}).rules
    findings = evaluate(cfg, {job: samples}, t0 + timedelta(minutes=5))
    assert [(f.rule, f.batch_id) for f in findings] == [("watermark_stall", 3)]


def test_every_problem_is_reported_at_once() -> None:
    # a user fixing a config one error per run found it slow: all rules' problems come in one error,
    # one line each (an unknown rule, two bad parameters of two rules, a bad override)
    config = RulesConfig.model_validate(
        {
            "watermark_stal": {},
            "state_growth": {"metric": "cells"},
            "late_drop_surge": {"max_share": 5},
            "overrides": [{"match": {"job_name": "x"}, "rule": "nope", "params": {}}],
        }
    )
    with pytest.raises(ConfigError) as info:
        validate(config)
    lines = str(info.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "rules.watermark_stal",
        "rules.state_growth.metric",
        "rules.late_drop_surge.max_share",
        "rules.overrides[0].rule",
    ]
