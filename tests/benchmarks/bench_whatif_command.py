"""Benchmark: ``tidegauge whatif`` as a whole command (process start, imports, reading the file, replay,
report) on N events in CSV, JSON lines and Parquet, against the same replay as a PySpark script (issue 17:
at least 20x the script's time).

The events are ``bench_engine.make_events(n)`` (1000 events/s of event time, arrival lag exponential with
mean 2 s, 1% of rows 0-10 min late); the what-if is a 1-minute tumbling window, delay 10 s, trigger 10 s.
Each format is run ``--repeat`` times (``python -m monitor.cli whatif FILE ... --format json``, output
discarded) and the median wall time printed. ``--spark`` also times ``bench_engine.spark_whatif`` (the
same events written one JSON file per planned batch, read with ``maxFilesPerTrigger=1`` under
``Trigger.AvailableNow`` in ``local[1]``) as a whole command too (``python -c ...``: JVM start included),
once, and prints each format's ratio to it.

Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_whatif_command [--events 200000] [--repeat 3]
[--spark]``. Not a test: it prints figures for the note.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tests.benchmarks.bench_engine import make_events

WHATIF = ["--delay", "10s", "--window", "1m", "--trigger", "10s", "--format", "json"]


def write_files(n: int, folder: Path) -> dict[str, Path]:
    """The events of ``make_events(n)`` as ``events.csv``, ``events.jsonl`` (ISO-8601 times) and
    ``events.parquet`` (timestamp columns) in ``folder``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    events = make_events(n)
    et_us = events.event_time_us.tolist()
    arrival_ms = events.arrival_ms.tolist() if events.arrival_ms is not None else et_us

    def iso_us(us: int) -> str:
        return datetime.fromtimestamp(us / 1e6, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")

    rows = [(iso_us(e), iso_us(a * 1000)) for e, a in zip(et_us, arrival_ms, strict=True)]
    paths = {"csv": folder / "events.csv", "jsonl": folder / "events.jsonl", "parquet": folder / "events.parquet"}
    with paths["csv"].open("w") as fh:
        fh.write("event_time,arrival_time\n")
        fh.writelines(f"{e},{a}\n" for e, a in rows)
    with paths["jsonl"].open("w") as fh:
        fh.writelines(f'{{"event_time": "{e}", "arrival_time": "{a}"}}\n' for e, a in rows)
    pq.write_table(
        pa.table({
            "event_time": pa.array(et_us, type=pa.timestamp("us", tz="UTC")),
            "arrival_time": pa.array(arrival_ms, type=pa.timestamp("ms", tz="UTC")),
        }),
        paths["parquet"],
    )
    return paths


def time_command(argv: list[str]) -> float:
    """Wall seconds of one run of ``argv`` (its output discarded); raises if it fails."""
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action="store_true", help="also time the PySpark script (about 30 s)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_whatif_") as tmp:
        paths = write_files(args.events, Path(tmp))
        medians: dict[str, float] = {}
        for fmt, path in paths.items():
            runs = [
                time_command([sys.executable, "-m", "monitor.cli", "whatif", str(path), *WHATIF])
                for _ in range(args.repeat)
            ]
            medians[fmt] = statistics.median(runs)
            print(f"whatif {fmt:<8} {args.events:,} events: median {medians[fmt]:.2f} s of {args.repeat} "
                  f"(runs {', '.join(f'{r:.2f}' for r in runs)})", flush=True)
    if args.spark:
        script = (
            "from monitor.watermark import Tumbling, WatermarkConfig\n"
            "from tests.benchmarks.bench_engine import spark_whatif\n"
            f"spark_whatif({args.events}, WatermarkConfig(delay_ms=0, window=Tumbling(60_000), "
            "trigger_ms=10_000), 10_000)\n"
        )
        spark_s = time_command([sys.executable, "-c", script])
        print(f"PySpark script (whole command, local[1]): {spark_s:.1f} s")
        for fmt, m in medians.items():
            print(f"  whatif {fmt}: {spark_s / m:.1f}x faster")


if __name__ == "__main__":
    main()
