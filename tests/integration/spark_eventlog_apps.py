"""Run a few tiny PySpark streaming apps sequentially, each writing an event log with one codec.

Used by ``test_eventlog_spark.py`` as ONE subprocess (one JVM) so the JVM start is paid once:
``python spark_eventlog_apps.py OUT_DIR codec:rolling [codec:rolling ...]`` where ``codec`` is one of
``none, zstd, lz4, snappy, lzf`` and ``rolling`` is ``0``/``1``. For each app it writes the event log under
``OUT_DIR/<codec>-<rolling>/`` and prints one JSON line ``{"label", "app_id", "seconds"}``.

The query is the fixture's query in miniature: JSON file source -> withWatermark("event_time", "10 minutes")
-> groupBy(window(event_time, "5 minutes")).count() -> append to a noop sink, trigger availableNow, fed
with one file of 4 rows whose latest event time is 2024-01-01T12:07:00Z, so the batch's eventTime.max is
that value and its watermark is the epoch (first batch), followed by a no-data batch whose watermark is
12:07 - 10 min = 11:57.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROWS = [
    {"event_time": "2024-01-01T12:00:00Z", "k": "a"},
    {"event_time": "2024-01-01T12:03:00Z", "k": "b"},
    {"event_time": "2024-01-01T12:07:00Z", "k": "a"},
    {"event_time": "2024-01-01T12:01:00Z", "k": "c"},
]


def main(out_dir: Path, specs: list[str]) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    input_dir = out_dir / "input"
    input_dir.mkdir(parents=True, exist_ok=True)
    (input_dir / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    for spec in specs:
        codec, rolling = spec.split(":")
        label = f"{codec}-{rolling}"
        log_dir = out_dir / label
        log_dir.mkdir()
        started = time.monotonic()
        builder = (
            SparkSession.builder.master("local[1]")
            .appName(f"tidegauge-eventlog-{label}")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.eventLog.enabled", "true")
            .config("spark.eventLog.dir", log_dir.as_uri())
            .config("spark.eventLog.rolling.enabled", "true" if rolling == "1" else "false")
        )
        if codec == "none":
            builder = builder.config("spark.eventLog.compress", "false")
        else:
            builder = builder.config("spark.eventLog.compress", "true").config(
                "spark.eventLog.compression.codec", codec
            )
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        app_id = spark.sparkContext.applicationId
        df = (
            spark.readStream.schema("event_time timestamp, k string")
            .json(str(input_dir))
            .withWatermark("event_time", "10 minutes")
            .groupBy(F.window("event_time", "5 minutes"))
            .count()
        )
        query = (
            df.writeStream.format("noop")
            .outputMode("append")
            .queryName(f"q_{codec}_{rolling}")
            .option("checkpointLocation", str(out_dir / f"ckpt-{label}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        spark.stop()
        print(json.dumps({"label": label, "app_id": app_id, "seconds": round(time.monotonic() - started, 2)}))
        sys.stdout.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
