"""Issue 7: the engine's Flink mode against a real Flink 2.3.0 on seeded random scenarios.

All CI seeds run in ONE JVM (``harness.run_flink``: a local MiniCluster, one job per 25 scenarios,
about 15-30 s with the JVM start). Per seed, the firings (window, count, the watermark at the firing,
late or on-time), ``numLateRecordsDropped`` and the late side output's rows must be equal. The
expected values come from Flink itself. Four scripted streams with hand-derived expectations (lateness
re-firing, the all-splits-idle jump, a late session joining an in-flight one, partial sliding lateness)
run in the same JVM and must match both the hand derivation and the engine.
``python -m tests.differential.flink.run --count N`` (or ``make differential-flink N=...``) runs more seeds.
"""

from __future__ import annotations

import pytest

from monitor.watermark import Session, Sliding, Tumbling
from monitor.watermark.flink import LONG_MAX, FlinkConfig
from tests.differential.flink.compare import compare
from tests.differential.flink.harness import FlinkResult
from tests.differential.flink.scenarios import FlinkScenario, generate

pytestmark = [pytest.mark.integration, pytest.mark.flink, pytest.mark.slow]

#: CI runs these seeds (one JVM); ``make differential-flink N=...`` runs more.
CI_SEEDS = range(20)


def _scripted(
    seed: int,
    ts: list[int],
    config: FlinkConfig,
    partition: list[int] | None = None,
    arrival: list[int] | None = None,
) -> FlinkScenario:
    n = len(ts)
    return FlinkScenario(
        seed, ts, arrival or [1_000_000 + 10 * i for i in range(n)], partition or [0] * n, [0] * n, config
    )


def _per_event(**kw: object) -> FlinkConfig:
    return FlinkConfig(per_event_watermarks=True, end_of_input=True, **kw)  # type: ignore[arg-type]


#: Scripted streams with hand-derived expectations (the reasoning is in tests/unit/test_flink_engine.py,
#: which checks the engine on the same streams): (scenario, firings as (key, start, end, count,
#: watermark, late), numLateRecordsDropped, late side output rows). They run in the same JVM launch.
SCRIPTED: dict[str, tuple[FlinkScenario, list[tuple[int, int, int, int, int, bool]], int, list[int]]] = {
    "allowed lateness re-fires, then drops after end - 1 + lateness": (
        _scripted(
            90_001,
            [1000, 10_000, 2000, 15_000, 3000],
            _per_event(delay_ms=0, window=Tumbling(10_000), allowed_lateness_ms=5000),
        ),
        [
            (0, 0, 10_000, 1, 9999, False),
            (0, 0, 10_000, 2, 9999, True),
            (0, 10_000, 20_000, 2, LONG_MAX, False),
        ],
        1,
        [],
    ),
    "all splits idle: the watermark jumps to the highest split's": (
        _scripted(
            90_002,
            [9000, 1000],
            FlinkConfig(
                delay_ms=0,
                window=Tumbling(5000),
                watermark_interval_ms=100,
                start_ms=1_000_000,
                run_until_ms=1_001_000,
                idleness_ms=300,
                end_of_input=True,
            ),
            partition=[0, 1],
            arrival=[1_000_050, 1_000_050],
        ),
        [(0, 0, 5000, 1, 8999, False), (0, 5000, 10_000, 1, LONG_MAX, False)],
        0,
        [],
    ),
    "session: a late own window joins an in-flight session; side output": (
        _scripted(
            90_003,
            [1000, 2000, 5000, 4500, 3600, 2000],
            _per_event(delay_ms=0, window=Session(1000), late_side_output=True),
        ),
        [(0, 1000, 3000, 2, 4999, False), (0, 3600, 6000, 3, LONG_MAX, False)],
        0,
        [5],
    ),
    "sliding: late for one window only, silently kept out of it": (
        _scripted(90_004, [12_000, 7000], _per_event(delay_ms=0, window=Sliding(10_000, 5000))),
        [(0, 5000, 15_000, 2, LONG_MAX, False), (0, 10_000, 20_000, 1, LONG_MAX, False)],
        0,
        [],
    ),
}


@pytest.fixture(scope="module")
def flink_results() -> dict[str, FlinkResult]:
    """Every CI scenario and scripted stream run through real Flink, in one JVM launch."""
    from tests.differential.flink.harness import run_flink

    return run_flink([generate(s) for s in CI_SEEDS] + [v[0] for v in SCRIPTED.values()])


@pytest.mark.parametrize("name", list(SCRIPTED))
def test_flink_does_what_the_hand_derivation_says(flink_results: dict[str, FlinkResult], name: str) -> None:
    scenario, firings, dropped, side = SCRIPTED[name]
    result = flink_results[scenario.id]
    assert sorted(result.firings) == sorted(firings)
    assert result.late_records_dropped == dropped
    assert sorted(result.side_output_rows) == side
    assert compare(scenario, result) == []  # and the engine agrees


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_engine_agrees_with_flink(flink_results: dict[str, FlinkResult], seed: int) -> None:
    scenario: FlinkScenario = generate(seed)
    result = flink_results[scenario.id]
    assert result.firings or result.side_output_rows or result.late_records_dropped, "Flink produced nothing"
    differences = compare(scenario, result)
    assert not differences, f"\n{scenario.describe()}\n" + "\n".join(differences)
