"""Consumer-lag evaluation with Burrow's status semantics (OK, WARN, STALL, STOP, REWIND).

Follows LinkedIn Burrow's evaluator (``core/internal/evaluator/caching.go``: ``calculatePartitionStatus``
and its rules) over a sliding window of a partition's committed offsets, including the later additions
exercised by Burrow's own test vectors (``caching_test.go``; 16 vectors in
``tests/fixtures/kafka/burrow``): an ``allowedLag`` below which a partition is never in error, a rewind
that is *recovered* (the consumer got back past the offset it rewound from) is not an error, and the
``recent lag zero`` check against the broker's recent log-end offsets that delays STOP.

Order of evaluation for one partition (only when ``current_lag > allowed_lag``):

1. **STOP**: ``now - last_commit_time > last_commit_time - first_commit_time`` (all ms) and the last
   committed offset is not >= any of the recent broker log-end offsets (the consumer was not caught up
   recently).
2. Only if the lag was never ``<= allowed_lag`` anywhere in the window (nil lags are skipped):
   **REWIND** (an offset lower than its predecessor, not recovered by the end of the window), then
   **STALL** (every committed offset in the window is the same), then **WARN** (lag never decreases
   between consecutive known lags).
3. Otherwise **OK**.

tidegauge additions (the issue's rules, each documented where applied):

- zero lag is never an error (``current_lag == 0`` -> OK, Burrow's first check);
- negative lag from sampling skew (committed offset read after the log-end offset) is clamped to 0 by
  :func:`compute_lag` and so is never growth;
- a partition without a committed offset has *unknown* lag (``None``), status ``UNKNOWN``, never a number;
  when a live member owns it and records wait the ``consumer_lag`` rule reports it as ``NEVER_COMMITTED``
  (:mod:`rules.consumer_lag.rule`: Burrow has no window of commits to judge there);
- a constant residual lag of 1 (a transactional producer's commit marker occupies one offset after the
  last record, so a caught-up consumer stays 1 behind the log-end offset) is treated as caught up: when the
  current lag and every known lag in the window are ``<= 1`` the partition is OK.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "CommitObservation",
    "LagStatus",
    "PartitionLagEvaluation",
    "compute_lag",
    "evaluate_partition",
    "surely_ok",
]


class LagStatus(enum.StrEnum):
    """Burrow's partition statuses plus ``UNKNOWN`` (no committed offset: lag cannot be computed) and
    ``NEVER_COMMITTED`` (a live member owns the partition, never committed, while records wait; set by the
    ``consumer_lag`` rule, never by :func:`evaluate_partition`)."""

    UNKNOWN = "UNKNOWN"
    OK = "OK"
    NEVER_COMMITTED = "NEVER_COMMITTED"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"


@dataclass(frozen=True, slots=True)
class CommitObservation:
    """One committed offset of a partition as stored in the window.

    Attributes:
        offset: the committed offset.
        timestamp_ms: when it was committed (epoch ms).
        lag: the lag computed when it was stored (log-end offset minus committed offset, clamped at 0),
            or ``None`` when no broker offset was known then (Burrow's nil lag).
    """

    offset: int
    timestamp_ms: int
    lag: int | None


@dataclass(frozen=True, slots=True)
class PartitionLagEvaluation:
    """Result of :func:`evaluate_partition`.

    Attributes:
        status: the partition's status.
        current_lag: the lag used (``None`` when unknown).
        checks: the individual rule outcomes (Burrow's names), for explanations and tests.
    """

    status: LagStatus
    current_lag: int | None
    checks: dict[str, object] = field(default_factory=dict)


def compute_lag(log_end_offset: int | None, committed_offset: int | None) -> int | None:
    """Lag in records: ``log_end_offset - committed_offset``, clamped at 0.

    Returns ``None`` when either side is unknown, or the committed offset is negative (Kafka reports
    ``-1`` for "no committed offset"; exporters copy it): unknown lag is not a number.
    """
    if log_end_offset is None or committed_offset is None or committed_offset < 0 or log_end_offset < 0:
        return None
    return max(0, log_end_offset - committed_offset)


def _lag_always_above(window: Sequence[CommitObservation], allowed_lag: int) -> bool:
    return all(c.lag is None or c.lag > allowed_lag for c in window)


def _rewind_index(window: Sequence[CommitObservation]) -> int:
    for i in range(1, len(window)):
        if window[i].offset < window[i - 1].offset:
            return i
    return -1


def _rewind_recovered(window: Sequence[CommitObservation], index: int) -> bool:
    before = window[index - 1].offset
    return any(c.offset >= before for c in window[index:])


def _stopped(window: Sequence[CommitObservation], now_ms: int) -> bool:
    first, last = window[0].timestamp_ms, window[-1].timestamp_ms
    return (now_ms - last) > (last - first)


def _stalled(window: Sequence[CommitObservation]) -> bool:
    return all(window[i].offset == window[i - 1].offset for i in range(1, len(window)))


def _lag_not_decreasing(window: Sequence[CommitObservation]) -> bool:
    last: int | None = None
    for c in window:
        if c.lag is None:
            continue
        if last is not None and c.lag < last:
            return False
        last = c.lag
    return True


def _recent_lag_zero(window: Sequence[CommitObservation], broker_offsets: Sequence[int]) -> bool:
    last_offset = window[-1].offset
    return any(b <= last_offset for b in broker_offsets)


def surely_ok(
    window: Sequence[CommitObservation],
    broker_offsets: Sequence[int],
    current_lag: int | None,
    now_ms: int,
    allowed_lag: int = 0,
) -> bool:
    """Whether :func:`evaluate_partition` of the same arguments is certainly ``OK`` or ``UNKNOWN`` (no
    finding), from its cheapest checks: the lag is unknown or at most ``allowed_lag``; or the window is not
    STOP (its span covers the time since its last commit, or the consumer was caught up recently) and some
    known lag in it is at most ``allowed_lag`` (so REWIND, STALL and WARN are not judged). ``False``: call
    :func:`evaluate_partition` for the status (this is a pre-check, never a status of its own)."""
    if current_lag is None or max(0, current_lag) <= allowed_lag:
        return True
    if not window:
        return True
    if _stopped(window, now_ms) and not _recent_lag_zero(window, broker_offsets):
        return False
    return not _lag_always_above(window, allowed_lag)


def evaluate_partition(
    window: Sequence[CommitObservation],
    broker_offsets: Sequence[int],
    current_lag: int | None,
    now_ms: int,
    allowed_lag: int = 0,
) -> PartitionLagEvaluation:
    """Evaluate one partition's status over its window of commits (Burrow ``calculatePartitionStatus``).

    Args:
        window: committed offsets, oldest first (Burrow's ``intervals`` ring, nil entries removed).
        broker_offsets: the partition's recent log-end offsets as seen by the monitor (any order).
        current_lag: the partition's lag now (records), ``None`` when unknown.
        now_ms: the evaluation time (epoch ms), from the scheduler tick, never the wall clock.
        allowed_lag: lag at or below which the partition is never in error (Burrow ``allowed-lag``).

    Returns:
        The status with every rule's outcome in ``checks``.
    """
    if current_lag is None:
        return PartitionLagEvaluation(LagStatus.UNKNOWN, None, {"reason": "no committed offset"})
    current = max(0, current_lag)
    if not window:
        return PartitionLagEvaluation(LagStatus.OK, current, {"reason": "no commits in window"})
    checks: dict[str, object] = {
        "isLagAlwaysNotZero": _lag_always_above(window, allowed_lag),
        "checkIfOffsetsRewind": _rewind_index(window),
        "checkIfOffsetsStopped": _stopped(window, now_ms),
        "checkIfOffsetsStalled": _stalled(window),
        "checkIfLagNotDecreasing": _lag_not_decreasing(window),
        "checkIfRecentLagZero": _recent_lag_zero(window, broker_offsets),
    }
    if current <= allowed_lag:
        return PartitionLagEvaluation(LagStatus.OK, current, checks)
    if current <= 1 and all(c.lag is None or c.lag <= 1 for c in window):
        checks["residualLagOne"] = True
        return PartitionLagEvaluation(LagStatus.OK, current, checks)
    if checks["checkIfOffsetsStopped"] and not checks["checkIfRecentLagZero"]:
        return PartitionLagEvaluation(LagStatus.STOP, current, checks)
    if checks["isLagAlwaysNotZero"]:
        rewind = _rewind_index(window)
        if rewind != -1 and not _rewind_recovered(window, rewind):
            return PartitionLagEvaluation(LagStatus.REWIND, current, checks)
        if checks["checkIfOffsetsStalled"]:
            return PartitionLagEvaluation(LagStatus.STALL, current, checks)
        if checks["checkIfLagNotDecreasing"]:
            return PartitionLagEvaluation(LagStatus.WARN, current, checks)
    return PartitionLagEvaluation(LagStatus.OK, current, checks)
