"""Restarts of a stream-stream join: the engine's restart model against real PySpark, run by run.

``python -m tests.differential.join_restarts --count 100`` (``--hand``: the hand-made cases only;
``--seeds 3,19``: exactly these; ``--spark-only --verbose`` prints Spark's batches; ``--model-check``:
engine only, which seeds another restart model would fail).

A seed is the join scenario of :func:`tests.differential.joins_scenarios.generate_join` (two watermarked
inputs, one of five join types, a time-range condition or none, ``min``/``max`` policy) split into query
runs on one checkpoint by the restart schedule of :func:`tests.differential.restarts.random_runs` (live,
``Trigger.Once`` and ``Trigger.AvailableNow`` runs; every run after the first is a restart). Spark runs it
with :func:`tests.differential.restarts.run_restart_scenario` over the join query of
:func:`tests.differential.joins_harness.build_join_frame` (``maxFilesPerTrigger=1``); the engine replays
the same rows with :func:`monitor.watermark.restart.replay_runs` over
``WatermarkConfig(join=StreamJoin(...))``. Compared batch by batch (``compare.compare``): batch ids
including no-data batches, the step each data batch read, the watermark in effect, the joined and
NULL-padded rows exactly, the join's ``numRowsTotal`` / ``numRowsRemoved`` (both sides together: Spark's
progress has no per-side count) and ``numRowsDroppedByWatermark`` (late rows of both sides), and the
``eventTime`` min/max/avg. FINDINGS.md section "Restarts of a stream-stream join" records the runs.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from tests.differential.joins_scenarios import JoinScenario, _hand, generate_join
from tests.differential.restarts import RestartScenario, engine_runs, parse_runs, random_runs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.differential.compare import BatchView
    from tests.differential.spark_runner import SparkRun


def generate_join_restart(seed: int) -> RestartScenario:
    """The join restart scenario for ``seed``: ``generate_join(seed)`` (3-6 steps) under
    ``random_runs(seed, steps)``. Deterministic."""
    base = generate_join(seed)
    return RestartScenario(base=base, runs=random_runs(seed, base.step_count))


def _join(scenario: RestartScenario) -> JoinScenario:
    assert isinstance(scenario.base, JoinScenario), scenario.base
    return scenario.base


def _delayed_right(scenario: JoinScenario, delay_ms: int) -> JoinScenario:
    left, right = scenario.inputs
    return replace(scenario, inputs=(left, replace(right, delay_ms=delay_ms)))


#: Left (delay 0) and right (delay 5 s) rows of the hand-made cases, ``(key, seconds after BASE_US)``:
#: after step 1 left is at 20 s, right at 30 s - 5 s = 25 s, the watermark (min) 20 s; step 2 has left
#: rows only; step 3 has a left row at 22 s and a right row at 24 s, both below the 25 s a live query has
#: by then.
_LEFT = [[("k", 10)], [("k", 20), ("j", 21)], [("k", 31)], [("k", 22), ("x", 50)]]
_RIGHT = [[("k", 12)], [("k", 30)], [], [("k", 24), ("x", 45)]]


def hand_join_restart_scenarios() -> list[RestartScenario]:
    """Hand-made join restarts (seeds 900201-), ``lkey = rkey AND lt BETWEEN rt - 5 s AND rt + 5 s``,
    ``min`` policy, the rows of ``_LEFT`` / ``_RIGHT`` (FINDINGS.md JR1-JR4):

    - 900201 inner, ``live:0-1,live:2-3``: the restart after step 1 loses the right input's watermark
      (25 s); step 2 has no right row, so the watermark stays at 20 s instead of moving to 25 s, and step
      3's ``k@22`` and ``k@24`` are not late: they are stored and joined (a live query drops both).
    - 900202 the same as a left outer join: the NULL-padded rows come out when the watermark passes
      them, in the batches after the restart.
    - 900203 the left outer join as one ``Trigger.Once`` run per step: no no-data batch ever runs.
    - 900204 the inner join with no restart (the baseline 900201 is compared with).
    - 900205-900207 (``lt BETWEEN rt - 5 s AND rt + 1 s``, one Trigger.Once run per step): a right row not
      late but below the right state watermark, in a left semi join (900205: it misses the left row of
      its own batch, JR4), an inner join (900206: it joins both) and, above that watermark, a left semi
      join again (900207: both output).
    """
    inner = _delayed_right(_hand(900201, "inner", 5_000, 5_000, _LEFT, _RIGHT), 5_000)
    outer = _delayed_right(_hand(900202, "left_outer", 5_000, 5_000, _LEFT, _RIGHT), 5_000)
    return [
        RestartScenario(inner, parse_runs("live:0-1,live:2-3")),
        RestartScenario(outer, parse_runs("live:0-1,live:2-3")),
        RestartScenario(replace(outer, seed=900203), parse_runs("once:0,once:1,once:2,once:3")),
        RestartScenario(replace(inner, seed=900204), parse_runs("live:0-3")),
        # one Trigger.Once run per step: batch 2 filters late rows against 10 s and evicts against 30 s,
        # so right b@28.5 is not late but below the right state watermark (30 s - 1 s - 1 ms); it
        # matches left b@26 (stored by batch 1) and left b@27 (stored by batch 2 itself)
        RestartScenario(_hand(900205, "left_semi", 5_000, 1_000, _SEMI_LEFT, _SEMI_RIGHT), _ONCE3),
        RestartScenario(_hand(900206, "inner", 5_000, 1_000, _SEMI_LEFT, _SEMI_RIGHT), _ONCE3),
        # the same with right b@29.5, above the right state watermark
        RestartScenario(
            _hand(900207, "left_semi", 5_000, 1_000, _SEMI_LEFT, [*_SEMI_RIGHT[:2], [("b", 29.5)]]), _ONCE3
        ),
    ]


_SEMI_LEFT = [[("x", 10)], [("x", 30), ("b", 26)], [("b", 27)]]
_SEMI_RIGHT = [[("x", 10)], [("x", 30)], [("b", 28.5)]]
_ONCE3 = parse_runs("once:0,once:1,once:2")


def run_join_restart_scenario(spark: SparkSession, scenario: RestartScenario) -> SparkRun:
    """Runs the schedule through Spark (``restarts.run_restart_scenario`` with the join query)."""
    from tests.differential.joins_harness import build_join_frame
    from tests.differential.restarts import run_restart_scenario

    return run_restart_scenario(spark, scenario, frame_builder=build_join_frame)


def join_restart_engine_views(scenario: RestartScenario) -> list[BatchView]:
    """The engine's replay of the join under the run schedule, as batch views."""
    from monitor.watermark.restart import replay_runs
    from tests.differential.joins_harness import join_config, join_events, join_views

    base = _join(scenario)
    events, flat = join_events(base)
    result = replay_runs(events, join_config(base), engine_runs(scenario))
    return join_views(base, result.replay, flat)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    from tests.differential.compare import compare, render
    from tests.differential.joins_harness import format_join_row, spark_join_views
    from tests.differential.seeds import Harness, arguments, run_seeds
    from tests.differential.spark_runner import format_batches

    parser = arguments(__doc__, 20)
    parser.add_argument("--hand", action="store_true", help="run the hand-made scenarios (900201-) only")
    parser.add_argument("--seeds", help="run exactly these seeds, e.g. 3,19,145 (instead of --count)")
    parser.add_argument(
        "--model-check",
        action="store_true",
        help="engine only: the seeds each other restart model would fail",
    )
    args = parser.parse_args(argv)
    if args.model_check:
        from tests.differential.joins_harness import join_engine_views
        from tests.differential.restarts import model_check

        found = model_check(
            range(args.seed_start, args.seed_start + args.count),
            generate_one=generate_join_restart,
            views=join_restart_engine_views,
            plain_views=lambda s: join_engine_views(_join(s)),
        )
        for name, listed in found.items():
            print(f"{name}: {len(listed)} of {args.count} seeds differ: {listed}")
        return 0
    harness: Harness[RestartScenario, SparkRun, list[BatchView]] = Harness(
        what="join restart scenarios",
        label=lambda s: f"{_join(s).join_type:11} {s.base.policy} {s.schedule()}",
        run_spark=run_join_restart_scenario, spark_views=lambda run, _s: spark_join_views(run),
        engine_views=join_restart_engine_views, compare=compare,
        render=lambda ours, theirs, diffs: render(ours, theirs, diffs, format_join_row),
        describe=RestartScenario.describe, spark_batches=lambda run: format_batches(run.batches, format_join_row),
    )  # fmt: skip
    if args.seeds:
        scenarios = [generate_join_restart(int(s)) for s in args.seeds.split(",")]
    elif args.hand:
        scenarios = hand_join_restart_scenarios()
    else:
        scenarios = [generate_join_restart(s) for s in range(args.seed_start, args.seed_start + args.count)]
    return run_seeds(
        harness, [(s.seed, s) for s in scenarios], spark_only=args.spark_only, verbose=args.verbose
    )


if __name__ == "__main__":
    sys.exit(main())
