"""A PySpark driver for ``test_pipeline_chain.py``: two Structured Streaming queries chained through Kafka.

``python spark_pipeline_app.py BOOTSTRAP IN MID OUT OUT_DIR JARS`` (``JARS``: comma-separated ``spark.jars``).
Runs in its own process, like a real driver:

* query ``chain_a`` reads topic ``IN`` (JSON values ``{"ts": ISO time, "n": int}``), sets a watermark on
  ``ts`` (0 s delay), passes each row through a Python UDF and writes the same JSON to topic ``MID``;
* query ``chain_b`` reads ``MID`` the same way and writes topic ``OUT``.

The event time (``ts``) thus travels from ``IN`` to ``OUT`` unchanged, as in a real pipeline. While the file
``OUT_DIR/stall`` exists the UDF of ``chain_a`` blocks (a stuck task: the query reports nothing more, as a
hung executor or a slow external call would do), so ``chain_b`` sees no new data.

A ``StreamingQueryListener`` appends every progress and idle event as one line of Spark's event-log JSON
(``{"Event": "...QueryProgressEvent", "progress": {...}}``) to ``OUT_DIR/events.jsonl`` (Spark 4 posts a
``QueryIdleEvent`` every ``noDataProgressEventInterval``, set to 1 s, while a query has no new data). Writes
``OUT_DIR/started`` when both queries run; stops when ``OUT_DIR/stop`` appears.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

PROGRESS = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
IDLE = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent"


def main() -> None:
    bootstrap, topic_in, topic_mid, topic_out, out, jars = sys.argv[1:7]
    out_dir = Path(out)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    spark = (
        SparkSession.builder.master("local[3]")
        .appName("tidegauge-pipeline-chain")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.noDataProgressEventInterval", "1000")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    lock = threading.Lock()
    events = out_dir / "events.jsonl"

    def write(line: dict[str, Any]) -> None:
        with lock, events.open("a") as f:
            f.write(json.dumps(line) + "\n")

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            write({"Event": PROGRESS, "progress": json.loads(event.progress.json)})

        def onQueryIdle(self, event: Any) -> None:
            write({"Event": IDLE, "id": str(event.id), "runId": str(event.runId), "timestamp": event.timestamp})

        def onQueryTerminated(self, event: Any) -> None:
            pass

    spark.streams.addListener(Listener())
    schema = StructType([StructField("ts", TimestampType()), StructField("n", LongType())])
    stall = str(out_dir / "stall")

    def gate(n: int) -> int:
        import os
        import time as t

        while os.path.exists(stall):
            t.sleep(0.2)
        return n

    gate_udf = F.udf(gate, LongType())

    def chain(name: str, source: str, sink: str, gated: bool) -> Any:
        rows = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select(F.from_json(F.col("value").cast(StringType()), schema).alias("v"))
            .select("v.ts", "v.n")
            .withWatermark("ts", "0 seconds")
        )
        if gated:
            rows = rows.withColumn("n", gate_udf(F.col("n")))
        return (
            rows.select(F.to_json(F.struct("ts", "n")).alias("value"))
            .writeStream.format("kafka")
            .queryName(name)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", str(out_dir / f"checkpoint-{name}"))
            .trigger(processingTime="1 second")
            .start()
        )

    a = chain("chain_a", topic_in, topic_mid, gated=True)
    b = chain("chain_b", topic_mid, topic_out, gated=False)
    (out_dir / "started").write_text(json.dumps({"a": str(a.id), "b": str(b.id)}))
    while not (out_dir / "stop").exists():
        for q in (a, b):
            if q.exception() is not None:
                (out_dir / "failed").write_text(str(q.exception()))
                return
        time.sleep(0.2)
    for q in (a, b):
        q.stop()
    spark.stop()


if __name__ == "__main__":
    main()
