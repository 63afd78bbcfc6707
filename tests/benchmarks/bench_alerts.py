"""Benchmark: one alert storm through the lifecycle, the outbox and the dispatcher on SQLite.

Not collected by pytest. Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_alerts [n_jobs] [per_job]``.
Prints the time of the tick that stores n_jobs * per_job firing alerts with their outbox rows (one
transaction), of the dispatch that delivers them to a loopback webhook receiver (one POST per job), and
of an idle tick + dispatch afterwards (nothing due: the steady-state cost).
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from monitor.alerts.routing import Route
from monitor.model import Engine, Finding, JobRef, Scope, Severity
from monitor.notify.dispatcher import dispatch_due
from monitor.notify.webhook import WebhookNotifier
from tests.alerting import migrated_sessions, sqlite_url, tick
from tests.http_receiver import running_receiver


def main(n_jobs: int = 200, per_job: int = 10) -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    findings = [
        Finding(
            "idle_source",
            Severity.WARNING,
            JobRef(Engine.FLINK, f"job-{j}"),
            "idle",
            now,
            scope=Scope(subtask=s),
        )
        for j in range(n_jobs)
        for s in range(per_job)
    ]
    routes = [Route("hook")]
    with tempfile.TemporaryDirectory() as tmp, migrated_sessions(sqlite_url(Path(tmp))) as sessions, \
            running_receiver() as receiver, httpx.Client() as client:  # fmt: skip
        hook = WebhookNotifier("hook", receiver.url, "secret")
        t0 = time.perf_counter()
        tick(sessions, findings, now, routes)
        t1 = time.perf_counter()
        report = dispatch_due(sessions, [hook], client, now, routes=routes)
        t2 = time.perf_counter()
        later = now + timedelta(seconds=30)
        tick(sessions, findings, later, routes)
        dispatch_due(sessions, [hook], client, later, routes=routes)
        t3 = time.perf_counter()
    n = len(findings)
    print(f"alerts={n} jobs={n_jobs}")
    print(f"tick storing {n} firing alerts + outbox rows: {t1 - t0:.3f} s ({n / (t1 - t0):.0f} alerts/s)")
    print(f"dispatch: {report.batches_sent} POSTs, {report.delivered} rows delivered in {t2 - t1:.3f} s")
    print(f"steady-state tick + dispatch (no transitions): {t3 - t2:.3f} s")
    assert report.delivered == n and len(receiver.processed) == n_jobs


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
