"""Benchmark: replay speed of the engine's Flink mode (not a test; prints a table). Target: >= 5M
events/s per core on 1M events (issue 7).

Usage::

    PYTHONPATH=. python -m tests.benchmarks.bench_flink_engine                     # 1M events
    PYTHONPATH=. python -m tests.benchmarks.bench_flink_engine --sizes 1000000,10000000

Workload: ``n`` events at 1000 events/s of event time over 4 partitions (splits) and 100 keys;
arrival = event time + a lag (exponential, mean 2 s; 1% of rows 0-10 min late), so about 1% of the
rows are late; ``forBoundedOutOfOrderness(5 s)``, periodic watermarks every 200 ms (about ``n / 5``
ticks), ``keyBy(key)``. Cases: tumbling 10 s; tumbling 10 s with idleness 30 s and allowed lateness
5 s; sliding 10 s / 5 s; per-event watermarks; session windows (gap 300 ms: about 57k sessions per
1M events; vectorised for the gap-connected runs that provably behave simply, the rest -- about 0.4%
of the events here -- element by element in Python). Each case is timed as the best of 3 runs of
``replay_flink`` on one core (the process is single-threaded; NumPy does not use threads here),
excluding the event generation, in CPU time of the process (``time.process_time``: events per
CPU-second = per core, less distorted by other processes on a shared machine) and in wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from monitor.watermark import EventsTable, Session, Sliding, Tumbling
from monitor.watermark.flink import FlinkConfig, replay_flink

BASE_MS = 1_790_000_000_000  # 2026-09-21


def make_events(n: int, seed: int = 7) -> EventsTable:
    rng = np.random.default_rng(seed)
    event_ms = BASE_MS + np.arange(n, dtype=np.int64)
    lag = rng.exponential(2_000, n).astype(np.int64)
    outliers = rng.random(n) < 0.01
    lag[outliers] = rng.integers(0, 600_000, int(outliers.sum()))
    arrival = event_ms + lag
    order = np.argsort(arrival, kind="stable")
    return EventsTable(
        event_time_us=event_ms[order] * 1000,
        valid=np.ones(n, dtype=np.bool_),
        source_codes=np.zeros(n, dtype=np.int32),
        source_names=("",),
        key_codes=rng.integers(0, 100, n).astype(np.int32),
        key_names=tuple(f"k{i}" for i in range(100)),
        arrival_ms=arrival[order],
        partition=rng.integers(0, 4, n).astype(np.int64),
    )


CASES: dict[str, FlinkConfig] = {
    "tumbling 10s": FlinkConfig(delay_ms=5000, window=Tumbling(10_000), keep_late_rows=False),
    "tumbling 10s, idleness 30s, lateness 5s": FlinkConfig(
        delay_ms=5000,
        window=Tumbling(10_000),
        idleness_ms=30_000,
        allowed_lateness_ms=5000,
        keep_late_rows=False,
    ),
    "sliding 10s/5s": FlinkConfig(delay_ms=5000, window=Sliding(10_000, 5000), keep_late_rows=False),
    "tumbling 10s, per-event watermarks": FlinkConfig(
        delay_ms=5000, window=Tumbling(10_000), per_event_watermarks=True, keep_late_rows=False
    ),
    "session gap 300ms": FlinkConfig(delay_ms=5000, window=Session(300), keep_late_rows=False),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for n in [int(s) for s in args.sizes.split(",")]:
        t0 = time.perf_counter()
        events = make_events(n)
        print(f"\n{n:,} events, 4 partitions, 100 keys (generated in {time.perf_counter() - t0:.2f}s)")
        print(
            f"{'case':<42} {'cpu s':>7} {'events/s/core':>14} {'wall s':>7} {'events/s':>12} "
            f"{'firings':>8} {'late':>7}"
        )
        for name, cfg in CASES.items():
            best_cpu = best_wall = float("inf")
            r = None
            for _ in range(args.repeat):
                c1, t1 = time.process_time(), time.perf_counter()
                r = replay_flink(events, cfg)
                best_cpu = min(best_cpu, time.process_time() - c1)
                best_wall = min(best_wall, time.perf_counter() - t1)
            assert r is not None
            s = r.summary
            print(
                f"{name:<42} {best_cpu:>7.3f} {n / best_cpu:>14,.0f} {best_wall:>7.3f} {n / best_wall:>12,.0f} "
                f"{s.firings:>8} {s.late_elements:>7}"
            )


if __name__ == "__main__":
    main()
