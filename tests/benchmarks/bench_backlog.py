"""Measurement (not a test): rows dropped on 200k events, ``tidegauge whatif``'s no-data-batch readings vs real
PySpark replaying the same backlog one file per trigger (issue 17, "no-data batches follow from the data's
arrival").

Workload: :func:`tests.benchmarks.bench_engine.make_events` (200,000 events at 1000/s of event time, lag
exponential with mean 2 s, 1% up to 10 min late), cut into batches by a 10 s processing-time trigger over
their arrival times; tumbling 1-minute windows, append, delay 10 s. One sentinel row a day after the last
event forms the last batch, so that every window closes and Spark's emitted counts account for every row
(rows dropped = rows read - rows counted in emitted windows; the sentinel is left out).

* ``tidegauge whatif`` on a CSV with ``event_time`` (epoch us) and ``batch``: by default (no arrival_time:
  the caught-up assumption, a no-data batch after every batch that moved the watermark), with ``--backlog``,
  and with ``--no-no-data-batches``; and on the same CSV with ``arrival_time`` = 0 for every row (all data
  there at the start: the arrival times decide, a backlog).
* PySpark 4.3.0 (``local[2]``): one JSON file per batch, all written before the query starts,
  ``maxFilesPerTrigger=1``, the default trigger, ``processAllAvailable()``; dropped rows from the
  ``foreachBatch`` output; batches and no-data batches from the progress.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.benchmarks.bench_backlog [--events 200000] [--no-spark]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from monitor.watermark import Tumbling, WatermarkConfig, plan_batches
from tests.benchmarks.bench_engine import make_events

DELAY = "10s"
SENTINEL_AFTER_US = 86_400_000_000


def write_inputs(n: int, work: Path) -> tuple[Path, Path, Path, int]:
    """The CSV without and with arrival times, the directory of per-batch JSON files, and the row count
    (sentinel excluded)."""
    events = make_events(n)
    plan = plan_batches(events, WatermarkConfig(delay_ms=0, window=Tumbling(60_000), trigger_ms=10_000))
    et = events.event_time_us
    batch_of = np.zeros(len(events), dtype=np.int64)
    for j in range(len(plan)):
        batch_of[plan.rows(j)] = j
    sentinel = int(et.max()) + SENTINEL_AFTER_US
    rows = [(int(et[i]), int(batch_of[i])) for i in plan.order.tolist()] + [(sentinel, len(plan))]
    plain, arrived, files = work / "events.csv", work / "events_arrival.csv", work / "files"
    files.mkdir()
    with plain.open("w") as a, arrived.open("w") as b:
        a.write("event_time,batch\n")
        b.write("event_time,batch,arrival_time\n")
        for t, j in rows:
            a.write(f"{t},{j}\n")
            b.write(f"{t},{j},0\n")
    start = time.time() - len(plan) - 10
    by_batch: dict[int, list[int]] = {}
    for t, j in rows:
        by_batch.setdefault(j, []).append(t)
    for j, times in sorted(by_batch.items()):
        path = files / f"b{j:05d}.json"
        path.write_text("".join(json.dumps({"event_time": t / 1e6}) + "\n" for t in times))
        os.utime(path, (start + j, start + j))  # the file source reads files in modification-time order
    return plain, arrived, files, n


def whatif(path: Path, *flags: str) -> dict[str, int]:
    """``tidegauge whatif`` in a subprocess: dropped rows, batches, no-data batches and seconds."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "whatif", str(path), "--time-unit", "us", "--delay", DELAY,
         "--window", "1m", "--format", "json", "--show-late", "0", *flags],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    s = json.loads(out)["summary"]
    return {"dropped": s["dropped_rows"], "batches": s["batches"], "no_data": s["no_data_batches"],
            "ms": round((time.perf_counter() - t0) * 1000)}  # fmt: skip


def spark(files: Path, n: int, work: Path) -> dict[str, int]:
    """Real PySpark on the backlog: rows dropped, batches, no-data batches, seconds."""
    from pyspark.sql import functions as F

    from tests.differential.spark_runner import get_spark_session

    session = get_spark_session()
    counted: list[int] = []

    def sink(df: object, _batch_id: int) -> None:
        counted.extend(int(r["count"]) for r in df.collect())  # type: ignore[attr-defined]

    frame = (
        session.readStream.schema("event_time DOUBLE").option("maxFilesPerTrigger", 1).json(str(files))
        .select(F.col("event_time").cast("timestamp").alias("event_time"))
        .withWatermark("event_time", "10 seconds").groupBy(F.window("event_time", "1 minute")).count()
    )  # fmt: skip
    t0 = time.perf_counter()
    query = (
        frame.writeStream.outputMode("append").foreachBatch(sink)
        .option("checkpointLocation", str(work / "ck")).start()
    )  # fmt: skip
    query.processAllAvailable()
    progress = [p for p in query.recentProgress if "addBatch" in (p.durationMs or {})]
    query.stop()
    seconds = time.perf_counter() - t0
    return {"dropped": n - sum(counted), "batches": len(progress),
            "no_data": sum(1 for p in progress if int(p.numInputRows) == 0), "ms": round(seconds * 1000)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_backlog_") as tmp:
        work = Path(tmp)
        plain, arrived, files, n = write_inputs(args.events, work)
        rows = {
            "whatif (no arrival_time: caught-up assumption, the default)": whatif(plain),
            "whatif --backlog": whatif(plain, "--backlog"),
            "whatif --no-no-data-batches": whatif(plain, "--no-no-data-batches"),
            "whatif with arrival_time (all rows there at the start)": whatif(arrived),
        }
        if not args.no_spark:
            rows["PySpark 4.3.0, backlog, maxFilesPerTrigger=1"] = spark(files, n, work)
        print(f"{n:,} events; tumbling 1m, append, delay {DELAY}; batches from a 10 s trigger (+1 sentinel batch)")
        print(f"{'run':<64} {'dropped':>8} {'batches':>8} {'no-data':>8} {'ms':>8}")
        for name, r in rows.items():
            print(f"{name:<64} {r['dropped']:>8} {r['batches']:>8} {r['no_data']:>8} {r['ms']:>8}")


if __name__ == "__main__":
    main()
