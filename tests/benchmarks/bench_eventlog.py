"""Benchmark: event-log scanning throughput (MB/s) and peak memory of the Spark event-log collector.

Target (issue 2): at least 100 MB/s of event log on one core, compressed and plain, and a peak memory that
does not grow with the file size.

The logs are made of recorded real lines: the ordinary Spark events (jobs, stages, tasks, SQL executions)
of a real PySpark 4.3.0 run (tests/fixtures/spark-codecs/local-1795956025902, one-time events left out) and
the streaming-listener lines of one query run of tests/fixtures/spark/real-4.3.0/eventlog_trimmed.jsonl
(started, two progress, terminated), repeated block after block up to the target size. A second, worst-case
profile holds only streaming-listener lines (every line is parsed). zstd files are written at level 1
(Spark's default ``spark.io.compression.zstd.level``) with a frame closed after every block, as Spark's
``closeFrameOnFlush`` does.

Each measurement runs in a fresh process (``--measure``) that consumes ``EventLogCollector.iter_poll``, poll
after poll while one stops at the per-poll budget (``max_poll_bytes``), and drops the pieces (as the daemon
does after storing them); peak RSS is ``ru_maxrss`` of that process, and the baseline is the RSS after
imports.

Usage: ``python -m tests.benchmarks.bench_eventlog [--sizes-mb 200,1000] [--dir /tmp]``
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ORDINARY_SRC = REPO / "tests" / "fixtures" / "spark-codecs" / "local-1795956025902"
STREAMING_SRC = REPO / "tests" / "fixtures" / "spark" / "real-4.3.0" / "eventlog_trimmed.jsonl"
ONE_TIME = (
    b"SparkListenerLogStart",
    b"SparkListenerEnvironmentUpdate",
    b"SparkListenerApplication",
    b"SparkListenerExecutorAdded",
    b"SparkListenerBlockManagerAdded",
    b"SparkListenerResourceProfileAdded",
)
MARKER = b"StreamingQueryListener$Query"


def _blocks(profile: str) -> bytes:
    streaming = [
        line for line in STREAMING_SRC.read_bytes().splitlines(keepends=True) if MARKER in line[:200]
    ]
    if profile == "streaming-only":
        return b"".join(streaming)
    ordinary = [
        line
        for line in ORDINARY_SRC.read_bytes().splitlines(keepends=True)
        if MARKER not in line[:200] and not any(t in line[:80] for t in ONE_TIME)
    ]
    # one run of the query: started, progress batch 0, progress batch 1, terminated (lines 1-4 of streaming)
    return b"".join(streaming[:2]) + b"".join(ordinary) + b"".join(streaming[2:4])


def generate(directory: Path, profile: str, size_mb: int) -> tuple[Path, Path]:
    """Write ``<profile>-<size>.log`` (plain) and ``<profile>-<size>.log.zstd``-named Spark-style files."""
    import zstandard

    block = _blocks(profile)
    target = size_mb * 1_000_000
    plain = directory / f"local-{profile}-{size_mb}mb"
    packed = directory / f"local-{profile}-{size_mb}mb.zstd"
    written = 0
    with plain.open("wb") as out, packed.open("wb") as raw:
        writer = zstandard.ZstdCompressor(level=1).stream_writer(raw, closefd=False)
        while written < target:
            out.write(block)
            writer.write(block)
            writer.flush(zstandard.FLUSH_FRAME)
            written += len(block)
        writer.close()
    return plain, packed


def measure(path: Path) -> dict[str, float | int]:
    """Scan ``path`` once in this process; return time, bytes, samples and memory."""
    from collectors.spark.eventlog import EventLogCollector

    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    collector = EventLogCollector([path])
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    wall0 = time.perf_counter()
    samples = errors = log_bytes = polls = 0
    while polls == 0 or collector.more_to_read:
        for piece in collector.iter_poll(datetime(2026, 11, 29, tzinfo=UTC)):
            samples += len(piece.samples)
            errors += len(piece.errors)
        log_bytes += collector.decompressed_bytes_read
        polls += 1
    wall = time.perf_counter() - wall0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "file_bytes": path.stat().st_size,
        "log_bytes": log_bytes,
        "polls": polls,
        "samples": samples,
        "errors": errors,
        "baseline_rss_mb": baseline_kb / 1024,
        "peak_rss_mb": cpu1.ru_maxrss / 1024,
    }


def _measure_in_subprocess(path: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench_eventlog", "--measure", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-mb", default="200,1000")
    parser.add_argument(
        "--dir", default=None, help="where to write the generated logs (default: system temp)"
    )
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure))))
        return
    sizes = [int(s) for s in args.sizes_mb.split(",")]
    work = Path(tempfile.mkdtemp(prefix="tidegauge-bench-", dir=args.dir))
    cases = [("mixed", s) for s in sizes] + [("streaming-only", sizes[0])]
    print(
        f"{'profile':<15} {'size':>6} {'codec':<6} {'log MB/s':>9} {'file MB/s':>9} {'wall MB/s':>9} {'CPU s':>6} "
        f"{'wall s':>6} {'samples':>8} {'RSS base':>8} {'RSS peak':>8}"
    )
    try:
        for profile, size in cases:
            plain, packed = generate(work, profile, size)
            for codec, path in (("plain", plain), ("zstd", packed)):
                r = _measure_in_subprocess(path)
                cpu = max(r["cpu_s"], 1e-9)
                print(
                    f"{profile:<15} {size:>4}MB {codec:<6} {r['log_bytes'] / 1e6 / cpu:>9.0f} "
                    f"{r['file_bytes'] / 1e6 / cpu:>9.0f} {r['log_bytes'] / 1e6 / max(r['wall_s'], 1e-9):>9.0f} {r['cpu_s']:>6.2f} {r['wall_s']:>6.2f} "
                    f"{int(r['samples']):>8} {r['baseline_rss_mb']:>7.0f}M {r['peak_rss_mb']:>7.0f}M",
                    flush=True,
                )
            plain.unlink()
            packed.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        "MB/s = 10^6 bytes per CPU second of the scanning process (one core); log = decompressed event-log "
        "bytes, file = bytes on disk; wall MB/s = log bytes per wall-clock second (shared machine)."
    )


if __name__ == "__main__":
    main()
