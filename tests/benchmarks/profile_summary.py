"""Summarise py-spy collapsed stacks (``py-spy record --format raw``, as ``bench_fleet --profile`` writes them)
into where a daemon's CPU goes: each sample is charged to the first bucket (in :data:`BUCKETS` order) whose
pattern appears in its stack (frames ``function (file:line)``, outermost first), else to ``other``.

Run: ``python -m tests.benchmarks.profile_summary FILE [--per-job-batch N] [--seconds S] [--top 25]``. Prints
each bucket's share of the samples and, with ``--per-job-batch`` (job-batches in the sampled time: queries x
rounds) and ``--seconds`` (the instance's CPU seconds in that time, from the benchmark's output), its CPU ms per
job-batch; then the ``--top`` leaf functions by self samples. Not a test.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

#: (bucket, regular expression over the stack); the first match wins, so more specific buckets go first.
BUCKETS: tuple[tuple[str, str], ...] = (
    ("lease / fleet tick", r"monitor/daemon/fleet\.py|fleet_repo\.py"),
    ("cursor read", r"StoreCursors\.get|get_cursors|StoreCursors\.prefetch"),
    ("cursor write", r"StoreCursors\.write|set_cursors"),
    ("alerts + episodes (evaluation tick)", r"apply_transitions|step_all|episode|Episodes|load_alerts"),
    ("evaluation: load samples", r"histories\.py.*catch_up|load_samples_after|load_recent_samples"),
    ("evaluation: rules (replay, clock rules)", r"rules/|_clock_findings|evaluate_pipelines|evaluate_targets"),
    ("evaluation: other", r"daemon/evaluate\.py"),
    ("store samples (save_poll)", r"save_poll|record_job_sources"),
    ("parse event log", r"collectors/"),
    ("poll: other", r"daemon/poll\.py"),
    ("http / metrics / healthz", r"uvicorn|starlette|fastapi|metrics/"),
)


def summarise(text: str) -> tuple[Counter[str], Counter[str], int]:
    """(samples per bucket, self samples per leaf frame, total samples) of collapsed-stack ``text`` (lines
    ``frame;frame;... count``)."""
    buckets: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    patterns = [(name, re.compile(rx)) for name, rx in BUCKETS]
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        bucket = next((name for name, rx in patterns if rx.search(stack)), "other")
        buckets[bucket] += count
        leaves[stack.rsplit(";", 1)[-1]] += count
    return buckets, leaves, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--per-job-batch", type=int, help="job-batches in the sampled time (queries x rounds)")
    parser.add_argument("--seconds", type=float, help="the instance's CPU seconds in the sampled time")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    buckets, leaves, total = summarise(args.file.read_text())
    print(f"{total} samples")
    for name, n in buckets.most_common():
        line = f"  {n / total:6.1%}  {name}"
        if args.per_job_batch and args.seconds:
            line += f"  {args.seconds * n / total / args.per_job_batch * 1000:.3f} ms per job-batch"
        print(line)
    print("self time by leaf frame:")
    for frame, n in leaves.most_common(args.top):
        print(f"  {n / total:6.1%}  {frame}")


if __name__ == "__main__":
    main()
