"""Advice right for the engine and the cause (one numbered table; each row's comment says why).

Every remedy comes from :mod:`rules.remedies` by the finding's engine: a Spark finding names only Spark
settings, a Flink finding only Flink's, a Kafka finding only the consumer group's. A finding that follows a
mis-dated row (a future jump) names the jump (batch, event time, how far) and gives the jump's remedy,
never a longer or shorter delay. Times are minutes after ``T0`` (see :mod:`tests.rule_samples`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from collectors.spark.eventlog import EventLogCollector
from monitor.commands._scan_render import build_report
from monitor.model import Engine, Finding, Sample
from rules import behind, freshness, idle, late, stall, state_growth
from rules.config import RulesConfig
from rules.history import JobHistory
from rules.registry import Evaluator
from rules.remedies import ENGINE_SETTINGS, REMEDIES, Cause, MissingRemedyError, remedy
from tests.rule_samples import FLINK, RULE_CASES, T0, flink, history, source, spark

NOW = T0 + timedelta(minutes=30)

#: Spark: batches 0-2 advance (delay 10 min), from batch 3 on the watermark stays at 11:52 while `clicks`
#: brings rows and `impressions` none (Spark's min policy: the quiet input holds it)
SPARK_HOLDING = (
    [spark(0, 10, -20, 0), spark(1, 10, -10, 1), spark(2, 10, -9, 2)]
    + [spark(m, 10, -8, m) for m in range(3, 15)]
    + [source(m, "clicks", 10) for m in range(15)]
    + [source(m, "impressions", 10 if m < 3 else 0) for m in range(15)]
)
#: Flink: subtask 1 of the source stays at 11:55 while subtask 0 advances; the job watermark is flat
FLINK_HOLDING = [s for m in range(13) for s in (flink(m, None, -5, 100), flink(m, 0, m - 1, 100), flink(m, 1, -5, 0))]
#: Flink: subtask 1 idle for 10 min (sourceIdleTime) with the lowest watermark, the job's flat
FLINK_IDLE = [
    s
    for m in range(11)
    for s in (flink(m, None, -5, 100), flink(m, 0, m - 1, 100), flink(m, 1, -5, 0, idle_ms=m * 60_000))
]
#: Spark: 11 of 1000 rows dropped in the last 10 min, the watermark moving normally: honest lateness
SPARK_LATE = [spark(m, 100, m - 10, m, dropped={8: 5, 9: 6}.get(m, 0)) for m in range(10)]
#: Flink: 5 of 100 records dropped at every poll, the watermark moving normally
FLINK_LATE = [dataclasses.replace(flink(m, None, m - 1, 100), dropped_by_watermark=5) for m in range(5)]
#: Spark: state rows climb 1000 per batch, never removed, while the watermark advances
SPARK_STATE = [spark(m, 10, m - 10, m, state=1000 * (m + 1), removed=0) for m in range(30)]
#: Flink: the checkpointed state size climbs while the watermark advances
FLINK_STATE = [dataclasses.replace(flink(m, None, m - 1, 100), state_memory_bytes=1000 * (m + 1)) for m in range(30)]
#: Spark: batches of 40-45 s with a 30 s trigger
SPARK_SLOW = [spark(m, 10, m - 10, m, duration_ms=40_000 + m) for m in range(5)]
#: Flink: subtask 0 back-pressured 80 % for 3 min
FLINK_PRESSURE = [flink(m, 0, m - 1, 100, backpressure=0.8) for m in range(4)]


def _jump_then_flat(engine: Engine) -> list[Sample]:
    """Batches 0-5 advance one minute each (delay 10 min); batch 6 carries a row dated a day ahead (12:06 +
    1 day); from batch 7 on the watermark rests at that day - 10 min while rows keep coming (event times
    12:07...12:21), all behind it. A Spark or Flink job (job-scope batches/polls with event-time stats)."""
    out = [spark(m, 10, m - 11 if m else None, m) for m in range(6)]
    out.append(spark(6, 10, -5, 6 + 24 * 60))
    out += [spark(m, 10, 6 + 24 * 60 - 10, m, dropped=10) for m in range(7, 22)]
    if engine is Engine.FLINK:
        out = [dataclasses.replace(s, job=FLINK, batch_id=None) for s in out]
    return out


Rule = Callable[[JobHistory], list[Finding]]


def _run(evaluate: Callable[..., list[Finding]], params: object) -> Rule:
    return lambda h: evaluate(params, h, NOW)


STALL = _run(stall.evaluate_stall, stall.StallParams())
IDLE = _run(idle.evaluate_idle, idle.IdleParams())
LATE = _run(late.evaluate_late_surge, late.LateSurgeParams())
STATE = _run(state_growth.evaluate_state_growth, state_growth.StateGrowthParams())
SLOW = _run(behind.evaluate_behind, behind.BehindParams.model_validate({"trigger_interval": "30s"}))
FRESH = _run(freshness.evaluate_freshness, freshness.FreshnessParams.model_validate({"target": "15m"}))

# (case, engine, rule, samples, cause the remedy is for, a phrase of that engine's remedy the finding gives)
TABLE: list[tuple[int, Engine, Rule, list[Sample], Cause, str]] = [
    # 1. Spark stall, one input holds the min: Spark's multipleWatermarkPolicy (WatermarkTracker), not withIdleness
    (1, Engine.SPARK, STALL, SPARK_HOLDING, Cause.HOLDING_INPUT, "multipleWatermarkPolicy=max"),
    # 2. Flink stall, subtask 1 holds the min (StatusWatermarkValve): withIdleness, not multipleWatermarkPolicy
    (2, Engine.FLINK, STALL, FLINK_HOLDING, Cause.HOLDING_INPUT, "WatermarkStrategy.withIdleness"),
    # 3. Spark idle input holding the watermark: the same Spark remedy as the stall (one truth)
    (3, Engine.SPARK, IDLE, SPARK_HOLDING, Cause.HOLDING_INPUT, "multipleWatermarkPolicy=max"),
    # 4. Flink idle subtask holding the watermark: withIdleness
    (4, Engine.FLINK, IDLE, FLINK_IDLE, Cause.HOLDING_INPUT, "WatermarkStrategy.withIdleness"),
    # 5. Spark honest late drops: raise the withWatermark delay (Spark has no late side output)
    (5, Engine.SPARK, LATE, SPARK_LATE, Cause.LATE_DROPS, "raise the withWatermark delay"),
    # 6. Flink honest late drops: forBoundedOutOfOrderness / allowedLateness / sideOutputLateData
    (6, Engine.FLINK, LATE, FLINK_LATE, Cause.LATE_DROPS, "sideOutputLateData"),
    # 7. Spark state growth with the watermark advancing: the key lacks the event time (dropDuplicates...)
    (7, Engine.SPARK, STATE, SPARK_STATE, Cause.STATE_GROWTH, "dropDuplicatesWithinWatermark"),
    # 8. Flink state growth: keyed state without TTL (StateTtlConfig)
    (8, Engine.FLINK, STATE, FLINK_STATE, Cause.STATE_GROWTH, "StateTtlConfig"),
    # 9. Spark batches longer than the trigger: maxOffsetsPerTrigger / the trigger
    (9, Engine.SPARK, SLOW, SPARK_SLOW, Cause.SLOW_BATCHES, "maxOffsetsPerTrigger"),
    # 10. Flink back-pressure: the bottleneck's parallelism
    (10, Engine.FLINK, SLOW, FLINK_PRESSURE, Cause.BACKPRESSURE, "raise its parallelism"),
    # 11. Spark stall after batch 6's row dated a day ahead: the jump's remedy (filter, restart before
    #     batch 6), not "lower the delay" (the rows are behind the watermark because of the row)
    (11, Engine.SPARK, STALL, _jump_then_flat(Engine.SPARK), Cause.FUTURE_JUMP, "restart from a checkpoint taken before batch 6"),
    # 12. the same on Flink polls: the savepoint, taken before the poll that carried the row
    (12, Engine.FLINK, STALL, _jump_then_flat(Engine.FLINK), Cause.FUTURE_JUMP, "a savepoint taken before the poll at 2026-11-29T12:06Z"),
    # 13. Spark late drops behind that row: the jump's remedy, never "raise the withWatermark delay"
    (13, Engine.SPARK, LATE, _jump_then_flat(Engine.SPARK), Cause.FUTURE_JUMP, "A longer delay does not help"),
    # 14. Flink late drops behind it: the same, in Flink's words
    (14, Engine.FLINK, LATE, _jump_then_flat(Engine.FLINK), Cause.FUTURE_JUMP, "before the WatermarkStrategy"),
]


@pytest.mark.parametrize(("case", "engine", "rule", "samples", "cause", "phrase"), TABLE, ids=[f"advice-{c[0]}" for c in TABLE])
def test_remedy_is_the_engines_own(
    case: int, engine: Engine, rule: Rule, samples: list[Sample], cause: Cause, phrase: str
) -> None:
    found = [f for f in rule(history(samples)) if f.severity.name != "INFO"]
    assert found, "the case must raise a finding"
    for finding in found:
        assert finding.job.engine is engine
        assert phrase in finding.message, finding.message
        others = [s for e, settings in ENGINE_SETTINGS.items() if e is not engine for s in settings]
        named = [s for s in others if _names(finding.message, s)]
        assert named == [], f"{engine.value} finding names another engine's setting {named}: {finding.message}"


def test_every_remedy_names_only_its_engines_settings() -> None:
    # e.g. no "withIdleness" in a Spark remedy and no "multipleWatermarkPolicy" in a Flink one
    for cause, by_engine in REMEDIES.items():
        for engine, text in by_engine.items():
            for other, settings in ENGINE_SETTINGS.items():
                if other is not engine:
                    assert not [s for s in settings if _names(text, s)], (cause, engine, other, text)


def _names(text: str, setting: str) -> bool:
    """Whether ``text`` names ``setting`` as a whole name (Spark's ``withWatermark`` is not named by Flink's
    ``withWatermarkAlignment``)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(setting)}(?![A-Za-z0-9_])", text) is not None


