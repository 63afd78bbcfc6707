"""Runs chain scenarios against real PySpark: ``python -m tests.differential.chains_run --count 100``.

One line per seed (shape, batches, seconds, OK / DIFF); every disagreement with the scenario and a
side-by-side table. Exit status 1 if any scenario disagreed or failed.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    from tests.differential.chains_compare import (
        ChainView,
        compare_chain,
        engine_chain_views,
        render_chain,
        spark_chain_views,
    )
    from tests.differential.chains_scenarios import ChainScenario, generate_chain
    from tests.differential.chains_spark import ChainSparkRun, run_chain
    from tests.differential.seeds import Harness, arguments, run_seeds

    args = arguments(__doc__, 8, spark_only=False).parse_args(argv)
    harness: Harness[ChainScenario, ChainSparkRun, list[ChainView]] = Harness(
        what="chain scenarios", label=ChainScenario.label, run_spark=lambda spark, s: run_chain(spark, s),
        spark_views=lambda run, _s: spark_chain_views(run), engine_views=engine_chain_views,
        compare=compare_chain, render=render_chain, describe=ChainScenario.describe,
    )  # fmt: skip
    seeds = range(args.seed_start, args.seed_start + args.count)
    return run_seeds(harness, [(s, generate_chain(s)) for s in seeds], verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
