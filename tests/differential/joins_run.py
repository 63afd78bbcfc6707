"""Runs stream-stream join differential scenarios: ``python -m tests.differential.joins_run --count 100``.

Prints one line per seed (join type, condition, policy, batches, seconds, OK / DIFF) and, for every
disagreement, the scenario and a side-by-side diff. Exit status 1 if any scenario disagreed or failed.
``--spark-only`` runs Spark alone and prints its batches.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20, help="number of scenarios (default 20)")
    parser.add_argument("--seed-start", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--spark-only", action="store_true", help="run Spark only and print its batches")
    parser.add_argument("--verbose", action="store_true", help="print every scenario and both runs")
    parser.add_argument("--hand", action="store_true", help="run the hand-made scenarios (900001-) only")
    args = parser.parse_args(argv)

    from tests.differential.compare import compare, render
    from tests.differential.joins_harness import (
        format_join_row,
        join_engine_views,
        run_join_scenario,
        spark_join_views,
    )
    from tests.differential.joins_scenarios import generate_join, hand_scenarios
    from tests.differential.spark_runner import format_batches, get_spark_session

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        spark = get_spark_session()
    print(f"SparkSession ready in {time.perf_counter() - started:.1f}s", flush=True)
    failed: list[int] = []
    spark_seconds = 0.0
    scenarios = (
        hand_scenarios()
        if args.hand
        else [generate_join(seed) for seed in range(args.seed_start, args.seed_start + args.count)]
    )
    for scenario in scenarios:
        seed = scenario.seed
        label = f"seed {seed:5d} {scenario.join_type:11} {scenario.policy} {scenario.condition_sql()}"
        try:
            run = run_join_scenario(spark, scenario)
        except Exception as error:  # report and go on with the next seed
            failed.append(seed)
            print(f"{label}: SPARK ERROR {type(error).__name__}: {str(error).splitlines()[0]}", flush=True)
            continue
        spark_seconds += run.seconds
        if args.spark_only:
            print(f"{label}: {len(run.batches)} batches, {run.seconds:.2f}s", flush=True)
            if args.verbose:
                print(scenario.describe())
                print(format_batches(run.batches, format_join_row))
            continue
        ours = spark_join_views(run)
        try:
            theirs = join_engine_views(scenario)
        except Exception as error:
            failed.append(seed)
            print(f"{label}: ENGINE ERROR {type(error).__name__}: {error}", flush=True)
            print(scenario.describe())
            continue
        differences = compare(ours, theirs)
        status = "OK" if not differences else f"DIFF ({len(differences)})"
        print(f"{label}: {len(run.batches)} batches, {run.seconds:.2f}s, {status}", flush=True)
        if differences or args.verbose:
            print(scenario.describe())
            print(render(ours, theirs, differences, format_join_row))
            print()
        if differences:
            failed.append(seed)
    total = time.perf_counter() - started
    print(
        f"{len(scenarios)} join scenarios in {total:.1f}s (Spark queries {spark_seconds:.1f}s, "
        f"{spark_seconds / max(len(scenarios), 1):.2f}s per seed); "
        f"{len(failed)} with differences or errors: {failed}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
