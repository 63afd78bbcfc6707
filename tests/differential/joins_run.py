"""Runs stream-stream join differential scenarios: ``python -m tests.differential.joins_run --count 100``.

Prints one line per seed (join type, condition, policy, batches, seconds, OK / DIFF) and, for every
disagreement, the scenario and a side-by-side diff. Exit status 1 if any scenario disagreed or failed.
``--spark-only`` runs Spark alone and prints its batches.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    from tests.differential.compare import BatchView, compare, render
    from tests.differential.joins_harness import (
        format_join_row,
        join_engine_views,
        run_join_scenario,
        spark_join_views,
    )
    from tests.differential.joins_scenarios import JoinScenario, generate_join, hand_scenarios
    from tests.differential.seeds import Harness, arguments, run_seeds
    from tests.differential.spark_runner import SparkRun, format_batches

    parser = arguments(__doc__, 20)
    parser.add_argument("--hand", action="store_true", help="run the hand-made scenarios (900001-) only")
    args = parser.parse_args(argv)
    harness: Harness[JoinScenario, SparkRun, list[BatchView]] = Harness(
        what="join scenarios",
        label=lambda s: f"{s.join_type:11} {s.policy} {s.condition_sql()}",
        run_spark=run_join_scenario, spark_views=lambda run, _s: spark_join_views(run),
        engine_views=join_engine_views, compare=compare,
        render=lambda ours, theirs, diffs: render(ours, theirs, diffs, format_join_row),
        describe=JoinScenario.describe, spark_batches=lambda run: format_batches(run.batches, format_join_row),
    )  # fmt: skip
    scenarios = (
        hand_scenarios()
        if args.hand
        else [generate_join(seed) for seed in range(args.seed_start, args.seed_start + args.count)]
    )
    return run_seeds(
        harness, [(s.seed, s) for s in scenarios], spark_only=args.spark_only, verbose=args.verbose
    )


if __name__ == "__main__":
    sys.exit(main())
