"""Runs seeded Flink differential scenarios: ``python -m tests.differential.flink.run --count 100``.

All scenarios go through ONE JVM (a local MiniCluster, one job per chunk of 25). Prints one line per
seed (OK / DIFF) and the differences; exit status 1 if any scenario disagreed.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed-start", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print every scenario")
    args = parser.parse_args(argv)
    from tests.differential.flink.compare import compare
    from tests.differential.flink.harness import run_flink
    from tests.differential.flink.scenarios import generate

    seeds = range(args.seed_start, args.seed_start + args.count)
    scenarios = [generate(s) for s in seeds]
    t0 = time.perf_counter()
    results = run_flink(scenarios)
    t1 = time.perf_counter()
    bad = 0
    for sc in scenarios:
        diffs = compare(sc, results[sc.id])
        fired = len(results[sc.id].firings)
        status = "OK" if not diffs else "DIFF"
        if diffs or args.verbose:
            print(f"{status} {sc.describe()}; flink firings {fired}")
        for d in diffs:
            print("   ", d)
        bad += bool(diffs)
    print(
        f"{len(scenarios) - bad}/{len(scenarios)} seeds agree (seeds {seeds.start}-{seeds.stop - 1}); "
        f"Flink JVM {t1 - t0:.1f}s, engine+compare {time.perf_counter() - t1:.1f}s"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
