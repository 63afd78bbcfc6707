"""Runs chain scenarios against real PySpark: ``python -m tests.differential.chains_run --count 100``.

One line per seed (shape, batches, seconds, OK / DIFF); every disagreement with the scenario and a
side-by-side table. Exit status 1 if any scenario disagreed or failed.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=8, help="number of scenarios (default 8)")
    parser.add_argument("--seed-start", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--verbose", action="store_true", help="print every scenario and both runs")
    args = parser.parse_args(argv)

    from tests.differential.chains_compare import (
        compare_chain,
        engine_chain_views,
        render_chain,
        spark_chain_views,
    )
    from tests.differential.chains_scenarios import generate_chain
    from tests.differential.chains_spark import run_chain
    from tests.differential.spark_runner import get_spark_session

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        spark = get_spark_session()
    print(f"SparkSession ready in {time.perf_counter() - started:.1f}s", flush=True)
    failed: list[int] = []
    spark_seconds = 0.0
    for seed in range(args.seed_start, args.seed_start + args.count):
        scenario = generate_chain(seed)
        label = f"seed {seed:5d} {scenario.label()}"
        try:
            run = run_chain(spark, scenario)
        except Exception as error:  # report and go on
            failed.append(seed)
            print(f"{label}: SPARK ERROR {type(error).__name__}: {str(error).splitlines()[0]}", flush=True)
            continue
        spark_seconds += run.seconds
        ours = spark_chain_views(run)
        try:
            theirs = engine_chain_views(scenario)
        except Exception as error:
            failed.append(seed)
            print(f"{label}: ENGINE ERROR {type(error).__name__}: {error}\n{scenario.describe()}", flush=True)
            continue
        differences = compare_chain(ours, theirs)
        status = "OK" if not differences else f"DIFF ({len(differences)})"
        print(f"{label}: {len(run.batches)} batches, {run.seconds:.2f}s, {status}", flush=True)
        if differences or args.verbose:
            print(scenario.describe())
            print(render_chain(ours, theirs, differences))
            print()
        if differences:
            failed.append(seed)
    total = time.perf_counter() - started
    print(
        f"{args.count} chain scenarios in {total:.1f}s (Spark queries {spark_seconds:.1f}s); "
        f"{len(failed)} with differences or errors: {failed}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
