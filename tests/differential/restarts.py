"""Restart differential scenarios: the engine's restart model against real PySpark, run by run.

``python -m tests.differential.restarts --count 100`` (``--spark-only --verbose`` prints Spark's batches).

A :class:`RestartScenario` is an ordinary seeded :class:`~tests.differential.scenarios.Scenario` (its
inputs, delays, operation, output mode and ``min``/``max`` policy) plus a **run schedule**: the steps are
split into consecutive query runs, and every run after the first is a restart, a new query started on the
same checkpoint directory. A run is one of

- ``live``: the default trigger; each step's file is written and ``processAllAvailable()`` waits for the
  data batch and any no-data batch Spark decides to run (``spark_runner.feed_steps``); then the query is
  stopped.
- ``once``: ``trigger(once=True)`` over one step: exactly one batch, then the query ends on its own
  (``SingleBatchExecutor``), so a no-data batch that would follow it never runs in that run.
- ``available_now``: the run's step files are written first (their modification times set in step
  order), then ``trigger(availableNow=True)`` with ``maxFilesPerTrigger=1`` reads one file per batch
  back to back and ends when nothing is left to run (``MultiBatchExecutor``).

The file source always has ``maxFilesPerTrigger=1`` (a live run writes one file at a time, so nothing
changes for it). Batches of all runs are recorded from the one ``foreachBatch`` sink (batch ids continue
across runs, from the checkpoint) and from each run's ``recentProgress``, then compared batch by batch
with :func:`monitor.watermark.restart.replay_runs` over the same schedule (``compare.compare``: batch ids,
no-data batches, watermark in effect, emitted rows, state, ``numRowsDroppedByWatermark``).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.differential.joins_scenarios import JoinScenario
from tests.differential.scenarios import (
    BASE_US,
    EventRow,
    InputSpec,
    Scenario,
    WindowSpec,
    generate,
    us_to_iso,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from monitor.watermark.restart import QueryRun
    from tests.differential.compare import BatchView
    from tests.differential.spark_runner import SparkRun

#: Run kinds as the engine names them (``monitor.watermark.restart.RunKind``).
RUN_KINDS = ("live", "once", "available_now")


@dataclass(frozen=True)
class RunSpec:
    """One query run over steps ``[first_step, end_step)``."""

    kind: str
    first_step: int
    end_step: int


@dataclass(frozen=True)
class RestartScenario:
    """A scenario (window/dedup, or a stream-stream join: ``join_restarts``) and its run schedule
    (``runs`` cover every step, in order)."""

    base: Scenario | JoinScenario
    runs: tuple[RunSpec, ...]

    @property
    def seed(self) -> int:
        """The seed (same as the base scenario's)."""
        return self.base.seed

    @property
    def step_count(self) -> int:
        """Number of steps (data batches)."""
        return self.base.step_count

    def step_rows(self, step: int) -> list[tuple[str, EventRow]]:
        """One step's rows, as the base scenario writes them."""
        return self.base.step_rows(step)

    def schedule(self) -> str:
        """The schedule in one line: ``live[0-1] | once[2] | available_now[3-5]``."""
        return " | ".join(
            f"{r.kind}[{r.first_step}" + (f"-{r.end_step - 1}]" if r.end_step - r.first_step > 1 else "]")
            for r in self.runs
        )

    def describe(self) -> str:
        """The base scenario's dump and the schedule."""
        return f"{self.base.describe()}\n  runs: {self.schedule()}"


def generate_restart(seed: int) -> RestartScenario:
    """The restart scenario for ``seed``: the base scenario ``generate(seed)`` (3-6 steps) split at 1-3
    random points into runs of random kinds (a ``once`` stretch is one run per step). Deterministic."""
    base = generate(seed)
    return RestartScenario(base=base, runs=random_runs(seed, base.step_count))


def random_runs(seed: int, n: int) -> tuple[RunSpec, ...]:
    """A run schedule over ``n`` >= 2 steps for ``seed``: split at 1-3 random points into runs of random
    kinds (a ``once`` stretch is one run per step). Deterministic."""
    rng = random.Random(seed * 7919 + 17)
    cut_count = rng.randint(1, min(3, n - 1))
    cuts = sorted(rng.sample(range(1, n), cut_count))
    runs: list[RunSpec] = []
    for first, end in zip([0, *cuts], [*cuts, n], strict=True):
        kind = rng.choice(RUN_KINDS)
        if kind == "once":
            runs.extend(RunSpec("once", s, s + 1) for s in range(first, end))
        else:
            runs.append(RunSpec(kind, first, end))
    return tuple(runs)


def _hand(
    seed: int,
    policy: str,
    delays: dict[str, int],
    steps: list[dict[str, list[float]]],
    runs: str,
    window_ms: int,
) -> RestartScenario:
    """A hand-made scenario: ``steps[i][input]`` = event times (seconds after ``BASE_US``) of step ``i``;
    ``runs`` = ``"live:0-1,once:2,available_now:3-4"``; a tumbling window count, append mode."""
    inputs = tuple(
        InputSpec(
            name=name,
            delay_ms=delay_ms,
            steps=tuple(
                tuple(EventRow(us_to_iso(BASE_US + int(t * 1_000_000)), "k") for t in step.get(name, []))
                for step in steps
            ),
        )
        for name, delay_ms in delays.items()
    )
    base = Scenario(
        seed=seed,
        inputs=inputs,
        operation=WindowSpec("tumbling", window_ms, None, False),
        output_mode="append",
        policy=policy,  # type: ignore[arg-type]
    )
    return RestartScenario(base=base, runs=parse_runs(runs))


def parse_runs(text: str) -> tuple[RunSpec, ...]:
    """``"live:0-1,once:2,available_now:3-4"`` -> the run schedule (step spans inclusive)."""
    specs = []
    for part in text.split(","):
        kind, _, span = part.partition(":")
        first, _, last = span.partition("-")
        specs.append(RunSpec(kind, int(first), int(last or first) + 1))
    return tuple(specs)


#: Two inputs, ``a`` (delay 0) and ``b`` (delay 5 s), 5 s tumbling windows: after step 1 ``a`` is at 20 s
#: and ``b`` at 25 s; step 2 has rows of ``a`` only, step 3 a row at 22 s (window [20 s, 25 s)).
_TWO_INPUTS = [
    {"a": [10], "b": [12]},
    {"a": [20], "b": [30]},
    {"a": [31]},
    {"a": [22, 41], "b": [45]},
]


def hand_restart_scenarios() -> list[RestartScenario]:
    """The hand-made restart cases (seeds 900101-), recorded in FINDINGS.md R1-R4 and written out as
    expected values in tests/unit/test_engine_restart.py."""
    delays = {"a": 0, "b": 5_000}
    one = [{"a": [1, 7]}, {"a": [12]}, {"a": [13]}]
    return [
        # R1: min policy, restart after step 1's run: per-input watermarks lost, b holds the watermark
        _hand(900101, "min", delays, _TWO_INPUTS, "live:0-1,live:2-3", 5_000),
        # the same without a restart (the baseline the restart is compared with)
        _hand(900102, "min", delays, _TWO_INPUTS, "live:0-3", 5_000),
        # R2: max policy, same restart
        _hand(900103, "max", delays, _TWO_INPUTS, "live:0-1,live:2-3", 5_000),
        # R3: Trigger.Once then live: stopped between a data batch and its no-data batch
        _hand(900104, "min", {"a": 0}, one, "once:0,live:1-2", 5_000),
        # R4: the two-input steps as AvailableNow runs
        _hand(900105, "min", delays, _TWO_INPUTS, "available_now:0-1,available_now:2-3", 5_000),
        # R4: the same as Trigger.Once runs
        _hand(900106, "min", delays, _TWO_INPUTS, "once:0,once:1,once:2,once:3", 5_000),
        # R4: stopped right after step 1's data batch (a Once run), before its no-data batch
        _hand(900107, "min", delays, _TWO_INPUTS, "live:0,once:1,live:2-3", 5_000),
    ]


def engine_runs(scenario: RestartScenario) -> list[QueryRun]:
    """The schedule as the engine's :class:`~monitor.watermark.restart.QueryRun` list."""
    from monitor.watermark.restart import QueryRun

    return [QueryRun(kind=r.kind, data_batches=r.end_step - r.first_step) for r in scenario.runs]  # type: ignore[arg-type]


def run_restart_scenario(
    spark: SparkSession,
    scenario: RestartScenario,
    frame_builder: Callable[..., DataFrame] | None = None,
) -> SparkRun:
    """Runs the schedule on one checkpoint as the module docstring says; returns every batch of every
    run. ``frame_builder(spark, base, input_dir, max_files_per_trigger=1)`` builds each run's query
    (default ``spark_runner.build_query_frame``; the join restarts pass ``joins_harness.build_join_frame``).
    Raises RuntimeError if the batches do not map one data batch per step (``spark_runner``)."""
    from tests.differential.spark_runner import (
        EmittedRow,
        SparkRun,
        apply_session_confs,
        assemble,
        build_query_frame,
        check_one_batch_per_step,
        feed_steps,
        write_step_file,
    )

    started = time.perf_counter()
    base_dir = Path(tempfile.mkdtemp(prefix=f"restart-{scenario.seed}-"))
    try:
        input_dir = base_dir / "input"
        input_dir.mkdir()
        collected: dict[int, list[EmittedRow]] = {}

        def sink(batch_df: Any, batch_id: int) -> None:
            collected[batch_id] = [tuple(row) for row in batch_df.collect()]

        apply_session_confs(spark, scenario.base.policy)
        step_of_batch: dict[int, int | None] = {}
        progress: list[Any] = []
        clock = time.time()
        for run in scenario.runs:
            frame = (frame_builder or build_query_frame)(
                spark, scenario.base, input_dir, max_files_per_trigger=1
            )
            writer = (
                frame.writeStream.outputMode(scenario.base.output_mode)
                .foreachBatch(sink)
                .option("checkpointLocation", str(base_dir / "checkpoint"))
                .queryName(f"restart_{scenario.seed}")
            )
            steps = range(run.first_step, run.end_step)
            if run.kind == "live":
                mapped, run_progress = feed_steps(writer.start(), input_dir, scenario, collected, steps)
                step_of_batch.update(mapped)
                progress.extend(run_progress)
                continue
            for step in steps:
                write_step_file(input_dir, scenario, step)
                # the file source orders waiting files by modification time
                os.utime(input_dir / f"step{step:03d}.json", (clock + step, clock + step))
            before = set(collected)
            query = writer.trigger(
                **({"once": True} if run.kind == "once" else {"availableNow": True})
            ).start()
            try:
                query.awaitTermination()
                run_progress = list(query.recentProgress)
            finally:
                query.stop()
            progress.extend(run_progress)
            rows_of = {
                p.batchId: int(p.numInputRows) for p in run_progress if "addBatch" in (p.durationMs or {})
            }
            pending = list(steps)
            for batch_id in sorted(set(collected) - before):
                step_of_batch[batch_id] = pending.pop(0) if rows_of.get(batch_id, 0) > 0 and pending else None
        run_ = SparkRun(scenario_seed=scenario.seed)
        run_.batches = assemble(collected, step_of_batch, progress)
        check_one_batch_per_step(run_, scenario.base)  # type: ignore[arg-type]
        run_.seconds = time.perf_counter() - started
        return run_
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


def restart_engine_views(scenario: RestartScenario) -> list[BatchView]:
    """The engine's replay of the scenario under its run schedule, as batch views."""
    from monitor.watermark.restart import replay_runs
    from tests.differential.engine_adapter import engine_config, engine_events, replay_views

    result = replay_runs(engine_events(scenario.base), engine_config(scenario.base), engine_runs(scenario))
    return replay_views(scenario.base, result.replay)


def model_check(
    seeds: range,
    generate_one: Callable[[int], RestartScenario] | None = None,
    views: Callable[[RestartScenario], list[BatchView]] | None = None,
    plain_views: Callable[[RestartScenario], list[BatchView]] | None = None,
) -> dict[str, list[int]]:
    """Which seeds the restart model matters for (engine only, no Spark): the seeds whose views differ
    from a replay with no restart at all (``no_restart``), from a restart that keeps the per-input
    watermarks (``keeps_input_watermarks``), and from a restart that runs the pending no-data batch
    (``runs_pending_no_data``). A seed listed under a variant would fail the comparison with Spark had
    the engine modelled restarts that way. ``generate_one`` / ``views`` / ``plain_views`` (the scenario of
    a seed, its engine views under the schedule, and with no restart) default to this module's
    window/dedup scenarios; ``join_restarts`` passes the join's."""
    from unittest import mock

    from monitor.watermark import WatermarkRuntime, replay
    from tests.differential.engine_adapter import engine_config, engine_events, replay_views

    def plain_default(scenario: RestartScenario) -> list[BatchView]:
        base = scenario.base
        assert isinstance(base, Scenario)
        return replay_views(base, replay(engine_events(base), engine_config(base)))

    generate_one = generate_one or generate_restart
    views = views or restart_engine_views
    plain_views = plain_views or plain_default

    restart = WatermarkRuntime.restart

    def keeps(self: WatermarkRuntime) -> dict[str, int | None]:
        lost = restart(self)
        self._source_wm = list(lost.values())
        return lost

    def pending(self: WatermarkRuntime) -> dict[str, int | None]:
        lost = restart(self)
        self._ran_since_start = True
        return lost

    found: dict[str, list[int]] = {"no_restart": [], "keeps_input_watermarks": [], "runs_pending_no_data": []}
    for seed in seeds:
        scenario = generate_one(seed)
        ours = views(scenario)
        if plain_views(scenario) != ours:
            found["no_restart"].append(seed)
        for name, variant in (("keeps_input_watermarks", keeps), ("runs_pending_no_data", pending)):
            with mock.patch.object(WatermarkRuntime, "restart", variant):
                if views(scenario) != ours:
                    found[name].append(seed)
    return found


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    from tests.differential.compare import compare, render, spark_views
    from tests.differential.seeds import Harness, arguments, run_seeds
    from tests.differential.spark_runner import format_batches

    parser = arguments(__doc__, 20)
    parser.add_argument("--hand", action="store_true", help="run the hand-made scenarios (900101-) only")
    parser.add_argument("--seeds", help="run exactly these seeds, e.g. 3,19,145 (instead of --count)")
    parser.add_argument(
        "--model-check",
        action="store_true",
        help="engine only: the seeds each other restart model would fail",
    )
    args = parser.parse_args(argv)
    if args.model_check:
        found = model_check(range(args.seed_start, args.seed_start + args.count))
        for name, listed in found.items():
            print(f"{name}: {len(listed)} of {args.count} seeds differ: {listed}")
        return 0
    harness: Harness[RestartScenario, SparkRun, list[BatchView]] = Harness(
        what="restart scenarios",
        label=lambda s: f"{s.base.policy} inputs={len(s.base.inputs)} {s.schedule()}",
        run_spark=run_restart_scenario, spark_views=lambda run, s: spark_views(run, s.base),
        engine_views=restart_engine_views, compare=compare, render=render,
        describe=RestartScenario.describe, spark_batches=lambda run: format_batches(run.batches),
    )  # fmt: skip
    seeds = range(args.seed_start, args.seed_start + args.count)
    if args.seeds:
        seeds = range(0)
        scenarios = [generate_restart(int(s)) for s in args.seeds.split(",")]
    else:
        scenarios = hand_restart_scenarios() if args.hand else [generate_restart(s) for s in seeds]
    return run_seeds(
        harness, [(s.seed, s) for s in scenarios], spark_only=args.spark_only, verbose=args.verbose
    )


if __name__ == "__main__":
    sys.exit(main())
