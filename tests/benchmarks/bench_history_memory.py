"""Memory of the daemon's in-memory histories: N Spark queries x 1 h of 10 s triggers (issue 16 target:
10,000 jobs with 1 h of history under 2 GB).

What is built is what a daemon that has run for an hour holds for each job:

* the job's sample list (``monitor.daemon.histories.JobHistories``: every sample of the last hour, oldest
  first), and
* its replay state's :class:`rules.history.RollingHistory` fed the same samples (the split the rules read:
  job batches, per-scope series), with ``state_growth``'s kept :class:`rules.history.StateTrack`.

The samples are the recorded real Spark 4.3.0 event log's (``tests/fixtures/spark/real-4.3.0``, through
``tests/live_eventlog.py``: query id, run id, batch id and trigger time rewritten), read by the event-log
collector, stored in a SQLite store and loaded back, so they have the collector's scopes and ``extra`` keys.
Each job's hour is then made as the daemon's store loader makes it in steady state: one load per tick
(``load_samples_after``, whose sharing of job refs, scopes, times and names spans one load), every text
and time a new object per row as a database driver returns them, ``extra`` decoded from JSON per row.

Measured: tracemalloc bytes of the histories (total, per sample, per job; ``--top`` lines by allocation
site) and the process RSS growth. Not a test: it prints figures for the issue note.

Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_history_memory [--jobs 10000] [--hours 1]
[--trace-jobs 200] [--top 12]`` (``make bench-memory``).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from collectors.spark.eventlog import EventLogCollector
from monitor.daemon.histories import _share_parts
from monitor.model import Sample
from monitor.store import open_store, save_poll, upgrade
from monitor.store.repo import _sample_select, _to_sample
from monitor.store.tables import SampleRow
from rules.history import RollingHistory, StateTrack
from tests.conftest import RECORDED_FIXTURES
from tests.live_eventlog import LiveEventLog

TRIGGER = timedelta(seconds=10)
TEMPLATES = (2, 4, 5, 4, 5, 4)  # data, data, no-data ... (as bench_daemon_rss)
START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def template_rows(ticks: int) -> list[list[dict[str, Any]]]:
    """One job's stored sample rows, per tick (``ticks`` batches of 10 s), as the store loader reads them:
    the recorded log rewritten by :class:`LiveEventLog`, polled by the event-log collector, saved, selected."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log = LiveEventLog(work / "events" / "app-0001.inprogress", RECORDED_FIXTURES / "spark" / "real-4.3.0",
                           START, step=TRIGGER)
        log.batches(*(TEMPLATES[j % len(TEMPLATES)] for j in range(ticks)))
        poll = EventLogCollector([str(work / "events")], keep_raw=False).poll(START + ticks * TRIGGER)
        assert not poll.errors, poll.errors[:1]
        url = f"sqlite:///{work / 'tg.db'}"
        upgrade(url)
        store = open_store(url)
        try:
            with store.sessions.begin() as session:
                save_poll(session, poll)
            with store.sessions() as session:
                rows = [dict(r._mapping) for r in session.execute(_sample_select().order_by(SampleRow.id))]
        finally:
            store.dispose()
    by_tick: dict[datetime, list[dict[str, Any]]] = {}
    for row in rows:
        by_tick.setdefault(row["observed_at"], []).append(row)
    return [by_tick[t] for t in sorted(by_tick)]


class _Row:
    """What :func:`_to_sample` reads of a SQLAlchemy row (its ``_mapping``)."""

    __slots__ = ("_mapping",)

    def __init__(self, mapping: dict[str, Any]) -> None:
        self._mapping = mapping


def _fresh(value: Any) -> Any:
    """A new object equal to ``value``, as a database driver returns each row's texts and times."""
    if isinstance(value, str):
        return (value + "\x00")[:-1] if len(value) > 1 else value
    if isinstance(value, datetime):
        return value.replace(microsecond=value.microsecond)
    return value


