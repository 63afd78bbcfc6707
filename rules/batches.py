"""Helpers shared by the batch-history detectors: selecting a query's batches, formatting times."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from monitor.model import Sample, SampleKind

__all__ = ["fmt_duration", "fmt_time", "progress_batches"]


def progress_batches(samples: Sequence[Sample]) -> list[Sample]:
    """The query-scope ``PROGRESS`` samples of ``samples`` (one query), in time order.

    Idle events, lifecycle events and per-source samples are left out: detectors reason about batches.
    A batch seen twice (the same ``run_id`` and ``batch_id`` read from two inputs) is kept once.
    """
    seen: set[tuple[str | None, int | None, datetime]] = set()
    out: list[Sample] = []
    for sample in samples:
        if sample.kind is not SampleKind.PROGRESS or not sample.scope.is_job():
            continue
        key = (sample.job.run_id, sample.batch_id, sample.observed_at)
        if key in seen:
            continue
        seen.add(key)
        out.append(sample)
    out.sort(key=lambda s: (s.observed_at, s.batch_id if s.batch_id is not None else -1))
    return out


def fmt_time(value: datetime) -> str:
    """ISO-8601 UTC, as short as exact: ``2099-01-01T00:00Z``, ``2026-11-29T11:32:48.289Z``."""
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if value.second:
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value.strftime("%Y-%m-%dT%H:%MZ")


def fmt_duration(delta: timedelta) -> str:
    """A rough human duration in the largest fitting unit: ``72 years``, ``3 days``, ``14 min``, ``9 s``."""
    seconds = abs(delta.total_seconds())
    for unit, size in (("years", 365.25 * 86400), ("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            amount = seconds / size
            text = f"{amount:.0f}" if amount >= 10 or amount == int(amount) else f"{amount:.1f}"
            return f"{text} {unit}"
    return f"{seconds:.0f} s"
