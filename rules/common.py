"""Small helpers shared by the rules: Spark's "no watermark yet" value, tail windows, scope names for messages."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any

from monitor.model import TRANSFORM_WITH_STATE_EXTRA, TWS_TIME_MODES_EXTRA, Engine, Sample, Scope
from monitor.versions import FlinkVersionError, parse_flink_version

__all__ = [
    "EPOCH",
    "NULL_EVENT_TIME_BEFORE",
    "WatermarkMoves",
    "flink_scope_name",
    "holding_input",
    "holding_split",
    "is_epoch",
    "paused_by_alignment",
    "scope_name",
    "since_index",
    "split_name",
    "tail_since",
    "watermark_moves",
]

_TIME = attrgetter("observed_at")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The end of Spark's "nothing seen yet" instants: a watermark or event time before it is no real time.
NULL_EVENT_TIME_BEFORE = EPOCH + timedelta(seconds=1)


#: ``transformWithState`` time modes in which the operator ignores the event-time watermark
#: (``TimeMode.ProcessingTime()``; ``TimeMode.None()``, written ``NoTime`` in the plan).
_WATERMARK_FREE_MODES = frozenset({"ProcessingTime", "NoTime"})


def watermark_unused(batch: Sample) -> bool:
    """True when the Spark batch's plan shows that no operator of the query uses its watermark: every state
    operator is a ``transformWithState`` (``extra["transform_with_state"]["operators"]`` equals
    ``extra["num_state_operators"]``) and the plan gives each of them a time mode without event time
    (``extra["tws_time_modes"]``: ``ProcessingTime`` / ``NoTime``).

    Spark's ``TransformWithStateExec`` (and its Python counterparts) filters late rows and fires timers by
    the watermark only in ``TimeMode.EventTime()``; in processing-time mode it emits no event-time watermark
    downstream and its results never wait for one. The query still reports the input's ``withWatermark``
    (``eventTime.watermark``), which then holds nothing back: a flat one is no stall and its lag no staleness
    (``watermark_stall``, ``freshness`` and ``freshness_slo`` leave it alone). Without the plan (listener push,
    progress files) the time mode is unknown and the watermark is judged as usual.
    """
    tws = batch.extra.get(TRANSFORM_WITH_STATE_EXTRA)
    modes = batch.extra.get(TWS_TIME_MODES_EXTRA)
    return (
        isinstance(tws, dict)
        and isinstance(modes, list)
        and bool(modes)
        and tws.get("operators") == batch.extra.get("num_state_operators") == len(modes)
        and all(mode in _WATERMARK_FREE_MODES for mode in modes)
    )


def flink_version(batch: Sample) -> tuple[int, int] | None:
    """The ``(major, minor)`` Flink release of the cluster a job sample came from (``extra["flink_version"]``,
    read by the Flink REST collector from ``/config``), or ``None`` when unknown (rules then follow the
    newest release modelled, :data:`monitor.versions.NEWEST_MODELLED_FLINK`)."""
    text = batch.extra.get("flink_version")
    if not isinstance(text, str):
        return None
    try:
        return parse_flink_version(text)
    except FlinkVersionError:
        return None


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


#: A split counts as paused by watermark alignment / marked idle when it spent at least this many ms of the
#: last second so (``pausedTimeMsPerSecond`` / ``idleTimeMsPerSecond``, FLIP-513).
SPLIT_STATE_MS_PER_S = 500.0


def split_name(split: dict[str, Any]) -> str:
    """How a message names a source split of ``Sample.extra["splits"]``
    (:func:`collectors.flink.samples.split_extra`): ``Kafka partition 3 of topic `orders` (split
    `orders-3`)``, or ``split `<id>``` for another connector's split."""
    if split.get("topic") is not None and split.get("partition") is not None:
        return f"Kafka partition {split['partition']} of topic `{split['topic']}` (split `{split['split']}`)"
    return f"split `{split.get('split')}`"


def holding_split(sample: Sample) -> dict[str, Any] | None:
    """The split holding a Flink source subtask's watermark, from the sample's split-level watermarks
    (Flink 2.1+, FLIP-513; ``extra["splits"]``), or ``None`` (no split metrics: Flink before 2.1).

    ``SourceOperator`` combines its splits' watermarks as ``WatermarkOutputMultiplexer`` does: the minimum
    over the splits not marked idle (``idleTimeMsPerSecond`` at least :data:`SPLIT_STATE_MS_PER_S`); a
    split without a watermark yet (``Long.MIN_VALUE``) holds it at none. A split paused by watermark
    alignment still takes part (it is ahead: it never holds the minimum of its own group). The one
    definition the rules, the job facts and ``rules.splits`` use to name the partition.
    """
    splits = sample.extra.get("splits")
    if not isinstance(splits, list) or not splits:
        return None
    active = [s for s in splits if isinstance(s, dict) and (s.get("idle_ms_per_s") or 0.0) < SPLIT_STATE_MS_PER_S]
    if not active:
        return None
    unset = [s for s in active if s.get("watermark_ms") is None]
    if unset:
        return unset[0]
    return min(active, key=lambda s: (s["watermark_ms"], str(s.get("split"))))


def paused_by_alignment(sample: Sample) -> bool:
    """Whether every split of a Flink source subtask that is not marked idle was paused by watermark
    alignment for most of the last second (``pausedTimeMsPerSecond`` at least :data:`SPLIT_STATE_MS_PER_S`,
    Flink 2.1+): the subtask reads nothing because its splits ran ahead of the alignment group's slowest
    split (``SourceOperator`` / ``SourceReader.pauseOrResumeSplits``, FLIP-182/217), not because it has no
    data; ``idle_source`` leaves it to ``split_watermark``. ``False`` without split metrics."""
    splits = sample.extra.get("splits")
    if not isinstance(splits, list) or not splits:
        return False
    live = [s for s in splits if isinstance(s, dict) and (s.get("idle_ms_per_s") or 0.0) < SPLIT_STATE_MS_PER_S]
    return bool(live) and all((s.get("paused_ms_per_s") or 0.0) >= SPLIT_STATE_MS_PER_S for s in live)


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
    if max_steps == 0:
        return WatermarkMoves(flat_start, (), ())  # only the flat stretch was asked for
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
    holds it (source subtasks are compared among themselves where the job has them: a downstream vertex
    trails its inputs by the metric store's sampling). A source subtask with no watermark while a downstream (non-source) vertex has one does not hold
    it: the valve left it out as idle (``WatermarkStatus.IDLE``, e.g. ``withIdleness``), or the downstream
    watermark would be ``Long.MIN_VALUE`` too (rule ``idle_source`` says ``no_watermark`` for it). Spark (``WatermarkTracker`` with the ``min`` policy): per-source progress has no watermark,
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
    downstream_advances = any(wm is not None for scope, wm in newest.items() if not scope.source)
    if not downstream_advances and any(wm is None for wm in newest.values()) and any(
        wm is not None for wm in newest.values()
    ):
        return next(scope for scope, wm in newest.items() if wm is None)
    # a downstream vertex always trails its inputs by a poll's sampling: compare source subtasks among
    # themselves where the job has them
    sources = {scope: wm for scope, wm in newest.items() if scope.source}
    known = {scope: wm for scope, wm in (sources or newest).items() if wm is not None}
    if len(known) >= 2 and len(set(known.values())) > 1:
        return min(known, key=lambda scope: known[scope])
    return None
