"""Join -> aggregation scenarios (issue 17): a stream-stream join followed by window aggregations,
engine (:func:`monitor.watermark.chain.replay_chain` with ``first.join``) vs real PySpark.

Run: ``python -m tests.differential.joinagg --seed-start 0 --count 100``.

A :class:`JoinAggScenario` is a generated join (:func:`tests.differential.joins_scenarios.generate_join`
for the same seed: two inputs with their own delays, five join types, inclusive/strict/negative/no range
conditions, late, boundary and state-watermark-edge rows, both policies) with one or two window
aggregations stacked on the joined rows, built from the chain harness:

- Spark query: :func:`tests.differential.joins_harness.joined_frame`, projected to
  ``key = lkey, event_time = lt, sum = 1`` (the left side's key and event time; a NULL-padded row
  without a left side has a NULL window and is filtered), then
  :func:`tests.differential.chains_spark.stack_windows` (``window(event_time)``, then
  ``window(window_time(window))``), run by :func:`tests.differential.chains_spark.run_chain` with
  ``spark.sql.streaming.statefulOperator.allowMultiple`` true for four seeds in five, false otherwise;
- engine: ``ChainConfig(first=join_config(...), then=...)`` over :func:`joins_harness.join_events`;
- compared per batch by :func:`tests.differential.chains_compare.compare_chain`: batch ids incl.
  no-data batches, step, global watermark, the windows the last operator emitted with count and sum,
  and per operator in Spark's ``stateOperators`` order (aggregations first, ``symmetricHashJoin``
  last): name, ``numRowsTotal``, ``numRowsRemoved``, ``numRowsDroppedByWatermark``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from monitor.watermark.chain import ChainConfig, replay_chain
from tests.differential.chains_compare import ChainView, chain_views, then_window
from tests.differential.chains_scenarios import ThenSpec
from tests.differential.chains_spark import ChainSparkRun, run_chain, stack_windows
from tests.differential.joins_harness import join_config, join_events, joined_frame
from tests.differential.joins_scenarios import JoinScenario, generate_join, hand_scenarios

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class JoinAggScenario:
    """A join (``base``) with window aggregations (``then``) over its rows' left time and key."""

    base: JoinScenario
    then: tuple[ThenSpec, ...]
    allow_multiple: bool

    @property
    def seed(self) -> int:
        """The seed (same as the join scenario's)."""
        return self.base.seed

    def describe(self) -> str:
        """Multi-line dump (failure messages, ``--verbose``)."""
        return f"{self.base.describe()}\n  then: {self._stages()}  allowMultiple={str(self.allow_multiple).lower()}"

    def _stages(self) -> str:
        return " -> ".join(
            f"{t.kind}({t.size_ms}"
            + (f"/{t.slide_ms}" if t.slide_ms else "")
            + ")"
            + ("+key" if t.by_key else "")
            for t in self.then
        )

    def label(self) -> str:
        """One-line shape for run logs."""
        b = self.base
        cond = ("l" if b.lower_ms is not None else "-") + ("u" if b.upper_ms is not None else "-")
        am = "multi" if self.allow_multiple else "single"
        return f"{b.join_type:11} {cond} -> {self._stages():40} {b.policy} {am}"


def generate_joinagg(seed: int) -> JoinAggScenario:
    """The join -> aggregation scenario for ``seed`` (deterministic)."""
    rng = random.Random(f"joinagg-{seed}")
    stages: list[ThenSpec] = []
    by_key = True  # the join's rows carry the left key
    for _ in range(rng.choices((1, 2), weights=(3, 1))[0]):
        by_key = by_key and rng.random() < 0.5
        if rng.random() < 0.7:
            stages.append(ThenSpec("tumbling", rng.choice((2_000, 5_000, 10_000)), None, by_key))
        else:
            size = rng.choice((10_000, 20_000))
            stages.append(ThenSpec("sliding", size, rng.choice((5_000, 10_000)), by_key))
    return JoinAggScenario(generate_join(seed), tuple(stages), allow_multiple=rng.random() < 0.8)


def hand_joinagg_scenarios() -> list[JoinAggScenario]:
    """Hand-made scenarios for edges random seeds rarely hit (FINDINGS.md JA2):

    - 900003: the joins' hand scenario 900003 (right outer, ``lt >= rt - 2 s AND lt <= rt - 0.5 s``;
      the right ``k@10.3`` is not late but below the right state watermark and unmatched: a right
      outer join alone keeps it in state and outputs it NULL-padded, J6) under a 5 s window of ``lt``.
      Spark runs the join as an inner join there, so the row is not kept: no ``numRowsRemoved``.
    """
    base = next(s for s in hand_scenarios() if s.seed == 900003)
    return [JoinAggScenario(base, (ThenSpec("tumbling", 5_000, None, False),), allow_multiple=True)]


