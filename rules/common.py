"""Small helpers shared by the rules: epoch tests, tail windows, scope names for messages."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from monitor.model import Sample, Scope

__all__ = [
    "EPOCH",
    "NULL_EVENT_TIME_BEFORE",
    "WatermarkMoves",
    "flink_scope_name",
    "is_epoch",
    "scope_name",
    "since_index",
    "tail_since",
    "watermark_moves",
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


@dataclass(frozen=True, slots=True)
class WatermarkMoves:
    """How the watermark moved over a run of samples (see :func:`watermark_moves`).

    Attributes:
        flat_start: the index of the first sample of the trailing stretch whose watermark equals the newest
            one (``None`` equals ``None``: Flink's Long.MIN_VALUE stays "no watermark").
        steps: the forward steps between consecutive known watermarks, oldest first (the newest ones, at
            most ``max_steps``).
        steps_at: the sample each step showed in, in the same order.
    """

    flat_start: int
    steps: tuple[timedelta, ...]
    steps_at: tuple[Sample, ...]

    @property
    def advanced(self) -> bool:
        """Whether the watermark moved forward at least once."""
        return bool(self.steps)

    @property
    def last_step(self) -> timedelta | None:
        """The newest forward step (``None``: none)."""
        return self.steps[-1] if self.steps else None

    @property
    def last_step_at(self) -> Sample | None:
        """The sample the newest forward step showed in (``None``: none)."""
        return self.steps_at[-1] if self.steps_at else None


def watermark_moves(samples: Sequence[Sample], max_steps: int | None = None) -> WatermarkMoves:
    """THE definition of "the watermark advanced / stayed flat" over ``samples`` (one job's batches or polls,
    oldest first), shared by ``watermark_stall`` (the flat stretch), ``state_growth`` (the steps it needs),
    ``idle_source`` (a flat job watermark) and the jump the others link to, so two findings on the same
    samples never disagree on it.

    A step is a rise between two consecutive *known* watermarks: unknown (``None``: Flink's
    Long.MIN_VALUE, or no ``withWatermark``) and Spark's initial 1970 value (:func:`is_epoch`,
    ``WatermarkTracker``'s "none computed yet") are no values to step from. The watermark never goes
    back in Spark (``WatermarkTracker``) or Flink (``StatusWatermarkValve``); a lower value (a restart
    from an older checkpoint) is not a step. Scans backwards; with ``max_steps`` it stops once that many
    steps and the flat stretch are found (O(flat stretch + steps)). An empty ``samples`` gives
    ``flat_start`` 0 and no steps.
    """
    n = len(samples)
    if n == 0:
        return WatermarkMoves(0, (), ())
    newest = samples[-1].watermark
    flat_start = n - 1
    while flat_start > 0 and samples[flat_start - 1].watermark == newest:
        flat_start -= 1
    steps: list[timedelta] = []
    steps_at: list[Sample] = []
    later: Sample | None = None  # the nearest later sample with a known watermark
    for i in range(n - 1, -1, -1):
        if max_steps is not None and len(steps) >= max_steps and i < flat_start:
            break
        sample = samples[i]
        wm = sample.watermark
        if wm is None or is_epoch(wm):
            continue
        if later is not None:
            assert later.watermark is not None
            if later.watermark > wm:
                steps.append(later.watermark - wm)
                steps_at.append(later)
        later = sample
    steps.reverse()
    steps_at.reverse()
    return WatermarkMoves(flat_start, tuple(steps), tuple(steps_at))
