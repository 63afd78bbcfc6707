"""The chain scenario generator: deterministic, append-only, and the CI seeds cover the chain shapes
issue 17 lists (agg -> agg with a tumbling and a sliding first stage, dedup -> agg, three operators,
both ``allowMultiple`` settings, several inputs under both policies). No Spark needed."""

from __future__ import annotations

from tests.differential.chains_scenarios import ChainScenario, generate_chain
from tests.differential.scenarios import DedupSpec, WindowSpec
from tests.differential.test_chains_differential import CI_SEEDS


def _shape(scenario: ChainScenario) -> set[str]:
    first = scenario.first
    found = {
        f"first:{first.kind}",
        f"allow_multiple:{scenario.allow_multiple}",
        f"operators:{len(scenario.then) + 1}",
    }
    if isinstance(first, DedupSpec):
        found.add("first:dedup")
    if len(scenario.base.inputs) > 1:
        found.add(f"inputs:{scenario.base.policy}")
    found.update(f"then:{t.kind}" for t in scenario.then)
    return found


def test_chain_scenarios_are_deterministic_and_append_only() -> None:
    for seed in range(40):
        scenario = generate_chain(seed)
        assert scenario == generate_chain(seed)
        assert scenario.base.output_mode == "append"
        assert not (isinstance(scenario.first, WindowSpec) and scenario.first.kind == "session")


def test_ci_seeds_cover_the_chain_shapes() -> None:
    covered: set[str] = set()
    for seed in CI_SEEDS:
        covered |= _shape(generate_chain(seed))
    required = {
        "first:tumbling",
        "first:sliding",
        "first:dedup",
        "then:tumbling",
        "then:sliding",
        "operators:2",
        "operators:3",
        "allow_multiple:True",
        "allow_multiple:False",
        "inputs:min",
        "inputs:max",
    }
    assert required <= covered, f"not covered by the CI seeds: {sorted(required - covered)}"
