"""Restarts and run kinds: the same replay when the query is stopped and started again on its checkpoint.

What a restart keeps and loses (Spark 3.5-4.x ``MicroBatchExecution.populateStartOffsets``, checked against
PySpark 4.3.0, tests/differential/FINDINGS.md R1-R5) is modelled by
:meth:`~monitor.watermark.runtime.WatermarkRuntime.restart`: the global watermark, the previous batch's
watermark (late filter) and the operator state come back from the checkpoint; the per-input watermarks
do not (only the global one is in the offset log's ``batchWatermarkMs`` / commit log's
``nextBatchWatermarkMs``), and no no-data batch runs before the new query's first batch.

Run kinds (how each query run ends and where no-data batches run):

* ``live``: the default / processing-time trigger; a no-data batch runs whenever the query is idle after a
  data batch and the watermark moved (the plan's ``idle_after``). A restart stops it right after the batch
  named, so a no-data batch that would have followed a data batch does not run (after the restart it does
  not either: the new query has no previous execution; the next data batch evicts instead, with its rows).
* ``available_now`` (``Trigger.AvailableNow``, ``MultiBatchExecutor``): a run reads what is there, data
  batch after data batch without no-data batches between them (new data is always waiting), then one
  no-data batch at its end if the watermark moved, then stops. A job scheduled as AvailableNow runs is a
  restart per run.
* ``once`` (``Trigger.Once``, ``SingleBatchExecutor``): one batch per run and never a no-data batch:
  every run is a restart, and every batch stops the query between it and its no-data batch.

:func:`replay_runs` replays an explicit schedule of runs (what the differential tests run);
:func:`replay_restarting` takes restart points as batch ids, as a Spark user names a redeploy ("we
redeployed after batch 41"), and :func:`restart_impact` says what the restarts changed against the same
events replayed by one query that never stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from monitor.watermark.config import EngineConfigError, WatermarkConfig
from monitor.watermark.events import EventsTable
from monitor.watermark.plan import BatchPlan, plan_batches
from monitor.watermark.replay import replay
from monitor.watermark.results import BatchResult, Replay
from monitor.watermark.runtime import WatermarkRuntime

__all__ = [
    "QueryRun",
    "Restart",
    "RestartImpact",
    "RestartReplay",
    "RunKind",
    "replay_restarting",
    "replay_runs",
    "restart_impact",
]

RunKind = Literal["live", "once", "available_now"]
RUN_KINDS: tuple[str, ...] = get_args(RunKind)


@dataclass(frozen=True)
class QueryRun:
    """One run of the query: ``data_batches`` consecutive data batches of the plan (``once``: exactly 1)."""

    kind: RunKind
    data_batches: int


@dataclass(frozen=True)
class Restart:
    """One stop and start on the same checkpoint.

    Attributes:
        after_batch_id: the last batch the stopped query ran.
        first_batch_id: the id the restarted query's first batch takes.
        watermark_ms: the global watermark restored from the checkpoint (epoch ms).
        lost_source_watermarks_ms: the per-input watermarks the restart forgot (``None``: never set).
        skipped_no_data_batch: the query stopped after a data batch before the no-data batch Spark would
            have run next (its evictions/emissions then wait for the next data batch).
    """

    after_batch_id: int
    first_batch_id: int
    watermark_ms: int
    lost_source_watermarks_ms: dict[str, int | None]
    skipped_no_data_batch: bool

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form (all times epoch ms)."""
        return {
            "after_batch_id": self.after_batch_id,
            "first_batch_id": self.first_batch_id,
            "watermark_ms": self.watermark_ms,
            "lost_source_watermarks_ms": dict(self.lost_source_watermarks_ms),
            "skipped_no_data_batch": self.skipped_no_data_batch,
        }


@dataclass(frozen=True)
class RestartReplay:
    """A replay with restarts: the batches (``replay``) and each restart in order."""

    replay: Replay
    restarts: tuple[Restart, ...]


