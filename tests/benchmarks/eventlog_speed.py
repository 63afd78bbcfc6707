"""Reading speed of an event log through :class:`collectors.spark.eventlog.EventLogCollector`, wherever it is
kept (shared by the S3 and HDFS benchmarks, which compare a remote log with the same log on disk)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import zstandard

from collectors.spark.eventlog import EventLogCollector

__all__ = ["FIXTURE", "big_logs", "read_speed_mb_s"]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "real-4.3.0" / "eventlog_trimmed.jsonl"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def big_logs(repeat: int = 1_200) -> tuple[bytes, dict[str, bytes]]:
    """``(events, {file name: stored bytes})``: the recorded real log's header lines and its progress lines
    repeated ``repeat`` times (~40 MB of events at the default), stored plain (``big-app-1``) and as zstd
    (``big-app-2.zstd``)."""
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    body = b"".join(lines[:7]) + b"".join(lines[7:]) * repeat
    return body, {"big-app-1": body, "big-app-2.zstd": zstandard.ZstdCompressor(level=1).compress(body)}


def read_speed_mb_s(
    target: str, events_bytes: int, storage_options: Mapping[str, Any] | None = None, repeats: int = 3
) -> float:
    """Decompressed MB (10^6 bytes of events) per second of one full poll of ``target`` by a fresh collector,
    the best of ``repeats`` (a poll with errors raises ``AssertionError``)."""
    best = float("inf")
    for _ in range(repeats):
        collector = EventLogCollector([target], keep_raw=False, storage_options=storage_options)
        started = time.perf_counter()
        result = collector.poll(NOW)
        best = min(best, time.perf_counter() - started)
        assert not result.errors, result.errors[:1]
    return events_bytes / best / 1e6
