"""Run every ``bench_*.py`` script in this folder, one after the other (``make bench``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    """Run each benchmark as ``python -m tests.benchmarks.<name>``; return the number that failed."""
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.stem}", flush=True)
        proc = subprocess.run(
            [sys.executable, "-m", f"tests.benchmarks.{script.stem}"], cwd=HERE.parents[1], check=False
        )
        if proc.returncode != 0:
            print(f"!! {script.stem} exited with {proc.returncode}", flush=True)
            failed += 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
