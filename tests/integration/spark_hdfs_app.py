"""A PySpark streaming query that writes its event log to HDFS and runs until told to stop.

Used by ``test_eventlog_hdfs.py`` as a subprocess:
``python spark_hdfs_app.py EVENT_LOG_DIR CHECKPOINT STOP_FILE ROLLING`` where ``EVENT_LOG_DIR`` is an
``hdfs://127.0.0.1:PORT/...`` URL (``spark.eventLog.dir``). The event log is zstd-compressed; with ``ROLLING``
``false`` it is one file (``<app>.zstd.inprogress`` while the query runs, renamed to ``<app>.zstd`` by
``spark.stop()``), with ``true`` (Spark 4's default) a directory ``eventlog_v2_<app>/`` whose
``events_1_<app>.zstd`` grows while ``appstatus_<app>.inprogress`` says the application runs. Either way a
reader tails a growing compressed file over HDFS.

The query: ``rate`` source (5 rows/s) -> ``withWatermark("timestamp", "10 seconds")`` ->
``groupBy(window("timestamp", "5 seconds")).count()`` -> ``noop`` sink, one micro-batch a second
(``processingTime``). Prints ``{"app_id": ...}`` once the query has started, then polls for ``STOP_FILE``;
when it appears the query is stopped and the session closed (which renames the event log).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(event_log_dir: str, checkpoint: str, stop_file: Path, rolling: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("tidegauge-hdfs-live")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", event_log_dir)
        .config("spark.eventLog.rolling.enabled", rolling)
        .config("spark.eventLog.compress", "true")
        .config("spark.eventLog.compression.codec", "zstd")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .withWatermark("timestamp", "10 seconds")
        .groupBy(F.window("timestamp", "5 seconds"))
        .count()
    )
    query = (
        df.writeStream.format("noop")
        .outputMode("append")
        .queryName("hdfs_live")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    print(json.dumps({"app_id": spark.sparkContext.applicationId}), flush=True)
    while not stop_file.exists():
        time.sleep(0.2)
    query.stop()
    spark.stop()
    print(json.dumps({"stopped": True}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4])
