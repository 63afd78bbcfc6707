"""Runs a :class:`~tests.differential.scenarios.Scenario` through real PySpark and records each batch.

How the query is built (one query per scenario, one SparkSession per process):

- **One JSON file source** reading a directory; every row carries an ``input`` column. Each scenario
  input is ``source.filter(input = name).withWatermark("event_time", delay)``; the inputs are then
  ``unionByName``-ed. Spark's ``WatermarkTracker`` keeps one watermark per ``EventTimeWatermarkExec``
  node, whatever source feeds it, so this is the multiple-watermark setup of a union of separate
  streams, with one difference that matters here: a step's rows for all inputs arrive in one file,
  written atomically (hidden name, then rename), so they are always in the same micro-batch. With one
  file source per input the query thread could start a batch between two inputs' files.
- The operation (window count or dedup), ``outputMode``, and ``foreachBatch`` that runs exactly ONE
  action (``collect()``) on the batch: a second action would run the stateful operator twice and
  double every state metric (see shared fixture ``progress_gt_b2_foreachBatch_orderBy_doublecount``).
- Driving: per step, write the step's file, then ``processAllAvailable()``, which returns only after
  Spark has run the data batch and every no-data batch it decided to run on its own
  (``spark.sql.streaming.noDataMicroBatches.enabled`` is left at its default, true).

Each batch is recorded from the ``foreachBatch`` call (batch id, rows) and from ``query.recentProgress``
(watermark in effect = ``eventTime.watermark``, ``eventTime.min/max/avg`` (absent in a batch without
rows), ``numInputRows``, the stateful operator's ``numRowsTotal`` / ``numRowsUpdated`` /
``numRowsRemoved`` / ``numRowsDroppedByWatermark``).

Emitted rows are normalised to plain tuples of integers/strings:
window aggregation -> ``(start_us, end_us, key or None, count)``; dedup -> ``(key, event_time_us or None)``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.differential.scenarios import DedupSpec, Scenario, WindowSpec, iso_to_us

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Fixed so that numRowsDroppedByWatermark (counted per shuffle partition after partial aggregation)
#: is reproducible; recorded in every SparkRun.
SHUFFLE_PARTITIONS = 2

EmittedRow = tuple[Any, ...]


@dataclass(frozen=True)
class SparkBatch:
    """One micro-batch as Spark ran it. ``data_step`` is the scenario step whose file it read, or None
    for a no-data batch Spark ran on its own. ``watermark_ms`` is the watermark in effect during the
    batch (``eventTime.watermark`` of its progress; epoch ms). ``emitted`` is sorted."""

    batch_id: int
    data_step: int | None
    watermark_ms: int | None
    num_input_rows: int
    emitted: tuple[EmittedRow, ...]
    state_operator: str | None
    state_rows_total: int | None
    state_rows_updated: int | None
    state_rows_removed: int | None
    rows_dropped_by_watermark: int | None
    event_time_min_ms: int | None = None
    event_time_max_ms: int | None = None
    event_time_avg_ms: int | None = None


@dataclass
class SparkRun:
    """All batches of one scenario run, in batch-id order, plus the run's timing and settings."""

    scenario_seed: int
    batches: list[SparkBatch] = field(default_factory=list)
    shuffle_partitions: int = SHUFFLE_PARTITIONS
    seconds: float = 0.0


_SESSION_LOCK = threading.Lock()
_SESSION: SparkSession | None = None


def get_spark_session() -> SparkSession:
    """The process-wide local SparkSession (created on first call; small JVM, UI off, UTC)."""
    global _SESSION
    with _SESSION_LOCK:
        from pyspark.sql import SparkSession

        if _SESSION is not None and SparkSession.getActiveSession() is None:
            # Another test stopped the shared session (getOrCreate handed it ours): start a new one.
            _SESSION = None
        if _SESSION is None:
            _SESSION = (
                SparkSession.builder.master("local[2]")
                .appName("tidegauge-differential")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.driver.memory", "768m")
                .config("spark.sql.streaming.noDataProgressEventInterval", "3600000")
                .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
                .config("spark.sql.adaptive.enabled", "false")
                .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
                .getOrCreate()
            )
            _SESSION.sparkContext.setLogLevel("ERROR")
        return _SESSION


