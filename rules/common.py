"""Small helpers shared by the rules: epoch tests, tail windows, scope names for messages."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from monitor.model import Sample, Scope

__all__ = [
    "EPOCH",
    "NULL_EVENT_TIME_BEFORE",
    "flink_scope_name",
    "is_epoch",
    "scope_name",
    "since_index",
    "tail_since",
]

_TIME = attrgetter("observed_at")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Spark reports a watermark of 0 (1970-01-01) before any event time was seen, and ``eventTime.min`` of
#: 1970-01-01 when a batch held rows whose event time was null. Anything this close to the epoch is that,
#: not a real event time (a seconds value read as milliseconds lands later: 1.7e9 ms is 1970-01-20).
NULL_EVENT_TIME_BEFORE = EPOCH + timedelta(seconds=1)


def is_epoch(value: datetime | None) -> bool:
    """True for Spark's "nothing seen yet / null" marker time (within a second of 1970-01-01T00:00Z)."""
    return value is not None and value < NULL_EVENT_TIME_BEFORE


def since_index(samples: Sequence[Sample], since: datetime) -> int:
    """The index of the first sample (oldest first) with ``observed_at >= since`` (``len(samples)`` if none),
    by bisection: O(log n), nothing copied (a rule that needs only the ends of a window reads them by index)."""
    return bisect_left(samples, since, key=_TIME)


def tail_since(samples: Sequence[Sample], since: datetime) -> Sequence[Sample]:
    """The samples (oldest first) with ``observed_at >= since``, found by bisection (O(log n) plus the copy)."""
    return samples[bisect_left(samples, since, key=_TIME) :]


def scope_name(scope: Scope) -> str:
    """How a message names a scope: ``source `clicks` partition 3``, ``subtask 1``, ``operator x``."""
    parts: list[str] = []
    if scope.source is not None:
        parts.append(f"source `{scope.source}`")
    if scope.partition is not None:
        parts.append(f"partition {scope.partition}")
    if scope.subtask is not None:
        parts.append(f"subtask {scope.subtask}")
    if scope.operator is not None:
        parts.append(f"operator `{scope.operator}`")
    return " ".join(parts) or "the job"


def flink_scope_name(job: str, sample: Sample) -> str:
    """``job `x` vertex `Source: ...` subtask 1`` for a Flink sample (vertex name from the collector)."""
    vertex = sample.extra.get("vertex") or sample.scope.source or sample.scope.operator
    text = f"job `{job}` vertex `{vertex}`"
    if sample.scope.subtask is not None:
        text += f" subtask {sample.scope.subtask}"
    return text
