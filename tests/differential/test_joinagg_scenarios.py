"""The join -> aggregation scenario generator: deterministic, and the CI seeds cover the shapes (an
outer join, a key-only join, both ``allowMultiple`` settings, one and two aggregations). No Spark."""

from __future__ import annotations

from tests.differential.joinagg import JoinAggScenario, generate_joinagg
from tests.differential.test_joinagg_differential import CI_SEEDS


def _shape(scenario: JoinAggScenario) -> set[str]:
    b = scenario.base
    found = {f"join:{b.join_type}", f"allow_multiple:{scenario.allow_multiple}", f"aggs:{len(scenario.then)}"}
    if b.lower_ms is None and b.upper_ms is None:
        found.add("key_only")
    return found


def test_joinagg_scenarios_are_deterministic() -> None:
    for seed in range(40):
        scenario = generate_joinagg(seed)
        assert scenario == generate_joinagg(seed)
        assert scenario.base.output_mode == "append"
        assert 1 <= len(scenario.then) <= 2


def test_ci_seeds_cover_the_join_agg_shapes() -> None:
    covered: set[str] = set()
    for seed in CI_SEEDS:
        covered |= _shape(generate_joinagg(seed))
    required = {
        "join:full_outer",
        "join:left_semi",
        "key_only",
        "allow_multiple:True",
        "allow_multiple:False",
        "aggs:1",
    }
    assert required <= covered, f"not covered by the CI seeds: {sorted(required - covered)}"


def test_the_generator_reaches_every_join_type_with_two_aggregations() -> None:
    covered: set[str] = set()
    for seed in range(150):
        covered |= _shape(generate_joinagg(seed))
    assert {f"join:{t}" for t in ("inner", "left_outer", "right_outer", "full_outer", "left_semi")} <= covered
    assert {"aggs:2", "key_only", "allow_multiple:False"} <= covered
