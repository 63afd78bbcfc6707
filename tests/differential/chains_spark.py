"""Runs a :class:`~tests.differential.chains_scenarios.ChainScenario` through real PySpark.

Same setup as :mod:`tests.differential.spark_runner` (one JSON file source, one
``filter(input = name).withWatermark(...)`` view per input, ``unionByName``, one file per step written
atomically, ``processAllAvailable()`` after each step, ``foreachBatch`` with exactly one ``collect()``),
with a chain of operators on the union:

- operator 1: ``groupBy(window("event_time", ...).alias("window")[, key]).agg(count("*") AS count,
  count("*") AS sum)`` or a deduplication followed by ``withColumn("sum", lit(1))``;
- each later operator: ``groupBy(window(window_time("window") | "event_time", ...).alias("window")
  [, key]).agg(count("*") AS count, sum("sum") AS sum)``.

Each batch records every ``stateOperators[i]`` in Spark's order (the last operator first).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.differential.chains_scenarios import ChainScenario, ThenSpec
from tests.differential.scenarios import DedupSpec, WindowSpec
from tests.differential.spark_runner import (
    SHUFFLE_PARTITIONS,
    _sort_key,
    feed_steps,
    watermark_iso_to_ms,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

EmittedRow = tuple[Any, ...]


@dataclass(frozen=True)
class OperatorProgress:
    """One ``stateOperators[i]`` entry."""

    name: str
    rows_total: int
    rows_removed: int
    rows_dropped_by_watermark: int


@dataclass(frozen=True)
class ChainSparkBatch:
    """One batch: ``data_step`` None for a no-data batch; ``operators`` in Spark's order (sink first);
    ``emitted`` sorted ``(start_us, end_us, key, count, sum)``."""

    batch_id: int
    data_step: int | None
    watermark_ms: int | None
    num_input_rows: int
    emitted: tuple[EmittedRow, ...]
    operators: tuple[OperatorProgress, ...]


@dataclass
class ChainSparkRun:
    """All batches of one chain run."""

    seed: int
    batches: list[ChainSparkBatch] = field(default_factory=list)
    seconds: float = 0.0


def _window(kind: str, time_col: Column, size_ms: int, slide_ms: int | None) -> Column:
    from pyspark.sql import functions as F

    if kind == "sliding":
        return F.window(time_col, f"{size_ms} milliseconds", f"{slide_ms} milliseconds")
    return F.window(time_col, f"{size_ms} milliseconds")


def build_chain_frame(spark: SparkSession, scenario: ChainScenario, input_dir: Path) -> DataFrame:
    """The streaming DataFrame of the chain; raises ValueError for an unknown operation."""
    from pyspark.sql import functions as F

    source = spark.readStream.schema("input STRING, key STRING, event_time TIMESTAMP").json(str(input_dir))
    union: DataFrame | None = None
    for spec in scenario.base.inputs:
        one = (
            source.filter(F.col("input") == spec.name)
            .withWatermark("event_time", f"{spec.delay_ms} milliseconds")
            .select("key", "event_time")
        )
        union = one if union is None else union.unionByName(one)
    assert union is not None
    first = scenario.first
    frame: DataFrame
    time_col: Column
    if isinstance(first, WindowSpec):
        grouping = [_window(first.kind, F.col("event_time"), first.size_ms, first.slide_ms).alias("window")]
        grouping += [F.col("key")] if first.by_key else []
        frame = union.groupBy(*grouping).agg(F.count("*").alias("count"), F.count("*").alias("sum"))
        time_col = F.window_time("window")
    elif isinstance(first, DedupSpec):
        if first.kind == "with_event_time":
            deduped = union.dropDuplicates(["key", "event_time"])
        elif first.kind == "without_event_time":
            deduped = union.dropDuplicates(["key"])
        elif first.kind == "within_watermark":
            deduped = union.dropDuplicatesWithinWatermark(["key"])
        else:
            raise ValueError(f"unknown dedup kind {first.kind!r}")
        frame = deduped.withColumn("sum", F.lit(1).cast("long"))
        time_col = F.col("event_time")
    else:
        raise ValueError(f"unknown operation {first!r}")
    return stack_windows(frame, time_col, scenario.then)


def stack_windows(frame: DataFrame, time_col: Column, then: tuple[ThenSpec, ...]) -> DataFrame:
    """The later operators over ``frame`` (columns ``key``, ``sum`` and the time ``time_col``): one
    window aggregation per stage, then the sink's projection ``(start_us, end_us, key, count, sum)``."""
    from pyspark.sql import functions as F

    by_key = False
    for stage in then:
        grouping = [_window(stage.kind, time_col, stage.size_ms, stage.slide_ms).alias("window")]
        grouping += [F.col("key")] if stage.by_key else []
        frame = frame.groupBy(*grouping).agg(F.count("*").alias("count"), F.sum("sum").alias("sum"))
        time_col = F.window_time("window")
        by_key = stage.by_key
    key_col = F.col("key") if by_key else F.lit(None).cast("string")
    return frame.select(
        F.unix_micros(F.col("window.start")).alias("start_us"),
        F.unix_micros(F.col("window.end")).alias("end_us"),
        key_col.alias("key"),
        F.col("count"),
        F.col("sum"),
    )


