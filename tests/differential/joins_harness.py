"""Join scenarios through real PySpark and through the engine, reduced to comparable batch views.

Spark query (:func:`build_join_frame`): the one JSON file source of :mod:`spark_runner`, filtered
into ``left`` and ``right`` (``input`` column), each with its own ``withWatermark("event_time", ...)``,
columns renamed ``lkey, lt`` / ``rkey, rt``, joined with ``JoinScenario.condition_sql()`` and the
scenario's join type; a step's rows for both sides land in one file, so in one micro-batch. The sink
gets ``(lkey, lt_us, rkey, rt_us)`` (NULL side ``None``), or ``(lkey, lt_us)`` for left semi.

Engine (:func:`join_engine_views`): ``WatermarkConfig(join=StreamJoin(...))`` over the same rows
(``batch`` = step, ``source`` = side), its output pairs mapped back to the same tuples.

Compared per batch with :func:`tests.differential.compare.compare`: batch ids incl. no-data
batches, step, watermark, the joined and NULL-padded rows exactly, output row count, the join's
``numRowsTotal`` / ``numRowsRemoved`` / ``numRowsDroppedByWatermark`` (the engine's late rows of
both sides), and ``eventTime.min/max/avg``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.watermark import EventsTable, WatermarkConfig, replay
from monitor.watermark.join import StreamJoin
from monitor.watermark.results import Replay
from tests.differential.compare import BatchView
from tests.differential.joins_scenarios import JoinScenario
from tests.differential.spark_runner import SparkRun, run_scenario

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

JoinRow = tuple[Any, ...]


def joined_frame(
    spark: SparkSession, scenario: JoinScenario, input_dir: Path, *, max_files_per_trigger: int | None = None
) -> DataFrame:
    """The joined streaming DataFrame before the sink's projection: columns ``lkey, lt`` and, except
    for left semi, ``rkey, rt`` (the join-then-aggregate scenarios build on it). ``max_files_per_trigger``:
    the file source's ``maxFilesPerTrigger`` (one step file per batch when several wait: the restart
    runs of ``join_restarts``)."""
    from pyspark.sql import functions as F

    reader = spark.readStream.schema("input STRING, key STRING, event_time TIMESTAMP")
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    source = reader.json(str(input_dir))
    left_spec, right_spec = scenario.inputs
    left = (
        source.filter(F.col("input") == left_spec.name)
        .withWatermark("event_time", f"{left_spec.delay_ms} milliseconds")
        .select(F.col("key").alias("lkey"), F.col("event_time").alias("lt"))
    )
    right = (
        source.filter(F.col("input") == right_spec.name)
        .withWatermark("event_time", f"{right_spec.delay_ms} milliseconds")
        .select(F.col("key").alias("rkey"), F.col("event_time").alias("rt"))
    )
    return left.join(right, F.expr(scenario.condition_sql()), scenario.join_type)


def build_join_frame(
    spark: SparkSession, scenario: JoinScenario, input_dir: Path, *, max_files_per_trigger: int | None = None
) -> DataFrame:
    """The streaming DataFrame of ``scenario`` (see the module docstring; ``max_files_per_trigger`` as
    :func:`joined_frame`)."""
    from pyspark.sql import functions as F

    joined = joined_frame(spark, scenario, input_dir, max_files_per_trigger=max_files_per_trigger)
    if scenario.join_type == "left_semi":
        return joined.select(F.col("lkey"), F.unix_micros(F.col("lt")).alias("lt_us"))
    return joined.select(
        F.col("lkey"),
        F.unix_micros(F.col("lt")).alias("lt_us"),
        F.col("rkey"),
        F.unix_micros(F.col("rt")).alias("rt_us"),
    )


def run_join_scenario(spark: SparkSession, scenario: JoinScenario) -> SparkRun:
    """Runs the join scenario through Spark (``spark_runner.run_scenario`` with the join frame)."""
    return run_scenario(spark, scenario, frame_builder=build_join_frame)  # type: ignore[arg-type]


def spark_join_views(run: SparkRun) -> list[BatchView]:
    """Spark's batches as views (``numRowsDroppedByWatermark`` = raw late rows of both sides)."""
    return [
        BatchView(
            batch_id=b.batch_id,
            data_step=b.data_step,
            watermark_ms=b.watermark_ms,
            emitted=b.emitted,
            output_rows=len(b.emitted),
            state_rows_total=b.state_rows_total,
            state_rows_removed=b.state_rows_removed,
            rows_dropped_by_watermark=b.rows_dropped_by_watermark,
            late_rows=b.rows_dropped_by_watermark,
            event_time_min_ms=b.event_time_min_ms,
            event_time_max_ms=b.event_time_max_ms,
            event_time_avg_ms=b.event_time_avg_ms,
        )
        for b in run.batches
    ]