def test_a_missing_pair_is_an_error_not_another_engines_text() -> None:
    with pytest.raises(MissingRemedyError, match="no remedy for cause 'backpressure' on engine 'spark'"):
        remedy(Engine.SPARK, Cause.BACKPRESSURE)
    with pytest.raises(MissingRemedyError, match="needs the field 'before'"):
        remedy(Engine.SPARK, Cause.FUTURE_JUMP, skew="1 h")


def test_a_stall_after_a_future_jump_names_the_jump_and_its_batch() -> None:
    (finding,) = STALL(history(_jump_then_flat(Engine.SPARK)))
    # the watermark rests at 2026-11-30T11:56 (batch 6's 12:06 the next day - 10 min) since batch 7
    assert finding.message.startswith("the watermark stayed at 2026-11-30T11:56Z for 14 min (since 2026-11-29T12:07Z)")
    # batch 6 carried 2026-11-30T12:06, 1 day ahead of its observation time 2026-11-29T12:06 (> skew 1 h)
    assert (
        "Every row since is behind the watermark because batch 6 at 2026-11-29T12:06Z carried a mis-dated row "
        "(event time 2026-11-30T12:06Z, 1 day ahead of its observation time) that moved the watermark "
        "(see future_timestamp)." in finding.message
    )
    assert "Lower the withWatermark delay" not in finding.message
    assert finding.details["cause"] == "after_jump"
    assert finding.details["caused_by"] == {
        "rule": "future_timestamp",
        "kind": "skew",
        "batch_id": 6,
        "at": "2026-11-29T12:06Z",
        "event_time": "2026-11-30T12:06Z",
        "jump_seconds": 86_400.0,
    }


