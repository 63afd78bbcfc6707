"""Replay of a job's samples through the rules, batch by batch, as the daemon would have seen them live.

One implementation serves every caller (``tidegauge scan`` on a recorded log, the daemon catching up on
the batches that arrived since its last evaluation): at each *instant* — each distinct observation time
of the job's samples (a batch's trigger time, an idle or lifecycle event; a termination, which Spark logs
without a time of its own, is a separate instant after the batch it follows), oldest first — the rules are
evaluated through :class:`rules.registry.Evaluator` with ``now`` = that time and the history up to and
including it. Time comes from the data only (Prometheus's rule manager evaluating a recorded series in
``promtool test rules`` works the same way).

Cost: the job's history is kept up to date sample by sample (:class:`rules.history.RollingHistory`, the
window its rules read), so a replay is linear in the number of samples (times what the rules do with the
window at each instant).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter

from monitor.model import Finding, Sample, SampleKind
from rules.registry import Evaluator, finding_order

__all__ = ["Instant", "replay"]

_TIME = attrgetter("observed_at")


@dataclass(frozen=True, slots=True)
class Instant:
    """One evaluation of one job: at ``at`` (a sample time), the findings holding then.

    ``batch_id`` is the job's newest query-scope batch id at ``at`` (``None`` before its first batch);
    ``terminated`` says the job's newest event then was its termination (its alerts resolve, reason
    "terminated").
    """

    at: datetime
    batch_id: int | None
    findings: list[Finding]
    terminated: bool = False
    at_count: int = 0
    """How many of the job's samples observed at ``at`` this instant has seen (a termination logged with
    its batch's time is a later instant at the same time): with ``at``, the replay's resume position."""


def replay(
    evaluator: Evaluator, samples: Sequence[Sample], after: tuple[datetime, int] | None = None
) -> Iterator[Instant]:
    """Evaluate ONE job at each of its instants after ``after`` (all when ``None``).

    Args:
        evaluator: the compiled rules.
        samples: the job's samples (its history from before ``after`` included, so windows are whole),
            sorted by ``observed_at`` (a termination after the other samples of its time).
        after: the last instant already evaluated, as ``(at, at_count)`` of its :class:`Instant` (the
            daemon's per-job evaluation cursor): samples at ``at`` beyond the first ``at_count`` are new.

    Yields:
        One :class:`Instant` per distinct observation time, oldest first, with the findings of
        :meth:`Evaluator.evaluate_job` on the samples up to that time (never a clock rule).
    """
    if not samples:
        return
    times = list(map(_TIME, samples))
    lookback = evaluator.lookback(samples[-1].job)
    start = 0 if after is None else min(bisect_left(times, after[0]) + after[1], bisect_right(times, after[0]))
    rolling = evaluator.rolling(samples[-1].job)
    if start:
        rolling.extend(samples[bisect_left(times, times[start - 1] - lookback, 0, start) : start])
    batch_id: int | None = None
    if start:
        for s in reversed(samples[:start]):
            if s.kind is SampleKind.PROGRESS and s.scope.is_job():
                batch_id = s.batch_id
                break
    i = start
    n = len(samples)
    while i < n:
        at = times[i]
        j = i
        while j < n and times[j] == at:
            s = samples[j]
            if s.kind is SampleKind.TERMINATED and j > i:
                break  # the termination is an instant of its own, after the batch it came with
            if s.kind is SampleKind.PROGRESS and s.scope.is_job() and s.batch_id is not None:
                batch_id = s.batch_id
            j += 1
        history = rolling.extend(samples[i:j])
        assert history is not None
        findings = evaluator.evaluate_history(history, at)
        findings.sort(key=finding_order)
        last = samples[j - 1]
        terminated = last.kind is SampleKind.TERMINATED and not any(
            samples[k].kind is SampleKind.STARTED for k in range(i, j)
        )
        yield Instant(at, batch_id, findings, terminated, j - bisect_left(times, at, 0, i + 1))
        i = j