def join_config(scenario: JoinScenario) -> WatermarkConfig:
    """The engine config equivalent to the scenario's Spark query."""
    left, right = scenario.inputs
    return WatermarkConfig(
        delay_ms=left.delay_ms,
        join=StreamJoin(
            left=left.name,
            right=right.name,
            join_type=scenario.join_type,
            lower_ms=scenario.lower_ms,
            upper_ms=scenario.upper_ms,
            lower_strict=scenario.lower_strict,
            upper_strict=scenario.upper_strict,
        ),
        policy=scenario.policy,
        sources=(left.name, right.name),
        source_delays_ms={left.name: left.delay_ms, right.name: right.delay_ms},
    )


def join_events(scenario: JoinScenario) -> tuple[EventsTable, list[tuple[str, int | None]]]:
    """The rows as an engine table (file order, step = batch) and each row's ``(key, event_time_us)``."""
    times: list[int | None] = []
    batch: list[int] = []
    source: list[str | None] = []
    key: list[str | None] = []
    flat: list[tuple[str, int | None]] = []
    for step in range(scenario.step_count):
        for name, row in scenario.step_rows(step):
            times.append(row.event_time_us)
            batch.append(step)
            source.append(name)
            key.append(row.key)
            flat.append((row.key, row.event_time_us))
    return EventsTable.from_columns(times, batch=batch, source=source, key=key), flat


def join_engine_views(scenario: JoinScenario) -> list[BatchView]:
    """Runs the engine on the scenario; one view per batch it ran."""
    events, flat = join_events(scenario)
    return join_views(scenario, replay(events, join_config(scenario)), flat)


def join_views(scenario: JoinScenario, result: Replay, flat: list[tuple[str, int | None]]) -> list[BatchView]:
    """An engine replay of ``scenario``'s rows (``join_events``; ``flat`` = each row's ``(key, event_time_us)``)
    as one view per batch it ran (one query or several runs: ``join_restarts``)."""
    semi = scenario.join_type == "left_semi"
    views: list[BatchView] = []
    step = 0
    for b in result.batches:
        data_step: int | None = None
        if b.kind == "data":
            data_step = step
            step += 1
        assert b.join is not None
        rows: list[JoinRow] = []
        for li, ri in b.join.pairs():
            lpart = (None, None) if li is None else flat[li]
            rpart = (None, None) if ri is None else flat[ri]
            rows.append(lpart if semi else (*lpart, *rpart))
        views.append(
            BatchView(
                batch_id=b.batch_id,
                data_step=data_step,
                watermark_ms=b.watermark_ms,
                emitted=tuple(sorted(rows, key=lambda r: tuple((v is not None, v) for v in r))),
                output_rows=b.output_rows,
                state_rows_total=b.state_rows,
                state_rows_removed=b.state_rows_removed,
                rows_dropped_by_watermark=b.dropped_by_watermark_metric,
                late_rows=b.late_row_count,
                event_time_min_ms=None if b.event_time is None else b.event_time.min_ms,
                event_time_max_ms=None if b.event_time is None else b.event_time.max_ms,
                event_time_avg_ms=None if b.event_time is None else b.event_time.avg_ms,
            )
        )
    return views


def format_join_row(row: JoinRow) -> str:
    """``(lkey, lt_us, rkey, rt_us)`` as ``b@00:00:05.000|b@00:00:06.000`` (``null`` side), semi rows
    as ``b@00:00:05.000``."""

    def one(key: Any, us: Any) -> str:
        if key is None and us is None:
            return "null"
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(us))
        return f"{key}@{moment.strftime('%H:%M:%S.%f')}"

    if len(row) == 2:
        return one(*row)
    return f"{one(row[0], row[1])}|{one(row[2], row[3])}"
