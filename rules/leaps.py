"""Event-time leaps: one batch whose event-time max jumps far beyond the data's own progression.

Spark semantics followed (``WatermarkTracker``, ``EventTimeWatermarkExec``): the watermark after a batch
is ``max(previous, max event time seen - delay)`` and never goes back, and the progress of batch ``n``
reports the event-time stats of its own rows. So one mis-dated row in batch ``n`` shows as an
``eventTime.max`` far beyond what the earlier batches progressed, the watermark reported by the batch
after it follows (``max - delay``), and the honest rows of the next batches, whose event times continue
the old progression, fall behind the watermark and are dropped. In a backfill or replay every event time
is in the past, so comparing with processing time (``future_timestamp.skew``) cannot see it: the
signature is in the data alone.

A leap is the first of:

* enough history (three earlier increments of the running event-time max): the leap is at least
  ``jump_factor`` times the median increment — reported at the batch that carried the row;
* little history: a later batch with rows is back on the old progression (its max is less than half
  way up the leap) — the row was an outlier; reported once that batch is seen.

A steady fast backfill (every batch hours further, no batch falling back) never leaps. Event times ahead
of the batch's own (processing) time are left to ``future_timestamp.skew`` and its tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter

from monitor.model import Sample
from rules.batches import UNITS_HIGH, inferred_delay, usable_event_max
from rules.common import NULL_EVENT_TIME_BEFORE as _NULL_BEFORE
from rules.common import is_epoch

__all__ = ["DEFAULT_JUMP_FACTOR", "DEFAULT_MIN_JUMP", "Leap", "find_leap"]

#: ``future_timestamp``'s defaults: a leap is at least this long...
DEFAULT_MIN_JUMP = timedelta(hours=1)
#: ...and, with enough history, this many times the usual increment
DEFAULT_JUMP_FACTOR = 50.0

_EVENT_MAX = attrgetter("event_time_max")


@dataclass(frozen=True, slots=True)
class Leap:
    """A batch that carried a mis-dated row.

    Attributes:
        index: its index in the batches searched.
        batch: the batch.
        previous_max: the newest event time of the batches before it.
        leap: ``batch.event_time_max - previous_max``.
        usual: the median increment of the running max before it (``None``: fewer than one).
        delay: the watermark delay inferred from the history (``None``: not seen).
        followed_at: the first later batch whose watermark followed the leap (``None``: not yet).
        watermark_advance: how far the watermark moved in that batch.
        fell_back: a later batch with rows is back on the old progression.
    """

    index: int
    batch: Sample
    previous_max: datetime
    leap: timedelta
    usual: timedelta | None
    delay: timedelta | None
    followed_at: Sample | None
    watermark_advance: timedelta | None
    fell_back: bool


def find_leap(
    batches: Sequence[Sample],
    min_jump: timedelta,
    jump_factor: float,
    tops: tuple[datetime, datetime | None] | None = None,
) -> Leap | None:
    """The newest leap (see the module docstring) among one job's batches (oldest first) that still holds:
    the newest batch with rows after it is still behind it. ``tops``: the newest ``event_time_max`` and the
    largest before it, when the caller keeps them (:attr:`rules.history.JobHistory.event_max_top`); then
    the common case (no leap possible) costs O(1), else O(len(batches)) plus a pass over the batches after
    each candidate (candidates are rare)."""
    # exact fast path (most calls): a leap that still holds needs the newest batch with rows either to
    # be far below an earlier max (fell back by at least half of a leap >= min_jump) or to be the leap
    if tops is None:  # (newest, largest before it), as rules.history.RollingHistory keeps them
        maxes = [m for m in map(_EVENT_MAX, batches) if m is not None]
        tops = (maxes[-1], max(maxes[:-1]) if len(maxes) > 1 else None) if maxes else None
    if tops is None or tops[1] is None:
        return None
    newest, top = tops[0], tops[1]
    # (a batch reports an event-time max only when it had rows, as Spark's eventTime stats do; values
    # outside [1970 + 1 s, 2200) are left to the full pass)
    plain = top < UNITS_HIGH and newest >= _NULL_BEFORE
    if plain and newest >= top - min_jump / 2 and newest - top < min_jump:
        return None
    running: datetime | None = None
    increments: list[timedelta] = []
    found: Leap | None = None
    for i, batch in enumerate(batches):
        value = usable_event_max(batch)
        if value is None:
            continue
        if running is None:
            running = value
            continue
        step = value - running
        # an event time ahead of processing time is future_timestamp.skew's to judge (with its tolerance):
        # leaps are looked for in data behind processing time (a backfill, a replay, an old log)
        if step >= min_jump and value <= batch.observed_at:
            delay = inferred_delay(batches[: i + 1])  # candidates are rare: O(i) each
            if delay is None or step > delay:
                leap = _judge(batches, i, running, step, increments, delay, jump_factor)
                if leap is not None:
                    found = leap
        if step > timedelta(0):
            increments.append(step)
            if len(increments) > 20:
                del increments[0]
            running = value
    return found


def _judge(
    batches: Sequence[Sample],
    i: int,
    previous: datetime,
    step: timedelta,
    increments: list[timedelta],
    delay: timedelta | None,
    jump_factor: float,
) -> Leap | None:
    batch = batches[i]
    assert batch.event_time_max is not None
    halfway = previous + step / 2
    later = [m for b in batches[i + 1 :] if (m := usable_event_max(b)) is not None]
    ordered = sorted(increments)
    usual = ordered[len(ordered) // 2] if ordered else None
    if later:
        fell_back = later[-1] < halfway
        if not fell_back:
            return None  # the data kept up with it: a gap in the data or a fast backfill, not an outlier
    else:
        fell_back = False
        if len(increments) < 3 or usual is None or step < usual * jump_factor:
            return None  # little history: wait for the next batch with rows
    followed = next(
        (b for b in batches[i + 1 :] if b.watermark is not None and b.watermark >= halfway - (delay or timedelta(0))),
        None,
    )
    advance = None
    if followed is not None:
        j = batches.index(followed, i + 1)
        before = batches[j - 1].watermark
        if before is not None and followed.watermark is not None and not is_epoch(before):
            advance = followed.watermark - before
    return Leap(i, batch, previous, step, usual, delay, followed, advance, fell_back)
