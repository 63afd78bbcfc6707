"""The mis-dated row a job's watermark rests on: one definition that every rule links to.

Spark (``EventTimeWatermarkExec`` / ``WatermarkTracker``) and Flink (``BoundedOutOfOrdernessWatermarks``)
both set the watermark to ``max event time - delay`` and never move it back. So one row dated far ahead
moves the watermark there, and from then on every honest row is older than it: the watermark stays flat
(``watermark_stall``), the rows are dropped as late (``late_drop_surge``), and once processing time has
passed the jumped value, results stop (``freshness``). None of these is cured by another delay: the cure is
the jump's (filter the row, cap the future skew, restart from a checkpoint/savepoint taken before it).

:func:`find_jump` finds that row the way ``future_timestamp`` and ``event_time_units`` report it, and the
rules whose findings follow it name it (:meth:`Jump.describe`, ``details["caused_by"]``) and give its
remedy (:meth:`Jump.remedy`) instead of their own. The jump still holds only while the job's newest
watermark rests on it: the newest watermark is the one the jump set (or later, on the same mis-dated row's
account: the rows after it are still behind it).

Checked, in order, on the job-scope batches/polls:

1. ``units``: the newest watermark is from 2200 on (epoch milliseconds read as seconds);
2. ``skew``: the newest batch's event-time max or watermark is more than ``skew`` ahead of its own
   observation time (the jump is the first batch of that stretch);
3. ``leap``: :func:`rules.leaps.find_leap` (a backfill's mis-dated row, invisible against processing time);
4. ``advance``: the last forward step of the watermark (:func:`rules.common.watermark_moves`) is at least
   ``min_jump`` and ``jump_factor`` times the median of the forward steps before it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from monitor.model import Engine, Sample
from monitor.timefmt import format_duration, format_instant_short
from rules.common import is_epoch, watermark_moves
from rules.history import JobHistory
from rules.leaps import DEFAULT_JUMP_FACTOR, DEFAULT_MIN_JUMP, find_leap
from rules.remedies import Cause, remedy

__all__ = [
    "DEFAULT_SKEW",
    "UNITS_HIGH",
    "Jump",
    "JumpKind",
    "ahead",
    "batch_name",
    "find_jump",
    "skew_start",
    "when",
]

#: ``future_timestamp.skew``'s default: how far ahead of the observation time an event time may be.
DEFAULT_SKEW = timedelta(hours=1)
_PRIOR_STEPS = 20  # the usual watermark step is the median of the newest 20 before the one judged
#: Event times from here on are a unit mismatch (``event_time_units``), not a clock problem.
UNITS_HIGH = datetime(2200, 1, 1, tzinfo=UTC)


class JumpKind(enum.StrEnum):
    """How the jump shows (see the module docstring)."""

    UNITS = "units"
    SKEW = "skew"
    LEAP = "leap"
    ADVANCE = "advance"


def ahead(sample: Sample, skew: timedelta) -> datetime | None:
    """The event-time max or watermark of ``sample`` beyond ``observed_at + skew`` (below 2200), else None."""
    limit = sample.observed_at + skew
    for value in (sample.event_time_max, sample.watermark):
        if value is not None and limit < value < UNITS_HIGH:
            return value
    return None


def skew_start(batches: Sequence[Sample], skew: timedelta) -> int | None:
    """The index of the first batch of the trailing stretch whose event-time max or watermark is more than
    ``skew`` ahead of its own observation time; ``None`` when the newest batch is not ahead."""
    if not batches or ahead(batches[-1], skew) is None:
        return None
    start = len(batches) - 1
    while start > 0 and ahead(batches[start - 1], skew) is not None:
        start -= 1
    return start


def when(sample: Sample) -> str:
    """``batch 7 at <time>`` (Spark), ``the poll at <time>`` where there are no batches (Flink)."""
    if sample.batch_id is None:
        return f"the poll at {format_instant_short(sample.observed_at)}"
    return f"batch {sample.batch_id} at {format_instant_short(sample.observed_at)}"


def batch_name(sample: Sample) -> str:
    """``batch 7`` (Spark), ``the poll at <time>`` where there are no batches (Flink): where a remedy says to
    restart from, or where rows were dropped."""
    return f"batch {sample.batch_id}" if sample.batch_id is not None else f"the poll at {format_instant_short(sample.observed_at)}"


@dataclass(frozen=True, slots=True)
class Jump:
    """A mis-dated row that moved the job's watermark, which still rests on it.

    Attributes:
        kind: how it shows (:class:`JumpKind`).
        batch: the batch (Spark) or poll (Flink) that carried the row (``advance``: the one before the
            watermark showed the jump: Spark reports in batch ``n`` the watermark batch ``n - 1``'s rows set).
        event_time: the mis-dated event time, when the batch reports it (``None`` for ``advance``/``units``,
            and for ``skew`` when only the watermark shows it).
        how_far: ``skew``: how far ahead of the batch's observation time; ``leap``: beyond the data's own
            progression; ``advance``: the watermark's step; ``units``: ``None``.
        watermark: the watermark the job rests on (newest), when known.
    """

    kind: JumpKind
    batch: Sample
    event_time: datetime | None
    how_far: timedelta | None
    watermark: datetime | None

    @property
    def rule(self) -> str:
        """The rule that reports the jump itself."""
        return "event_time_units" if self.kind is JumpKind.UNITS else "future_timestamp"

    @property
    def cause(self) -> Cause:
        """The remedy's cause (:mod:`rules.remedies`)."""
        return Cause.MILLIS_AS_SECONDS if self.kind is JumpKind.UNITS else Cause.FUTURE_JUMP

    def describe(self) -> str:
        """``batch 4 at <time> carried a mis-dated row (event time <t>, 1.0 days beyond ...; see future_timestamp)``."""
        where = when(self.batch)
        event = f"event time {format_instant_short(self.event_time)}, " if self.event_time is not None else ""
        far = format_duration(self.how_far) if self.how_far is not None else ""
        if self.kind is JumpKind.UNITS:
            what = "an event time in epoch milliseconds read as seconds (beyond the year 2200)"
        elif self.kind is JumpKind.SKEW and self.event_time is None:
            return (
                f"at {where} the watermark was {far} ahead of its observation time (a row with a future event "
                f"time came before; see {self.rule})"
            )
        elif self.kind is JumpKind.SKEW:
            what = f"a mis-dated row ({event}{far} ahead of its observation time)"
        elif self.kind is JumpKind.LEAP:
            what = f"a mis-dated row ({event}{far} beyond the data's own progression)"
        else:
            return (
                f"{where} brought a row with a future event time: the watermark jumped +{far} after it "
                f"(see {self.rule})"
            )
        return f"{where} carried {what} that moved the watermark (see {self.rule})"

    def remedy(self, engine: Engine) -> str:
        """The jump's remedy for ``engine`` (filter the row / fix the unit, restart from before it).

        Raises:
            MissingRemedyError: ``engine`` has no watermark (Kafka).
        """
        return remedy(engine, self.cause, before=batch_name(self.batch), skew=format_duration(DEFAULT_SKEW))

    def details(self) -> dict[str, object]:
        """``details["caused_by"]`` of a linked finding: the rule, batch, times and how far."""
        return {
            "rule": self.rule,
            "kind": self.kind.value,
            "batch_id": self.batch.batch_id,
            "at": format_instant_short(self.batch.observed_at),
            "event_time": format_instant_short(self.event_time) if self.event_time is not None else None,
            "jump_seconds": self.how_far.total_seconds() if self.how_far is not None else None,
        }


def _units(batches: Sequence[Sample]) -> Jump | None:
    newest = batches[-1]
    if newest.watermark is None or newest.watermark < UNITS_HIGH:
        return None
    carrier = next(
        (b for b in batches if b.event_time_max is not None and b.event_time_max >= UNITS_HIGH), newest
    )
    return Jump(JumpKind.UNITS, carrier, None, None, newest.watermark)


def _skew(batches: Sequence[Sample], skew: timedelta) -> Jump | None:
    start = skew_start(batches, skew)
    if start is None:
        return None
    first = batches[start]
    value = ahead(first, skew)
    assert value is not None
    event = first.event_time_max if value == first.event_time_max else None
    return Jump(JumpKind.SKEW, first, event, value - first.observed_at, batches[-1].watermark)


def _advance(batches: Sequence[Sample], min_jump: timedelta, jump_factor: float) -> Jump | None:
    moves = watermark_moves(batches, max_steps=_PRIOR_STEPS + 1)  # the newest step and the 20 before it
    if moves.last_step is None or moves.last_step < min_jump or moves.last_step_at is None:
        return None
    prior = sorted(s for s in moves.steps[:-1][-_PRIOR_STEPS:] if s > timedelta(0))
    if len(prior) < 3:
        return None
    usual = prior[len(prior) // 2]
    if moves.last_step < usual * jump_factor:
        return None
    shown = batches.index(moves.last_step_at)  # (rare: only once a jump-sized step is found)
    carrier = batches[shown - 1] if shown > 0 else moves.last_step_at
    return Jump(JumpKind.ADVANCE, carrier, None, moves.last_step, batches[-1].watermark)


def find_jump(
    history: JobHistory,
    *,
    skew: timedelta = DEFAULT_SKEW,
    min_jump: timedelta = DEFAULT_MIN_JUMP,
    jump_factor: float = DEFAULT_JUMP_FACTOR,
) -> Jump | None:
    """The mis-dated row the job's newest watermark rests on (see the module docstring), or ``None``.

    The thresholds are ``future_timestamp``'s defaults (the linking rules do not read another rule's
    parameters). Pure: the same history gives the same jump in ``scan`` and in the daemon.
    """
    batches = history.batches
    if not batches or history.engine is Engine.KAFKA:
        return None
    found = _units(batches) or _skew(batches, skew)
    if found is not None:
        return found
    leap = find_leap(batches, min_jump, jump_factor, history.event_max_top)
    if leap is not None:
        newest = batches[-1].watermark
        return Jump(JumpKind.LEAP, leap.batch, leap.batch.event_time_max, leap.leap, newest)
    newest_wm = batches[-1].watermark
    if newest_wm is None or is_epoch(newest_wm):
        return None
    return _advance(batches, min_jump, jump_factor)