@dataclass
class _Driver:
    """The replay's ``drive`` for a run schedule (see the module docstring for the run kinds).

    ``kind_of(j)``: the kind of the run data batch ``j`` belongs to; ``starts``: data-batch indices
    that start a new run; ``stop_after``: batch ids after which the query stops (a run ends there);
    ``stop_data`` / ``stop_idle``: data-batch indices after which it stops, right after the data batch
    (before its no-data batch) / after the no-data batch that follows it (or the data batch when none
    runs there)."""

    kind_of: Callable[[int], RunKind]
    starts: frozenset[int]
    stop_after: frozenset[int]
    restarts: list[Restart] = field(default_factory=list)
    stop_data: frozenset[int] = frozenset()
    stop_idle: frozenset[int] = frozenset()

    def __call__(self, rt: WatermarkRuntime, plan: BatchPlan, record: Callable[[BatchResult], None]) -> None:
        stopped: tuple[int, bool] | None = None  # (last batch id, skipped a no-data batch)
        for j in range(len(plan)):
            kind = self.kind_of(j)
            if j > 0 and (stopped is not None or j in self.starts or kind == "once"):
                assert stopped is not None
                self._restart(rt, *stopped)
                # a new query's first trigger: no previous execution asks for a no-data batch, so
                # this never runs in Spark (kept to state the rule; the model check flips it)
                if rt.needs_no_data_batch():
                    record(rt.run_no_data_batch(plan.idle_time_ms[j - 1]))
            data = rt.run_data_batch(plan.rows(j), plan.times_ms[j])
            record(data)
            last_of_run = (
                j + 1 == len(plan)
                or (j + 1) in self.starts
                or kind == "once"
                or data.batch_id in self.stop_after
                or j in self.stop_data
                or j in self.stop_idle
            )
            if kind == "live":
                may_run = (
                    bool(plan.idle_after[j]) and data.batch_id not in self.stop_after and j not in self.stop_data
                )
            else:
                may_run = kind == "available_now" and last_of_run
            stopped = None
            if may_run and rt.needs_no_data_batch():
                idle = rt.run_no_data_batch(plan.idle_time_ms[j])
                record(idle)
                if last_of_run or idle.batch_id in self.stop_after:
                    stopped = (idle.batch_id, False)
            elif last_of_run:
                # skipped: one was due, and a live query would have run it (no data waiting at the trigger)
                stopped = (data.batch_id, rt.needs_no_data_batch() and bool(plan.idle_after[j]))

    def _restart(self, rt: WatermarkRuntime, after_batch_id: int, skipped: bool) -> None:
        lost = rt.restart()
        self.restarts.append(
            Restart(
                after_batch_id=after_batch_id,
                first_batch_id=rt.next_batch_id,
                watermark_ms=rt.watermark_ms,
                lost_source_watermarks_ms=lost,
                skipped_no_data_batch=skipped,
            )
        )


def replay_runs(
    events: EventsTable, config: WatermarkConfig, runs: Sequence[QueryRun], *, plan: BatchPlan | None = None
) -> RestartReplay:
    """Replay ``events`` as a sequence of query runs on one checkpoint (every run after the first is a
    restart); the runs cover the plan's data batches in order.

    Raises:
        EngineConfigError: the runs do not cover the plan's data batches exactly, a run is empty, a
            ``once`` run reads more than one data batch, or a kind is unknown.
    """
    if plan is None:
        plan = plan_batches(events, config)
    kinds: list[RunKind] = []
    starts: set[int] = set()
    for run in runs:
        if run.kind not in RUN_KINDS:
            raise EngineConfigError(f"run kind {run.kind!r} is not one of {', '.join(RUN_KINDS)}")
        if run.data_batches < 1:
            raise EngineConfigError(f"a query run must read at least one data batch, got {run.data_batches}")
        if run.kind == "once" and run.data_batches != 1:
            raise EngineConfigError(
                f"a Trigger.Once run reads everything waiting in one batch; got {run.data_batches} data batches"
            )
        starts.add(len(kinds))
        kinds.extend([run.kind] * run.data_batches)
    if len(kinds) != len(plan):
        raise EngineConfigError(f"the runs read {len(kinds)} data batches but the events make {len(plan)}")
    driver = _Driver(kind_of=kinds.__getitem__, starts=frozenset(starts - {0}), stop_after=frozenset())
    result = replay(events, config, plan=plan, drive=driver)
    return RestartReplay(replay=result, restarts=tuple(driver.restarts))


