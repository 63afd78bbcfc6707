"""Records what real Spark does with epoch numbers read in the wrong unit and with extreme numbers.

``python -m tests.differential.record_epoch_units OUT_DIR`` runs two streaming queries on the shared
local SparkSession of :mod:`tests.differential.spark_runner` and writes what Spark did to ``OUT_DIR``
(the recording kept in ``tests/fixtures/spark/epoch-units-4.3.0/``; see its PROVENANCE.md):

1. **ms read as seconds.** A JSON file source with ``event_time TIMESTAMP``: Spark's JSON reader takes a
   JSON integer for a timestamp column as epoch **seconds**. The rows are epoch seconds except one that
   a producer wrote in milliseconds (year 57,971 once read as seconds). Query:
   ``withWatermark("event_time", "1 minute").groupBy(window("event_time", "1 minute")).count()`` in
   append mode, ``foreachBatch`` collecting each batch (one action). Fed one file per step with
   ``processAllAvailable()`` after each, as the differential harness does. Written: ``events.csv`` (the
   rows with their step as ``batch``, what a user gives ``tidegauge whatif --time-unit s``),
   ``progress.jsonl`` (each executed batch's ``StreamingQueryProgress.json``), ``emitted.json`` (the
   rows each batch's sink received, window bounds as ``unix_micros``).
2. **Extreme numbers.** A stateless ``select`` of ``unix_micros(event_time)`` over JSON lines whose
   ``event_time`` is ``1e300``, a 20-digit integer, ``"+inf"``, epoch microseconds (read as seconds)
   and a good value; written to ``extremes.json`` (input line -> what the sink received, ``null`` for a
   null event time).

Emitted times are converted with ``unix_micros`` inside Spark: a Python ``datetime`` cannot hold year
57,971, so collecting the timestamp itself would fail on the driver.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

#: 2026-01-01T00:00:00Z in epoch seconds.
BASE_S = 1_767_225_600

#: Steps of the first query: epoch seconds, except the millisecond value in step 1.
STEPS: tuple[tuple[int, ...], ...] = (
    (BASE_S, BASE_S + 10, BASE_S + 30),
    (BASE_S + 65, (BASE_S + 70) * 1000, BASE_S + 80),
    (BASE_S + 90, BASE_S + 100, BASE_S + 125),
    (BASE_S + 160, BASE_S + 190),
)

#: Lines of the second query's single input file.
EXTREME_LINES: tuple[str, ...] = (
    '{"event_time": 1e300}',
    '{"event_time": 99999999999999999999}',
    '{"event_time": "+inf"}',
    f'{{"event_time": {BASE_S * 1_000_000}}}',
    f'{{"event_time": {BASE_S}}}',
)


def _drive(spark: Any, frame: Any, input_dir: Path, files: list[list[str]], name: str, base: Path) -> Any:
    collected: dict[int, list[tuple[Any, ...]]] = {}

    def sink(batch_df: Any, batch_id: int) -> None:
        collected[batch_id] = [tuple(row) for row in batch_df.collect()]

    query = (
        frame.writeStream.outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", str(base / f"checkpoint-{name}"))
        .queryName(name)
        .start()
    )
    try:
        for step, lines in enumerate(files):
            temp = input_dir / f".step{step:03d}.tmp"
            temp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            temp.rename(input_dir / f"step{step:03d}.json")
            query.processAllAvailable()
        progress = [json.loads(p.json) for p in query.recentProgress if "addBatch" in (p.durationMs or {})]
        exception = query.exception()
    finally:
        query.stop()
    return collected, progress, None if exception is None else str(exception)


def record(out_dir: Path) -> None:
    """Run both queries and write the recording into ``out_dir`` (created if missing)."""
    from pyspark.sql import functions as F

    from tests.differential.spark_runner import get_spark_session

    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        spark = get_spark_session()
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    out_dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="epoch-units-"))
    try:
        in1 = base / "in1"
        in1.mkdir()
        source = spark.readStream.schema("event_time TIMESTAMP").json(str(in1))
        counted = (
            source.withWatermark("event_time", "1 minute")
            .groupBy(F.window("event_time", "1 minute").alias("window"))
            .count()
            .select(
                F.unix_micros(F.col("window.start")).alias("start_us"),
                F.unix_micros(F.col("window.end")).alias("end_us"),
                F.col("count"),
            )
        )
        files = [[json.dumps({"event_time": t}) for t in step] for step in STEPS]
        collected, progress, exception = _drive(spark, counted, in1, files, "epoch_units", base)
        with (out_dir / "events.csv").open("w", encoding="utf-8") as fh:
            fh.write("event_time,batch\n")
            for step, values in enumerate(STEPS):
                for t in values:
                    fh.write(f"{t},{step}\n")
        with (out_dir / "progress.jsonl").open("w", encoding="utf-8") as fh:
            for item in progress:
                fh.write(json.dumps(item, sort_keys=True) + "\n")
        emitted = {str(k): sorted(v) for k, v in sorted(collected.items())}
        (out_dir / "emitted.json").write_text(
            json.dumps({"emitted": emitted, "query_exception": exception}, indent=1) + "\n", encoding="utf-8"
        )

        in2 = base / "in2"
        in2.mkdir()
        raw = spark.readStream.schema("event_time TIMESTAMP").json(str(in2))
        micros = raw.select(F.unix_micros("event_time").alias("event_time_us"))
        got, _, exc2 = _drive(spark, micros, in2, [list(EXTREME_LINES)], "epoch_extremes", base)
        rows = [r[0] for b in sorted(got) for r in got[b]]
        (out_dir / "extremes.json").write_text(
            json.dumps(
                {"input_lines": list(EXTREME_LINES), "sink_event_time_us": rows, "query_exception": exc2},
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    record(Path(sys.argv[1]))
