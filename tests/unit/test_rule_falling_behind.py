"""Table test of ``falling_behind`` (rules.behind.evaluate_behind); each row's comment says why.
Defaults: batches 3, backpressure_ratio 0.5 (Flink's HIGH), for 1m. Samples one minute apart."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.model import Sample, Severity
from rules.behind import BehindParams, evaluate_behind
from tests.rule_samples import T0, flink, history, spark

NOW = T0 + timedelta(minutes=10)
TRIGGER = {"trigger_interval": "30s"}


def batches(durations_ms: list[int | None]) -> list[Sample]:
    return [spark(m, 10, m - 10, m, duration_ms=d) for m, d in enumerate(durations_ms)]


def pressure(ratios: list[float | None]) -> list[Sample]:
    return [flink(m, 1, m - 1, 10, backpressure=r) for m, r in enumerate(ratios)] + [
        flink(m, 0, m - 1, 10, backpressure=0.0) for m in range(len(ratios))
    ]


# (case, samples, params, expected scope labels of the findings)
TABLE: list[tuple[int, list[Sample], dict[str, object], list[dict[str, str]]]] = [
    # 1. the last 3 batches took 40, 45, 50 s with a 30 s trigger: falling behind (job scope)
    (1, batches([10_000, 40_000, 45_000, 50_000]), TRIGGER, [{}]),
    # 2. only the last 2 of 3 above 30 s: not N consecutive yet
    (2, batches([10_000, 20_000, 45_000, 50_000]), TRIGGER, []),
    # 3. exactly 30 s is on time, not above it
    (3, batches([30_000, 30_000, 30_000]), TRIGGER, []),
    # 4. one duration unknown (UI statistics page removes durationMs.triggerExecution): not counted slow
    (4, batches([40_000, None, 50_000]), TRIGGER, []),
    # 5. no trigger_interval configured: batch durations are not judged
    (5, batches([40_000, 45_000, 50_000]), {}, []),
    # 6. Flink subtask 1 back-pressured 0.8 in every poll of the last minute (and before): HIGH -> finding
    (6, pressure([0.8, 0.8, 0.8, 0.8]), {}, [{"source": "Source: clicks", "subtask": "1"}]),
    # 7. 0.2 one minute ago, 0.8 now: not high for the whole `for` -> nothing yet
    (7, pressure([0.8, 0.8, 0.2, 0.8]), {}, []),
    # 8. ratio unknown (None) in the window: unknown is not high
    (8, pressure([0.8, 0.8, None, 0.8]), {}, []),
    # 9. 0.5 is Flink's HIGH boundary (> 0.5 is HIGH in the UI, we alert at >= 0.5): finding
    (9, pressure([0.5, 0.5, 0.5]), {}, [{"source": "Source: clicks", "subtask": "1"}]),
]


@pytest.mark.parametrize(
    ("case", "samples", "params", "expected"), TABLE, ids=[f"behind-{c[0]}" for c in TABLE]
)
def test_falling_behind(
    case: int, samples: list[Sample], params: dict[str, object], expected: list[dict[str, str]]
) -> None:
    found = evaluate_behind(BehindParams.model_validate(params), history(samples), NOW)
    assert [f.scope.labels() for f in found] == expected
    assert all(f.rule == "falling_behind" and f.severity is Severity.WARNING for f in found)


def test_message() -> None:
    (finding,) = evaluate_behind(
        BehindParams.model_validate(TRIGGER), history(batches([40_000, 45_000, 50_000])), NOW
    )
    assert finding.message.startswith(
        "the last 3 batches (up to batch 2) took 40000-50000 ms, longer than the trigger interval 30 s"
    )
    assert "maxOffsetsPerTrigger" in finding.message