def run_chain(
    spark: SparkSession,
    scenario: ChainScenario,
    work_dir: Path | None = None,
    frame_builder: Callable[[SparkSession, Any, Path], DataFrame] | None = None,
) -> ChainSparkRun:
    """Runs the chain as a streaming query; returns every batch Spark ran (data and no-data).

    ``frame_builder`` builds the query instead of :func:`build_chain_frame` (the join-then-aggregate
    scenarios pass theirs; the scenario then needs ``seed``, ``allow_multiple`` and a ``base`` with
    ``step_count``, ``step_rows`` and ``policy``).

    Raises RuntimeError when a step's file did not land in exactly one data batch or a progress is
    missing; Spark's own exceptions propagate.
    """
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix=f"chain-{scenario.seed}-", dir=work_dir))
    try:
        input_dir = base / "input"
        input_dir.mkdir()
        spark.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
        spark.conf.set("spark.sql.streaming.multipleWatermarkPolicy", scenario.base.policy)
        spark.conf.set(
            "spark.sql.streaming.statefulOperator.allowMultiple", str(scenario.allow_multiple).lower()
        )
        frame = (frame_builder or build_chain_frame)(spark, scenario, input_dir)
        collected: dict[int, list[EmittedRow]] = {}

        def sink(batch_df: DataFrame, batch_id: int) -> None:
            collected[batch_id] = [tuple(row) for row in batch_df.collect()]  # exactly one action

        query = (
            frame.writeStream.outputMode("append")
            .foreachBatch(sink)
            .option("checkpointLocation", str(base / "checkpoint"))
            .queryName(f"chain_{scenario.seed}")
            .start()
        )
        step_of_batch, progress = feed_steps(query, input_dir, scenario.base, collected)
        run = ChainSparkRun(seed=scenario.seed)
        by_batch = {p.batchId: p for p in progress if "addBatch" in (p.durationMs or {})}
        for batch_id in sorted(collected):
            item = by_batch.get(batch_id)
            if item is None:
                raise RuntimeError(f"no progress recorded for batch {batch_id}")
            watermark = (item.eventTime or {}).get("watermark")
            run.batches.append(
                ChainSparkBatch(
                    batch_id=batch_id,
                    data_step=step_of_batch.get(batch_id),
                    watermark_ms=None if watermark is None else watermark_iso_to_ms(watermark),
                    num_input_rows=int(item.numInputRows),
                    emitted=tuple(sorted(collected[batch_id], key=_sort_key)),
                    operators=tuple(
                        OperatorProgress(
                            name=str(op.operatorName),
                            rows_total=int(op.numRowsTotal),
                            rows_removed=int(op.numRowsRemoved),
                            rows_dropped_by_watermark=int(op.numRowsDroppedByWatermark),
                        )
                        for op in item.stateOperators
                    ),
                )
            )
        steps = [b.data_step for b in run.batches if b.data_step is not None]
        if steps != list(range(scenario.base.step_count)):
            raise RuntimeError(f"seed {scenario.seed}: data batches map to steps {steps}")
        run.seconds = time.perf_counter() - started
        return run
    finally:
        shutil.rmtree(base, ignore_errors=True)
