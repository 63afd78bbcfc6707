"""`tidegauge scan` of a streaming-only event log against Spark's own History Server replaying the same log
(issue 16 target: scan at least 3x the History Server's speed).

The log: the recorded real Spark 4.3.0 event log's application header (``SparkListenerLogStart``,
``ExecutorAdded``, ``EnvironmentUpdate``, ``ApplicationStart``), then one query run of ``--batches`` progress
events (the recorded batches, ids and trigger times rewritten by ``tests/live_eventlog.py``, 10 s apart), its
``QueryTerminatedEvent`` and ``SparkListenerApplicationEnd``: streaming events only, no jobs, stages or tasks. (The recording's
``EnvironmentUpdate`` had its host maps removed; they are put back empty, as Spark's parser requires them.)
Written plain (uncompressed), so neither side pays for a codec.

Timed, each ``--runs`` times, one process at a time, under the caller's ``nice``:

* **scan**: ``tidegauge scan LOG --format json`` as a subprocess, wall time and its CPU (user + system,
  from ``wait4``'s rusage).
* **History Server**: ``org.apache.spark.deploy.history.HistoryServer`` from the PySpark package's jars
  (``spark-class``), ``spark.history.fs.logDirectory`` = a directory holding only the log,
  ``spark.history.fs.update.interval=1s``, in-memory store (Spark's default). Timed from the JVM's start:
  *listed* = ``/api/v1/applications`` names the application (the listing pass: Spark reads the log
  filtering its lines by event name and the tail for the end event); *replayed* = the first
  ``/api/v1/applications/<id>/environment`` answer, which makes the History Server load the application's
  UI: a replay of every event of the log through its listeners, the SQL and Structured Streaming ones
  included (``StreamingQueryStatusListener``, the History Server's streaming tab). Its CPU is the JVM's
  user + system time (``/proc/<pid>/stat``, all its threads: JIT compilers and GC included) at that moment;
  the replay's own share is the CPU used between *listed* and *replayed*.

Printed: each run, the medians, and scan's speed over the History Server's (its replay time / scan's time)
by wall and by CPU, against the full start-to-replayed figure and against the replay step alone.

Run: ``PYTHONPATH=. nice -n 10 python -m tests.benchmarks.bench_scan_vs_history_server [--batches 120000]
[--runs 3]``. Not a test: it prints figures for the issue note.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyspark
import zstandard

from tests.conftest import RECORDED_FIXTURES
from tests.daemon_process import free_port
from tests.live_eventlog import RECORDED_DIR, RECORDED_FILE, LiveEventLog

SPARK = RECORDED_FIXTURES / "spark" / "real-4.3.0"
HEADER_EVENTS = ("SparkListenerLogStart", "SparkListenerExecutorAdded", "SparkListenerEnvironmentUpdate",
                 "SparkListenerApplicationStart")  # fmt: skip
TEMPLATES = (2, 4, 5, 4, 5, 4)  # data, data, no-data ... (as bench_daemon_rss)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def build_log(path: Path, batches: int) -> str:
    """Write the streaming-only log (module docstring) to ``path``; returns the application id."""
    with (SPARK / RECORDED_DIR / RECORDED_FILE).open("rb") as f:
        lines = zstandard.ZstdDecompressor().stream_reader(f).read().decode("utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    header = [e for e in events if e["Event"] in HEADER_EVENTS]
    for event in header:  # the recording dropped these maps (host details); Spark's parser needs them
        if event.pop("_trimmed", None) is not None:
            for key in ("JVM Information", "System Properties", "Classpath Entries", "Hadoop Properties"):
                event.setdefault(key, {})
    app_start = next(e for e in header if e["Event"] == "SparkListenerApplicationStart")
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in header), encoding="utf-8")
    start = datetime.fromtimestamp(app_start["Timestamp"] / 1000, UTC) + timedelta(seconds=5)
    log = LiveEventLog(path, SPARK, start, step=timedelta(seconds=10))
    log.start_run()
    for first in range(0, batches, 2_000):
        log.batches(*(TEMPLATES[j % len(TEMPLATES)] for j in range(first, min(batches, first + 2_000))))
    log.terminate()
    end = {"Event": "SparkListenerApplicationEnd", "Timestamp": int(log.clock.timestamp() * 1000)}
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(end) + "\n")
    return str(app_start["App ID"])


def time_scan(log: Path) -> tuple[float, float]:
    """``(wall s, CPU s)`` of ``tidegauge scan LOG --format json`` (exit 0 or 1: findings)."""
    argv = [sys.executable, "-m", "monitor.cli", "scan", str(log), "--format", "json"]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if code not in (0, 1):
        raise SystemExit(f"scan exited {code}: {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its reaped children (``/proc/<pid>/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return sum(int(x) for x in fields[11:15]) / CLK_TCK


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=600) as answer:
            return json.loads(answer.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None  # not up yet (refused, or a page that is not JSON yet)


def time_history_server(log_dir: Path, app_id: str, work: Path) -> dict[str, float]:
    """One History Server run over ``log_dir`` (module docstring): seconds from the JVM's start to listed and
    to replayed, and its CPU seconds at both."""
    spark_home = Path(pyspark.__file__).parent
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_HISTORY_OPTS": " ".join([
            f"-Dspark.history.fs.logDirectory=file://{log_dir}",
            f"-Dspark.history.ui.port={port}",
            "-Dspark.history.fs.update.interval=1s",
        ]),
        "SPARK_LOG_DIR": str(work / "shs-logs"),
    }
    argv = [str(spark_home / "bin" / "spark-class"), "org.apache.spark.deploy.history.HistoryServer"]
    base = f"http://127.0.0.1:{port}/api/v1/applications"
    started = time.perf_counter()
    with (work / "shs.log").open("ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        listed = None
        while listed is None:
            if proc.poll() is not None:
                raise SystemExit(f"History Server exited {proc.returncode}; see {work / 'shs.log'}")
            apps = _get(base)
            if apps and any(a.get("id") == app_id for a in apps):
                listed = time.perf_counter() - started
                listed_cpu = _cpu_s(proc.pid)
            else:
                time.sleep(0.05)
        env_answer = _get(f"{base}/{app_id}/environment")
        replayed = time.perf_counter() - started
        replayed_cpu = _cpu_s(proc.pid)
        if not env_answer or "sparkProperties" not in env_answer:
            raise SystemExit(f"History Server gave no environment for {app_id}: {str(env_answer)[:300]}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {"listed": listed, "replayed": replayed, "listed_cpu": listed_cpu, "replayed_cpu": replayed_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=120_000, help="progress events in the log")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the log here (and reuse it if present)")
    args = parser.parse_args()
    if shutil.which("java") is None:
        raise SystemExit("java is not on PATH: the History Server needs a JDK 17+")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log_dir = (args.keep or work / "events")
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / "local-1795951957158"
        t0 = time.perf_counter()
        app_id = "local-1795951957158"
        if not log.exists():
            app_id = build_log(log, args.batches)
        print(f"log: {log.stat().st_size / 1e6:.0f} MB, {args.batches:,} progress events, app {app_id} "
              f"(ready in {time.perf_counter() - t0:.0f} s)", flush=True)
        scans: list[tuple[float, float]] = []
        servers: list[dict[str, float]] = []
        for run in range(args.runs):  # alternated: the machine's load drifts
            scans.append(time_scan(log))
            print(f"run {run + 1}: scan {scans[-1][0]:.1f} s wall, {scans[-1][1]:.1f} s CPU", flush=True)
            servers.append(time_history_server(log_dir, app_id, work))
            s = servers[-1]
            print(f"run {run + 1}: History Server listed at {s['listed']:.1f} s ({s['listed_cpu']:.1f} s CPU), "
                  f"replayed at {s['replayed']:.1f} s ({s['replayed_cpu']:.1f} s CPU)", flush=True)
    scan_wall = statistics.median(w for w, _ in scans)
    scan_cpu = statistics.median(c for _, c in scans)
    full_wall = statistics.median(s["replayed"] for s in servers)
    full_cpu = statistics.median(s["replayed_cpu"] for s in servers)
    step_wall = statistics.median(s["replayed"] - s["listed"] for s in servers)
    step_cpu = statistics.median(s["replayed_cpu"] - s["listed_cpu"] for s in servers)
    print(f"median of {args.runs}: scan {scan_wall:.1f} s wall / {scan_cpu:.1f} s CPU; History Server start to "
          f"replayed {full_wall:.1f} s / {full_cpu:.1f} s CPU, replay step alone {step_wall:.1f} s / "
          f"{step_cpu:.1f} s CPU")
    print(f"scan's speed over the History Server's: {full_wall / scan_wall:.2f}x wall, {full_cpu / scan_cpu:.2f}x "
          f"CPU (start to replayed); {step_wall / scan_wall:.2f}x wall, {step_cpu / scan_cpu:.2f}x CPU "
          f"(replay step alone)")


if __name__ == "__main__":
    main()
