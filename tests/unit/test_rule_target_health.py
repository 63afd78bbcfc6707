"""Table tests of ``target_health`` (rules.health): restarted / failed jobs and unreachable targets.
NOW is 12:30. Defaults: restart_window 15m, error_window 2m, min_errors 2."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import CollectorError, Engine, Sample, SampleKind, Severity
from rules.health import HealthParams, evaluate_health, evaluate_targets
from tests.rule_samples import T0, flink, history, lifecycle, spark

NOW = T0 + timedelta(minutes=30)
STARTED, TERMINATED = SampleKind.STARTED, SampleKind.TERMINATED

# (case, samples, expected [(check label, severity)])
def _running_since(sample: Sample, minute: int, exception: str | None = None) -> Sample:
    extra: dict[str, object] = {"running_since_ms": int((T0 + timedelta(minutes=minute)).timestamp() * 1000)}
    if exception:
        extra["exception"] = exception
    return dataclasses.replace(sample, extra=extra)


TABLE: list[tuple[int, list[Sample], list[tuple[str, Severity]]]] = [
    # 1. run r1 started 12:00, terminated 12:20; run r2 started 12:21 (9 min ago, within 15m): restarted
    (
        1,
        [
            lifecycle(0, STARTED, "r1"),
            spark(1, 10, -9, 1),
            lifecycle(20, TERMINATED, "r1"),
            lifecycle(21, STARTED, "r2"),
        ],
        [("restarted", Severity.WARNING)],
    ),
    # 2. the same restart at 12:10 is 20 min old, beyond the 15m window: no longer current
    (
        2,
        [lifecycle(0, STARTED, "r1"), lifecycle(9, TERMINATED, "r1"), lifecycle(10, STARTED, "r2")],
        [],
    ),
    # 3. a first start is not a restart
    (3, [lifecycle(25, STARTED, "r1"), spark(26, 10, -9, 1)], []),
    # 4. the newest lifecycle event is a termination with an exception: failed (critical)
    (
        4,
        [
            lifecycle(0, STARTED, "r1"),
            lifecycle(5, TERMINATED, "r1", exception="java.lang.ArithmeticException: / by zero\n\tat ..."),
        ],
        [("failed", Severity.CRITICAL)],
    ),
    # 5. a clean stop (terminated without exception): neither failed nor restarted
    (5, [lifecycle(0, STARTED, "r1"), lifecycle(5, TERMINATED, "r1")], []),
    # 6. Flink numRestarts 2 before the window, 3 inside it: restarted once
    (6, [flink(5, None, 0, restarts=2), flink(20, None, 10, restarts=3)], [("restarted", Severity.WARNING)]),
    # 7. Flink numRestarts constant at 3: a counter that does not rise is no restart
    (7, [flink(m, None, m, restarts=3) for m in range(10, 30)], []),
    # 8. Flink job first seen with numRestarts 2 and its current attempt RUNNING since 12:25 (within 15m):
    #    it restarted since submission, the last time 5 min ago (a one-shot `check flink`)
    (8, [_running_since(flink(m, None, m, restarts=2), 25) for m in (26, 27)], [("restarted", Severity.WARNING)]),
    # 9. the same counts, but RUNNING since 12:05 (25 min ago): the restarts are older than the window
    (9, [_running_since(flink(m, None, m, restarts=2), 5) for m in (26, 27)], []),
    # 10. RUNNING since 12:25 after numRestarts 0: a first start, not a restart
    (10, [_running_since(flink(m, None, m, restarts=0), 25) for m in (26, 27)], []),
]


@pytest.mark.parametrize(("case", "samples", "expected"), TABLE, ids=[f"health-{c[0]}" for c in TABLE])
def test_target_health(case: int, samples: list[Sample], expected: list[tuple[str, Severity]]) -> None:
    found = evaluate_health(HealthParams(), history(samples), NOW)
    assert [(f.labels["check"], f.severity) for f in found] == expected
    assert all(f.rule == "target_health" for f in found)


def test_failed_message_quotes_the_exception_first_line() -> None:
    samples = TABLE[3][1]
    (finding,) = evaluate_health(HealthParams(), history(samples), NOW)
    assert "java.lang.ArithmeticException: / by zero." in finding.message
    assert "\tat" not in finding.message


def _err(minute: float, target: str = "http://jm:8081", collector: str = "flink-rest") -> CollectorError:
    return CollectorError(collector, target, "connection refused", T0 + timedelta(minutes=minute))


# (case, errors, expected targets reported)
ERRORS: list[tuple[int, list[CollectorError], list[str]]] = [
    # 1. three errors in the last 2 min: unreachable
    (1, [_err(28.5), _err(29), _err(29.5)], ["http://jm:8081"]),
    # 2. one error: a blip, not unreachable (min_errors 2)
    (2, [_err(29.5)], []),
    # 3. errors 10 min ago, none since: it recovered
    (3, [_err(20), _err(20.5), _err(21)], []),
    # 4. two targets, only one failing twice
    (4, [_err(29), _err(29.5), _err(29.5, "/logs/app-1", "spark-eventlog")], ["http://jm:8081"]),
]


@pytest.mark.parametrize(("case", "errors", "expected"), ERRORS, ids=[f"targets-{c[0]}" for c in ERRORS])
def test_unreachable_targets(case: int, errors: list[CollectorError], expected: list[str]) -> None:
    found = evaluate_targets(HealthParams(), errors, NOW)
    assert [f.job.job_id for f in found] == expected
    assert all(f.severity is Severity.CRITICAL and f.labels["check"] == "unreachable" for f in found)
    assert all(f.job.engine is Engine.FLINK for f in found)  # from the collector name prefix


def test_flink_restart_names_the_cause() -> None:
    cause = "java.lang.IllegalStateException: tidegauge test failure at record 30"
    samples = [_running_since(flink(26, None, 26, restarts=2), 25, cause)]
    (found,) = evaluate_health(HealthParams(), history(samples), NOW)
    assert found.message.startswith("the job restarted 2 times in the last 15 min, last at 2026-11-29T12:25Z")
    assert f"The last failure: {cause}." in found.message
    assert found.details["cause"] == cause
