"""Daemon memory with 500 simulated Spark queries (issue 4 target: RSS under 300 MB).

Each query is a live single-file event log made of the recorded real Spark 4.3.0 progress lines, ids and
trigger times rewritten (tests/live_eventlog.py), one batch per simulated 10 s trigger. The daemon
(`tidegauge run`, a real subprocess with SQLite) tails all 500 files; while it runs, every query gets new
batches each round. RSS (VmRSS) and its peak (VmHWM) are read from /proc after each round.

Run: `.venv/bin/python -m tests.benchmarks.bench_daemon_rss [--queries 500] [--rounds 6] [--history 60]`.
Not a test: it prints figures for the issue note.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.store import migrate
from tests.conftest import RECORDED_FIXTURES
from tests.daemon_process import DaemonProcess, free_port, metric_values, wait_for
from tests.live_eventlog import LiveEventLog

TEMPLATES = (2, 4, 5, 4, 5, 4)  # data, data, no-data ... (watermark moves, nothing in the future)


def _rss_kib(pid: int) -> tuple[int, int]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=6, help="rounds of new batches while the daemon runs")
    parser.add_argument("--history", type=int, default=60, help="batches per query written before start")
    args = parser.parse_args()
    spark = RECORDED_FIXTURES / "spark" / "real-4.3.0"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        start = datetime.now(UTC) - timedelta(seconds=10 * (args.history + 1))
        logs = [
            LiveEventLog(
                work / "events" / f"app-{i:04d}.inprogress", spark, start, step=timedelta(seconds=10)
            )
            for i in range(args.queries)
        ]
        t0 = time.monotonic()
        for log in logs:
            log.batches(*(TEMPLATES[j % len(TEMPLATES)] for j in range(args.history)))
        print(f"wrote {args.queries} event logs x {args.history} batches in {time.monotonic() - t0:.1f} s")
        db_url = f"sqlite:///{work / 'tg.db'}"
        migrate.upgrade(db_url)
        config = {
            "server": {"host": "127.0.0.1", "port": free_port()},
            "targets": {
                "spark_event_logs": [{"name": "fleet", "path": str(work / "events"), "poll_interval": "5s"}]
            },
            "evaluation_interval": "15s",
        }
        daemon = DaemonProcess(config, db_url, work)
        try:
            daemon.start(ready_timeout_s=120)
            assert daemon.proc is not None
            pid = daemon.proc.pid

            def all_jobs() -> bool | None:
                jobs = {lbl["job_id"] for lbl, _ in metric_values(daemon.metrics(), "tidegauge_state_rows")}
                return True if len(jobs) >= args.queries else None

            t0 = time.monotonic()
            wait_for(f"{args.queries} queries on /metrics", all_jobs, timeout_s=600, interval_s=2.0)
            rss, hwm = _rss_kib(pid)
            print(
                f"all {args.queries} queries ingested in {time.monotonic() - t0:.1f} s: RSS {rss / 1024:.0f} MiB, peak {hwm / 1024:.0f} MiB"
            )
            for r in range(args.rounds):
                for log in logs:
                    log.batches(TEMPLATES[r % len(TEMPLATES)])
                time.sleep(15)
                rss, hwm = _rss_kib(pid)
                print(f"round {r + 1}: RSS {rss / 1024:.0f} MiB, peak {hwm / 1024:.0f} MiB")
            print(
                f"RESULT queries={args.queries} rss_mib={rss / 1024:.0f} peak_mib={hwm / 1024:.0f} (target < 300)"
            )
            daemon.terminate(timeout_s=60)
        finally:
            daemon.close()


if __name__ == "__main__":
    main()
