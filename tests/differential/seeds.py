"""The seed loop every differential command shares (``run``, ``joins_run``, ``chains_run``): start one
SparkSession, run each seeded scenario through real PySpark and through the engine, compare, print one line
per seed (label, batches, Spark seconds, OK / DIFF) and every disagreement with the scenario and a
side-by-side table. Each command brings its own :class:`Harness` (generator, Spark job, views, comparison).
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar


class SparkRun(Protocol):
    """What every harness's Spark run carries: its batches and how long the query took (seconds)."""

    @property
    def batches(self) -> Sequence[Any]: ...

    @property
    def seconds(self) -> float: ...


S = TypeVar("S")
R = TypeVar("R", bound=SparkRun)
V = TypeVar("V")


@dataclass(frozen=True)
class Harness(Generic[S, R, V]):
    """One kind of differential scenario.

    Attributes:
        what: how the summary names the scenarios (``"join scenarios"``).
        label: a scenario's one-line description (after ``seed NNNNN``).
        run_spark: runs a scenario on a SparkSession.
        spark_views / engine_views: the compared views of the Spark run and of the engine's replay.
        compare: the differences between two views (empty: they agree).
        render: the side-by-side table of two views and their differences.
        describe: a scenario's multi-line dump.
        spark_batches: ``--spark-only --verbose``: a Spark run's batches as text (``None``: no such option).
    """

    what: str
    label: Callable[[S], str]
    run_spark: Callable[[Any, S], R]
    spark_views: Callable[[R, S], V]
    engine_views: Callable[[S], V]
    compare: Callable[[V, V], list[Any]]
    render: Callable[[V, V, list[Any]], str]
    describe: Callable[[S], str]
    spark_batches: Callable[[R], str] | None = None


def arguments(doc: str | None, default_count: int, *, spark_only: bool = True) -> argparse.ArgumentParser:
    """The options every differential command takes: ``--count``, ``--seed-start``, ``--verbose`` and
    (``spark_only``) ``--spark-only``."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument(
        "--count", type=int, default=default_count, help=f"number of scenarios (default {default_count})"
    )
    parser.add_argument("--seed-start", type=int, default=0, help="first seed (default 0)")
    if spark_only:
        parser.add_argument("--spark-only", action="store_true", help="run Spark only and print its batches")
    parser.add_argument("--verbose", action="store_true", help="print every scenario and both runs")
    return parser


def run_seeds(
    harness: Harness[S, R, V],
    scenarios: Sequence[tuple[int, S]],
    *,
    spark_only: bool = False,
    verbose: bool = False,
    keep: Callable[[int, V], None] | None = None,
) -> int:
    """Run ``scenarios`` (``(seed, scenario)`` pairs) as the module docstring says; returns the exit status
    (1 when a scenario disagreed or failed on either side). ``keep(seed, views)`` is handed each Spark run's
    views (to save them for a later comparison without Spark)."""
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
    for seed, scenario in scenarios:
        label = f"seed {seed:5d} {harness.label(scenario)}"
        try:
            run = harness.run_spark(spark, scenario)
        except Exception as error:  # report and go on with the next seed
            failed.append(seed)
            print(f"{label}: SPARK ERROR {type(error).__name__}: {str(error).splitlines()[0]}", flush=True)
            continue
        spark_seconds += run.seconds
        if spark_only:
            print(f"{label}: {len(run.batches)} batches, {run.seconds:.2f}s", flush=True)
            if verbose and harness.spark_batches is not None:
                print(harness.describe(scenario))
                print(harness.spark_batches(run))
            continue
        ours = harness.spark_views(run, scenario)
        if keep is not None:
            keep(seed, ours)
        try:
            theirs = harness.engine_views(scenario)
        except Exception as error:
            failed.append(seed)
            print(f"{label}: ENGINE ERROR {type(error).__name__}: {error}", flush=True)
            print(harness.describe(scenario))
            continue
        differences = harness.compare(ours, theirs)
        status = "OK" if not differences else f"DIFF ({len(differences)})"
        print(f"{label}: {len(run.batches)} batches, {run.seconds:.2f}s, {status}", flush=True)
        if differences or verbose:
            print(harness.describe(scenario))
            print(harness.render(ours, theirs, differences))
            print()
        if differences:
            failed.append(seed)
    total = time.perf_counter() - started
    n = len(scenarios)
    print(
        f"{n} {harness.what} in {total:.1f}s (Spark queries {spark_seconds:.1f}s, {spark_seconds / max(n, 1):.2f}s "
        f"per seed); {len(failed)} with differences or errors: {failed}"
    )
    return 1 if failed else 0
