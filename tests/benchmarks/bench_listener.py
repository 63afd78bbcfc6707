"""Benchmark: what the listener costs the Spark driver, and how fast the ingest side takes events.

Targets (issue 2 §3b): a callback must not slow the query, whatever state the monitor is in: its cost is
serializing the event and a non-blocking queue offer (microseconds), the same when the monitor is up,
refusing connections, or hanging (accepting TCP but never answering).

Measured:
1. per-callback time of ``onQueryProgress`` (median, p99, max; µs) with the monitor up (uvicorn + the real
   ingest app + a list sink), refusing (closed loopback port) and hanging (a listening socket that never
   answers);
2. delivered events per second to the live ingest endpoint (listener -> HTTP -> parse -> sink);
3. ``parse_event_document`` throughput (events/s) on its own.

Events are PySpark ``QueryProgressEvent`` objects built with ``fromJson`` from the recorded real lines of
tests/fixtures/spark/real-4.3.0/eventlog_trimmed.jsonl (12 progress events, repeated).

Usage: ``python -m tests.benchmarks.bench_listener [--events 5000]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.listener import QueryProgressEvent

from collectors.spark.listener import TidegaugeListener
from collectors.spark.progress import EVENT_PROGRESS
from monitor.daemon.ingest import create_ingest_app, parse_event_document
from monitor.model import PollResult
from tests.servers import black_hole, refused_port, serve_in_thread

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "fixtures" / "spark" / "real-4.3.0" / "eventlog_trimmed.jsonl"
TOKEN = "bench-token-0123456789abcdef"


def _events() -> list[dict[str, Any]]:
    return [json.loads(x) for x in SOURCE.read_text().splitlines() if EVENT_PROGRESS in x]


def _callback_times(
    url: str, events: list[QueryProgressEvent], n: int, **kwargs: Any
) -> tuple[list[float], dict[str, int]]:
    listener = TidegaugeListener(url, TOKEN, flush_at_exit_s=None, **kwargs)
    times = []
    for i in range(n):
        event = events[i % len(events)]
        start = time.perf_counter()
        listener.onQueryProgress(event)
        times.append((time.perf_counter() - start) * 1e6)
    listener.close(flush_timeout_s=30)
    return times, listener.stats()


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return f"median {statistics.median(ordered):7.1f} µs  p99 {p99:7.1f} µs  max {ordered[-1]:8.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5000)
    args = parser.parse_args()
    docs = _events()
    events = [QueryProgressEvent.fromJson(d) for d in docs]
    n = args.events
    stored: list[PollResult] = []
    clock = lambda: datetime.now(UTC)  # noqa: E731

    with serve_in_thread(create_ingest_app(token=TOKEN, sink=stored.append, clock=clock)) as url:
        start = time.perf_counter()
        times, stats = _callback_times(url, events, n, queue_size=n)
        elapsed = time.perf_counter() - start
        delivered = sum(1 for r in stored for s in r.samples if s.scope.is_job())
        print(f"monitor up       {_summary(times)}  stats {stats}")
        print(
            f"  delivered {delivered} events in {elapsed:.2f} s = {delivered / elapsed:,.0f} events/s "
            f"(callbacks + close/flush, one sender thread, batches of <=100)"
        )

    times, stats = _callback_times(f"http://127.0.0.1:{refused_port()}", events, n, timeout_s=0.5)
    print(f"monitor refusing {_summary(times)}  stats {stats}")
    with black_hole() as port:
        times, stats = _callback_times(f"http://127.0.0.1:{port}", events, n, timeout_s=2.0)
        print(f"monitor hanging  {_summary(times)}  stats {stats}")

    received = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    batch = [docs[i % len(docs)] for i in range(n)]
    start = time.perf_counter()
    parse_event_document(batch, received_at=received)
    elapsed = time.perf_counter() - start
    print(f"parse_event_document: {n} events in {elapsed:.3f} s = {n / elapsed:,.0f} events/s")


if __name__ == "__main__":
    main()
