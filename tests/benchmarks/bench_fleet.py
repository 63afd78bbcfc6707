"""Benchmark: a fleet of 1, 2 and 3 `tidegauge run` instances on one real PostgreSQL sharing N simulated Spark
queries at 10 s triggers (``--trigger``; issue 16, "Tests and measurements").

Each query is a live single-file event log of recorded real Spark 4.3.0 progress lines (tests/live_eventlog.py);
the queries are spread round-robin over ``--targets`` event-log directories, each one configured target (a
lease: the unit the instances share), ``--history`` batches written before the instances start. All
instances start together (same config, own port, ``--instance iK``) and catch up; then ``--rounds`` steady rounds
each append one batch to every query and wait out the 10 s trigger. In the second round one query gets a
future-dated row (recorded batch 6: an event time in 2099) instead of its normal batch, and the time from
appending that line to the ``future_timestamp`` notification arriving at a loopback webhook receiver is
measured (the only route goes to it; every rule is evaluated as by default).

Printed per instance count: each instance's CPU seconds per 10 s interval in the steady rounds (utime + stime
from /proc; 10 s = one core) and the targets and queries it held (``cluster status --format json``), the
PostgreSQL server's CPU per interval (postmaster and backends, /proc), transactions, rows inserted / updated
per second (pg_stat_database), statement executions per second and the costliest statements
(pg_stat_statements), what the daemons' connections were doing (pg_stat_activity sampled every 0.5 s: active,
idle in transaction, waiting, and the longest open transaction), the fault-to-notification time, and the
polls or evaluations the logs say were skipped. This machine has 2 cores shared by the instances, PostgreSQL,
the simulator and whatever else runs: read CPU seconds, not wall times.

Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_fleet [--queries 1000] [--instances 1,2,3] [--targets 12]
[--history 6] [--rounds 4] [--profile DIR]`` (``make bench-fleet QUERIES=1000``). Not a test: it prints figures for
the README. ``--profile DIR``: each instance is sampled by py-spy (``pip install py-spy``; on its ``PATH`` or
``PY_SPY``) through the steady rounds, on-CPU stacks only, written as collapsed stacks to
``DIR/<queries>x<instances>-<instance>.txt`` (summarised by ``tests/benchmarks/profile_summary.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from monitor.store import make_engine, migrate
from monitor.store.database import READ_ONLY
from tests.benchmarks.bench_one_instance import TEMPLATES, TRIGGER_S
from tests.benchmarks.daemon_measure import (
    ActivitySampler,
    cpu_s,
    database,
    enable_statement_stats,
    evaluated_jobs,
    pg_counters,
    postmaster_pid,
    reset_statement_stats,
    rss_mib,
    statement_stats,
    stored_batches,
    tree_cpu_s,
)
from tests.conftest import RECORDED_FIXTURES
from tests.daemon_process import DaemonProcess, cluster_status, free_port, wait_for
from tests.http_receiver import Receiver, running_receiver
from tests.live_eventlog import LiveEventLog

FAULT_TEMPLATE = 6  # recorded batch 6: one row dated 2099-01-01 (tests/live_eventlog.py)
FAULT_RULE = "future_timestamp"
SECRET_ENV = {"TG_BENCH_WEBHOOK_SECRET": "bench-fleet-secret"}


def _config(work: Path, targets: int, url: str, webhook_url: str, trigger_s: float) -> dict[str, Any]:
    return {
        "database": url,
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {
            "spark_event_logs": [
                {"name": f"t{k:02d}", "path": str(work / "events" / f"t{k:02d}"), "poll_interval": f"{trigger_s:g}s"}
                for k in range(targets)
            ]
        },
        "evaluation_interval": f"{trigger_s:g}s",
        "receivers": [{"name": "bench", "type": "webhook", "url": webhook_url,
                       "secret": {"env": "TG_BENCH_WEBHOOK_SECRET"}}],
        "routes": [{"receiver": "bench", "match": {"alertname": FAULT_RULE}}],
    }  # fmt: skip


def _notified_at(rx: Receiver, job_id: str) -> float | None:
    """When the receiver got the first firing notification of the fault's rule for ``job_id`` (Unix s)."""
    with rx.lock:
        for request in rx.requests:
            for alert in request.json()["alerts"]:
                labels = alert["labels"]
                if labels.get("job_id") == job_id and alert["status"] == "firing" and alert.get("rule") == FAULT_RULE:
                    return request.received_at
    return None


