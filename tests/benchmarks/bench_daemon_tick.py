"""Benchmark: one rule-evaluation tick of the daemon (load each job's last hour from SQLite, run the rules,
step the alerts, write transitions) as the stored history grows.

Not collected by pytest. Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_daemon_tick [jobs] [batches]``
(default 5 jobs x 3600 batches: one-second triggers for an hour, two samples per batch: query and source
scope). Prints the first tick (loads the window) and the median of 10 steady ticks (one new batch per job
stored between ticks: what the daemon does every ``evaluation_interval``).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.config import parse_config
from monitor.daemon.runtime import Runtime
from monitor.metrics.latest import LatestSamples
from monitor.model import Engine, JobRef, PollResult, Sample, Scope
from monitor.store import open_store, save_poll, upgrade

START = datetime(2026, 11, 29, tzinfo=UTC)


def _history(jobs: int, batches: int) -> list[PollResult]:
    out = []
    for j in range(jobs):
        job = JobRef(Engine.SPARK, f"bench-{j}", run_id="r1", name=f"bench{j}")
        samples = []
        for b in range(batches):
            at = START + timedelta(seconds=b)
            wm = START - timedelta(minutes=10) + timedelta(seconds=b // 10 * 10)  # moves every 10 batches
            common = {"observed_at": at, "collector": "spark-eventlog", "batch_id": b, "num_input_rows": 100}
            samples.append(Sample(job, watermark=wm, event_time_max=at, state_rows_total=50, **common))  # type: ignore[arg-type]
            samples.append(
                Sample(job, scope=Scope(source="kafka[clicks]"), input_rows_per_second=100.0, **common)
            )  # type: ignore[arg-type]
        out.append(PollResult(tuple(samples)))
    return out


def main(jobs: int = 5, batches: int = 3600) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        upgrade(url)
        store = open_store(url)
        with store.sessions.begin() as session:
            for poll in _history(jobs, batches):
                save_poll(session, poll)
        runtime = Runtime(
            sessions=store.sessions, targets=[], latest=LatestSamples(), rules_config=parse_config({}).rules
        )
        now = START + timedelta(seconds=batches)
        t0 = time.perf_counter()
        runtime.evaluate(now)
        first = time.perf_counter() - t0
        more = _history(jobs, batches + 10)
        times = []
        for i in range(10):
            with store.sessions.begin() as session:
                for poll in more:
                    save_poll(session, PollResult(poll.samples[2 * (batches + i) : 2 * (batches + i + 1)]))
            t0 = time.perf_counter()
            runtime.evaluate(now + timedelta(seconds=i + 1))
            times.append(time.perf_counter() - t0)
        store.dispose()
    samples = jobs * batches * 2
    print(
        f"evaluate: {jobs} jobs x {batches} batches ({samples} samples): first tick {first:.3f} s, "
        f"steady tick {statistics.median(times):.3f} s (median of 10)"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
