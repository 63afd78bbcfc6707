"""The join scenario generator: deterministic, Spark-valid configs, and the CI seeds cover what issue
17 asks for (five join types, both policies, a key-only join, late and boundary rows)."""

from __future__ import annotations

from monitor.watermark import WatermarkConfig
from tests.differential.joins_harness import join_config, join_events
from tests.differential.joins_scenarios import JOIN_KINDS, generate_join
from tests.differential.test_joins_differential import CI_JOIN_SEEDS


def test_same_seed_same_scenario() -> None:
    assert generate_join(7) == generate_join(7)
    assert generate_join(7) != generate_join(8)


def test_ci_seeds_cover_every_join_type_both_policies_and_a_key_only_join() -> None:
    scenarios = [generate_join(s) for s in CI_JOIN_SEEDS]
    assert {s.join_type for s in scenarios} == set(JOIN_KINDS)
    assert {s.policy for s in scenarios} == {"min", "max"}
    assert any(s.lower_ms is None and s.upper_ms is None for s in scenarios)
    assert any(s.lower_strict or s.upper_strict for s in scenarios)


def test_every_generated_join_is_one_spark_accepts_and_has_both_sides() -> None:
    for seed in range(200):
        scenario = generate_join(seed)
        config = join_config(scenario)  # raises EngineConfigError for a join Spark rejects
        assert isinstance(config, WatermarkConfig)
        events, _ = join_events(scenario)
        assert set(events.source_names) <= {"left", "right"}
        for step in range(scenario.step_count):
            assert scenario.step_rows(step), f"seed {seed} step {step} has no row: Spark would run no batch"


def test_generated_rows_include_late_rows_and_rows_on_a_range_boundary() -> None:
    late = boundary = 0
    for seed in range(40):
        sc = generate_join(seed)
        left, right = sc.inputs
        for spec, other in ((left, right), (right, left)):
            top: int | None = None
            other_times = {r.event_time_us for step in other.steps for r in step}
            for step in spec.steps:
                for row in step:
                    t = row.event_time_us
                    assert t is not None
                    if top is not None and t // 1000 <= top // 1000 - spec.delay_ms:
                        late += 1
                    widths = [w for w in (sc.lower_ms, sc.upper_ms) if w]
                    if any(t + sign * w * 1000 in other_times for w in widths for sign in (-1, 1)):
                        boundary += 1
                top = max([top or 0, *(r.event_time_us or 0 for r in step)]) if step else top
    assert late >= 20
    assert boundary >= 10