def test_findings_on_one_job_agree_on_the_jump() -> None:
    # stall, late drops and the jump itself on the same history: one batch named, one remedy, no delay advice
    h = history(_jump_then_flat(Engine.SPARK))
    found = STALL(h) + LATE(h)
    assert {f.details["caused_by"]["batch_id"] for f in found} == {6}
    assert all("restart from a checkpoint taken before batch 6" in f.message for f in found)


def test_state_growth_and_stall_agree_on_when_the_watermark_last_advanced() -> None:
    # Flink polls: the watermark advances at minutes 1-20, then stays flat (12:19) for 11 min while rows
    # flow and the checkpointed state grows. Both findings hold; they must agree: state_growth's last
    # advance is the stall's "since".
    samples = [
        dataclasses.replace(flink(m, None, min(m, 20) - 1, 100), state_memory_bytes=1000 * (m + 1))
        for m in range(31)
    ]
    h = history(samples)
    (flat,) = STALL(h)
    (grew,) = STATE(h)
    assert "(since 2026-11-29T12:20Z)" in flat.message
    # within the 30-min window (12:00-12:30) the watermark stepped at minutes 1..20: 20 steps, the last at 12:20
    assert "while the watermark advanced 20 times, the last at 2026-11-29T12:20Z" in grew.message
    assert grew.details["watermark_last_advanced_at"] == flat.details["flat_since"]


