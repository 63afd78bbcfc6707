"""Small helpers shared by the rules: Spark's "no watermark yet" value, tail windows, scope names for messages."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from monitor.model import Engine, Sample, Scope

__all__ = [
    "EPOCH",
    "NULL_EVENT_TIME_BEFORE",
    "flink_scope_name",
    "holding_input",
    "is_epoch",
    "scope_name",
    "since_index",
    "tail_since",
]

_TIME = attrgetter("observed_at")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The end of Spark's "nothing seen yet" instants: a watermark or event time before it is no real time.
NULL_EVENT_TIME_BEFORE = EPOCH + timedelta(seconds=1)


def is_epoch(value: datetime | None) -> bool:
    """True for Spark's "no watermark yet / null event time" marker: any time before
    ``1970-01-01T00:00:01Z`` (so ``1970-01-01T00:00:00.000Z`` and ``...00.5`` alike). The one definition
    every rule, report, ``scan`` and the dashboard use.

    Evidence (Spark ``sql/core/.../streaming``):

    - ``ProgressReporter.extractEventTimeStats`` (``ProgressContext`` in Spark 4) puts
      ``"watermark" -> formatTimestamp(offsetSeqMetadata.batchWatermarkMs)`` into ``eventTime`` whenever the
      plan has an ``EventTimeWatermark`` node, whatever the batch saw.
    - ``OffsetSeqMetadata.batchWatermarkMs`` defaults to 0 and ``WatermarkTracker`` keeps 0 for an input
      that has seen no row; the tracker moves the global watermark only to a *larger* value
      (``max event time - delay`` of an ``EventTimeWatermarkExec`` that saw rows). So before the first
      watermark is computed Spark reports ``1970-01-01T00:00:00.000Z`` (epoch ms 0), and, under the
      ``min`` policy, keeps reporting it while an input never had data.
    - A restart reads the watermark back from the checkpoint's offset log, so only a query's first
      batch(es) show 0. The recorded Spark 4.3.0 log (tests/fixtures/spark/real-4.3.0) shows batch 0
      reporting ``1970-01-01T00:00:00.000Z`` with 5 rows and batch 1 ``2024-01-01T11:57:00.000Z``.
    - ``eventTime.min`` is 1970-01-01 when a batch held rows whose event time was null.

    Why a whole second, not exactly 0: a real watermark within a second of the epoch needs event times of
    1970-01-01 (a unit mistake, which ``event_time_units`` reports; seconds read as milliseconds land on
    1970-01-20 and later, outside this second), while a sub-second value near 0 is the same "nothing seen"
    marker rounded through another path (a Prometheus gauge in seconds, a ``0.5`` from a test or exporter).
    Treating the whole second as "none" never hides a real watermark and never reports a 56-year delay.
    """
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


def _rows_of(samples: Sequence[Sample]) -> int:
    return sum(s.num_input_rows for s in samples if s.num_input_rows)


def holding_input(series: dict[Scope, list[Sample]], since: datetime, engine: Engine) -> Scope | None:
    """The narrower scope holding the job's minimum watermark since ``since``, if the history shows one: the
    one definition of "which input / partition / subtask holds the minimum" (``watermark_stall``, the job
    facts, the reports and the dashboard read it).

    Args:
        series: a job's per-scope samples, oldest first within each scope
            (:attr:`rules.history.JobHistory.series`).
        since: the start of the window compared (aware UTC).
        engine: the job's engine.

    Returns the scope, or ``None`` when no scope holds it (one scope, or all alike).

    Flink (``StatusWatermarkValve``): the input watermark is the minimum over input channels; the subtask
    whose newest watermark is the lowest (or ``None``: it never emitted one) while a sibling's is higher
    holds it. Spark (``WatermarkTracker`` with the ``min`` policy): per-source progress has no watermark,
    so the source that brought no rows since ``since`` while a sibling did holds it.
    """
    if engine is Engine.SPARK:
        rows = {scope: _rows_of(tail_since(samples, since)) for scope, samples in series.items() if scope.source}
        if len(rows) >= 2 and any(rows.values()):
            quiet = [scope for scope, n in rows.items() if n == 0]
            if quiet:
                return quiet[0]
        return None
    newest = {scope: samples[-1].watermark for scope, samples in series.items() if samples}
    if len(newest) < 2:
        return None
    if any(wm is None for wm in newest.values()) and any(wm is not None for wm in newest.values()):
        return next(scope for scope, wm in newest.items() if wm is None)
    known = {scope: wm for scope, wm in newest.items() if wm is not None}
    if len(known) >= 2 and len(set(known.values())) > 1:
        return min(known, key=lambda scope: known[scope])
    return None