def scenario_for(seed: int) -> JoinAggScenario:
    """The generated scenario for ``seed``, or the hand-made one with that seed (900000 and up)."""
    if seed >= 900_000:
        return next(s for s in hand_joinagg_scenarios() if s.seed == seed)
    return generate_joinagg(seed)


def build_joinagg_frame(spark: SparkSession, scenario: JoinAggScenario, input_dir: Path) -> DataFrame:
    """The streaming DataFrame: the join, then the window aggregations (module docstring)."""
    from pyspark.sql import functions as F

    joined = joined_frame(spark, scenario.base, input_dir)
    rows = joined.select(
        F.col("lkey").alias("key"), F.col("lt").alias("event_time"), F.lit(1).cast("long").alias("sum")
    )
    return stack_windows(rows, F.col("event_time"), scenario.then)


def run_joinagg(spark: SparkSession, scenario: JoinAggScenario) -> ChainSparkRun:
    """Runs the scenario through Spark (:func:`run_chain` with the join -> aggregation frame)."""
    return run_chain(spark, scenario, frame_builder=build_joinagg_frame)  # type: ignore[arg-type]


def joinagg_config(scenario: JoinAggScenario) -> ChainConfig:
    """The engine's chain: the join as operator 1, the window aggregations after it."""
    return ChainConfig(
        first=join_config(scenario.base),
        then=tuple(then_window(s) for s in scenario.then),
        allow_multiple=scenario.allow_multiple,
    )


def engine_joinagg_views(scenario: JoinAggScenario) -> list[ChainView]:
    """Runs the engine on the scenario; one :class:`ChainView` per batch."""
    events, _ = join_events(scenario.base)
    return chain_views(replay_chain(events, joinagg_config(scenario)), scenario.then[-1].by_key)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (one line per seed, a side-by-side table for each disagreement);
    exit status 1 if any scenario disagreed or failed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=8, help="number of scenarios (default 8)")
    parser.add_argument("--seed-start", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--hand", action="store_true", help="run the hand-made scenarios instead of seeds")
    parser.add_argument("--verbose", action="store_true", help="print every scenario and both runs")
    parser.add_argument("--save", type=Path, help="append each seed's Spark batches to this JSON-lines file")
    parser.add_argument(
        "--replay", type=Path, help="compare the engine with the Spark batches saved by --save (no Spark)"
    )
    args = parser.parse_args(argv)
    if args.replay is not None:
        return _replay(args.replay)

    from tests.differential.chains_compare import compare_chain, render_chain, spark_chain_views
    from tests.differential.seeds import Harness, run_seeds

    harness: Harness[JoinAggScenario, ChainSparkRun, list[ChainView]] = Harness(
        what="join -> aggregation scenarios", label=JoinAggScenario.label, run_spark=run_joinagg,
        spark_views=lambda run, _s: spark_chain_views(run), engine_views=engine_joinagg_views,
        compare=compare_chain, render=render_chain, describe=JoinAggScenario.describe,
    )  # fmt: skip
    seeds = (
        [s.seed for s in hand_joinagg_scenarios()]
        if args.hand
        else list(range(args.seed_start, args.seed_start + args.count))
    )
    save = args.save

    def keep(seed: int, views: list[ChainView]) -> None:
        with save.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"seed": seed, "batches": [dataclasses.asdict(v) for v in views]}) + "\n")

    return run_seeds(
        harness,
        [(s, scenario_for(s)) for s in seeds],
        verbose=args.verbose,
        keep=keep if save is not None else None,
    )


def _replay(path: Path) -> int:
    """Compares the engine with saved Spark batches (``--replay``); returns the exit status."""
    from tests.differential.chains_compare import compare_chain

    failed = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        item = json.loads(line)
        spark = [
            ChainView(
                batch_id=v["batch_id"],
                data_step=v["data_step"],
                watermark_ms=v["watermark_ms"],
                emitted=tuple(tuple(r) for r in v["emitted"]),
                operators=tuple((o[0], o[1], o[2], o[3]) for o in v["operators"]),
            )
            for v in item["batches"]
        ]
        if compare_chain(spark, engine_joinagg_views(scenario_for(item["seed"]))):
            failed.append(item["seed"])
    print(f"{len(lines)} saved seeds replayed; {len(failed)} with differences: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
