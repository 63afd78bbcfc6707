"""Batch planning: which rows each data micro-batch reads, and when the engine goes idle.

The plan depends on the events and the trigger only (never on the delay), so a sweep plans once.

Three ways rows are assigned to data batches:

* **explicit** (the events have a ``batch`` column): rows with the same ``batch`` value form one data
  batch, in ascending value order, rows in file order. Processing time: the latest ``arrival_ms`` of
  the batch's rows, if known. Whether the engine is idle after a batch (so that a no-data batch may run,
  Spark's ``MicroBatchExecution.constructNextBatch``: only when no new data is available) follows

  - the arrival times when the events have them: idle unless a row of the next batch had arrived by
    the batch's processing time (``basis="arrival_time"``; batches are taken to take no time);
  - else the assumption the caller names: ``config.backlog=False`` (default), a live query caught up
    between batches: the next batch's data arrives after the engine went idle (what
    ``processAllAvailable()`` between feeds does in tests; ``basis="caught_up"``); ``config.backlog=True``,
    a query started on these batches already waiting, one per trigger (files read with
    ``maxFilesPerTrigger=1``): data waits at every trigger, idle only after the last
    (``basis="backlog"``).
* **trigger** (``trigger_ms`` and an ``arrival_ms`` column): Spark's ``ProcessingTimeTrigger`` fires at
  multiples of the interval; the batch fired at ``t`` reads every row with ``arrival_ms < t`` not read
  yet (in arrival order, ties in file order). When a tick finds no new rows the engine is idle and may
  run a no-data batch at that tick. Batches are assumed to take no time.
* **all at once** (neither): every row is available at the start (``Trigger.AvailableNow`` over a
  finished file): one data batch, then idle.

``max_rows_per_batch`` (``maxOffsetsPerTrigger``) caps a data batch; rows left over form the next data
batch immediately (there is a backlog, so no no-data batch runs in between).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.durations import format_duration_ms
from monitor.watermark.config import EngineConfigError, WatermarkConfig
from monitor.watermark.events import EventsTable

__all__ = ["BatchPlan", "no_data_basis_text", "plan_batches"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class BatchPlan:
    """Data batches of a replay.

    Attributes:
        order: row indices, data batch after data batch (``order[bounds[j]:bounds[j+1]]`` is batch j).
        bounds: ``len(times_ms) + 1`` offsets into ``order``.
        times_ms: processing time of each data batch (``None`` unknown).
        idle_after: whether the engine is idle after data batch j (a no-data batch may run then).
        idle_time_ms: the processing time of that possible no-data batch.
        mode: ``"explicit"``, ``"trigger"`` or ``"all"``.
        labels: the events' own ``batch`` value of each data batch (explicit mode; ``None`` otherwise).
        basis: what decided ``idle_after``: ``"arrival_time"`` (explicit batches with arrival times),
            ``"caught_up"`` / ``"backlog"`` (explicit batches without: the assumption made, see the module
            docstring), ``"trigger"`` (arrival times at each trigger) or ``"all"`` (one read of every row).
    """

    order: I64
    bounds: I64
    times_ms: list[int | None]
    idle_after: list[bool]
    idle_time_ms: list[int | None]
    mode: str
    labels: list[int | None] | None = None
    basis: str = ""

    def __len__(self) -> int:
        return len(self.times_ms)

    def rows(self, j: int) -> I64:
        """Row indices of data batch ``j``."""
        return self.order[int(self.bounds[j]) : int(self.bounds[j + 1])]


def _chunks(start: int, end: int, cap: int | None) -> list[tuple[int, int]]:
    if cap is None or end - start <= cap:
        return [(start, end)]
    return [(s, min(s + cap, end)) for s in range(start, end, cap)]


def plan_batches(events: EventsTable, config: WatermarkConfig) -> BatchPlan:
    """Assign rows to data batches (see the module docstring).

    Raises:
        EngineConfigError: ``trigger_ms`` without an ``arrival_ms`` column; ``arrival_ms`` without a
            trigger or ``batch`` column; a future-skew filter without any processing times.
    """
    n = len(events)
    cap = config.max_rows_per_batch
    arrival = events.arrival_ms
    if events.batch is not None:
        plan = _plan_explicit(events.batch, arrival, cap, backlog=config.backlog)
    elif config.trigger_ms is not None:
        if arrival is None:
            raise EngineConfigError(
                "a processing-time trigger needs an 'arrival_time' column (or give a 'batch' column)"
            )
        plan = _plan_trigger(arrival, config.trigger_ms, cap)
        plan = dataclasses.replace(plan, basis="trigger")
    else:
        if arrival is not None:
            raise EngineConfigError(
                "the events have arrival times but no trigger interval: pass a trigger (e.g. 30s) "
                "or add a 'batch' column"
            )
        bounds = [0]
        for _, e in _chunks(0, n, cap):
            bounds.append(e)
        k = len(bounds) - 1
        plan = BatchPlan(
            order=np.arange(n, dtype=np.int64),
            bounds=np.asarray(bounds, dtype=np.int64),
            times_ms=[None] * k,
            idle_after=[j == k - 1 for j in range(k)],
            idle_time_ms=[None] * k,
            mode="all",
            basis="all",
        )
    if config.max_future_skew_ms is not None and any(t is None for t in plan.times_ms):
        raise EngineConfigError(
            "a future-skew filter compares event time with processing time: the events need an "
            "'arrival_time' column"
        )
    return plan


def _plan_explicit(batch: I64, arrival: I64 | None, cap: int | None, *, backlog: bool) -> BatchPlan:
    basis = "arrival_time" if arrival is not None else "backlog" if backlog else "caught_up"
    order = np.argsort(batch, kind="stable").astype(np.int64)
    sb = batch[order]
    n = len(order)
    if n == 0:
        return BatchPlan(order, np.zeros(1, dtype=np.int64), [], [], [], "explicit", [], basis)
    cuts = np.flatnonzero(np.diff(sb)) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    ends = np.concatenate([cuts, [n]]).astype(np.int64)
    bounds = [0]
    times: list[int | None] = []
    idle: list[bool] = []
    labels: list[int | None] = []
    pairs = list(zip(starts.tolist(), ends.tolist(), strict=True))
    for v, (s, e) in enumerate(pairs):
        parts = _chunks(s, e, cap)
        last_value = v == len(pairs) - 1
        if arrival is not None and not last_value:
            # data waits at the trigger after this batch when a row of the next batch had arrived by then
            ns, ne = pairs[v + 1]
            waiting = int(arrival[order[ns:ne]].min()) <= int(arrival[order[s:e]].max())
        else:
            waiting = backlog and not last_value
        for i, (cs, ce) in enumerate(parts):
            bounds.append(ce)
            times.append(None if arrival is None else int(arrival[order[cs:ce]].max()))
            idle.append(i == len(parts) - 1 and not waiting)
            labels.append(int(sb[s]))
    return BatchPlan(
        order, np.asarray(bounds, dtype=np.int64), times, idle, list(times), "explicit", labels, basis
    )


def _plan_trigger(arrival: I64, trigger_ms: int, cap: int | None) -> BatchPlan:
    order = np.argsort(arrival, kind="stable").astype(np.int64)
    sa = arrival[order]
    n = len(order)
    if n == 0:
        return BatchPlan(order, np.zeros(1, dtype=np.int64), [], [], [], "trigger")
    # Tick index k fires at k * trigger_ms and reads rows with arrival < k * trigger_ms.
    ticks = sa // trigger_ms + 1
    bounds = [0]
    times: list[int | None] = []
    idle: list[bool] = []
    idle_t: list[int | None] = []
    if cap is None:
        cuts = np.flatnonzero(np.diff(ticks)) + 1
        ends = np.concatenate([cuts, [n]])
        bt = ticks[np.concatenate([[0], cuts])]
        bounds.extend(int(e) for e in ends)
        times = [int(t) * trigger_ms for t in bt]
        nxt = np.concatenate([bt[1:], [np.iinfo(np.int64).max]])
        idle = [bool(x) for x in (nxt > bt + 1)]
        idle_t = [(int(t) + 1) * trigger_ms for t in bt]
        return BatchPlan(order, np.asarray(bounds, dtype=np.int64), times, idle, idle_t, "trigger")
    pos = 0
    tick = int(ticks[0])
    while pos < n:
        avail = int(np.searchsorted(sa, tick * trigger_ms, side="left"))
        take = min(avail, pos + cap)
        bounds.append(take)
        times.append(tick * trigger_ms)
        pos = take
        nxt_avail = n if pos >= n else int(np.searchsorted(sa, (tick + 1) * trigger_ms, side="left"))
        if pos >= n or nxt_avail <= pos:
            idle.append(True)
            idle_t.append((tick + 1) * trigger_ms)
            if pos < n:
                tick = int(ticks[pos])
        else:
            idle.append(False)
            idle_t.append(None)
            tick += 1
    return BatchPlan(order, np.asarray(bounds, dtype=np.int64), times, idle, idle_t, "trigger")


def no_data_basis_text(basis: str, trigger_ms: int | None = None) -> str:
    """One sentence for a reader: what decided when no-data batches run in a replay whose
    :attr:`BatchPlan.basis` is ``basis`` (Spark's ``MicroBatchExecution.constructNextBatch`` runs one only
    when no new data is available at a trigger and the watermark moved). ``trigger_ms``: the
    processing-time trigger of a ``"trigger"`` basis. ``""`` for an unknown basis."""
    every = "" if trigger_ms is None else f" at each {format_duration_ms(trigger_ms)} trigger"
    return {
        "arrival_time": "decided from arrival_time: one runs after a batch only when no row of the next batch "
        "had arrived by then and the watermark moved, as Spark does.",
        "trigger": f"decided from arrival_time{every}: one runs at a trigger that finds no new rows, when the "
        "watermark moved, as Spark does.",
        "caught_up": "the file has no arrival_time, so the replay ASSUMES a live query caught up between "
        "batches: after each batch that moved the watermark, a no-data batch runs before the next batch's "
        "data arrives.",
        "backlog": "ASSUMED a query started on this backlog (the batches already waiting, one per trigger as "
        "with maxFilesPerTrigger=1): the next batch's data is waiting at every trigger, so a no-data batch "
        "can run only after the last batch.",
        "all": "every row is read in one batch (no batch or arrival_time column); a no-data batch can run "
        "after it.",
    }.get(basis, "")
