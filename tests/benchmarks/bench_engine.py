"""Benchmark: replay speed of the reference watermark engine (not a test; prints a table).

Usage::

    PYTHONPATH=. python tests/benchmarks/bench_engine.py                 # 1M and 10M events
    PYTHONPATH=. python tests/benchmarks/bench_engine.py --sizes 1000000 --spark

Workload: ``n`` events at 1000 events/s of event time; arrival = event time + a lag (exponential,
mean 2 s; 1% of rows 0-10 min late); processing-time trigger 10 s; tumbling 1-minute windows,
append mode, min policy, one input. Ten delays are swept over one batch plan. Reports events per
second per delay on one core (the process is single-threaded), plus the load+plan time.

``--spark`` also runs the same what-if in real PySpark on the first size (one JSON file per planned
batch, ``maxFilesPerTrigger=1``, ``Trigger.AvailableNow``, ``local[1]``) for one delay and prints
the ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from monitor.watermark import EventsTable, Tumbling, WatermarkConfig, plan_batches, replay

DELAYS_MS = [0, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000]
BASE_MS = 1_790_000_000_000  # 2026-09-21


def make_events(n: int, seed: int = 7) -> EventsTable:
    rng = np.random.default_rng(seed)
    event_ms = BASE_MS + np.arange(n, dtype=np.int64)  # 1000 events per second
    lag = rng.exponential(2_000, n).astype(np.int64)
    outliers = rng.random(n) < 0.01
    lag[outliers] = rng.integers(0, 600_000, int(outliers.sum()))
    arrival = event_ms + lag
    event_us = event_ms * 1000 + rng.integers(0, 1000, n)
    return EventsTable.from_columns(event_us, arrival_ms=arrival)


def bench(n: int, config: WatermarkConfig) -> tuple[float, list[tuple[int, float, int, float]]]:
    t0 = time.perf_counter()
    events = make_events(n)
    plan = plan_batches(events, config)
    t_prep = time.perf_counter() - t0
    rows = []
    for d in DELAYS_MS:
        cfg = WatermarkConfig(
            delay_ms=d, window=config.window, trigger_ms=config.trigger_ms, keep_late_rows=False
        )
        t1 = time.perf_counter()
        r = replay(events, cfg, plan=plan)
        dt = time.perf_counter() - t1
        rows.append((d, dt, r.summary.dropped_rows, r.summary.dropped_share))
    return t_prep, rows


def spark_whatif(n: int, config: WatermarkConfig, delay_ms: int) -> tuple[float, int]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    events = make_events(n)
    plan = plan_batches(events, config)
    tmp = Path(tempfile.mkdtemp(prefix="bench_spark_"))
    try:
        src = tmp / "in"
        src.mkdir()
        et = events.event_time_us
        for j in range(len(plan)):
            with (src / f"b{j:06d}.json").open("w") as fh:
                for i in plan.rows(j).tolist():
                    fh.write(json.dumps({"event_time": int(et[i]) / 1e6}) + "\n")
        spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        df = (
            spark.readStream.schema("event_time DOUBLE")
            .option("maxFilesPerTrigger", 1)
            .json(str(src))
            .select(F.col("event_time").cast("timestamp").alias("event_time"))
            .withWatermark("event_time", f"{delay_ms} milliseconds")
            .groupBy(F.window("event_time", "1 minute"))
            .count()
        )
        t0 = time.perf_counter()
        q = (
            df.writeStream.outputMode("append")
            .format("noop")
            .option("checkpointLocation", str(tmp / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        dt = time.perf_counter() - t0
        batches = len(q.recentProgress)
        spark.stop()
        return dt, batches
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--spark", action="store_true", help="also time real PySpark on the first size")
    args = ap.parse_args()
    config = WatermarkConfig(delay_ms=0, window=Tumbling(60_000), trigger_ms=10_000)
    for n in [int(s) for s in args.sizes.split(",")]:
        t_prep, rows = bench(n, config)
        print(f"\n{n:,} events (generate + plan {t_prep:.2f}s); tumbling 1m, trigger 10s, append, min")
        print(f"{'delay':>8} {'seconds':>9} {'events/s':>12} {'dropped':>9} {'share':>8}")
        for d, dt, dropped, share in rows:
            print(f"{d / 1000:>7.0f}s {dt:>9.3f} {n / dt:>12,.0f} {dropped:>9} {share * 100:>7.3f}%")
        total = sum(r[1] for r in rows)
        print(f"10 delays: {total:.2f}s total, {n * len(rows) / total:,.0f} events/s per delay on one core")
    if args.spark:
        n = int(args.sizes.split(",")[0])
        delay = 10_000
        dt_spark, batches = spark_whatif(n, config, delay)
        events = make_events(n)
        t0 = time.perf_counter()
        replay(
            events,
            WatermarkConfig(delay_ms=delay, window=Tumbling(60_000), trigger_ms=10_000, keep_late_rows=False),
        )
        dt_engine = time.perf_counter() - t0
        print(
            f"\nPySpark (local[1], {batches} batches) {dt_spark:.1f}s vs engine {dt_engine:.3f}s "
            f"(incl. planning) for delay {delay / 1000:.0f}s: {dt_spark / dt_engine:,.0f}x"
        )


if __name__ == "__main__":
    main()
