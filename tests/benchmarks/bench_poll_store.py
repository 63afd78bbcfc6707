"""Benchmark: one instance polling N live Spark event logs (one query each, one batch per 10 s trigger) and
storing what it read, on SQLite and on PostgreSQL (issue 16, "one instance first").

Each query is a live single-file event log of recorded real Spark 4.3.0 progress lines (tests/live_eventlog.py).
The daemon's own poll stage (:class:`monitor.daemon.poll.PollStage` with the event-log collector and its
database cursors, as ``tidegauge run`` composes them) first catches up on ``--history`` batches per query, then
runs ``--rounds`` steady polls, each after one new batch was appended to every file (one 10 s trigger of every
query). Printed per phase: wall and process CPU seconds, SQL statements executed (an ``executemany`` counts
once: it is one round trip, pipelined on PostgreSQL), statements and ms per file, and, for the steady polls,
the share of one core a 10 s poll interval takes (CPU seconds per poll / 10 s). ``--profile`` prints the
steady polls' cProfile top functions (cumulative).

Not collected by pytest. Run:
``PYTHONPATH=. python -m tests.benchmarks.bench_poll_store [--queries 1000] [--backend sqlite,postgresql]``.
PostgreSQL is started from the installed binaries (tests/pg.py); it is skipped with a line if there are none.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event

from collectors.spark.eventlog import EventLogCollector
from monitor.daemon.poll import PollStage, StoreCursors, Target
from monitor.metrics.latest import LatestSamples
from monitor.redaction import Redactor
from monitor.store import migrate, open_store
from tests.conftest import RECORDED_FIXTURES
from tests.live_eventlog import LiveEventLog

TEMPLATES = (2, 4, 5, 4, 5, 4)  # data, data, no-data ... (watermark moves, nothing in the future)
TRIGGER_S = 10.0
COLLECTOR = "spark-eventlog"


@dataclass
class Phase:
    """Figures of one phase (catch-up or the steady polls)."""

    name: str
    polls: int
    files: int
    wall_s: float
    cpu_s: float
    statements: int

    def line(self) -> str:
        per_file_ms = 1000 * self.wall_s / max(self.files, 1)
        cpu_per_file_ms = 1000 * self.cpu_s / max(self.files, 1)
        return (
            f"{self.name}: {self.polls} poll(s), {self.files} file reads, wall {self.wall_s:.2f} s, CPU {self.cpu_s:.2f} s, "
            f"{self.statements} statements ({self.statements / max(self.files, 1):.2f}/file, "
            f"{self.statements / max(self.wall_s, 1e-9):,.0f}/s), {per_file_ms:.3f} ms/file wall, "
            f"{cpu_per_file_ms:.3f} ms/file CPU"
        )


class StatementCounter:
    """Counts the statements an engine executes (``before_cursor_execute``; executemany once)."""

    def __init__(self, engine: Any) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._on)

    def _on(self, *_args: Any, **_kwargs: Any) -> None:
        self.count += 1


@contextmanager
def _postgres() -> Iterator[str | None]:
    from tests.pg import PostgresUnavailable, start_postgres

    try:
        server = start_postgres(os.environ)
    except PostgresUnavailable as exc:
        print(f"postgresql: skipped ({exc})")
        yield None
        return
    try:
        yield server.create_database()
    finally:
        server.stop()


def run(backend: str, url: str, work: Path, queries: int, history: int, rounds: int, profile: bool) -> None:
    """Catch up on ``history`` batches of ``queries`` live logs under ``work``, then ``rounds`` steady polls."""
    spark = RECORDED_FIXTURES / "spark" / "real-4.3.0"
    events = work / "events"
    start = datetime(2026, 11, 29, tzinfo=UTC)
    logs = [
        LiveEventLog(events / f"app-{i:05d}.inprogress", spark, start, step=timedelta(seconds=TRIGGER_S))
        for i in range(queries)
    ]
    for log in logs:
        log.batches(*(TEMPLATES[j % len(TEMPLATES)] for j in range(history)))
    migrate.upgrade(url)
    store = open_store(url)
    counter = StatementCounter(store.engine)
    cursors = StoreCursors(store.sessions, COLLECTOR)
    collector = EventLogCollector([events], cursors)
    target = Target("fleet", collector, timedelta(seconds=TRIGGER_S), cursors)
    stage = PollStage(store.sessions, [target], LatestSamples(), time.monotonic, Redactor)
    clock = start + timedelta(seconds=TRIGGER_S * history)

    def measured(name: str, n_polls: int, before: Any = None) -> Phase:
        nonlocal clock
        wall = cpu = 0.0
        statements = polls = 0
        for _ in range(n_polls):
            if before is not None:
                before()
            while True:
                s0, w0, c0 = counter.count, time.perf_counter(), time.process_time()
                result = stage.poll(target, clock)
                wall += time.perf_counter() - w0
                cpu += time.process_time() - c0
                statements += counter.count - s0
                polls += 1
                if result.errors:
                    raise SystemExit(f"{backend}: poll errors: {result.errors[:3]}")
                if not collector.more_to_read:
                    break
            clock += timedelta(seconds=TRIGGER_S)
        return Phase(name, polls, queries * n_polls, wall, cpu, statements)

    try:
        print(f"{backend}: {queries} queries, {history} batches each before start")
        print("  " + measured("catch-up", 1).line())

        def new_batch() -> None:
            for i, log in enumerate(logs):
                log.batches(TEMPLATES[(history + i) % len(TEMPLATES)])

        profiler = cProfile.Profile() if profile else None
        if profiler is not None:
            profiler.enable()
        steady = measured(f"steady ({rounds} polls, 1 new batch per query each)", rounds, new_batch)
        if profiler is not None:
            profiler.disable()
        print("  " + steady.line())
        cpu_per_poll = steady.cpu_s / rounds
        print(
            f"  RESULT backend={backend} queries={queries} cpu_per_poll_s={cpu_per_poll:.3f} "
            f"core_share_at_10s={cpu_per_poll / TRIGGER_S:.1%} statements_per_file={steady.statements / steady.files:.2f} "
            f"ms_per_file_wall={1000 * steady.wall_s / steady.files:.3f}"
        )
        if profiler is not None:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
            print(out.getvalue())
    finally:
        store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--history", type=int, default=6, help="batches per query written before the first poll")
    parser.add_argument("--rounds", type=int, default=3, help="steady polls, each after one new batch per query")
    parser.add_argument("--backend", default="sqlite,postgresql")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for backend in args.backend.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if backend == "sqlite":
                run(backend, f"sqlite:///{work / 'tg.db'}", work, args.queries, args.history, args.rounds, args.profile)
            elif backend == "postgresql":
                with _postgres() as url:
                    if url is not None:
                        run(backend, url, work, args.queries, args.history, args.rounds, args.profile)
            else:
                raise SystemExit(f"--backend: unknown {backend!r} (sqlite, postgresql)")


if __name__ == "__main__":
    main()
