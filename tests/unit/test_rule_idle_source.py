"""Table test of ``idle_source`` (rules.idle.evaluate_idle); each row's comment says why its answer is
right. Default ``for``: 5m. Flink polls and Spark batches are one minute apart from 12:00."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import Sample, Scope, Severity
from rules.idle import IdleParams, evaluate_idle
from tests.rule_samples import T0, flink, history, source, spark

NOW = T0 + timedelta(minutes=10)
MIN_MS = 60_000


def _flink(job_wm_moves: bool, idle_minutes_at_end: int) -> list[Sample]:
    out: list[Sample] = []
    start = 10 - idle_minutes_at_end  # subtask 1 stopped getting records at this minute
    for m in range(11):
        out.append(flink(m, None, m - 1 if job_wm_moves else -5, 100))
        out.append(flink(m, 0, m - 1, 100, idle_ms=0))
        out.append(flink(m, 1, -5, 0, idle_ms=max(0, m - start) * MIN_MS))
    return out


def _spark(quiet_from: int, other_rows: int = 10, first: int = 0) -> list[Sample]:
    out: list[Sample] = []
    for m in range(first, 11):
        out.append(spark(m, other_rows + (10 if m < quiet_from else 0), -8, m))
        out.append(source(m, "clicks", other_rows))
        out.append(source(m, "impressions", 10 if m < quiet_from else 0))
    return out


# (case, samples, expected [(scope labels, severity)])
TABLE: list[tuple[int, list[Sample], list[tuple[dict[str, str], Severity]]]] = [
    # 1. Flink subtask 1: sourceIdleTime 6 min >= 5 while subtask 0 has rows; the job watermark stayed at
    #    11:55 meanwhile -> it holds the watermark: WARNING
    (1, _flink(False, 6), [({"source": "Source: clicks", "subtask": "1"}, Severity.WARNING)]),
    # 2. same idle subtask but the job watermark advances (withIdleness already excludes it): INFO
    (2, _flink(True, 6), [({"source": "Source: clicks", "subtask": "1"}, Severity.INFO)]),
    # 3. idle for 4 min < for 5m: not yet
    (3, _flink(False, 4), []),
    # 4. Spark: `impressions` brought 0 rows in batches 4-10 (6 min) while `clicks` brought rows and the
    #    global watermark stayed flat (min policy) -> WARNING naming `impressions`
    (4, _spark(quiet_from=4), [({"source": "impressions"}, Severity.WARNING)]),
    # 5. every source quiet (no rows anywhere): a quiet job, not one idle input beside advancing ones
    (5, _spark(quiet_from=4, other_rows=0), []),
    # 6. Flink subtask rows unknown (aggregated endpoint answered []: None) and no sourceIdleTime: unknown
    #    is not zero, so it is not idle even though its sibling flows
    (
        6,
        [flink(m, 0, m - 1, 100) for m in range(11)] + [flink(m, 1, -5, None) for m in range(11)],
        [],
    ),
    # 7. Flink subtask 1 has had no watermark (Long.MIN_VALUE -> None) and no rows reported for 10 min
    #    while subtask 0's watermark advances; no job-level watermark: it has none, so it holds -> WARNING
    (
        7,
        [flink(m, 0, m - 1) for m in range(11)] + [flink(m, 1, None) for m in range(11)],
        [({"source": "Source: clicks", "subtask": "1"}, Severity.WARNING)],
    ),
    # 8. history only 3 min long (batches from 12:07): `impressions` has 0 rows throughout, but for 5m
    #    cannot be shown yet
    (8, _spark(quiet_from=0, first=7), []),
]


@pytest.mark.parametrize(("case", "samples", "expected"), TABLE, ids=[f"idle-{c[0]}" for c in TABLE])
def test_idle_source(
    case: int, samples: list[Sample], expected: list[tuple[dict[str, str], Severity]]
) -> None:
    found = evaluate_idle(IdleParams(), history(samples), NOW)
    assert [(f.scope.labels(), f.severity) for f in found] == expected
    assert all(f.rule == "idle_source" for f in found)


def test_messages_name_the_input_and_remedy() -> None:
    (flink_finding,) = evaluate_idle(IdleParams(), history(_flink(False, 6)), NOW)
    # idle 6 min since 12:04 (sourceIdleTime 360000 ms at 12:10); named by job, vertex and subtask
    assert flink_finding.message.startswith(
        "job `sessions` vertex `Source: clicks` subtask 1 has had no records for 6 min (since 2026-11-29T12:04Z) "
        "while subtask 0 of the same vertex advanced"
    )
    assert "StatusWatermarkValve" in flink_finding.message
    assert "WatermarkStrategy.withIdleness" in flink_finding.message
    (marked,) = evaluate_idle(IdleParams(), history(_flink(True, 6)), NOW)
    assert "marked idle (withIdleness) and left out of the minimum" in marked.message
    (spark_finding,) = evaluate_idle(IdleParams(), history(_spark(quiet_from=4)), NOW)
    assert "spark.sql.streaming.multipleWatermarkPolicy=max" in spark_finding.message
    assert spark_finding.details["idle_seconds"] == 360.0  # batches 4..10: 12:04 to 12:10


def _window(minute: int, subtask: int, rows: int, idle_ms: int) -> Sample:
    """A non-source (window) vertex subtask of the Flink job."""
    return dataclasses.replace(
        flink(minute, subtask, minute - 1, rows, idle_ms=idle_ms),
        scope=Scope(operator="w1", subtask=subtask),
        extra={"vertex": "window-10s"},
    )


def test_flink_all_inputs_idle_freezes_event_time() -> None:
    # both source subtasks without records for 6 min (sourceIdleTime), the job watermark flat at 11:55:
    # no subtask is idle *beside* an advancing one, but event time is frozen -> one job-scope WARNING
    samples = []
    for m in range(11):
        samples.append(flink(m, None, -5, 0))
        for sub in (0, 1):
            samples.append(flink(m, sub, -5, 0, idle_ms=max(0, m - 4) * MIN_MS))
    (found,) = evaluate_idle(IdleParams(), history(samples), NOW)
    assert found.scope.labels() == {} and found.labels == {"check": "all_inputs_idle"}
    assert found.severity is Severity.WARNING
    assert "event time is frozen at 2026-11-29T11:55Z" in found.message
    assert "withIdleness cannot help" in found.message


@pytest.mark.parametrize(("version", "said"), [(None, False), ("2.2.0", False), ("2.3.0", False), ("2.1.1", True), ("2.0.0", True)])
def test_flink_all_inputs_idle_says_what_a_release_before_2_2_does(version: str | None, said: bool) -> None:
    # the same frozen job; the newest job sample carries the cluster's /config flink-version
    samples = []
    for m in range(11):
        job = flink(m, None, -5, 0)
        samples.append(dataclasses.replace(job, extra={**job.extra, "flink_version": version}) if version else job)
        for sub in (0, 1):
            samples.append(flink(m, sub, -5, 0, idle_ms=max(0, m - 4) * MIN_MS))
    (found,) = evaluate_idle(IdleParams(), history(samples), NOW)
    assert ("keeps the watermark of the split that went idle last" in found.message) is said
    if said:
        assert f"On Flink {version[:3] if version else ''} (this cluster's /config)" in found.message
        assert "FLINK-38454" in found.message
    assert "withIdleness cannot help" in found.message


def test_flink_source_subtask_advertising_infinity() -> None:
    # subtask 1 reports Long.MAX_VALUE (watermark_end_of_input) while subtask 0 flows
    samples = []
    for m in range(11):
        samples.append(flink(m, None, m - 1, 100))
        samples.append(flink(m, 0, m - 1, 100, idle_ms=0))
        samples.append(dataclasses.replace(flink(m, 1, None, 0, idle_ms=0), watermark_end_of_input=True))
    (found,) = evaluate_idle(IdleParams(), history(samples), NOW)
    assert (found.scope.subtask, found.labels, found.severity) == (1, {"check": "end_of_input"}, Severity.WARNING)
    assert "Long.MAX_VALUE (+infinity)" in found.message


def test_flink_idle_window_subtask_is_not_an_idle_input() -> None:
    # window subtask 0 gets no keys (all go to subtask 1) for 10 min; windows forward watermarks even
    # without records, so only source subtasks can pin event time: nothing to report
    samples = []
    for m in range(11):
        samples.append(flink(m, None, m - 1, 100))
        samples.append(flink(m, 0, m - 1, 100, idle_ms=0))
        samples.append(flink(m, 1, m - 1, 100, idle_ms=0))
        samples.append(_window(m, 0, 0, m * MIN_MS))
        samples.append(_window(m, 1, 200, 0))
    assert evaluate_idle(IdleParams(), history(samples), NOW) == []


def test_flink_subtask_without_watermark_beside_a_job_watermark_is_marked_idle() -> None:
    # subtask 1 never had a watermark (Long.MIN_VALUE) and no records for 10 min, yet the job has a
    # watermark (flat between these polls, as Flink's REST metrics can be): had subtask 1 been in the
    # valve's minimum the job would have none, so withIdleness left it out -> INFO, not pinning
    samples = []
    for m in range(11):
        samples.append(flink(m, None, -1, 100))
        samples.append(flink(m, 0, m - 1, 100, idle_ms=0))
        samples.append(flink(m, 1, None, 0, idle_ms=m * MIN_MS))
    (found,) = evaluate_idle(IdleParams(), history(samples), NOW)
    assert (found.scope.subtask, found.severity) == (1, Severity.INFO)
    assert "marked idle (withIdleness)" in found.message


def test_flink_subtask_pinning_a_watermark_that_caught_up_is_a_warning_at_once() -> None:
    # The demo's case (no withIdleness): subtask 1's last record came at 12:04 and its watermark stays at
    # 11:58; subtask 0's watermark is m - 8 minutes, so the job watermark (the valve's minimum) still rose
    # until 12:06 (to 11:58, subtask 1's level) and has been flat since. The idle window (12:05-12:10)
    # holds that rise, yet the job's watermark now *is* subtask 1's: it pins the job from the start ->
    # WARNING, and the message must not claim the job's watermark still advances. The flat stretch is
    # named as watermark_stall names it (rules.common.watermark_moves): since 12:06.
    samples = []
    for m in range(11):
        samples.append(flink(m, None, min(m - 8, -2), 100))
        samples.append(flink(m, 0, m - 8, 100, idle_ms=0))
        samples.append(flink(m, 1, -2, 0 if m > 4 else 100, idle_ms=max(0, m - 4) * MIN_MS))
    (found,) = evaluate_idle(IdleParams(), history(samples), NOW)
    assert (found.scope.subtask, found.severity) == (1, Severity.WARNING)
    assert "still advances" not in found.message and "marked idle" not in found.message
    assert "the job's watermark has stayed at 2026-11-29T11:58Z since 2026-11-29T12:06Z" in found.message
    assert found.details["holding_watermark"] is True
