"""Table test of ``consumer_lag_seconds`` (rules.consumer_lag.seconds): a threshold on a group's lag in
seconds, from the newest poll's job-scope sample and the partitions' lower bounds. Each row's comment says
why."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from monitor.model import Sample, SampleKind, Scope, Severity
from rules.consumer_lag import LagSecondsParams, evaluate_lag_seconds
from tests.rule_samples import KAFKA, T0, history

NOW = T0 + timedelta(seconds=60)


def part(second: float, partition: int, secs: float | None, lag: int | None = 10, **extra: Any) -> Sample:
    return Sample(job=KAFKA, observed_at=T0 + timedelta(seconds=second), kind=SampleKind.GAUGE,
                  collector="kafka-lag", scope=Scope(source="orders", partition=partition), lag_offsets=lag,
                  lag_seconds=secs, extra=extra)


def group(second: float, secs: float | None) -> Sample:
    return Sample(job=KAFKA, observed_at=T0 + timedelta(seconds=second), kind=SampleKind.GAUGE,
                  collector="kafka-lag", lag_seconds=secs)


# (case, samples, params, expected (severity, lag_seconds, at_least) or None)
TABLE: list[tuple[int, list[Sample], dict[str, str], tuple[Severity, float, bool] | None]] = [
    # 1. no threshold configured: the rule is off whatever the lag
    (1, [part(60, 0, 9999.0), group(60, 9999.0)], {}, None),
    # 2. 400 s behind, threshold 5 min: warning naming the partition
    (2, [part(60, 0, 400.0), part(60, 1, 3.0), group(60, 400.0)], {"threshold": "5m"},
     (Severity.WARNING, 400.0, False)),
    # 3. above `critical` too: critical
    (3, [part(60, 0, 4000.0), group(60, 4000.0)], {"threshold": "5m", "critical": "30m"},
     (Severity.CRITICAL, 4000.0, False)),
    # 4. the newest poll is back under the threshold (an older poll was above): nothing, it resolves
    (4, [part(0, 0, 900.0), group(0, 900.0), part(60, 0, 20.0), group(60, 20.0)], {"threshold": "5m"}, None),
    # 5. no estimate, but the record is older than the oldest sample by 2 h: at least 2 h > 5 min -> fires,
    #    saying "at least" (no extrapolated number)
    (5, [part(60, 0, None, lag_seconds_min=7200.0), group(60, None)], {"threshold": "5m"},
     (Severity.WARNING, 7200.0, True)),
    # 6. unknown lag (no committed offset, no bound) is never a finding
    (6, [part(60, 0, None, lag=None), group(60, None)], {"threshold": "5m"}, None),
    # 7. exactly at the threshold is not above it
    (7, [part(60, 0, 300.0), group(60, 300.0)], {"threshold": "5m"}, None),
]


@pytest.mark.parametrize(("case", "samples", "params", "expected"), TABLE, ids=[f"secs-{c[0]}" for c in TABLE])
def test_lag_seconds_threshold(
    case: int, samples: list[Sample], params: dict[str, str], expected: tuple[Severity, float, bool] | None
) -> None:
    found = evaluate_lag_seconds(LagSecondsParams.model_validate(params), history(samples), NOW)
    got = [(f.severity, f.details["lag_seconds"], f.details["at_least"]) for f in found]
    assert got == ([] if expected is None else [expected])
    for f in found:
        assert f.rule == "consumer_lag_seconds" and "source `orders` partition 0" in f.message


def test_message_says_at_least_for_a_lower_bound() -> None:
    (f,) = evaluate_lag_seconds(
        LagSecondsParams.model_validate({"threshold": "5m"}),
        history([part(60, 0, None, lag_seconds_min=7200.0), group(60, None)]), NOW,
    )
    assert "is at least 2 h behind (threshold 5 min)" in f.message and "2 h or more (10 records)" in f.message
