"""Issue 7: the engine's Flink mode against a real Flink 2.3.0 on seeded random scenarios.

All CI seeds run in ONE JVM (``harness.run_flink``: a local MiniCluster, one job per 25 scenarios,
about 15-30 s with the JVM start). Per seed, the firings (window, count, the watermark at the firing,
late or on-time), ``numLateRecordsDropped`` and the late side output's rows must be equal. The
expected values come from Flink itself. ``python -m tests.differential.flink.run --count N`` (or
``make differential-flink N=...``) runs more seeds.
"""

from __future__ import annotations

import pytest

from tests.differential.flink.compare import compare
from tests.differential.flink.harness import FlinkResult
from tests.differential.flink.scenarios import FlinkScenario, generate

pytestmark = [pytest.mark.integration, pytest.mark.flink, pytest.mark.slow]

#: CI runs these seeds (one JVM); ``make differential-flink N=...`` runs more.
CI_SEEDS = range(20)


@pytest.fixture(scope="module")
def flink_results() -> dict[str, FlinkResult]:
    """Every CI scenario run through real Flink, in one JVM launch."""
    from tests.differential.flink.harness import run_flink

    return run_flink([generate(s) for s in CI_SEEDS])


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_engine_agrees_with_flink(flink_results: dict[str, FlinkResult], seed: int) -> None:
    scenario: FlinkScenario = generate(seed)
    result = flink_results[scenario.id]
    assert result.firings or result.side_output_rows or result.late_records_dropped, "Flink produced nothing"
    differences = compare(scenario, result)
    assert not differences, f"\n{scenario.describe()}\n" + "\n".join(differences)
