"""The reference engine against a real PySpark run of the same stream (tumbling window, append).

PySpark local[1], JSON file source (one file per batch, ``processAllAvailable()`` after each),
``withWatermark("event_time", "10 seconds")`` -> ``groupBy(window(event_time, "5 seconds")).count()``,
``foreachBatch`` sink. The stream has an out-of-order row, late rows and a null event time. Every
batch's progress (batch id, watermark, input rows, state rows, dropped metric, eventTime stats) and
sink output must equal the engine's. The broad randomized comparison lives in the differential tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor.watermark import EventsTable, Tumbling, WatermarkConfig, replay

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

BATCHES: list[list[int | None]] = [[100], [101, 83, None], [84, 120, 107]]


def _ts(s: int | None) -> str | None:
    return None if s is None else f"1970-01-01T00:{s // 60:02d}:{s % 60:02d}Z"


def _iso_to_ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _run_spark(tmp: Path) -> tuple[list[dict[str, Any]], dict[int, list[tuple[int, int, int]]]]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
    spark.sparkContext.setLogLevel("ERROR")
    src = tmp / "in"
    src.mkdir()
    out: dict[int, list[tuple[int, int, int]]] = {}

    def sink(df: Any, batch_id: int) -> None:
        out[batch_id] = sorted(
            (
                int(r["window"]["start"].timestamp() * 1000),
                int(r["window"]["end"].timestamp() * 1000),
                r["count"],
            )
            for r in df.collect()
        )

    agg = (
        spark.readStream.schema("event_time TIMESTAMP")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .withWatermark("event_time", "10 seconds")
        .groupBy(F.window("event_time", "5 seconds"))
        .count()
    )
    q = (
        agg.writeStream.outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", str(tmp / "ck"))
        .start()
    )
    try:
        for i, rows in enumerate(BATCHES):
            (src / f"f{i:03d}.json").write_text(
                "".join(json.dumps({"event_time": _ts(s)}) + "\n" for s in rows), encoding="utf-8"
            )
            q.processAllAvailable()
        progress = [json.loads(p.json) for p in q.recentProgress]
    finally:
        q.stop()
        spark.stop()
    return progress, out


def test_engine_matches_pyspark_batch_by_batch(tmp_path: Path) -> None:
    progress, sink = _run_spark(tmp_path)
    events = EventsTable.from_records(
        {"event_time": None if s is None else s * 1_000_000, "batch": i}
        for i, b in enumerate(BATCHES)
        for s in b
    )
    result = replay(events, WatermarkConfig(delay_ms=10_000, window=Tumbling(5_000)))
    spark_view = []
    for p in progress:
        op = p["stateOperators"][0]
        et = p.get("eventTime", {})
        spark_view.append(
            (
                p["batchId"],
                _iso_to_ms(et["watermark"]),
                p["numInputRows"],
                op["numRowsTotal"],
                op["numRowsRemoved"],
                op["numRowsDroppedByWatermark"],
                _iso_to_ms(et["min"]) if "min" in et else None,
                _iso_to_ms(et["avg"]) if "avg" in et else None,
                sink.get(p["batchId"], []),
            )
        )
    engine_view = [
        (
            b.batch_id,
            b.watermark_ms,
            b.input_rows,
            b.state_rows,
            b.state_rows_removed,
            b.dropped_by_watermark_metric,
            None if b.event_time is None else b.event_time.min_ms,
            None if b.event_time is None else b.event_time.avg_ms,
            [(w.start_ms, w.end_ms, w.count) for w in b.emitted.to_list()],
        )
        for b in result.batches
    ]
    assert engine_view == spark_view