def stop_spark_session() -> None:
    """Stops the process-wide session if one was created."""
    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is not None:
            _SESSION.stop()
            _SESSION = None


def watermark_iso_to_ms(text: str) -> int:
    """Spark progress ``eventTime.watermark`` (``2026-01-01T00:00:05.123Z``) -> epoch milliseconds."""
    return iso_to_us(text) // 1_000


def build_query_frame(
    spark: SparkSession,
    scenario: Scenario,
    input_dir: Path,
    *,
    max_files_per_trigger: int | None = None,
    one_file_per_trigger: bool = False,
) -> DataFrame:
    """The streaming DataFrame for ``scenario``: watermarked inputs, union, operation, normalised
    output columns. ``max_files_per_trigger`` sets the file source's ``maxFilesPerTrigger`` (one step
    file per batch when several wait, e.g. in a ``Trigger.AvailableNow`` run); ``one_file_per_trigger``:
    ``maxFilesPerTrigger=1`` over the files of the input directory's subdirectories (:func:`feed_steps`
    with ``groups`` writes them). Raises ValueError for an
    operation it does not know."""
    from pyspark.sql import functions as F

    reader = spark.readStream.schema("input STRING, key STRING, event_time TIMESTAMP")
    if one_file_per_trigger:
        source = reader.option("maxFilesPerTrigger", 1).json(str(input_dir / "*"))
    else:
        if max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
        source = reader.json(str(input_dir))
    union: DataFrame | None = None
    for spec in scenario.inputs:
        one = (
            source.filter(F.col("input") == spec.name)
            .withWatermark("event_time", f"{spec.delay_ms} milliseconds")
            .select("key", "event_time")
        )
        union = one if union is None else union.unionByName(one)
    assert union is not None
    operation = scenario.operation
    if isinstance(operation, WindowSpec):
        if operation.kind == "tumbling":
            window = F.window("event_time", f"{operation.size_ms} milliseconds")
        elif operation.kind == "sliding":
            window = F.window(
                "event_time", f"{operation.size_ms} milliseconds", f"{operation.slide_ms} milliseconds"
            )
        elif operation.kind == "session":
            window = F.session_window("event_time", f"{operation.size_ms} milliseconds")
        else:
            raise ValueError(f"unknown window kind {operation.kind!r}")
        grouping = [window.alias("window")] + ([F.col("key")] if operation.by_key else [])
        counted = union.groupBy(*grouping).count()
        key_col = F.col("key") if operation.by_key else F.lit(None).cast("string")
        return counted.select(
            F.unix_micros(F.col("window.start")).alias("start_us"),
            F.unix_micros(F.col("window.end")).alias("end_us"),
            key_col.alias("key"),
            F.col("count"),
        )
    if isinstance(operation, DedupSpec):
        if operation.kind == "with_event_time":
            deduped = union.dropDuplicates(["key", "event_time"])
        elif operation.kind == "without_event_time":
            deduped = union.dropDuplicates(["key"])
        elif operation.kind == "within_watermark":
            deduped = union.dropDuplicatesWithinWatermark(["key"])
        else:
            raise ValueError(f"unknown dedup kind {operation.kind!r}")
        return deduped.select(F.col("key"), F.unix_micros(F.col("event_time")).alias("event_time_us"))
    raise ValueError(f"unknown operation {operation!r}")


def write_step_file(input_dir: Path, scenario: Any, step: int, mtime: float | None = None) -> Path:
    """Writes one step's rows as one JSON-lines file, atomically (hidden temp name, then rename;
    the file source ignores names starting with a dot). ``scenario`` needs ``step_rows``; ``mtime``: the
    file's modification time (the file source reads files in modification-time order)."""
    temp = input_dir / f".step{step:03d}.tmp"
    with temp.open("w", encoding="utf-8") as handle:
        for name, row in scenario.step_rows(step):
            handle.write(json.dumps({"input": name, "key": row.key, "event_time": row.event_time}) + "\n")
    if mtime is not None:
        os.utime(temp, (mtime, mtime))
    final = input_dir / f"step{step:03d}.json"
    os.replace(temp, final)
    return final