def _holders(doc: dict[str, Any], names: list[str]) -> dict[str, list[str]]:
    """Each instance's targets (``t00``...) in a ``cluster status`` document."""
    per: dict[str, list[str]] = {n: [] for n in names}
    for t in doc["targets"]:
        if t["holder"] in per and t["name"] != "ingest":
            per[t["holder"]].append(t["name"])
    return per


def _held(doc: dict[str, Any], names: list[str], targets: int) -> dict[str, list[str]] | None:
    """Each instance's targets when every target is held by one of ``names`` and each holds at most
    ⌈targets / instances⌉ (the fleet's share), else ``None``."""
    per: dict[str, list[str]] = {n: [] for n in names}
    ours = {f"t{k:02d}" for k in range(targets)}
    for t in doc["targets"]:
        if t["name"] not in ours:
            continue  # the ``ingest`` lease
        if t["holder"] not in per:
            return None
        per[t["holder"]].append(t["name"])
    if sum(len(v) for v in per.values()) != targets or max(len(v) for v in per.values()) > math.ceil(targets / len(names)):
        return None
    return per


def _profilers(pids: dict[str, int], out: Path | None, label: str, seconds: float) -> list[subprocess.Popen[bytes]]:
    """One py-spy sampler per instance for ``seconds`` (none when ``out`` is ``None``).

    Raises:
        SystemExit: ``--profile`` given but py-spy is not installed."""
    if out is None:
        return []
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile: py-spy not found (pip install py-spy, or set PY_SPY to its path)")
    out.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen([spy, "record", "--pid", str(pid), "--duration", str(math.ceil(seconds)), "--rate", "50",
                          "--nonblocking", "--format", "raw", "--output", str(out / f"{label}-{name}.txt")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, pid in pids.items()
    ]  # fmt: skip


def run(
    server: Any, url: str, queries: int, instances: int, targets: int, history: int, rounds: int,
    profile: Path | None = None, trigger_s: float = TRIGGER_S,
) -> dict[str, Any]:
    """One measured run of ``instances`` instances over ``queries`` queries (see the module docstring);
    returns the figures printed (CPU s per interval of ``trigger_s``, per job-batch, rows/s, statements/s, fault
    seconds)."""
    spark = RECORDED_FIXTURES / "spark" / "real-4.3.0"
    with tempfile.TemporaryDirectory() as tmp, running_receiver() as rx:
        work = Path(tmp)
        start = datetime.now(UTC) - timedelta(seconds=trigger_s * (history + 1))
        t0 = time.monotonic()
        logs = [
            LiveEventLog(work / "events" / f"t{i % targets:02d}" / f"app-{i:05d}.inprogress", spark, start,
                         step=timedelta(seconds=trigger_s))
            for i in range(queries)
        ]  # fmt: skip
        for log in logs:
            log.batches(*(TEMPLATES[j % len(TEMPLATES)] for j in range(history)))
        print(f"{instances} instance(s), {queries} queries over {targets} targets: wrote {history} batches each "
              f"in {time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
        migrate.upgrade(url)
        names = [f"i{k + 1}" for k in range(instances)]
        daemons: dict[str, DaemonProcess] = {}
        for name in names:
            (work / name).mkdir()
            daemons[name] = DaemonProcess(_config(work, targets, url, rx.url, trigger_s), url, work / name, SECRET_ENV, name)
        engine = make_engine(url).execution_options(**{READ_ONLY: True})  # never queued behind the daemons
        config_path = daemons[names[0]].config_path
        try:
            started = time.monotonic()
            with ThreadPoolExecutor(len(names)) as pool:
                list(pool.map(lambda d: d.start(ready_timeout_s=300), daemons.values()))
            pids = {n: d.proc.pid for n, d in daemons.items() if d.proc is not None}
            wait_for(f"{queries} x {history} batches stored",
                     lambda: stored_batches(engine) >= queries * history or None, timeout_s=3600, interval_s=2.0)  # fmt: skip
            try:
                held = wait_for("every target held, evenly", lambda: _held(cluster_status(config_path), names, targets),
                                timeout_s=180, interval_s=2.0)  # fmt: skip
            except AssertionError:
                held = _holders(cluster_status(config_path), names)
                print(f"  targets NOT spread evenly 180 s after the catch-up: {held}", flush=True)
            wait_for(f"{queries} jobs evaluated", lambda: evaluated_jobs(engine) >= queries or None,
                     timeout_s=3600, interval_s=2.0)  # fmt: skip
            catch_up_s = time.monotonic() - started
            print(f"  catch-up: all batches stored, every job evaluated and targets spread {catch_up_s:.1f} s after start",
                  flush=True)  # fmt: skip

            pm = postmaster_pid(server)
            reset_statement_stats(server, url)
            cpu0 = {n: cpu_s(p) for n, p in pids.items()}
            pg_cpu0, pg0, wall0 = tree_cpu_s(pm), pg_counters(server, url), time.monotonic()
            fault_log, fault_at = logs[len(logs) // 2], 0.0
            per_round: list[int] = []  # rows inserted in each round: a round inside one long transaction shows 0
            samplers = _profilers(pids, profile, f"{queries}x{instances}", rounds * trigger_s)
            with ActivitySampler(server, url) as activity:
                for r in range(rounds):
                    if r:
                        per_round.append(pg_counters(server, url).tup_inserted)
                    round_start = time.monotonic()
                    if r == 1:
                        fault_log.batches(FAULT_TEMPLATE)
                        fault_at = time.time()
                    for log in logs:
                        if not (r == 1 and log is fault_log):
                            log.batches(TEMPLATES[(history + r) % len(TEMPLATES)])
                    time.sleep(max(0.0, trigger_s - (time.monotonic() - round_start)))
                wall = time.monotonic() - wall0
                cpu = {n: cpu_s(p) - cpu0[n] for n, p in pids.items()}
                pg_cpu, pg = tree_cpu_s(pm) - pg_cpu0, pg_counters(server, url) - pg0
                marks = [pg0.tup_inserted, *per_round, pg0.tup_inserted + pg.tup_inserted]
                per_round = [b - a for a, b in pairwise(marks)]
                statements = statement_stats(server, url, top=10)
            for sampler in samplers:
                sampler.wait(timeout=60)
            intervals = wall / trigger_s
            job_batches = queries * intervals  # each query writes one batch per interval
            doc = cluster_status(config_path)
            held_now = _holders(doc, names)
            by_target = {f"t{k:02d}": sum(1 for i in range(queries) if i % targets == k) for k in range(targets)}
            print(f"  steady: {rounds} rounds of one batch per query in {wall:.0f} s "
                  f"({'holders unchanged' if held_now == held else 'targets moved during the rounds'})")  # fmt: skip
            for name in names:
                mine = held_now.get(name, [])
                rss, peak = rss_mib(pids[name])
                print(f"    {name}: CPU {cpu[name] / intervals:.2f} s per {trigger_s:g} s interval ({cpu[name] / wall:.0%} of a core), "
                      f"{len(mine)} targets / {sum(by_target[t] for t in mine)} queries held, RSS {rss:.0f} MiB (peak {peak:.0f})")  # fmt: skip
            print(f"    per job-batch: instances {sum(cpu.values()) / job_batches * 1000:.2f} ms CPU, PostgreSQL "
                  f"{pg_cpu / job_batches * 1000:.2f} ms CPU, {statements.calls / job_batches:.2f} statement executions, "
                  f"{pg.tup_inserted / job_batches:.2f} rows inserted, {pg.tup_updated / job_batches:.2f} updated")  # fmt: skip
            print(f"    PostgreSQL: CPU {pg_cpu / intervals:.2f} s per {trigger_s:g} s interval; {pg.xact_commit / wall:.1f} "
                  f"transactions/s; rows inserted {pg.tup_inserted / wall:,.0f}/s, updated {pg.tup_updated / wall:,.0f}/s, "
                  f"deleted {pg.tup_deleted / wall:,.0f}/s (inserted per round: {per_round}); {statements.calls / wall:,.0f} statement executions/s "
                  f"({statements.exec_s / intervals:.2f} s of execution per interval)")  # fmt: skip
            for calls, nrows, exec_s, text in statements.top:
                print(f"      {calls:>7} calls {nrows:>8} rows {exec_s:6.2f} s  {text}")
            print(f"    connections (samples of {activity.samples}): {activity.counts()}; "
                  f"longest open transaction {activity.longest_xact_s:.1f} s (last statement: {activity.longest_xact_query})")  # fmt: skip

            holder = next((n for n, ts in held_now.items() if fault_log.path.parent.name in ts), "?")
            try:
                notified = wait_for("the fault's notification at the webhook",
                                    lambda: _notified_at(rx, fault_log.query_id), timeout_s=300, interval_s=0.2)  # fmt: skip
            except AssertionError:
                notified, fault_s = float("nan"), float("nan")
                print(f"    fault: NO {FAULT_RULE} notification at the webhook within 300 s of the future-dated row "
                      f"({fault_log.path.parent.name}, held by {holder})", flush=True)  # fmt: skip
            else:
                fault_s = notified - fault_at
                print(f"    fault: future-dated row appended to one query ({fault_log.path.parent.name}, held by {holder}) "
                      f"-> {FAULT_RULE} notification at the webhook {fault_s:.1f} s later", flush=True)  # fmt: skip
        finally:
            codes = {}
            for name, daemon in daemons.items():
                if daemon.proc is not None and daemon.proc.poll() is None:
                    codes[name] = daemon.terminate(timeout_s=60)
                daemon.close()
            engine.engine.dispose()
        fired = [ln for d in daemons.values() for ln in d.log().splitlines() if f"alert {FAULT_RULE} firing for" in ln]
        if fired:  # the daemon log's local time is this machine's (UTC here)
            at = datetime.strptime(fired[0][:23], "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()
            print(f"    fault: the firing was logged {at - fault_at:.1f} s after the append "
                  f"(evaluated), {notified - at:.1f} s before it reached the webhook (delivery)")  # fmt: skip
        for name, daemon in daemons.items():
            text = daemon.log()
            skipped = sum(1 for ln in text.splitlines() if "skipp" in ln.lower() or "missed" in ln.lower())
            print(f"    {name} log: {skipped} skipped/missed runs, exit {codes.get(name)}")
    result = {
        "queries": queries, "instances": instances, "targets": targets, "catch_up_s": round(catch_up_s, 1),
        "cpu_per_interval_s": {n: round(c / intervals, 2) for n, c in cpu.items()},
        "pg_cpu_per_interval_s": round(pg_cpu / intervals, 2), "xact_per_s": round(pg.xact_commit / wall, 1),
        "rows_inserted_per_s": round(pg.tup_inserted / wall), "rows_updated_per_s": round(pg.tup_updated / wall),
        "statements_per_s": round(statements.calls / wall), "fault_to_notification_s": round(fault_s, 1),
        "trigger_s": trigger_s, "cpu_ms_per_job_batch": round(sum(cpu.values()) / job_batches * 1000, 2),
        "pg_cpu_ms_per_job_batch": round(pg_cpu / job_batches * 1000, 2),
        "statements_per_job_batch": round(statements.calls / job_batches, 2),
    }  # fmt: skip
    print(f"RESULT {result}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", default="1000", help="comma-separated query counts")
    parser.add_argument("--instances", default="1,2,3", help="comma-separated instance counts")
    parser.add_argument("--targets", type=int, default=12, help="event-log directories (targets) the queries spread over")
    parser.add_argument("--history", type=int, default=6, help="batches per query written before the instances start")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of one new batch per query (at least 2)")
    parser.add_argument("--trigger", type=float, default=TRIGGER_S,
                        help="seconds between two batches of a query, and the poll and evaluation interval")  # fmt: skip
    parser.add_argument("--profile", type=Path, help="sample each instance with py-spy in the steady rounds into DIR")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds: at least 2 (the fault is injected in the second round)")
    with tempfile.TemporaryDirectory() as tmp, database("postgresql", Path(tmp)) as (first_url, server):
        enable_statement_stats(server, first_url)
        url: str | None = first_url
        for queries in (int(q) for q in args.queries.split(",")):
            for instances in (int(n) for n in args.instances.split(",")):
                if url is None:
                    url = server.create_database()
                    enable_statement_stats(server, url)
                run(server, url, queries, instances, args.targets, args.history, args.rounds, args.profile, args.trigger)
                url = None


if __name__ == "__main__":
    main()
