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
window at each instant). A caller that replays the same job again and again as its samples arrive (the
daemon, every tick) passes a :class:`ReplayState`: the rolling history is kept from one call to the next
and fed only the samples after the last instant, instead of being rebuilt from the window at each call.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter

from monitor.model import Finding, Sample, SampleKind
from rules.history import JobHistory, RollingHistory
from rules.registry import Evaluator, finding_order

__all__ = ["Instant", "ReplayState", "replay", "resume"]

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


@dataclass(slots=True)
class ReplayState:
    """Where the replays of ONE job stopped, kept between calls of :func:`replay` (the daemon keeps one per
    job across its ticks).

    The state is valid only for the same job's samples with the same prefix: the caller drops it when a
    sample is inserted before ones already replayed (it arrived late, out of order), or when the job's
    evaluation cursor was moved by someone else (a fleet takeover). A state whose ``after`` is not the
    ``after`` of the next call (a tick that did not commit) is rebuilt from the window by :func:`resume`.

    Attributes:
        rolling: the job's rolling history, fed exactly the samples up to and including ``after``
            (``None``: nothing fed yet).
        after: the last instant fed, as ``(at, at_count)`` of its :class:`Instant` (``None``: none).
        batch_id: the batch id of the newest query-scope progress sample fed (``None`` when it has none).
        windows: the rolling history's ``(lookback, series_lookback)``: the job's windows when it was built
            (a job renamed into another override's match gets its state rebuilt with its new windows).
    """

    rolling: RollingHistory | None = None
    after: tuple[datetime, int] | None = None
    batch_id: int | None = None
    windows: tuple[timedelta, timedelta] | None = None

    def history(self) -> JobHistory | None:
        """The job's split history over the samples fed (what the rules saw at ``after``)."""
        return None if self.rolling is None else self.rolling.history


def _start(samples: Sequence[Sample], after: tuple[datetime, int] | None) -> int:
    """The position of the first sample after instant ``after`` (``(at, at_count)``): O(log n), or less when
    few samples came after it (a daemon tick's, counted back from the newest)."""
    if after is None:
        return 0
    at = after[0]
    n = len(samples)
    hi = n  # the first sample observed after ``at``
    while hi and samples[hi - 1].observed_at > at:
        hi -= 1
        if n - hi == 16:
            hi = bisect_right(samples, at, 0, hi, key=_TIME)
            break
    lo = hi  # the first sample observed at ``at``
    while lo and samples[lo - 1].observed_at == at:
        lo -= 1
        if hi - lo == 16:
            lo = bisect_left(samples, at, 0, lo, key=_TIME)
            break
    return min(lo + after[1], hi)


def resume(
    evaluator: Evaluator, samples: Sequence[Sample], after: tuple[datetime, int] | None,
    state: ReplayState,
) -> int:
    """Make ``state`` the one of a replay of ``samples`` stopped at instant ``after``, and return the position
    of the first sample after it.

    A ``state`` already at ``after`` (with the windows of the job as its newest sample names it) is kept as it
    is (O(log n)); any other is rebuilt from the window before ``after`` (its rolling history extended with
    the samples of the job's lookback before that instant), as :func:`replay` without a state does.

    Args:
        evaluator: the compiled rules (the job's windows).
        samples: the job's samples, sorted as :func:`replay` takes them, not empty.
        after: the last instant already evaluated (``None``: none).
        state: the job's state, changed in place.
    """
    start = _start(samples, after)
    job = samples[-1].job
    resolved = evaluator.resolved(job)
    windows = (resolved.lookback, resolved.series_lookback)
    if state.rolling is not None and state.after == after and state.windows == windows:
        return start
    rolling = evaluator.rolling(job)
    batch_id: int | None = None
    if start:
        since = samples[start - 1].observed_at - resolved.lookback
        rolling.extend(samples[bisect_left(samples, since, 0, start, key=_TIME) : start])
        for s in reversed(samples[:start]):
            if s.kind is SampleKind.PROGRESS and s.scope.is_job():
                batch_id = s.batch_id
                break
    state.rolling, state.after, state.batch_id, state.windows = rolling, after, batch_id, windows
    return start


def replay(
    evaluator: Evaluator, samples: Sequence[Sample], after: tuple[datetime, int] | None = None,
    state: ReplayState | None = None,
) -> Iterator[Instant]:
    """Evaluate ONE job at each of its instants after ``after`` (all when ``None``).

    Args:
        evaluator: the compiled rules.
        samples: the job's samples (its history from before ``after`` included, so windows are whole),
            sorted by ``observed_at`` (a termination after the other samples of its time).
        after: the last instant already evaluated, as ``(at, at_count)`` of its :class:`Instant` (the
            daemon's per-job evaluation cursor): samples at ``at`` beyond the first ``at_count`` are new.
        state: the job's :class:`ReplayState` kept from the previous call (see :func:`resume`); it follows
            the replay and, once the generator is exhausted, stands at the last instant yielded. ``None``:
            a fresh one, built from the window before ``after``.

    Yields:
        One :class:`Instant` per distinct observation time, oldest first, with the findings of
        :meth:`Evaluator.evaluate_job` on the samples up to that time (never a clock rule). The same with
        or without ``state``.
    """
    if not samples:
        return
    if state is None:
        state = ReplayState()
    i = resume(evaluator, samples, after, state)
    rolling = state.rolling
    assert rolling is not None
    batch_id = newest_id = state.batch_id
    n = len(samples)
    while i < n:
        at = samples[i].observed_at
        j = i
        while j < n and (s := samples[j]).observed_at == at:
            if s.kind is SampleKind.TERMINATED and j > i:
                break  # the termination is an instant of its own, after the batch it came with
            if s.kind is SampleKind.PROGRESS and s.scope.is_job():
                newest_id = s.batch_id
                if newest_id is not None:
                    batch_id = newest_id
            j += 1
        history = rolling.extend(samples[i:j])
        assert history is not None
        at_count = j - bisect_left(samples, at, 0, i + 1, key=_TIME)
        state.after, state.batch_id = (at, at_count), newest_id
        findings = evaluator.evaluate_history(history, at)
        findings.sort(key=finding_order)
        last = samples[j - 1]
        terminated = last.kind is SampleKind.TERMINATED and not any(
            samples[k].kind is SampleKind.STARTED for k in range(i, j)
        )
        yield Instant(at, batch_id, findings, terminated, at_count)
        i = j