def _write_group(input_dir: Path, scenario: Any, index: int, steps: list[int]) -> None:
    """Writes the files of ``steps`` into one hidden directory, then renames it into place: the file
    source sees all of them at once (one step per file, modification times one second apart in step
    order, so ``maxFilesPerTrigger=1`` reads them in step order)."""
    temp = input_dir / f".group{index:03d}"
    temp.mkdir()
    now = time.time()
    for i, step in enumerate(steps):
        write_step_file(temp, scenario, step, mtime=now + i)
    os.replace(temp, input_dir / f"group{index:03d}")


def feed_steps(
    query: Any,
    input_dir: Path,
    scenario: Any,
    collected: dict[int, list[EmittedRow]],
    steps: range | None = None,
    groups: list[list[int]] | None = None,
) -> tuple[dict[int, int | None], list[Any]]:
    """Writes each step's file and waits for Spark to process it (``processAllAvailable``), then stops
    ``query``. Returns which step each batch read (``None``: a no-data batch) and the query's progress
    list. ``scenario`` needs ``step_count`` and ``step_rows``; ``collected`` is filled by the query's sink.
    ``steps``: the steps to feed one at a time (default all; a restarted query on the same checkpoint is
    fed the rest). ``groups``: instead, steps written together (one directory each, all files appearing at
    once) before each ``processAllAvailable``, for a query reading one file per trigger: the first file of
    a group arrives when the engine is idle, the others wait at the triggers after it. A group's data
    batches (those with input rows) map to its steps in order."""
    step_of_batch: dict[int, int | None] = {}
    singles = [[s] for s in (range(scenario.step_count) if steps is None else steps)]
    try:
        for index, group in enumerate(groups if groups is not None else singles):
            before = set(collected)
            if groups is None:
                write_step_file(input_dir, scenario, group[0])
            else:
                _write_group(input_dir, scenario, index, group)
            query.processAllAvailable()
            new_ids = sorted(set(collected) - before)
            for batch_id in new_ids:
                step_of_batch[batch_id] = None
            if groups is None:
                if new_ids:
                    # The file lands in the first batch that runs after it was written.
                    step_of_batch[new_ids[0]] = group[0]
                continue
            rows_of = {p.batchId: int(p.numInputRows) for p in query.recentProgress if "addBatch" in (p.durationMs or {})}
            data_ids = [b for b in new_ids if rows_of.get(b, 0) > 0]
            for batch_id, step in zip(data_ids, group, strict=False):
                step_of_batch[batch_id] = step
        return step_of_batch, list(query.recentProgress)
    finally:
        query.stop()


def run_scenario(
    spark: SparkSession,
    scenario: Scenario,
    work_dir: Path | None = None,
    frame_builder: Callable[[SparkSession, Any, Path], DataFrame] | None = None,
    groups: list[list[int]] | None = None,
) -> SparkRun:
    """Runs ``scenario`` as a streaming query and returns every batch Spark ran, data and no-data.

    ``work_dir``: parent for the input and checkpoint directories (a fresh temp dir, removed
    afterwards). ``frame_builder``: builds the query instead of :func:`build_query_frame` (the join
    scenarios pass theirs; the scenario only needs ``seed``, ``step_count``, ``step_rows``,
    ``output_mode`` and ``policy``). ``groups``: :func:`feed_steps`'s (the frame must then read one file
    per trigger). Raises RuntimeError if Spark runs more than one data batch for a step or if a batch's
    progress is missing; Spark's own exceptions (StreamingQueryException) propagate.
    """
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix=f"diff-{scenario.seed}-", dir=work_dir))
    try:
        input_dir = base / "input"
        input_dir.mkdir()
        frame = (frame_builder or build_query_frame)(spark, scenario, input_dir)
        collected: dict[int, list[EmittedRow]] = {}

        def sink(batch_df: DataFrame, batch_id: int) -> None:
            # Exactly one action per batch: a second one would double the state metrics.
            collected[batch_id] = [tuple(row) for row in batch_df.collect()]

        apply_session_confs(spark, scenario.policy)
        query = (
            frame.writeStream.outputMode(scenario.output_mode)
            .foreachBatch(sink)
            .option("checkpointLocation", str(base / "checkpoint"))
            .queryName(f"diff_{scenario.seed}")
            .start()
        )
        step_of_batch, progress = feed_steps(query, input_dir, scenario, collected, groups=groups)
        run = SparkRun(scenario_seed=scenario.seed)
        run.batches = assemble(collected, step_of_batch, progress)
        check_one_batch_per_step(run, scenario)
        run.seconds = time.perf_counter() - started
        return run
    finally:
        shutil.rmtree(base, ignore_errors=True)


