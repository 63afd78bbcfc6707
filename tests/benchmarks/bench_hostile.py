"""Time and memory of every hostile case (issue 19), against each case's deadline and 300 MB bound.

Runs ``pytest tests/hostile`` with :data:`tests.hostile.harness.REPORT_ENV` set, then prints one line per
measured case: wall time (or seconds from SIGTERM to exit), peak RSS, and whether each is within its bound.

Run: `.venv/bin/python -m tests.benchmarks.bench_hostile`. Not a test: it prints figures for the issue note.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.hostile.harness import REPORT_ENV

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    """Run the hostile suite once and print its report; return 1 if a case broke its bounds."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "hostile.jsonl"
        env = {**os.environ, REPORT_ENV: str(report)}
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/hostile"],
            cwd=ROOT, env=env, check=False,
        )
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    broken = 0
    print(f"{'case':60} {'time s':>8} {'deadline':>8} {'RSS MiB':>8} {'bound':>6}  verdict")
    for row in rows:
        seconds = row["stop_s"] if row["stop_s"] is not None else row["wall_s"]
        ok = seconds <= row["deadline_s"] and row["peak_rss_mib"] <= row["rss_bound_mib"] and not row["killed"]
        broken += not ok
        print(
            f"{row['case'][:60]:60} {seconds:8.2f} {row['deadline_s']:8.1f} {row['peak_rss_mib']:8.1f} "
            f"{row['rss_bound_mib']:6.0f}  {'ok' if ok else 'OVER'}"
        )
    print(f"{len(rows)} cases, {broken} over their bounds")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
