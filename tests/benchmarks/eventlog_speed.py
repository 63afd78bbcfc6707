"""Reading speed of an event log through :class:`collectors.spark.eventlog.EventLogCollector`, wherever it is
kept (shared by the S3 and HDFS benchmarks, which compare a remote log with the same log on disk)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import zstandard

from collectors.spark.eventlog import EventLogCollector

__all__ = ["FIXTURE", "big_logs", "read_speeds_mb_s", "speed_line"]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "real-4.3.0" / "eventlog_trimmed.jsonl"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def big_logs(repeat: int = 1_200) -> tuple[bytes, dict[str, bytes]]:
    """``(events, {file name: stored bytes})``: the recorded real log's header lines and its progress lines
    repeated ``repeat`` times (~40 MB of events at the default), stored plain (``big-app-1``) and as zstd
    (``big-app-2.zstd``)."""
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    body = b"".join(lines[:7]) + b"".join(lines[7:]) * repeat
    return body, {"big-app-1": body, "big-app-2.zstd": zstandard.ZstdCompressor(level=1).compress(body)}


def read_speeds_mb_s(
    targets: Mapping[str, str],
    events_bytes: int,
    storage_options: Mapping[str, Mapping[str, Any]] | None = None,
    repeats: int = 5,
) -> dict[str, list[float]]:
    """``{label: [MB/s, ...]}``: decompressed MB (10^6 bytes of events) per second of one full poll of each
    target (``{label: path or URL}``) by a fresh collector, ``repeats`` times each, the targets alternated
    (the machine's load drifts); ``storage_options``: per label. A poll with errors raises
    ``AssertionError``."""
    seconds: dict[str, list[float]] = {label: [] for label in targets}
    for _ in range(repeats):
        for label, target in targets.items():
            options = (storage_options or {}).get(label)
            # the repeated lines compress over 1000x (zstd): not a decompression bomb here
            collector = EventLogCollector([target], keep_raw=False, storage_options=options, max_ratio=1_000_000)
            started = time.perf_counter()
            result = collector.poll(NOW)
            seconds[label].append(time.perf_counter() - started)
            assert not result.errors, result.errors[:1]
    return {label: [events_bytes / s / 1e6 for s in times] for label, times in seconds.items()}


def speed_line(figures: dict[str, list[float]], remote: str) -> str:
    """One line of :func:`read_speeds_mb_s`'s figures for ``local`` and ``remote``: median and best MB/s and
    the remote/local ratio of the medians (and of the bests)."""
    med = {label: statistics.median(v) for label, v in figures.items()}
    best = {label: max(v) for label, v in figures.items()}
    return (
        f"median local {med['local']:.1f} MB/s, {remote} {med[remote]:.1f} MB/s, {remote}/local "
        f"{med[remote] / med['local']:.0%} (best: {best['local']:.1f} / {best[remote]:.1f} MB/s, "
        f"{best[remote] / best['local']:.0%}; all local {[round(x, 1) for x in figures['local']]}, "
        f"{remote} {[round(x, 1) for x in figures[remote]]})"
    )