def apply_session_confs(spark: SparkSession, policy: str) -> None:
    """Sets the runtime SQL confs every differential query runs with (per query, in case another test
    module created the session: ``getOrCreate`` then returns it with that module's settings)."""
    spark.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    spark.conf.set("spark.sql.streaming.multipleWatermarkPolicy", policy)


def assemble(
    collected: dict[int, list[EmittedRow]],
    step_of_batch: dict[int, int | None],
    progress: list[Any],
) -> list[SparkBatch]:
    """The recorded batches from the sink's rows, the step map and the progress list (of one or
    more query runs on the same checkpoint). Raises RuntimeError for a batch without progress."""
    by_batch: dict[int, Any] = {}
    for item in progress:
        # Idle progress events repeat a batch id without running it; they lack durationMs.addBatch.
        if "addBatch" in (item.durationMs or {}):
            by_batch[item.batchId] = item
    batches = []
    for batch_id in sorted(collected):
        item = by_batch.get(batch_id)
        if item is None:
            raise RuntimeError(f"no progress recorded for batch {batch_id}")
        event_time = item.eventTime or {}
        watermark = event_time.get("watermark")
        operators = list(item.stateOperators or [])
        if len(operators) > 1:
            raise RuntimeError(f"batch {batch_id}: expected one stateful operator, got {len(operators)}")
        op = operators[0] if operators else None
        batches.append(
            SparkBatch(
                batch_id=batch_id,
                data_step=step_of_batch.get(batch_id),
                watermark_ms=None if watermark is None else watermark_iso_to_ms(watermark),
                num_input_rows=int(item.numInputRows),
                emitted=tuple(sorted(collected[batch_id], key=_sort_key)),
                state_operator=None if op is None else op.operatorName,
                state_rows_total=None if op is None else int(op.numRowsTotal),
                state_rows_updated=None if op is None else int(op.numRowsUpdated),
                state_rows_removed=None if op is None else int(op.numRowsRemoved),
                rows_dropped_by_watermark=None if op is None else int(op.numRowsDroppedByWatermark),
                event_time_min_ms=_opt_ms(event_time.get("min")),
                event_time_max_ms=_opt_ms(event_time.get("max")),
                event_time_avg_ms=_opt_ms(event_time.get("avg")),
            )
        )
    return batches


def _opt_ms(text: str | None) -> int | None:
    return None if text is None else watermark_iso_to_ms(text)


def _sort_key(row: EmittedRow) -> tuple[Any, ...]:
    """Sorts rows with None before any value in each column."""
    return tuple((value is not None, value) for value in row)


def check_one_batch_per_step(run: SparkRun, scenario: Scenario) -> None:
    """Raises RuntimeError unless each step was read by exactly one data batch, with all its rows."""
    steps = [b.data_step for b in run.batches if b.data_step is not None]
    if steps != list(range(scenario.step_count)):
        raise RuntimeError(f"seed {scenario.seed}: data batches map to steps {steps}")
    for batch in run.batches:
        expected_rows = len(scenario.step_rows(batch.data_step)) if batch.data_step is not None else 0
        if batch.num_input_rows != expected_rows:
            raise RuntimeError(
                f"seed {scenario.seed}: batch {batch.batch_id} read {batch.num_input_rows} rows, "
                f"expected {expected_rows}"
            )


def format_batches(batches: list[SparkBatch], render_row: Callable[[EmittedRow], str] | None = None) -> str:
    """One line per batch (for logs and failure messages)."""
    show = render_row or repr
    lines = []
    for b in batches:
        wm = "-" if b.watermark_ms is None else _ms_iso(b.watermark_ms)
        lines.append(
            f"batch {b.batch_id} step={b.data_step} wm={wm} in={b.num_input_rows} "
            f"state={b.state_rows_total} removed={b.state_rows_removed} "
            f"dropped={b.rows_dropped_by_watermark} "
            f"emitted=[{', '.join(show(r) for r in b.emitted)}]"
        )
    return "\n".join(lines)


def _ms_iso(ms: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