def replay_restarting(
    events: EventsTable,
    config: WatermarkConfig,
    restart_after: Sequence[int],
    *,
    kind: RunKind = "live",
    plan: BatchPlan | None = None,
    after_data_batches: Sequence[tuple[int, bool]] = (),
) -> RestartReplay:
    """Replay ``events`` with the query stopped after each batch id in ``restart_after`` and started again
    on the same checkpoint (a redeploy), every run of the given ``kind``. ``after_data_batches``: more
    restart points as ``(data-batch index, after its no-data batch)``, which do not move when an earlier
    restart changes the batch ids (``False``: right after that data batch, before the no-data batch Spark
    would run next; ``True``: after that no-data batch, or after the data batch when none runs there).

    ``live``: the query stops right after that batch (a data batch's no-data batch does not run);
    ``available_now``: the run whose data ends with that batch stops after its closing no-data batch (a
    batch id of a no-data batch ends the run there); ``once``: every batch is its own run (restart points
    add nothing). A batch id the replay never reaches is an error (it would silently change nothing).

    Raises:
        EngineConfigError: a negative batch id, a batch id beyond the last batch, or an unknown kind.
    """
    if kind not in RUN_KINDS:
        raise EngineConfigError(f"run kind {kind!r} is not one of {', '.join(RUN_KINDS)}")
    bad = sorted(b for b in restart_after if b < 0)
    if bad:
        raise EngineConfigError(f"restart after batch {bad[0]}: batch ids start at 0")
    if plan is None:
        plan = plan_batches(events, config)
    outside = sorted(j for j, _ in after_data_batches if not 0 <= j < len(plan) - 1)
    if outside:
        raise EngineConfigError(
            f"restart after data batch {outside[0]}: data batches are 0 to {len(plan) - 1} and a restart needs "
            "one after it"
        )
    driver = _Driver(
        kind_of=lambda _j: kind,
        starts=frozenset(),
        stop_after=frozenset(restart_after),
        stop_data=frozenset(j for j, idle in after_data_batches if not idle),
        stop_idle=frozenset(j for j, idle in after_data_batches if idle),
    )
    result = replay(events, config, plan=plan, drive=driver)
    beyond = sorted(b for b in restart_after if b >= len(result.batches) - 1)
    if beyond:
        last = len(result.batches) - 1
        raise EngineConfigError(
            f"restart after batch {beyond[0]}: the replay's last batch is {last}, so there is nothing to "
            f"restart into; give a batch id below {last}"
        )
    return RestartReplay(replay=result, restarts=tuple(driver.restarts))


@dataclass(frozen=True)
class HeldBack:
    """A stretch of data batches after a restart that ran with a lower watermark than without restarts.

    ``waiting_for``: the inputs without rows since the restart at its first batch (``min`` policy: each
    counts as 0, so the watermark stays at the restored value until all have had rows)."""

    restart: Restart
    data_batches: int
    first_batch_id: int
    watermark_ms: int
    watermark_without_restarts_ms: int
    waiting_for: tuple[str, ...]


