"""Benchmark: one `tidegauge run` with N simulated Spark queries at 10 s triggers, on SQLite and on PostgreSQL
(issue 16, "one instance first").

Each query is a live single-file event log of recorded real Spark 4.3.0 progress lines (tests/live_eventlog.py),
``--history`` batches written before the daemon starts (its first catch-up). The daemon (a real subprocess,
poll and evaluation every 10 s) tails them all. While it runs, ``/healthz`` is asked every 0.5 s (1 s timeout) by a process of its
own and every answer's status and latency kept; after the catch-up, ``--rounds`` rounds each append one batch to
every query (one trigger) and wait out the 10 s interval. Printed: the catch-up time, the daemon's CPU seconds
per 10 s interval in the steady rounds (utime + stime from /proc; 10 s = one core), its RSS, on PostgreSQL the
transactions and rows written per second (pg_stat_database), the slowest ``/healthz`` answer and the
non-200 ones, the polls and evaluations the log says were skipped or failed, and how long SIGTERM takes
(sent right after a round's batches were appended, while the daemon reads them).

Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_one_instance [--queries 1000,2500] [--backend sqlite,postgresql]
[--history 30] [--rounds 4]``. Not a test: it prints figures for the note.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

from monitor.store import make_engine, migrate
from monitor.store.database import READ_ONLY
from tests.benchmarks.daemon_measure import cpu_s, database, pg_counters, rss_mib, stored_batches
from tests.conftest import RECORDED_FIXTURES
from tests.daemon_process import DaemonProcess, free_port, wait_for
from tests.live_eventlog import LiveEventLog

TEMPLATES = (2, 4, 5, 4, 5, 4)
TRIGGER_S = 10.0

_PROBE = """
import sys, time, httpx
url, interval = sys.argv[1], float(sys.argv[2])
with httpx.Client(timeout=1.0) as client:
    while True:
        t0 = time.perf_counter()
        try:
            status = client.get(url).status_code
        except httpx.HTTPError:
            status = 0
        print(f"{time.time():.3f} {status} {time.perf_counter() - t0:.4f}", flush=True)
        time.sleep(interval)