#: what a finding must never say about rows dropped behind a mis-dated row (a delay cannot bring them back)
DELAY_ADVICE = (
    remedy(Engine.SPARK, Cause.LATE_DROPS),
    remedy(Engine.SPARK, Cause.DELAY_EXCEEDS_SPAN),
    "raise the withWatermark delay",
    "Lower the withWatermark delay",
)


@pytest.mark.parametrize("case", ["backfill_future_row", "epoch_units"])
def test_recorded_mis_dated_rows_get_no_delay_advice(case: str) -> None:
    # recorded PySpark 4.3.0 logs (tests/fixtures/spark/rule-cases): batch 4 carries a row dated +1 day
    # (backfill_future_row) or in epoch milliseconds read as seconds (epoch_units); every later batch drops
    # its rows. With windows short enough for the 40-s recordings, the stall and the late drops both hold:
    # each names batch 4 and the jump's remedy, none advises a delay.
    rules = RulesConfig.model_validate(
        {"freshness": {"target": "15m"}, "watermark_stall": {"for": "5s", "min_data_batches": 2}}
    )
    poll = EventLogCollector([RULE_CASES / case]).poll(datetime(2030, 1, 1, tzinfo=UTC))
    report = build_report(Evaluator(rules), list(poll.samples))
    linked = [f for f in report.findings if "caused_by" in f.details]
    assert {"watermark_stall", "late_drop_surge"} <= {f.rule for f in linked}
    assert {f.details["caused_by"]["batch_id"] for f in linked} == {4}
    for finding in report.findings:
        assert not [a for a in DELAY_ADVICE if a in finding.message], finding.message
    for finding in linked:
        assert "restart from a checkpoint taken before batch 4" in finding.message


def test_kafka_findings_name_consumers_and_partitions_only() -> None:
    from rules.consumer_lag import LagSecondsParams, evaluate_lag_seconds
    from tests.rule_samples import KAFKA

    samples = [
        # the group's job-scope polls: its largest partition lag is 15 min (above the 5 min threshold)
        Sample(job=KAFKA, observed_at=T0 + timedelta(seconds=s), lag_seconds=900.0, collector="kafka-lag")
        for s in (0, 60)
    ]
    found = evaluate_lag_seconds(LagSecondsParams.model_validate({"threshold": "5m"}), history(samples), NOW)
    (finding,) = found
    assert "Add consumer instances (up to the partition count; beyond it add partitions)" in finding.message
    others = ENGINE_SETTINGS[Engine.SPARK] + ENGINE_SETTINGS[Engine.FLINK]
    assert not [s for s in others if s in finding.message]


def test_a_flink_stall_after_a_jump_seen_only_in_the_watermark_names_the_poll_before_it() -> None:
    # a Flink backfill (polls report no event-time stats): the job watermark advances 1 min per poll from
    # 2024-03-01T12:00 (all in the past), then between the polls at 12:05 and 12:06 it jumps a day and stays
    # there for 15 min while records flow. Nothing is ahead of processing time: only the step shows it,
    # 1440 times the usual 1 min. The record came before the poll at 12:06: restart from before the one at 12:05.
    base = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
    samples = [
        dataclasses.replace(
            flink(m, None, None, 100),
            watermark=base + timedelta(minutes=m if m < 6 else 5 + 24 * 60),
        )
        for m in range(22)
    ]
    (finding,) = STALL(history(samples))
    assert finding.details["cause"] == "after_jump"
    assert (
        "Every row since is behind the watermark because the poll at 2026-11-29T12:05Z brought a row with a future "
        "event time: the watermark jumped +1 day after it (see future_timestamp)." in finding.message
    )
    assert "a savepoint taken before the poll at 2026-11-29T12:05Z" in finding.message
    assert "forBoundedOutOfOrderness delay" not in finding.message
