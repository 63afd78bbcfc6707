"""Runs any number of differential scenarios: ``python -m tests.differential.run --count 200``.

Prints one line per seed (operation, batches, seconds, OK / DIFF) and, for every disagreement, the
scenario and a side-by-side diff. Exit status 1 if any scenario disagreed or failed.
``--spark-only`` runs Spark alone and prints its batches (to inspect Spark's behaviour).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    from tests.differential.compare import BatchView, compare, render, spark_views
    from tests.differential.engine_adapter import engine_views
    from tests.differential.scenarios import Scenario, generate
    from tests.differential.seeds import Harness, arguments, run_seeds
    from tests.differential.spark_runner import SparkRun, format_batches, run_scenario

    args = arguments(__doc__, 40).parse_args(argv)
    harness: Harness[Scenario, SparkRun, list[BatchView]] = Harness(
        what="scenarios", label=_describe_op, run_spark=run_scenario, spark_views=spark_views,
        engine_views=engine_views, compare=compare, render=render, describe=Scenario.describe,
        spark_batches=lambda run: format_batches(run.batches),
    )  # fmt: skip
    seeds = range(args.seed_start, args.seed_start + args.count)
    return run_seeds(
        harness, [(s, generate(s)) for s in seeds], spark_only=args.spark_only, verbose=args.verbose
    )


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
