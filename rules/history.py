"""One job's sample history, split once into the series the rules read (precomputed per job).

:func:`job_history` makes a single pass over a job's samples and sorts them into:

* ``batches``: the job-scope ``PROGRESS``/``GAUGE`` samples (Spark micro-batches, or Flink/Kafka polls of
  the whole job), in time order, a batch read twice kept once (:func:`rules.batches.progress_batches`'s
  rule for Spark progress);
* ``series``: the same kinds for each narrower :class:`~monitor.model.Scope` (a Spark source, a Flink
  subtask, a Kafka topic partition), each in time order;
* ``lifecycle``: ``STARTED``/``TERMINATED`` samples; ``idle``: Spark ``QueryIdleEvent`` samples.

Every rule reads these lists instead of filtering the raw history again, so a full evaluation touches each
sample once plus each rule's window at the tail.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice
from operator import attrgetter, le, lt
from typing import TypeVar

from monitor.model import Engine, JobRef, Sample, SampleKind, Scope
from rules.common import is_epoch, tail_since

__all__ = [
    "JobHistory",
    "KnownPoints",
    "RollingHistory",
    "StateTrack",
    "WatermarkSteps",
    "job_history",
    "kept_state",
    "unread_from",
]

_MEASURED = (SampleKind.PROGRESS, SampleKind.GAUGE)


class KnownPoints:
    """The job batches with a known value of one field (``state_rows_total`` or ``state_memory_bytes``),
    oldest first, with a running count of the steps that did not decrease (as floats, the comparison
    ``state_growth`` makes), so a window's count and non-decreasing steps are a bisection and a difference.

    Attributes:
        field: the :class:`~monitor.model.Sample` attribute.
        samples: the batches with ``field`` not ``None``, oldest first.
        rises: ``rises[k]``: how many of the steps into ``samples[1..k]`` did not decrease, counted from the
            first sample ever added (a difference of two entries counts the steps between them).
    """

    __slots__ = ("field", "rises", "samples")

    def __init__(self, field: str) -> None:
        self.field = field
        self.samples: list[Sample] = []
        self.rises: list[int] = []

    def add(self, sample: Sample) -> None:
        """Append ``sample`` (the newest job batch) if its ``field`` is known."""
        value = getattr(sample, self.field)
        if value is None:
            return
        count = self.rises[-1] if self.rises else 0
        if self.samples and float(value) >= float(getattr(self.samples[-1], self.field)):
            count += 1
        self.samples.append(sample)
        self.rises.append(count)

    def trim(self, cutoff: datetime) -> None:
        """Drop the samples observed before ``cutoff``."""
        if self.samples and self.samples[0].observed_at < cutoff:
            drop = bisect_left(self.samples, cutoff, key=_TIME)
            del self.samples[:drop]
            del self.rises[:drop]


class WatermarkSteps:
    """The job batches with a known watermark (not ``None``, not Spark's epoch: :func:`rules.common.is_epoch`),
    oldest first, with a running count of the watermark's steps (a rise from the previous known value: the
    definition of :func:`rules.common.watermark_moves`) and the newest batch that stepped.
    """

    __slots__ = ("last_step", "samples", "steps")

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.steps: list[int] = []
        self.last_step: Sample | None = None

    def add(self, sample: Sample) -> None:
        """Append ``sample`` (the newest job batch) if its watermark is known."""
        wm = sample.watermark
        if wm is None or is_epoch(wm):
            return
        count = self.steps[-1] if self.steps else 0
        if self.samples:
            before = self.samples[-1].watermark
            assert before is not None
            if wm > before:
                count += 1
                self.last_step = sample
        self.samples.append(sample)
        self.steps.append(count)

    def since(self, cutoff: datetime) -> tuple[int, Sample | None]:
        """``(steps, newest stepping batch)`` among the batches observed at or after ``cutoff``: what
        ``watermark_moves`` of those batches gives as ``len(steps)`` and ``last_step_at``."""
        first = bisect_left(self.samples, cutoff, key=_TIME)
        if first >= len(self.samples):
            return 0, None
        steps = self.steps[-1] - self.steps[first]
        return steps, (self.last_step if steps else None)

    def trim(self, cutoff: datetime) -> None:
        """Drop the samples observed before ``cutoff``."""
        if self.samples and self.samples[0].observed_at < cutoff:
            drop = bisect_left(self.samples, cutoff, key=_TIME)
            del self.samples[:drop]
            del self.steps[:drop]


class StateTrack:
    """What ``state_growth`` reads of a job's batches, kept as they arrive, so the rule reads its window in
    O(log n) instead of rescanning it at every batch. One of the rules' kept states (:func:`kept_state`):
    :meth:`catch_up` feeds it the batches added to the history since it was last read.

    Attributes:
        rows: batches with a known ``state_rows_total``.
        bytes: batches with a known ``state_memory_bytes``.
        watermark: batches with a known watermark, and its steps.
        last: the newest batch fed (``None``: none).
    """

    __slots__ = ("bytes", "last", "rows", "watermark")

    def __init__(self) -> None:
        self.rows = KnownPoints("state_rows_total")
        self.bytes = KnownPoints("state_memory_bytes")
        self.watermark = WatermarkSteps()
        self.last: Sample | None = None

    def add(self, sample: Sample) -> None:
        """Add the newest job batch (the three ``add`` s, skipped when there is nothing to add)."""
        if sample.state_rows_total is not None:
            self.rows.add(sample)
        if sample.state_memory_bytes is not None:
            self.bytes.add(sample)
        if sample.watermark is not None:
            self.watermark.add(sample)

    def trim(self, cutoff: datetime) -> None:
        """Drop what was observed before ``cutoff``."""
        self.rows.trim(cutoff)
        self.bytes.trim(cutoff)
        self.watermark.trim(cutoff)

    def catch_up(self, batches: Sequence[Sample]) -> None:
        """Feed the batches after :attr:`last` (:func:`unread_from`; all of them, from empty lists, when
        ``last`` is no longer among them) and drop what is older than ``batches[0]``."""
        start = unread_from(batches, self.last)
        if start is None:
            self.rows, self.bytes, self.watermark = (
                KnownPoints("state_rows_total"), KnownPoints("state_memory_bytes"), WatermarkSteps()
            )  # fmt: skip
            start = 0
        for sample in batches[start:] if start < len(batches) else ():
            self.add(sample)
        if batches:
            self.last = batches[-1]
            self.trim(batches[0].observed_at)


_State = TypeVar("_State")


def kept_state(history: JobHistory, key: str, factory: Callable[[], _State]) -> _State | None:
    """THE store of a rule's running state over a job's rolling history (``history.rule_state[key]``, made
    by ``factory`` on first use), or ``None`` when ``history`` is not a :class:`RollingHistory`'s (a
    history split once: the rule reads its window from scratch).

    A kept state follows the history by itself: it remembers the newest sample it consumed and, when read,
    consumes those added since (:func:`unread_from`), rebuilding from the window when that sample is gone
    (trimmed); its answers must be the ones a rescan of the window gives (``consumer_lag``'s partition
    windows, ``state_growth``'s :class:`StateTrack`, ``freshness_slo``'s minute ledger).
    """
    if not history.marks_kept:
        return None
    state = history.rule_state.get(key)
    if state is None:
        state = history.rule_state[key] = factory()
    return state  # type: ignore[return-value]


def unread_from(samples: Sequence[Sample], last: Sample | None) -> int | None:
    """The index in ``samples`` (oldest first, appended to at the end) of the first sample after ``last``
    (the newest one a kept state consumed), found by identity from the newest back: O(samples added since
    plus those observed at ``last``'s time). ``None`` when ``last`` is ``None`` or no longer in ``samples``
    (trimmed off the front): the state must be rebuilt from ``samples``."""
    if last is None:
        return None
    at = last.observed_at
    for i in range(len(samples) - 1, -1, -1):
        sample = samples[i]
        if sample is last:
            return i + 1
        if sample.observed_at < at:
            return None
    return None


@dataclass(slots=True)
class JobHistory:
    """A job's samples split by role (see the module docstring).

    Attributes:
        job: the job as named by its newest sample (its current ``run_id``/name).
        batches: job-scope progress/gauge samples, oldest first.
        series: per-scope progress/gauge samples, oldest first within each scope.
        lifecycle: ``STARTED``/``TERMINATED`` samples, oldest first.
        idle: ``IDLE`` samples, oldest first.
        newest_at: the newest ``observed_at`` of any sample.
    """

    job: JobRef
    batches: list[Sample] = field(default_factory=list)
    series: dict[Scope, list[Sample]] = field(default_factory=dict)
    lifecycle: list[Sample] = field(default_factory=list)
    idle: list[Sample] = field(default_factory=list)
    newest_at: datetime | None = None
    event_max_top: tuple[datetime, datetime | None] | None = None
    """Kept by :class:`RollingHistory`: the newest batch's ``event_time_max`` and the largest of the earlier
    batches' (``None``: not kept; compute from ``batches``)."""
    marks_kept: bool = False
    """Whether :class:`RollingHistory` keeps ``newest_drop_at`` and ``newest_removal_at`` (else they are
    ``None`` and a rule scans ``batches``)."""
    newest_drop_at: datetime | None = None
    """When ``marks_kept``: the ``observed_at`` of the newest of ``batches`` that dropped rows as late (a
    non-zero ``dropped_by_watermark``), ``None`` if none did; lets ``late_drop_surge`` skip a quiet window in
    O(1)."""
    newest_removal_at: datetime | None = None
    """When ``marks_kept``: the ``observed_at`` of the newest of ``batches`` that removed state rows (a
    non-zero ``state_rows_removed``), ``None`` if none did; lets ``state_growth`` skip in O(1)."""
    rule_state: dict[str, object] = field(default_factory=dict)
    """The rules' running states over this history as :class:`RollingHistory` extends it (keyed by rule;
    read and made through :func:`kept_state`, the one mechanism): a rule's findings stay a function of the
    history, its state only spares it re-reading the window at every instant."""

    @property
    def engine(self) -> Engine:
        """The job's engine."""
        return self.job.engine


_TIME = attrgetter("observed_at")
_KIND = attrgetter("kind")
_BATCH_ID = attrgetter("batch_id")
_MEASURED_SET = frozenset(_MEASURED)
_SCOPE = attrgetter("scope")
_SCOPE_FIELDS = attrgetter("source", "partition", "subtask", "operator")
_JOB_KEY = (None, None, None, None)


def job_history(
    samples: Sequence[Sample], lookback: timedelta | None = None, series_lookback: timedelta | None = None
) -> JobHistory | None:
    """Split one job's samples into a :class:`JobHistory`.

    Args:
        samples: the job's samples, oldest first as :func:`monitor.store.load_recent_samples` returns
            them (other orders are detected and sorted, at a cost).
        lookback: keep only samples observed at most this long before the job's newest sample (``None``:
            all). The window is anchored at the job's own newest sample, not at a clock, as the daemon's
            loader does.
        series_lookback: a shorter window for the per-scope ``series`` (the rules read only their recent
            tail); ``None``: the same as ``lookback``.

    Returns ``None`` for an empty history. Cost: C-level passes over the observation times (order check,
    bisection) and the kept samples' scopes; polled histories whose rounds repeat the same scopes are then
    split by slicing, others by one Python pass over the kept samples.
    """
    if not samples:
        return None
    times = list(map(_TIME, samples))
    if not all(map(le, times, islice(times, 1, None))):
        samples = sorted(samples, key=_TIME)
        times = list(map(_TIME, samples))
    newest_at = times[-1]
    start = 0 if lookback is None else bisect_left(times, newest_at - lookback)
    kept = samples[start:] if start else samples
    history = JobHistory(job=samples[-1].job, newest_at=newest_at)
    keys = list(map(_SCOPE_FIELDS, map(_SCOPE, kept)))
    groups = _periodic_groups(kept, keys) or _groups(kept, keys, history)
    series_since = None if series_lookback is None else newest_at - series_lookback
    for key, group in groups:
        if key == _JOB_KEY:
            history.batches = _deduplicated(group)
        else:
            recent = list(tail_since(group, series_since)) if series_since else group
            if recent:  # a scope with nothing in the series window is left out (rules read samples[-1])
                history.series[group[0].scope] = recent
    return history


def _periodic_groups(
    kept: Sequence[Sample], keys: Sequence[tuple[object, ...]]
) -> list[tuple[tuple[object, ...], list[Sample]]] | None:
    """Fast path (C-level slicing) for polled histories: every poll round emits the same scopes in the same
    order and only measured samples, so scope ``j`` is ``kept[j::p]``. ``None`` when that does not hold."""
    if not keys or not set(map(_KIND, kept)) <= _MEASURED_SET:
        return None
    try:
        p = keys.index(keys[0], 1)  # the round length: where the first scope comes again
    except ValueError:
        p = len(keys)
    if len(set(keys[:p])) != p or keys[p:] != keys[:-p]:
        return None
    return [(keys[j], list(kept[j::p])) for j in range(p)]


def _groups(
    kept: Sequence[Sample], keys: Sequence[tuple[object, ...]], history: JobHistory
) -> list[tuple[tuple[object, ...], list[Sample]]]:
    """The general split: measured samples by scope key; idle and lifecycle samples into ``history``."""
    groups: dict[tuple[object, ...], list[Sample]] = {}
    progress, gauge, idle_kind = SampleKind.PROGRESS, SampleKind.GAUGE, SampleKind.IDLE
    for sample, key in zip(kept, keys, strict=True):
        kind = sample.kind
        if kind is progress or kind is gauge:
            bucket = groups.get(key)
            if bucket is None:
                groups[key] = [sample]
            else:
                bucket.append(sample)
        elif kind is idle_kind:
            history.idle.append(sample)
        else:
            history.lifecycle.append(sample)
    return list(groups.items())


def _deduplicated(batches: list[Sample]) -> list[Sample]:
    """Drop repeated batches (same run, batch id and time: one batch read from two inputs).

    Strictly increasing batch ids (the usual case) or batch-less gauges are returned as they are.
    """
    ids = list(map(_BATCH_ID, batches))
    if None in ids or all(map(lt, ids, islice(ids, 1, None))):
        return batches
    out: list[Sample] = []
    for sample in batches:
        if out and _duplicate(out, sample):
            continue
        out.append(sample)
    return out


def _duplicate(batches: list[Sample], sample: Sample) -> bool:
    """Whether ``sample`` repeats a kept batch (same run, batch id and time: one batch read from two inputs).

    Input is in time order, so only the kept batches with the same ``observed_at`` are compared.
    """
    at = sample.observed_at
    for kept in reversed(batches):
        if kept.observed_at != at:
            return False
        if kept.batch_id == sample.batch_id and kept.job.run_id == sample.job.run_id:
            return True
    return False


def _count_before(samples: list[Sample], cutoff: datetime) -> int:
    """How many of ``samples`` (oldest first) were observed before ``cutoff``: counted from the front for the
    few a new round pushes out of a window (the usual trim), bisected beyond."""
    n = len(samples)
    i = 0
    while i < n and samples[i].observed_at < cutoff:
        i += 1
        if i == 4:
            return bisect_left(samples, cutoff, 4, n, key=_TIME)
    return i


class RollingHistory:
    """A job's :class:`JobHistory` kept up to date as its samples arrive in time order (the replay's):
    after each :meth:`extend` it equals ``job_history(samples so far, lookback, series_lookback)`` (up to
    the order of ``series`` keys: first appearance), at a cost of what was added plus trimming the fronts.

    Args:
        lookback: the window kept before the newest sample.
        series_lookback: the shorter window of the per-scope series.
    """

    def __init__(self, lookback: timedelta, series_lookback: timedelta) -> None:
        self._lookback = lookback
        self._series_lookback = min(series_lookback, lookback)
        self.history: JobHistory | None = None
        # sliding maximum of the batches' event_time_max before the newest one (monotonic deque)
        self._tops: deque[tuple[datetime, datetime]] = deque()
        self._newest_max: tuple[datetime, datetime] | None = None

    def _push_max(self, sample: Sample) -> None:
        value = sample.event_time_max
        if value is None:
            return
        if self._newest_max is not None:
            tops = self._tops
            while tops and tops[-1][1] <= self._newest_max[1]:
                tops.pop()
            tops.append(self._newest_max)
        self._newest_max = (sample.observed_at, value)

    def extend(self, samples: Sequence[Sample]) -> JobHistory | None:
        """Add ``samples`` (none older than those added before) and return the trimmed history."""
        if not samples:
            return self.history
        history = self.history
        if history is None:
            history = self.history = JobHistory(job=samples[0].job, marks_kept=True)
        progress, gauge, idle_kind = SampleKind.PROGRESS, SampleKind.GAUGE, SampleKind.IDLE
        for sample in samples:
            kind = sample.kind
            if kind is progress or kind is gauge:
                scope = sample.scope
                if scope.is_job():
                    if not (history.batches and _duplicate(history.batches, sample)):
                        history.batches.append(sample)
                        self._push_max(sample)
                        if sample.dropped_by_watermark:
                            history.newest_drop_at = sample.observed_at
                        if sample.state_rows_removed:
                            history.newest_removal_at = sample.observed_at
                else:
                    history.series.setdefault(scope, []).append(sample)
            elif kind is idle_kind:
                history.idle.append(sample)
            else:
                history.lifecycle.append(sample)
        newest = samples[-1]
        history.job = newest.job
        history.newest_at = newest.observed_at
        cutoff = newest.observed_at - self._lookback
        for kept in (history.batches, history.idle, history.lifecycle):
            if kept and kept[0].observed_at < cutoff:
                del kept[: _count_before(kept, cutoff)]
        # a mark whose batch was trimmed: no kept batch is newer and marked
        oldest_batch = history.batches[0].observed_at if history.batches else None
        if history.newest_drop_at is not None and (oldest_batch is None or history.newest_drop_at < oldest_batch):
            history.newest_drop_at = None
        if history.newest_removal_at is not None and (
            oldest_batch is None or history.newest_removal_at < oldest_batch
        ):
            history.newest_removal_at = None
        tops = self._tops
        while tops and tops[0][0] < cutoff:
            tops.popleft()
        if self._newest_max is not None and self._newest_max[0] < cutoff:
            self._newest_max = None
        history.event_max_top = (
            None if self._newest_max is None else (self._newest_max[1], tops[0][1] if tops else None)
        )
        series_cutoff = newest.observed_at - self._series_lookback
        empty: list[Scope] = []
        for scope, kept in history.series.items():
            if kept[0].observed_at < series_cutoff:
                del kept[: _count_before(kept, series_cutoff)]
                if not kept:
                    empty.append(scope)
        for scope in empty:
            del history.series[scope]
        return history
