"""Watermark stall: the watermark stays flat while input rows keep arriving.

Spark semantics followed (``MicroBatchExecution`` / ``WatermarkTracker``): the watermark reported by batch
``n`` is the one batch ``n`` ran with, computed from the event times seen up to batch ``n - 1``. So the rows
of batch ``n`` can only move the watermark reported by batch ``n + 1``: a stall is judged on pairs
(rows of a batch, watermark of the batch after it). Spark runs no-data batches (``numInputRows`` 0) to
evict state when the watermark moved; a flat watermark across no-data batches, or while the query is idle
(``QueryIdleEvent``, no batch at all), is expected and is not a stall. With several inputs Spark takes the
minimum watermark (``spark.sql.streaming.multipleWatermarkPolicy=min``): one input without new event
times holds the global watermark even though other inputs deliver rows.

Real-time mode (``RealTimeTrigger``, Spark 4.1+) keeps these semantics: each long batch runs with the
watermark fixed at its start, ``MicroBatchExecution.markMicroBatchEnd`` updates the ``WatermarkTracker``
from the batch's rows and the next batch runs with it. Only the reports come late (one per batch, at its
end), and the rule judges each batch at its own start, so the trigger changes nothing here: a watermark that
advances once per batch is never flat, and rows whose event times stop advancing are a stall in either mode
(both shown on the recorded real-time-mode query, ``tests/unit/test_real_time_mode.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import Field

from monitor.model import Engine, Finding, Sample, Scope, Severity
from monitor.timefmt import format_duration, format_instant_short
from rules.batches import inferred_delay
from rules.common import (
    SPLIT_STATE_MS_PER_S,
    holding_input,
    holding_split,
    is_epoch,
    scope_name,
    split_name,
    watermark_moves,
    watermark_unused,
)
from rules.history import JobHistory
from rules.jumps import Jump, find_jump
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

__all__ = [
    "RULE",
    "StallCause",
    "StallParams",
    "classify_stall",
    "evaluate_stall",
]

RULE = "watermark_stall"


class StallCause(enum.StrEnum):
    """Why the watermark is flat (see :func:`classify_stall`)."""

    SOURCE_QUIET = "source_quiet"  # no rows at all: not a stall
    NO_WATERMARK = "no_watermark"  # Flink Long.MIN_VALUE (None) while rows flow
    EVENT_TIMES_NULL = "event_times_null"  # rows arrive but every event time is null
    INPUT_HOLDS_MIN = "input_holds_min"  # one input/partition/subtask has the minimum watermark
    NEVER_SEEN_INPUT = "never_seen_input"  # Spark watermark pinned at 1970: an input never had data
    DELAY_EXCEEDS_SPAN = "delay_exceeds_span"  # event times do not reach past watermark + delay
    AFTER_JUMP = "after_jump"  # the watermark rests on a mis-dated row: every honest row is behind it
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class StallDiagnosis:
    """A classified stall: the cause, the input named (if any) and the inferred watermark delay."""

    cause: StallCause
    culprit: Scope | None = None
    delay: timedelta | None = None
    newest_event_time: datetime | None = None


class StallParams(RuleParams):
    """``watermark_stall`` parameters.

    Attributes:
        for_ (``for``): how long the watermark must be flat while rows arrive (default 10m); measured on
            the sample times, so the finding is true as soon as the stretch is that long. Not waited for when
            Spark still reports its initial 1970 watermark after batches with event times (an input that
            never produced data): `min_data_batches` suffice.
        min_rows: rows that must have arrived in the flat stretch.
        min_data_batches: batches/polls with rows in the stretch.
        delay: the job's watermark delay (``withWatermark`` / ``forBoundedOutOfOrderness``), when known;
            otherwise it is inferred from the history (newest event time before the stretch minus the
            watermark).
    """

    min_rows: int = Field(1, ge=1)
    min_data_batches: int = Field(3, ge=1)
    delay: Duration | None = None

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """Stretches up to twice ``for`` are measured exactly (longer ones as that long); the inputs are
        compared over the last ``for``."""
        return 2 * self.flat_for(), self.flat_for()

    def flat_for(self) -> timedelta:
        """The ``for`` duration (default 10 minutes)."""
        return self.for_ if self.for_ is not None else timedelta(minutes=10)


def _rows(samples: Sequence[Sample]) -> int:
    return sum(s.num_input_rows for s in samples if s.num_input_rows)


def classify_stall(
    before: Sequence[Sample],
    movers: Sequence[Sample],
    watermark: datetime | None,
    history: JobHistory | None,
    delay: timedelta | None = None,
) -> StallDiagnosis:
    """Why the watermark stayed at ``watermark`` while ``movers`` (the batches whose rows should have moved
    it) arrived; ``before`` are the job's batches before the flat stretch (to infer the delay).

    Order: no rows -> ``SOURCE_QUIET``; no watermark at all -> ``NO_WATERMARK``; every event time null
    (Spark: ``eventTime.max`` absent or 1970 while ``min`` is 1970; engines without event-time stats, such
    as Flink, never get here) -> ``EVENT_TIMES_NULL``; a narrower
    scope holding the minimum -> ``INPUT_HOLDS_MIN`` (``NEVER_SEEN_INPUT`` when the watermark is the
    1970 initial value); watermark at 1970 -> ``NEVER_SEEN_INPUT``; newest event time no later than
    watermark + delay -> ``DELAY_EXCEEDS_SPAN``; else ``UNKNOWN``.
    """
    if _rows(movers) == 0:
        return StallDiagnosis(StallCause.SOURCE_QUIET)
    if watermark is None:
        culprit = None
        if history is not None and movers:
            culprit = holding_input(history.series, movers[0].observed_at, history.engine)
        return StallDiagnosis(StallCause.NO_WATERMARK, culprit)
    data = [s for s in movers if s.num_input_rows]
    maxes = [
        s.event_time_max for s in data if s.event_time_max is not None and not is_epoch(s.event_time_max)
    ]
    stats = any(s.event_time_max is not None or s.event_time_min is not None for s in data)
    if stats and not maxes:
        return StallDiagnosis(StallCause.EVENT_TIMES_NULL)
    newest_event = max(maxes) if maxes else None
    if history is not None and movers:
        culprit = holding_input(history.series, movers[0].observed_at, history.engine)
        if culprit is not None:
            cause = StallCause.NEVER_SEEN_INPUT if is_epoch(watermark) else StallCause.INPUT_HOLDS_MIN
            return StallDiagnosis(cause, culprit, newest_event_time=newest_event)
    if is_epoch(watermark):
        return StallDiagnosis(StallCause.NEVER_SEEN_INPUT, newest_event_time=newest_event)
    if delay is None:
        delay = inferred_delay([*before, movers[0]])  # movers[0] reports the flat watermark
    if delay is not None and newest_event is not None and newest_event <= watermark + delay:
        return StallDiagnosis(StallCause.DELAY_EXCEEDS_SPAN, delay=delay, newest_event_time=newest_event)
    return StallDiagnosis(StallCause.UNKNOWN, delay=delay, newest_event_time=newest_event)


#: the remedy of each cause (:mod:`rules.remedies`, by the finding's engine)
_REMEDY_CAUSE = {
    StallCause.NO_WATERMARK: Cause.NO_WATERMARK,
    StallCause.EVENT_TIMES_NULL: Cause.EVENT_TIMES_NULL,
    StallCause.INPUT_HOLDS_MIN: Cause.HOLDING_INPUT,
    StallCause.NEVER_SEEN_INPUT: Cause.NEVER_SEEN_INPUT,
    StallCause.DELAY_EXCEEDS_SPAN: Cause.DELAY_EXCEEDS_SPAN,
    StallCause.UNKNOWN: Cause.STALL_UNKNOWN,
}

#: what each cause says before its remedy (engine-neutral: the engine's names are in the remedy)
_WHY = {
    StallCause.NO_WATERMARK: "the engine reports no watermark while rows flow: an input has never emitted one.",
    StallCause.EVENT_TIMES_NULL: "every row's event time is null (eventTime.min shows 1970), so nothing can move "
    "the watermark.",
    StallCause.INPUT_HOLDS_MIN: "the watermark is the minimum over inputs and this one does not advance.",
    StallCause.NEVER_SEEN_INPUT: "the watermark is still its initial 1970 value: under the minimum over inputs an "
    "input that has never produced data keeps its own watermark at 0 and pins the global one there, so no window "
    "is ever emitted and state rows climb.",
    StallCause.DELAY_EXCEEDS_SPAN: "the rows' event times do not reach past watermark + delay: the event times "
    "arriving stopped advancing (a producer writing a frozen or old timestamp, a replay of old times), or the delay "
    "is larger than their span.",
    StallCause.UNKNOWN: "no input is seen holding it and the history shows no mis-dated row.",
}

#: causes a mis-dated row explains better: the rows are behind the watermark because of it
_JUMP_EXPLAINS = frozenset({StallCause.DELAY_EXCEEDS_SPAN, StallCause.UNKNOWN, StallCause.INPUT_HOLDS_MIN})


def _culprit_split(history: JobHistory, culprit: Scope | None) -> dict[str, object] | None:
    """The split (Kafka partition) holding a Flink source subtask's watermark when ``culprit`` is one and its
    newest sample has split-level watermarks (Flink 2.1+, :func:`rules.common.holding_split`)."""
    if culprit is None or history.engine is not Engine.FLINK:
        return None
    samples = history.series.get(culprit)
    return holding_split(samples[-1]) if samples else None


def _read(split: dict[str, object]) -> bool:
    """Whether a split was read for most of the last second (``activeTimeMsPerSecond``)."""
    active = split.get("active_ms_per_s")
    return isinstance(active, (int, float)) and active >= SPLIT_STATE_MS_PER_S


def evaluate_stall(params: StallParams, history: JobHistory, now: datetime) -> list[Finding]:
    """The current ``watermark_stall`` finding of one job (at most one, job scope), judged at its newest
    batch/poll: the watermark has had the same value (or none at all, on engines where ``None`` means
    Flink's Long.MIN_VALUE) for at least ``for`` of sample time while ``min_rows`` rows arrived in
    ``min_data_batches`` batches that could have moved it.

    Spark (``MicroBatchExecution``): the rows of the flat stretch's last batch show only in the next
    batch's watermark, so they are not counted; a Spark query without a watermark (``None``) is not judged.
    Flink (``StatusWatermarkValve``, polled): a poll's rows are already reflected in its watermark, so the
    first poll of the stretch is not counted. The cause is classified by :func:`classify_stall` and named
    in the message with its remedy. ``now`` only stamps the finding.
    """
    batches = history.batches
    if not batches or history.engine is Engine.KAFKA:
        return []  # (a consumer group has no watermark)
    newest = batches[-1]
    wm = newest.watermark
    if history.engine is Engine.SPARK and (wm is None or watermark_unused(newest)):
        return []  # no withWatermark in the query, or no operator uses it (processing-time transformWithState)
    start = watermark_moves(batches, max_steps=0).flat_start
    first = batches[start]
    flat = newest.observed_at - first.observed_at
    # Spark's initial 1970 watermark after batches with event times is never a lull in the data: with the
    # min policy it means an input has never produced data (WatermarkTracker keeps 0 for it), so it is
    # reported after min_data_batches batches, without waiting for `for`
    never_computed = history.engine is Engine.SPARK and wm is not None and is_epoch(wm)
    if flat < params.flat_for() and not never_computed:
        return []
    stretch = batches[start:]
    movers = stretch[:-1] if history.engine is Engine.SPARK else stretch[1:]
    data = [b for b in movers if b.num_input_rows]
    rows = _rows(data)
    if rows < params.min_rows or len(data) < params.min_data_batches:
        return []  # includes the quiet source: a flat watermark without rows is not a stall
    diagnosis = classify_stall(batches[:start], movers, wm, history, params.delay)
    jump: Jump | None = None
    if diagnosis.cause in _JUMP_EXPLAINS:
        jump = find_jump(history)
        if jump is not None and jump.batch.observed_at > first.observed_at:
            jump = None  # a jump inside the flat stretch did not set the watermark it rests on
        if jump is not None:
            diagnosis = StallDiagnosis(StallCause.AFTER_JUMP, delay=diagnosis.delay,
                                       newest_event_time=diagnosis.newest_event_time)
    if never_computed:
        what = "the watermark stayed at Spark's initial 1970-01-01 (none computed)"
    else:
        what = f"the watermark stayed at {format_instant_short(wm)}" if wm is not None else "there was no watermark"
    split = _culprit_split(history, diagnosis.culprit)
    where = "" if split is None else f", {split_name(split)},"
    culprit = f" {scope_name(diagnosis.culprit)}{where} holds it:" if diagnosis.culprit is not None else ""
    if diagnosis.culprit is not None and diagnosis.cause is StallCause.NEVER_SEEN_INPUT:
        culprit = f" {scope_name(diagnosis.culprit)} has produced no rows (numInputRows 0 in every batch):"
    at_least = "at least " if start == 0 else ""  # the stretch reaches back to the oldest batch read
    newest_text = (
        f"; the newest event time was {format_instant_short(diagnosis.newest_event_time)}"
        if diagnosis.newest_event_time is not None
        else ""
    )
    if jump is not None:
        advice = (
            f" Every row since is behind the watermark because {jump.describe()}. {jump.remedy(history.engine)}"
        )
    else:
        why = _WHY[diagnosis.cause]
        if not culprit:
            why = why[:1].upper() + why[1:]  # a sentence of its own after the period
        cause = _REMEDY_CAUSE[diagnosis.cause]
        if split is not None and cause is Cause.HOLDING_INPUT and _read(split):
            cause = Cause.SPLIT_BEHIND  # the partition is read: idleness would not release it
        advice = f"{culprit} {why} {remedy(history.engine, cause)}"
    message = (
        f"{what} for {at_least}{format_duration(flat)} (since {format_instant_short(first.observed_at)}) while {rows} rows arrived in "
        f"{len(data)} batches{newest_text}.{advice}"
    )
    details: dict[str, object] = {
        "cause": diagnosis.cause.value,
        "flat_since": format_instant_short(first.observed_at),
        "flat_seconds": flat.total_seconds(),
        "rows": rows,
        "data_batches": len(data),
    }
    if diagnosis.culprit is not None:
        details["culprit"] = diagnosis.culprit.labels()
    if split is not None:
        details["culprit_split"] = split
    if diagnosis.delay is not None:
        details["delay_seconds"] = diagnosis.delay.total_seconds()
    if jump is not None:
        details["caused_by"] = jump.details()
    return [
        Finding(
            rule=RULE,
            severity=Severity.WARNING,
            job=history.job,
            message=message,
            observed_at=now,
            batch_id=newest.batch_id,
            details=details,
        )
    ]