def job_samples(template: list[list[dict[str, Any]]], job: int, share: bool) -> list[Sample]:
    """Job number ``job``'s hour of samples, one store load per tick (see the module docstring), each tick's
    samples made to share equal parts with the job's earlier ones as ``JobHistories`` does (``share``)."""
    job_id = f"{job:08d}-e9ff-44d2-9c1a-ffa8ffe6c0c8"
    run_id = f"{job:08d}-0000-4000-8000-000000000000"
    out: list[Sample] = []
    for rows in template:
        interned: dict[Any, Any] = {}  # one load_samples_after call per tick
        loaded = []
        for row in rows:
            mapping = {k: _fresh(v) for k, v in row.items()}
            mapping["extra"] = json.loads(json.dumps(row["extra"]))
            row_like: Any = _Row(mapping)  # what _to_sample reads of a Row
            loaded.append(_to_sample(row_like, mapping["job_engine"], _fresh(job_id), _fresh(run_id), interned))
        if share:
            _share_parts(out, loaded)
        out.extend(loaded)
    return out


def hold(samples: list[Sample], lookback: timedelta) -> tuple[list[Sample], RollingHistory]:
    """What the daemon keeps of one job: its sample list and its rolling history (with ``state_growth``'s
    kept state), fed one tick at a time as the daemon's replays feed it."""
    rolling = RollingHistory(lookback, lookback)
    i = 0
    while i < len(samples):
        j = i
        at = samples[i].observed_at
        while j < len(samples) and samples[j].observed_at == at:
            j += 1
        history = rolling.extend(samples[i:j])
        i = j
    assert history is not None
    track = history.rule_state["state_growth"] = StateTrack()
    track.catch_up(history.batches)
    return samples, rolling


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def build(template: list[list[dict[str, Any]]], jobs: int, lookback: timedelta, share: bool) -> list[Any]:
    """Every job's held structures."""
    return [hold(job_samples(template, j, share), lookback) for j in range(jobs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs for the RSS figure")
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--trace-jobs", type=int, default=200, help="jobs for the tracemalloc breakdown")
    parser.add_argument("--top", type=int, default=12, help="allocation sites listed")
    parser.add_argument("--no-share", action="store_true",
                        help="keep each load's own copies (the daemon before it shared equal parts across ticks)")
    args = parser.parse_args()
    lookback = timedelta(hours=args.hours)
    ticks = int(lookback / TRIGGER)
    template = template_rows(ticks)
    per_job = sum(len(rows) for rows in template)
    scopes = sorted({(r["scope_source"], r["scope_operator"]) for rows in template for r in rows}, key=str)
    extra_keys = sorted({k for rows in template for r in rows for k in r["extra"]})
    print(f"one job: {len(template)} ticks of {TRIGGER.total_seconds():.0f} s, {per_job} samples "
          f"({per_job / len(template):.1f} per tick; scopes {scopes}; extra keys {extra_keys})")

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    held = build(template, args.trace_jobs, lookback, not args.no_share)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = after.compare_to(before, "lineno")
    total = sum(s.size_diff for s in stats)
    n = args.trace_jobs * per_job
    print(f"tracemalloc, {args.trace_jobs} jobs: {total / 2**20:.1f} MiB, {total / n:.0f} B/sample, "
          f"{total / args.trace_jobs / 1024:.0f} KiB/job -> {total / args.trace_jobs * 10_000 / 2**30:.2f} GiB "
          f"at 10,000 jobs")
    for s in stats[: args.top]:
        frame = s.traceback[0]
        print(f"  {s.size_diff / n:7.1f} B/sample  {s.count_diff / n:5.2f} blocks/sample  "
              f"{frame.filename.rsplit('/', 2)[-2:]}:{frame.lineno}")
    del held, before, after, stats
    gc.collect()

    rss0 = _rss_mib()
    t0 = time.perf_counter()
    held = build(template, args.jobs, lookback, not args.no_share)
    gc.collect()
    rss1 = _rss_mib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    grown = rss1 - rss0
    print(f"RSS, {args.jobs} jobs x {args.hours:g} h ({args.jobs * per_job:,} samples, built in "
          f"{time.perf_counter() - t0:.0f} s): +{grown:.0f} MiB ({grown * 2**20 / (args.jobs * per_job):.0f} "
          f"B/sample), process {rss1:.0f} MiB, peak {peak:.0f} MiB"
          + ("" if args.jobs == 10_000 else f" -> {grown / args.jobs * 10_000 / 1024:.2f} GiB at 10,000 jobs"))
    del held


if __name__ == "__main__":
    main()
