"""A PySpark driver for ``test_spark_end_to_end.py``: one Structured Streaming query, event log on, and the
:class:`collectors.spark.listener.TidegaugeListener` pushing to a live ingest endpoint.

``python spark_listener_app.py OUT_DIR INGEST_URL`` (token in ``TIDEGAUGE_INGEST_TOKEN``). Runs in its own
process, like a real driver. Writes the event log under ``OUT_DIR/eventlog`` and prints one JSON line::

    {"app_id", "query_id", "files": {"honest": batch, "future": batch, "late": batch},
     "progress": [{"batchId", "numInputRows", "eventTimeMax", "watermark"}...],
     "listener": {"sent", "failed", "dropped", "queued"}, "seconds": {...}}

``files`` maps each input file to the batch that read it, and ``progress`` is Spark's own
``query.recentProgress``: the test takes its expected values from there, not from tidegauge's parsers.

The query is the fixture's query in small: JSON file source -> ``withWatermark("event_time", "10 minutes")``
-> ``groupBy(window("event_time", "5 minutes")).count()`` -> append to the ``noop`` sink, default trigger.
Inputs, each dropped in atomically (written beside, then renamed) and processed with
``processAllAvailable()``:

1. ``honest``: four rows on 2024-01-01 between 12:00 and 12:07;
2. ``future``: two honest rows (12:10, 12:12) and one dated 2099-01-01T00:00:00Z: the watermark jumps to
   2098-12-31T23:50 after this batch;
3. ``late``: two honest rows (12:15, 12:20) that are now far behind the watermark and are dropped.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

FILES: list[tuple[str, list[dict[str, str]]]] = [
    (
        "honest",
        [
            {"event_time": "2024-01-01T12:00:00Z", "k": "a"},
            {"event_time": "2024-01-01T12:03:00Z", "k": "b"},
            {"event_time": "2024-01-01T12:07:00Z", "k": "a"},
            {"event_time": "2024-01-01T12:01:00Z", "k": "c"},
        ],
    ),
    (
        "future",
        [
            {"event_time": "2024-01-01T12:10:00Z", "k": "a"},
            {"event_time": "2099-01-01T00:00:00Z", "k": "x"},
            {"event_time": "2024-01-01T12:12:00Z", "k": "b"},
        ],
    ),
    (
        "late",
        [
            {"event_time": "2024-01-01T12:15:00Z", "k": "a"},
            {"event_time": "2024-01-01T12:20:00Z", "k": "c"},
        ],
    ),
]


def main(out_dir: Path, ingest_url: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.listener import QueryTerminatedEvent

    from collectors.spark.listener import TidegaugeListener

    class _Listener(TidegaugeListener):
        """Lets the driver wait until Spark delivered the terminated event (delivery is asynchronous)."""

        terminated = threading.Event()

        def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
            super().onQueryTerminated(event)
            self.terminated.set()

    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    input_dir = out_dir / "input"
    staging = out_dir / "staging"
    log_dir = out_dir / "eventlog"
    for d in (input_dir, staging, log_dir):
        d.mkdir(parents=True, exist_ok=True)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tidegauge-end-to-end")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", log_dir.as_uri())
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    seconds["spark_start"] = round(time.monotonic() - t0, 2)
    app_id = spark.sparkContext.applicationId
    listener = _Listener(ingest_url, os.environ["TIDEGAUGE_INGEST_TOKEN"], app_id=app_id, flush_at_exit_s=None)
    spark.streams.addListener(listener)

    counts = (
        spark.readStream.schema("event_time timestamp, k string")
        .json(str(input_dir))
        .withWatermark("event_time", "10 minutes")
        .groupBy(F.window("event_time", "5 minutes"))
        .count()
    )
    query = (
        counts.writeStream.format("noop")
        .outputMode("append")
        .queryName("e2e_wm")
        .option("checkpointLocation", str(out_dir / "checkpoint"))
        .start()
    )
    t1 = time.monotonic()
    files: dict[str, int] = {}
    for label, rows in FILES:
        tmp = staging / f"{label}.json"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.rename(input_dir / f"{label}.json")
        query.processAllAvailable()
        reading = [p for p in query.recentProgress if p.numInputRows == len(rows)]
        files[label] = reading[-1].batchId
    progress: list[dict[str, Any]] = [
        {
            "batchId": p.batchId,
            "numInputRows": p.numInputRows,
            "eventTimeMax": p.eventTime.get("max"),
            "watermark": p.eventTime.get("watermark"),
        }
        for p in query.recentProgress
    ]
    query_id = str(query.id)
    query.stop()
    seconds["query"] = round(time.monotonic() - t1, 2)
    delivered = listener.terminated.wait(30)
    listener.close(flush_timeout_s=15)
    spark.stop()
    seconds["total"] = round(time.monotonic() - t0, 2)
    report = {
        "app_id": app_id,
        "query_id": query_id,
        "files": files,
        "progress": progress,
        "terminated_delivered": delivered,
        "listener": listener.stats(),
        "seconds": seconds,
    }
    print(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