"""


class Probe:
    """Asks ``/healthz`` every ``interval_s`` from a process of its own (not slowed by this one's work),
    1 s timeout; each answer is a line ``unix_time status seconds`` (status 0: no answer within 1 s)."""

    def __init__(self, url: str, out: Path, interval_s: float = 0.5) -> None:
        self.out = out
        self._file = out.open("w")
        self.proc = subprocess.Popen([sys.executable, "-c", _PROBE, url, str(interval_s)], stdout=self._file)
        self.marks: list[tuple[str, float]] = [("catch-up", time.time())]

    def mark(self, phase: str) -> None:
        """Answers from now on belong to ``phase``."""
        self.marks.append((phase, time.time()))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self._file.close()

    def answers(self, phase: str) -> list[tuple[int, float]]:
        """``(status, seconds)`` of the answers asked during ``phase``."""
        bounds = [*self.marks, ("end", float("inf"))]
        out = []
        for line in self.out.read_text().splitlines():
            at, status, seconds = line.split()
            for (name, since), (_, until) in pairwise(bounds):
                if name == phase and since <= float(at) < until:
                    out.append((int(status), float(seconds)))
        return out

    def summary(self, phase: str) -> str:
        mine = self.answers(phase)
        if not mine:
            return f"{phase}: no answers"
        bad = sum(1 for s, _ in mine if s != 200)
        return f"{phase}: {len(mine)} asked, slowest {max(d for _, d in mine):.3f} s, {bad} not 200 within 1 s"


def run(backend: str, queries: int, history: int, rounds: int) -> None:
    spark = RECORDED_FIXTURES / "spark" / "real-4.3.0"
    with tempfile.TemporaryDirectory() as tmp, database(backend, Path(tmp)) as (url, server):
        work = Path(tmp)
        start = datetime.now(UTC) - timedelta(seconds=TRIGGER_S * (history + 1))
        t0 = time.monotonic()
        logs = [
            LiveEventLog(work / "events" / f"app-{i:05d}.inprogress", spark, start, step=timedelta(seconds=TRIGGER_S))
            for i in range(queries)
        ]
        for log in logs:
            log.batches(*(TEMPLATES[j % len(TEMPLATES)] for j in range(history)))
        print(f"{backend} {queries} queries: wrote {history} batches each in {time.monotonic() - t0:.0f} s", flush=True)
        migrate.upgrade(url)
        config = {
            "server": {"host": "127.0.0.1", "port": free_port()},
            "targets": {"spark_event_logs": [{"name": "fleet", "path": str(work / "events"), "poll_interval": "10s"}]},
            "evaluation_interval": "10s",
        }
        daemon = DaemonProcess(config, url, work)
        probe: Probe | None = None
        engine = make_engine(url).execution_options(**{READ_ONLY: True})  # never queued behind the daemon
        try:
            started = time.monotonic()
            daemon.start(ready_timeout_s=300)
            assert daemon.proc is not None
            pid = daemon.proc.pid
            probe = Probe(f"{daemon.base}/healthz", work / "healthz.txt")
            def caught_up() -> bool | None:
                return True if stored_batches(engine) >= queries * history else None

            wait_for(f"{queries} x {history} batches stored", caught_up, timeout_s=3600, interval_s=2.0)
            catch_up_s = time.monotonic() - started
            rss, peak = rss_mib(pid)
            print(f"  catch-up: all {queries} x {history} batches stored {catch_up_s:.1f} s after start; "
                  f"RSS {rss:.0f} MiB (peak {peak:.0f})", flush=True)  # fmt: skip
            probe.mark("steady")
            cpu0, wall0 = cpu_s(pid), time.monotonic()
            pg0 = pg_counters(server, url) if server is not None else None
            for r in range(rounds):
                round_start = time.monotonic()
                for log in logs:
                    log.batches(TEMPLATES[(history + r) % len(TEMPLATES)])
                time.sleep(max(0.0, TRIGGER_S - (time.monotonic() - round_start)))
            cpu, wall = cpu_s(pid) - cpu0, time.monotonic() - wall0
            rss, peak = rss_mib(pid)
            intervals = wall / TRIGGER_S
            line = (f"  steady: {rounds} rounds of one batch per query in {wall:.0f} s: daemon CPU {cpu / intervals:.2f} s "
                    f"per 10 s interval ({cpu / wall:.0%} of a core), RSS {rss:.0f} MiB (peak {peak:.0f})")  # fmt: skip
            if server is not None and pg0 is not None:
                pg1 = pg_counters(server, url)
                line += f", PostgreSQL {(pg1.xact_commit - pg0.xact_commit) / wall:.1f} transactions/s, {(pg1.rows_written - pg0.rows_written) / wall:,.0f} rows written/s"
            print(line, flush=True)
            for log in logs:
                log.batches(TEMPLATES[0])
            time.sleep(1.0)  # the next poll is reading them
            probe.mark("stop")
            t_stop = time.monotonic()
            code = daemon.terminate(timeout_s=60)
            stop_s = time.monotonic() - t_stop
            probe.stop()
            text = daemon.log()
            skipped_lines = [ln for ln in text.splitlines() if "skipp" in ln.lower() or "missed" in ln.lower()]
            skipped = len(skipped_lines)
            for example in sorted({ln.split(" - ")[-1][:160] for ln in skipped_lines})[:3]:
                print(f"  log: {example}")
            locked = text.count("database is locked")
            print(f"  {probe.summary('catch-up')}; {probe.summary('steady')}")
            print(f"  SIGTERM: exited with {code} after {stop_s:.1f} s; log: {skipped} skipped/missed runs, "
                  f"{locked} 'database is locked'")  # fmt: skip
            print(f"RESULT backend={backend} queries={queries} catch_up_s={catch_up_s:.1f} cpu_per_interval_s={cpu / intervals:.2f} "
                  f"rss_mib={rss:.0f} stop_s={stop_s:.1f} healthz_max_s={max((d for p in ('catch-up', 'steady') for _, d in probe.answers(p)), default=0):.3f}", flush=True)  # fmt: skip
        finally:
            if probe is not None:
                probe.stop()
            daemon.close()
            engine.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", default="1000")
    parser.add_argument("--backend", default="sqlite,postgresql")
    parser.add_argument("--history", type=int, default=30, help="batches per query written before the daemon starts")
    parser.add_argument("--rounds", type=int, default=4, help="10 s rounds of one new batch per query")
    args = parser.parse_args()
    for backend in args.backend.split(","):
        for n in (int(q) for q in args.queries.split(",")):
            run(backend, n, args.history, args.rounds)


if __name__ == "__main__":
    main()