@dataclass(frozen=True)
class RestartImpact:
    """What the restarts changed against one query that never stopped (same events, same plan).

    Rows are event indices (0-based rows of the events table). ``dropped_only_with_restarts``: late with
    restarts, kept without; ``kept_only_with_restarts``: the other way round (a held-back watermark lets
    rows in). ``held_back``: stretches of data batches whose watermark was lower because of a restart.
    ``windows_emitted``: windows (rows) emitted; for a stream-stream join the join's output rows, joined
    and NULL-padded.
    """

    restarts: tuple[Restart, ...]
    dropped_rows: int
    dropped_rows_without_restarts: int
    dropped_only_with_restarts: tuple[int, ...]
    kept_only_with_restarts: tuple[int, ...]
    windows_emitted: int
    windows_emitted_without_restarts: int
    no_data_batches: int
    no_data_batches_without_restarts: int
    held_back: tuple[HeldBack, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form (times epoch ms, rows event indices)."""
        return {
            "restarts": [r.to_json() for r in self.restarts],
            "dropped_rows": self.dropped_rows,
            "dropped_rows_without_restarts": self.dropped_rows_without_restarts,
            "dropped_only_with_restarts": list(self.dropped_only_with_restarts),
            "kept_only_with_restarts": list(self.kept_only_with_restarts),
            "windows_emitted": self.windows_emitted,
            "windows_emitted_without_restarts": self.windows_emitted_without_restarts,
            "no_data_batches": self.no_data_batches,
            "no_data_batches_without_restarts": self.no_data_batches_without_restarts,
            "held_back": [
                {
                    "after_batch_id": h.restart.after_batch_id,
                    "data_batches": h.data_batches,
                    "first_batch_id": h.first_batch_id,
                    "watermark_ms": h.watermark_ms,
                    "watermark_without_restarts_ms": h.watermark_without_restarts_ms,
                    "waiting_for": list(h.waiting_for),
                }
                for h in self.held_back
            ],
        }


def restart_impact(with_restarts: RestartReplay, without: Replay) -> RestartImpact:
    """Compare a replay with restarts to the same events and plan replayed by one query that never
    stopped (``replay(events, config, plan=plan)``): drops, emissions, no-data batches, and the data
    batches whose watermark a restart held back (data batch ``j`` of both replays read the same rows)."""
    ours = with_restarts.replay
    late_with = {r.row_index for b in ours.batches for r in b.late_rows}
    late_without = {r.row_index for b in without.batches for r in b.late_rows}
    data_with = [b for b in ours.batches if b.kind == "data"]
    data_without = [b for b in without.batches if b.kind == "data"]
    held: list[HeldBack] = []
    restarts = list(with_restarts.restarts)
    for r_index, restart in enumerate(restarts):
        end_id = restarts[r_index + 1].first_batch_id if r_index + 1 < len(restarts) else None
        stretch = [
            (j, b)
            for j, b in enumerate(data_with)
            if b.batch_id >= restart.first_batch_id and (end_id is None or b.batch_id < end_id)
        ]
        lower = [(j, b) for j, b in stretch if b.watermark_ms < data_without[j].watermark_ms]
        if not lower:
            continue
        j0, b0 = lower[0]
        # the inputs still without a watermark after the batch before the first held-back one
        before = [b for b in ours.batches if restart.first_batch_id <= b.batch_id < b0.batch_id]
        waiting = (
            tuple(n for n, wm in before[-1].source_watermarks_ms.items() if wm is None) if before else ()
        )
        held.append(
            HeldBack(
                restart=restart,
                data_batches=len(lower),
                first_batch_id=b0.batch_id,
                watermark_ms=b0.watermark_ms,
                watermark_without_restarts_ms=data_without[j0].watermark_ms,
                waiting_for=waiting,
            )
        )
    return RestartImpact(
        restarts=with_restarts.restarts,
        dropped_rows=ours.summary.dropped_rows,
        dropped_rows_without_restarts=without.summary.dropped_rows,
        dropped_only_with_restarts=tuple(sorted(late_with - late_without)),
        kept_only_with_restarts=tuple(sorted(late_without - late_with)),
        windows_emitted=_emitted(ours),
        windows_emitted_without_restarts=_emitted(without),
        no_data_batches=ours.summary.no_data_batches,
        no_data_batches_without_restarts=without.summary.no_data_batches,
        held_back=tuple(held),
    )


def _emitted(result: Replay) -> int:
    """Windows (rows) a replay emitted; a join's output rows (joined and NULL-padded) for a join."""
    outs = [b.join for b in result.batches if b.join is not None]
    if outs:
        return sum(len(o.left_rows) for o in outs)
    return result.summary.windows_emitted
