"""A PySpark driver for ``test_kafka_spark_end_to_end.py``: one Structured Streaming query reading the test
broker through Spark's Kafka source, throttled so it falls behind a fast producer.

``python spark_kafka_app.py BOOTSTRAP TOPIC OUT_DIR JARS [EVENT_TIME_FIELD]`` (``JARS``: comma-separated
``spark.jars``). With ``EVENT_TIME_FIELD`` (``test_kafka_culprit_spark.py``) the record values are JSON
objects whose field of that name is the event time (``from_json``, ``TIMESTAMP``), with a 10 s watermark and a
1-minute windowed count (append mode), so the progress reports ``eventTime`` (max, watermark). Runs in
its own process, like a real driver: ``readStream.format("kafka")`` with ``maxOffsetsPerTrigger`` 25 and a
500 ms processing-time trigger (so at most ~50 records/s), ``startingOffsets`` earliest, to the ``noop``
sink, checkpoint under ``OUT_DIR``. Each new ``query.lastProgress`` is appended as one JSON line to
``OUT_DIR/progress.jsonl`` (written beside and renamed, so a reader never sees half a line). Stops when
``OUT_DIR/stop`` appears; writes ``OUT_DIR/started`` when the query runs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> None:
    bootstrap, topic, out, jars = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    event_time_field = sys.argv[5] if len(sys.argv) > 5 else None
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tidegauge-kafka-e2e")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "25")
        .option("fetchOffset.retryIntervalMs", "100")
        .load()
    )
    if event_time_field is not None:
        df = (
            df.select(F.from_json(F.col("value").cast("string"), f"{event_time_field} TIMESTAMP").alias("v"))
            .select(F.col(f"v.{event_time_field}").alias("event_time"))
            .withWatermark("event_time", "10 seconds")
            .groupBy(F.window("event_time", "1 minute"))
            .count()
        )
    query = (
        df.writeStream.format("noop")
        .outputMode("append")
        .queryName("orders_e2e")
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    (out / "started").write_text(json.dumps({"id": str(query.id), "run_id": str(query.runId)}))
    lines: list[str] = []
    last_batch = None
    while not (out / "stop").exists():
        progress = query.lastProgress  # PySpark 4: a StreamingQueryProgress; its `json` is Spark's own text
        if progress is not None and progress["batchId"] != last_batch:
            last_batch = progress["batchId"]
            as_json = getattr(progress, "json", None)
            text = as_json if isinstance(as_json, str) else as_json() if callable(as_json) else json.dumps(progress)
            lines.append(" ".join(text.split()))
            tmp = out / "progress.jsonl.tmp"
            tmp.write_text("\n".join(lines) + "\n")
            tmp.replace(out / "progress.jsonl")
        if query.exception() is not None:
            (out / "failed").write_text(str(query.exception()))
            break
        time.sleep(0.1)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
