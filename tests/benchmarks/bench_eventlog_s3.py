"""Event logs in S3 (moto's server on loopback, tests/s3_server.py): requests and time per poll, and reading
speed against the same log on disk.

1. A prefix of 10,000 finished applications (5,000 single files, 5,000 finished rolling directories) and 20
   live rolling directories: requests (by kind) and seconds of the first poll, of a poll where nothing
   changed, and of a poll after one new rolled file in each live application.
2. ``EventLogCollector.poll`` of one ~31 MB plain log and its zstd form, from S3 and from disk, alternated,
   best of 5 each: MB/s of events and the remote/local ratio (target >= 80%).

Run: ``python -m tests.benchmarks.bench_eventlog_s3`` (``make bench``; ``BENCH_FINISHED_SINGLE`` and
``BENCH_FINISHED_ROLLING`` change the 5,000 + 5,000; ``--speed-only``: part 2 alone). Figures only; nothing
asserted.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collectors.spark.eventlog import EventLogCollector
from tests.benchmarks.eventlog_speed import FIXTURE, big_logs, read_speeds_mb_s, speed_line
from tests.s3_server import s3_server

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FINISHED_SINGLE = int(os.environ.get("BENCH_FINISHED_SINGLE", "5000"))
FINISHED_ROLLING = int(os.environ.get("BENCH_FINISHED_ROLLING", "5000"))
LIVE = 20


def _poll(collector: EventLogCollector, server: Any) -> tuple[dict[str, int], float, int]:
    server.reset_counts()
    started = time.perf_counter()
    result = collector.poll(NOW)
    seconds = time.perf_counter() - started
    return dict(server.counts()), seconds, len(result.samples)


def main(argv: list[str] | None = None) -> None:
    """Both parts, or only the reading speed with ``--speed-only``."""
    speed_only = "--speed-only" in (sys.argv[1:] if argv is None else argv)
    with s3_server() as server:
        os.environ.update(server.env)
        client = server.client()
        client.create_bucket(Bucket="bench")
        if not speed_only:
            _listing(server, client)
        _speed(client)


def _listing(server: Any, client: Any) -> None:
    """Requests and time per poll of a prefix of many finished and a few live applications."""
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    small = b"".join(lines[:12])
    jobs: list[tuple[str, bytes]] = []
    for i in range(FINISHED_SINGLE):
        jobs.append((f"spark-events/app-2026{i:08d}-0001", small))
    for i in range(FINISHED_ROLLING):
        d = f"spark-events/eventlog_v2_app-2027{i:08d}-0001"
        jobs += [(f"{d}/events_1_app-2027{i:08d}-0001", small), (f"{d}/appstatus_app-2027{i:08d}-0001", b"")]
    for i in range(LIVE):
        d = f"spark-events/eventlog_v2_live-{i:03d}"
        jobs += [(f"{d}/events_1_live-{i:03d}", small), (f"{d}/appstatus_live-{i:03d}.inprogress", b"")]
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda kv: client.put_object(Bucket="bench", Key=kv[0], Body=kv[1]), jobs))
    print(f"uploaded {len(jobs)} objects in {time.perf_counter() - started:.1f} s")
    collector = EventLogCollector(["s3://bench/spark-events"], keep_raw=False)
    for label in ("first poll", "unchanged poll"):
        counts, seconds, samples = _poll(collector, server)
        print(f"{label}: {sum(counts.values())} requests {counts}, {seconds:.2f} s, {samples} samples")
    for i in range(LIVE):
        client.put_object(Bucket="bench", Key=f"spark-events/eventlog_v2_live-{i:03d}/events_2_live-{i:03d}",
                          Body=b"".join(lines[12:24]))
    counts, seconds, samples = _poll(collector, server)
    print(f"poll after {LIVE} new rolled files: {sum(counts.values())} requests {counts}, {seconds:.2f} s, {samples} samples")
    counts, seconds, samples = _poll(collector, server)
    print(f"unchanged poll again: {sum(counts.values())} requests {counts}, {seconds:.2f} s, {samples} samples")


def _speed(client: Any) -> None:
    """Reading speed: a ~40 MB log (the recorded progress lines repeated), plain and zstd, local vs S3."""
    body, files = big_logs()
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            local = Path(tmp) / name
            local.write_bytes(data)
            client.put_object(Bucket="bench", Key=f"big/{name}", Body=data)
            figures = read_speeds_mb_s({"local": str(local), "s3": f"s3://bench/big/{name}"}, len(body))
            print(f"{name} ({len(data) / 1e6:.1f} MB stored, {len(body) / 1e6:.1f} MB of events): "
                  f"{speed_line(figures, 's3')}")


if __name__ == "__main__":
    sys.exit(main())
