"""No-data batches decided by the data's arrival, engine vs real PySpark: ``python -m tests.differential.arrival
--count 100``.

Each scenario is a :func:`tests.differential.scenarios.generate` scenario (windows and dedups, one to three
inputs, ``min``/``max``) whose steps are fed in **groups**: the steps of a group are written together (one
file per step, all appearing at once) and the query reads ONE file per trigger (``maxFilesPerTrigger=1``),
then ``processAllAvailable()``. So at the trigger after a group's first file the next file is already
waiting (Spark's ``MicroBatchExecution.constructNextBatch``: new data available -> a data batch, never a
no-data batch), and after a group's last file nothing waits until the next group (a no-data batch runs when
the watermark moved). Groups are drawn per seed: a step starts a new group with probability 1/2, so both
cases occur in most seeds (the first step always starts one).

The engine gets the same rows with ``batch`` = step and ``arrival_time`` = the group's index (the files of a
group arrive at the same instant, so each waits when the one before it ends): the plan then decides from
the arrival times (:mod:`monitor.watermark.plan`, ``basis="arrival_time"``). Compared per batch as in
:mod:`tests.differential.run` (:func:`tests.differential.compare.compare`): batch ids incl. no-data
batches, the step each data batch read, watermark, emitted rows, state rows, late rows.

Prints one line per seed and every disagreement; exit status 1 if any. ``make differential-arrival``.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import Any

from tests.differential.scenarios import Scenario, generate

#: Seeds the CI test runs (tests/differential/test_arrival_differential.py).
CI_SEEDS = (0, 2, 3)


@dataclass(frozen=True)
class ArrivalScenario:
    """A scenario and how its steps arrive: ``groups`` (consecutive steps written together)."""

    scenario: Scenario
    groups: tuple[tuple[int, ...], ...]

    @property
    def seed(self) -> int:
        """The seed (the base scenario's)."""
        return self.scenario.seed

    def arrival_ms_of_step(self) -> list[int]:
        """The arrival time (ms) of each step: its group's index."""
        return [g for g, steps in enumerate(self.groups) for _ in steps]

    def describe(self) -> str:
        """The base scenario's dump and the groups."""
        return f"{self.scenario.describe()}\n  arrival groups (steps written together): {list(self.groups)}"


def generate_arrival(seed: int) -> ArrivalScenario:
    """The scenario of ``seed`` (:func:`generate`) with its steps grouped (deterministic per seed)."""
    scenario = generate(seed)
    rng = random.Random(f"arrival-{seed}")
    groups: list[list[int]] = []
    for step in range(scenario.step_count):
        if not groups or rng.random() < 0.5:
            groups.append([step])
        else:
            groups[-1].append(step)
    return ArrivalScenario(scenario, tuple(tuple(g) for g in groups))


def run_spark(spark: Any, case: ArrivalScenario) -> Any:
    """Runs ``case`` through real PySpark (one file per trigger, groups written at once)."""
    from tests.differential.spark_runner import build_query_frame, run_scenario

    return run_scenario(
        spark,
        case.scenario,
        frame_builder=lambda s, sc, d: build_query_frame(s, sc, d, one_file_per_trigger=True),
        groups=[list(g) for g in case.groups],
    )


def _label(case: ArrivalScenario) -> str:
    from tests.differential.run import _describe_op

    waits = sum(len(g) - 1 for g in case.groups)
    return f"{_describe_op(case.scenario)} groups={len(case.groups)} waiting={waits}"


def harness() -> Any:
    """The :class:`tests.differential.seeds.Harness` of the arrival scenarios."""
    from tests.differential.compare import compare, render, spark_views
    from tests.differential.engine_adapter import engine_views
    from tests.differential.seeds import Harness
    from tests.differential.spark_runner import format_batches

    return Harness(
        what="arrival scenarios",
        label=_label,
        run_spark=run_spark,
        spark_views=lambda run, case: spark_views(run, case.scenario),
        engine_views=lambda case: engine_views(case.scenario, case.arrival_ms_of_step()),
        compare=compare,
        render=render,
        describe=ArrivalScenario.describe,
        spark_batches=lambda run: format_batches(run.batches),
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    from tests.differential.seeds import arguments, run_seeds

    args = arguments(__doc__, 100).parse_args(argv)
    seeds = range(args.seed_start, args.seed_start + args.count)
    return run_seeds(
        harness(), [(s, generate_arrival(s)) for s in seeds], spark_only=args.spark_only, verbose=args.verbose
    )


if __name__ == "__main__":
    sys.exit(main())
