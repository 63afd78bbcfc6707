"""Flink REST poll cost: one full poll of 1,000 jobs x 3 vertices x 2 subtasks (issue 7 target: under
10 s on one core) and the collector's peak RSS.

The JobManager is tests/benchmarks/flink_replay_server.py (recorded Flink 2.3.0 responses, one copy per
job) in a subprocess on loopback, pinned to the other CPU where there are two. The collector
(:class:`collectors.flink.FlinkRestCollector`, the daemon's ``make_client``) runs in this process pinned to
one CPU. Poll 1 lists every vertex's metric ids (9 requests per job); later polls reuse the lists (6 per
job). Peak RSS is this process's ``ru_maxrss``.

Run: ``.venv/bin/python -m tests.benchmarks.bench_flink_poll [--jobs 1000] [--polls 3] [--concurrency 8]``.
Not a test: it prints figures for the issue note.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from collectors.flink import FlinkRestCollector
from collectors.http import make_client
from tests.conftest import REPO_ROOT
from tests.daemon_process import free_port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.benchmarks.flink_replay_server",
            "--jobs",
            str(args.jobs),
            "--port",
            str(port),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        if len(cpus) >= 2:
            os.sched_setaffinity(server.pid, {cpus[-1]})
        os.sched_setaffinity(0, {cpus[0]})
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        client = make_client(max_connections=args.concurrency)
        collector = FlinkRestCollector(f"http://127.0.0.1:{port}", client, concurrency=args.concurrency)
        now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
        print(
            f"jobs={args.jobs} vertices/job=3 subtasks/vertex=2 concurrency={args.concurrency} "
            f"client cpu={cpus[0]} server cpu={cpus[-1] if len(cpus) > 1 else cpus[0]}"
        )
        for i in range(args.polls):
            started, cpu0 = time.perf_counter(), time.process_time()
            result = collector.poll(now + timedelta(seconds=15 * i))
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
            print(
                f"poll {i + 1}: wall {wall:.2f} s, client cpu {cpu:.2f} s, samples {len(result.samples)}, "
                f"errors {len(result.errors)}"
            )
            assert not result.errors, result.errors[:3]
        client.close()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"peak RSS {peak / 1024:.0f} MiB (before the polls {rss_before / 1024:.0f} MiB)")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
