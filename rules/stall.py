"""Watermark stall: the watermark stays flat while input rows keep arriving.

Spark semantics followed (``MicroBatchExecution`` / ``WatermarkTracker``): the watermark reported by batch
``n`` is the one batch ``n`` ran with, computed from the event times seen up to batch ``n - 1``. So the rows
of batch ``n`` can only move the watermark reported by batch ``n + 1``: a stall is judged on pairs
(rows of a batch, watermark of the batch after it). Spark runs no-data batches (``numInputRows`` 0) to
evict state when the watermark moved; a flat watermark across no-data batches, or while the query is idle
(``QueryIdleEvent``, no batch at all), is expected and is not a stall. With several inputs Spark takes the
minimum watermark (``spark.sql.streaming.multipleWatermarkPolicy=min``): one input without new event
times holds the global watermark even though other inputs deliver rows.
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
from rules.common import holding_input, is_epoch, scope_name
from rules.history import JobHistory
from rules.params import Duration, RuleParams

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


_REMEDY = {
    StallCause.NO_WATERMARK: (
        "the engine reports no watermark (Flink Long.MIN_VALUE) while rows flow: an input channel has never "
        "emitted one. Give the source WatermarkStrategy.withIdleness(...) so idle channels are skipped, or "
        "check that the source assigns timestamps and watermarks."
    ),
    StallCause.EVENT_TIMES_NULL: (
        "every row's event time is null (Spark filters them silently; eventTime.min shows 1970), so nothing "
        "can move the watermark. Fix the event-time column's parsing (format, time zone, field name)."
    ),
    StallCause.INPUT_HOLDS_MIN: (
        "the watermark is the minimum over inputs and this one does not advance. Give the source an idleness "
        "timeout (Flink WatermarkStrategy.withIdleness) or, in Spark, set "
        "spark.sql.streaming.multipleWatermarkPolicy=max if the other inputs may run ahead."
    ),
    StallCause.NEVER_SEEN_INPUT: (
        "the watermark is still Spark's initial 1970 value: under the default min policy "
        "(spark.sql.streaming.multipleWatermarkPolicy=min) an input that has never produced data keeps its "
        "own watermark at 0 and pins the global one there, so no window is ever emitted and state rows "
        "climb. Remedies: feed that input, or drop it from the query, or set "
        "spark.sql.streaming.multipleWatermarkPolicy=max (the fastest input then drives the watermark and "
        "rows of slower inputs older than it are dropped as late). Per-input watermarks are not "
        "checkpointed: with Trigger.AvailableNow or once, an input without data in a run pins it again in "
        "every run."
    ),
    StallCause.DELAY_EXCEEDS_SPAN: (
        "the rows' event times do not reach past watermark + delay: the delay is larger than the span of "
        "event times arriving (or the data is a replay of old times). Lower the watermark delay or check the "
        "event-time column."
    ),
    StallCause.UNKNOWN: (
        "look for an input or partition whose event time does not advance (the engine keeps the minimum "
        "watermark over inputs) or for rows all older than the watermark."
    ),
}


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
    if not batches:
        return []
    newest = batches[-1]
    wm = newest.watermark
    if wm is None and history.engine is Engine.SPARK:
        return []  # no withWatermark in the query
    start = len(batches) - 1
    while start > 0 and batches[start - 1].watermark == wm:
        start -= 1
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
    if never_computed:
        what = "the watermark stayed at Spark's initial 1970-01-01 (none computed)"
    else:
        what = f"the watermark stayed at {format_instant_short(wm)}" if wm is not None else "there was no watermark"
    culprit = f" {scope_name(diagnosis.culprit)} holds it:" if diagnosis.culprit is not None else ""
    if diagnosis.culprit is not None and diagnosis.cause is StallCause.NEVER_SEEN_INPUT:
        culprit = f" {scope_name(diagnosis.culprit)} has produced no rows (numInputRows 0 in every batch):"
    at_least = "at least " if start == 0 else ""  # the stretch reaches back to the oldest batch read
    newest_text = (
        f"; the newest event time was {format_instant_short(diagnosis.newest_event_time)}"
        if diagnosis.newest_event_time is not None
        else ""
    )
    message = (
        f"{what} for {at_least}{format_duration(flat)} (since {format_instant_short(first.observed_at)}) while {rows} rows arrived in "
        f"{len(data)} batches{newest_text}.{culprit} {_REMEDY[diagnosis.cause]}"
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
    if diagnosis.delay is not None:
        details["delay_seconds"] = diagnosis.delay.total_seconds()
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
