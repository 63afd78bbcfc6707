"""Benchmark: evaluating at every batch stays linear (issue 10, Performance).

* ``scan`` of one query's event log with N batches (default 10,000 and 100,000): the log is made of the
  recorded real progress line of batch 4 of tests/fixtures/spark/real-4.3.0/eventlog_trimmed.jsonl (one
  source, one state operator), rewritten per batch (batch id, one-second trigger times, event times and
  watermark advancing with them), so every rule sees a healthy query. Reported: parse (the event-log
  collector), replay (:func:`monitor.commands._scan_render.build_report`: every rule at every batch) and end to end
  (both plus rendering the JSON document), in batches per CPU second, and the ratio of the large to the
  small run's CPU time (linear: the ratio of batch counts).
* the daemon catching up after a restart: N batches (default 2,500, 5,000 and 10,000) stored in SQLite
  after the job's evaluation cursor, then one :meth:`monitor.daemon.runtime.Runtime.evaluate` tick, which
  replays them all, in batches per second and the ratio between sizes.

* ``scan`` of a log whose state is kept and never removed (``--kept``, issue 16: ``state_growth`` read its
  whole window at every batch).

Run: ``.venv/bin/python -m tests.benchmarks.bench_replay [--scan 10000,100000] [--daemon 2500,5000,10000] [--kept 10000]``
(``make bench`` runs it with the defaults). Timings are CPU seconds of this process (one core).
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATE_LOG = REPO / "tests" / "fixtures" / "spark" / "real-4.3.0" / "eventlog_trimmed.jsonl"
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EVENT_START = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def _iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def write_log(path: Path, batches: int, *, removed: int = 5) -> int:
    """One query's event log with ``batches`` progress lines (plus its start); returns its size in bytes.

    ``removed``: each state operator's ``numRowsRemoved`` per batch (0: a state kept and never evicted, at a
    constant 50 rows: ``state_growth`` then fits its whole window at every batch, finding nothing)."""
    events = [json.loads(line) for line in TEMPLATE_LOG.read_text().splitlines()]
    started = next(e for e in events if e["Event"].endswith("QueryStartedEvent"))
    progress = next(e for e in events if e["Event"].endswith("QueryProgressEvent") and e["progress"]["batchId"] == 4)
    started = {**started, "timestamp": _iso(START - timedelta(seconds=1))}
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(started, separators=(",", ":")) + "\n")
        for b in range(batches):
            event: dict[str, Any] = copy.deepcopy(progress)
            p = event["progress"]
            p.update(batchId=b, runId=started["runId"], id=started["id"], timestamp=_iso(START + timedelta(seconds=b)))
            event_max = EVENT_START + timedelta(seconds=b)
            p["eventTime"] = {
                "min": _iso(event_max - timedelta(seconds=5)),
                "avg": _iso(event_max - timedelta(seconds=2)),
                "max": _iso(event_max),
                "watermark": _iso(event_max - timedelta(minutes=10, seconds=1)),
            }
            for op in p.get("stateOperators", []):
                op.update(numRowsTotal=50, numRowsRemoved=removed, numRowsDroppedByWatermark=0)
            out.write(json.dumps(event, separators=(",", ":")) + "\n")
    return path.stat().st_size


def scan(path: Path) -> dict[str, float]:
    """CPU seconds of parsing, replaying and rendering one log."""
    from collectors.spark.eventlog import EventLogCollector
    from monitor.commands._scan_render import build_report, render_json
    from rules.config import RulesConfig
    from rules.registry import Evaluator

    t0 = time.process_time()
    # as `tidegauge scan` without --db reads: no raw documents kept
    poll = EventLogCollector([path], keep_raw=False).poll(datetime(2030, 1, 1, tzinfo=UTC))
    t1 = time.process_time()
    report = build_report(Evaluator(RulesConfig()), list(poll.samples))
    t2 = time.process_time()
    render_json(report)
    t3 = time.process_time()
    assert not report.findings, [f.message for f in report.findings]  # a healthy query: nothing to report
    return {"parse": t1 - t0, "replay": t2 - t1, "render": t3 - t2, "total": t3 - t0}


def catch_up(work: Path, batches: int) -> float:
    """CPU seconds of one daemon tick replaying ``batches`` stored batches after a restart."""
    from collectors.spark.eventlog import EventLogCollector
    from monitor.daemon.runtime import Runtime
    from monitor.metrics.latest import LatestSamples
    from monitor.store import open_store, save_poll, set_cursor, upgrade
    from rules.config import RulesConfig

    log = work / f"catch-up-{batches}"
    write_log(log, batches)
    poll = EventLogCollector([log]).poll(datetime(2030, 1, 1, tzinfo=UTC))
    url = f"sqlite:///{work / f'catch-up-{batches}.db'}"
    upgrade(url)
    store = open_store(url)
    try:
        job = poll.samples[0].job
        with store.sessions.begin() as session:
            save_poll(session, poll, collector="spark-eventlog")
            # the daemon had evaluated up to the first batch when it was stopped
            set_cursor(session, "rules", f"spark/{job.job_id}", {"evaluated_at": START.isoformat()}, START)
        runtime = Runtime(sessions=store.sessions, targets=[], latest=LatestSamples(), rules_config=RulesConfig())
        now = START + timedelta(seconds=batches + 5)
        t0 = time.process_time()
        runtime.evaluate(now)
        return time.process_time() - t0
    finally:
        store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scan", default="10000,100000")
    parser.add_argument("--daemon", default="2500,5000,10000")
    parser.add_argument("--kept", default="10000", help="scan sizes of a log whose state is never removed")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tidegauge-bench-replay-"))
    sizes = [int(n) for n in args.scan.split(",") if n]
    print(f"{'scan batches':>12} {'MB':>6} {'parse b/s':>10} {'replay b/s':>11} {'end-to-end b/s':>15} {'CPU s':>7}")
    totals: dict[int, float] = {}
    for n in sizes:
        path = work / f"local-scan-{n}"
        size = write_log(path, n)
        r = scan(path)
        totals[n] = r["total"]
        print(f"{n:>12} {size / 1e6:>6.1f} {n / r['parse']:>10.0f} {n / r['replay']:>11.0f} {n / r['total']:>15.0f} "
              f"{r['total']:>7.2f}")
        path.unlink()
    if len(sizes) >= 2:
        a, b = sizes[0], sizes[-1]
        print(f"scan CPU ratio {b}/{a} batches: {totals[b] / totals[a]:.1f} (linear: {b / a:.1f})")
    for n in [int(n) for n in args.kept.split(",") if n]:
        path = work / f"local-kept-{n}"
        write_log(path, n, removed=0)
        r = scan(path)
        print(f"{n:>12} batches, state kept and never removed: replay {n / r['replay']:.0f} b/s, "
              f"end to end {n / r['total']:.0f} b/s ({r['total']:.2f} CPU s)")
        path.unlink()
    dsizes = [int(n) for n in args.daemon.split(",") if n]
    print(f"{'catch-up batches':>16} {'tick CPU s':>11} {'batches/s':>10}")
    ticks: dict[int, float] = {}
    for n in dsizes:
        ticks[n] = catch_up(work, n)
        print(f"{n:>16} {ticks[n]:>11.2f} {n / ticks[n]:>10.0f}")
    if len(dsizes) >= 2:
        a, b = dsizes[0], dsizes[-1]
        print(f"catch-up CPU ratio {b}/{a} batches: {ticks[b] / ticks[a]:.1f} (linear: {b / a:.1f})")


if __name__ == "__main__":
    main()
