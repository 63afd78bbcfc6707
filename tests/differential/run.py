"""Runs any number of differential scenarios: ``python -m tests.differential.run --count 200``.

Prints one line per seed (operation, batches, seconds, OK / DIFF) and, for every disagreement, the
scenario and a side-by-side diff. Exit status 1 if any scenario disagreed or failed.
``--spark-only`` runs Spark alone and prints its batches (to inspect Spark's behaviour).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=40, help="number of scenarios (default 40)")
    parser.add_argument("--seed-start", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--spark-only", action="store_true", help="run Spark only and print its batches")
    parser.add_argument("--verbose", action="store_true", help="print every scenario and both runs")
    args = parser.parse_args(argv)

    from tests.differential.compare import compare, render, spark_views
    from tests.differential.scenarios import generate
    from tests.differential.spark_runner import format_batches, get_spark_session, run_scenario

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
        scenario = generate(seed)
        label = f"seed {seed:5d} {_describe_op(scenario)}"
        try:
            run = run_scenario(spark, scenario)
        except Exception as error:  # report and go on with the next seed
            failed.append(seed)
            print(f"{label}: SPARK ERROR {type(error).__name__}: {str(error).splitlines()[0]}", flush=True)
            continue
        spark_seconds += run.seconds
        if args.spark_only:
            print(f"{label}: {len(run.batches)} batches, {run.seconds:.2f}s", flush=True)
            if args.verbose:
                print(scenario.describe())
                print(format_batches(run.batches))
            continue
        from tests.differential.engine_adapter import engine_views

        ours = spark_views(run, scenario)
        try:
            theirs = engine_views(scenario)
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
            print(render(ours, theirs, differences))
            print()
        if differences:
            failed.append(seed)
    total = time.perf_counter() - started
    print(
        f"{args.count} scenarios in {total:.1f}s (Spark queries {spark_seconds:.1f}s); "
        f"{len(failed)} with differences or errors: {failed}"
    )
    return 1 if failed else 0


def _describe_op(scenario: object) -> str:
    from tests.differential.scenarios import DedupSpec, Scenario, WindowSpec

    assert isinstance(scenario, Scenario)
    op = scenario.operation
    if isinstance(op, WindowSpec):
        shape = f"{op.kind}({op.size_ms}" + (f"/{op.slide_ms}" if op.slide_ms else "") + ")"
        shape += "+key" if op.by_key and op.kind != "session" else ""
    else:
        assert isinstance(op, DedupSpec)
        shape = f"dedup:{op.kind}"
    return f"{shape:28} {scenario.output_mode:6} {scenario.policy} inputs={len(scenario.inputs)}"


if __name__ == "__main__":
    sys.exit(main())
