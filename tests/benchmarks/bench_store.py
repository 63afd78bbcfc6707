"""Benchmark: save_poll / load_samples throughput on SQLite (a file in a temp dir, WAL).

Not collected by pytest. Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_store [n_polls] [per_poll]``.
Prints samples/second for first saves, repeated (all-duplicate) saves and a full load.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.model import Engine, JobRef, PollResult, Sample, Scope
from monitor.store import load_samples, open_store, save_poll, upgrade


def _polls(n_polls: int, per_poll: int) -> list[PollResult]:
    start = datetime(2026, 11, 29, tzinfo=UTC)
    job = JobRef(Engine.FLINK, "bench-job", run_id="r1", name="bench")
    return [
        PollResult(
            tuple(
                Sample(
                    job,
                    start + timedelta(seconds=10 * p),
                    collector="flink-rest",
                    scope=Scope(source="src", subtask=i),
                    watermark=start + timedelta(seconds=10 * p - 5),
                    num_input_rows=i,
                    idle_ms=0,
                )
                for i in range(per_poll)
            )
        )
        for p in range(n_polls)
    ]


def main(argv: list[str]) -> None:
    n_polls = int(argv[0]) if argv else 200
    per_poll = int(argv[1]) if len(argv) > 1 else 50
    polls = _polls(n_polls, per_poll)
    total = n_polls * per_poll
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        upgrade(url)
        store = open_store(url)
        try:
            for label in ("first save", "duplicate save"):
                t0 = time.perf_counter()
                for poll in polls:
                    with store.sessions.begin() as session:
                        save_poll(session, poll)
                dt = time.perf_counter() - t0
                rate = total / dt
                print(f"{label}: {total} samples in {n_polls} polls: {dt:.2f} s ({rate:,.0f} samples/s)")
            t0 = time.perf_counter()
            with store.sessions() as session:
                loaded = load_samples(session)
            dt = time.perf_counter() - t0
            print(f"load_samples: {len(loaded)} samples in {dt:.2f} s ({len(loaded) / dt:,.0f} samples/s)")
        finally:
            store.dispose()


if __name__ == "__main__":
    main(sys.argv[1:])
