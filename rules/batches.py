"""Helpers shared by the batch-history detectors: selecting a query's batches and their real watermarks.

Times and durations are formatted by :mod:`monitor.timefmt`; Spark's "no watermark yet" value has its one
definition in :func:`rules.common.is_epoch`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice
from operator import attrgetter, lt

from monitor.model import Sample, SampleKind
from rules.common import is_epoch

__all__ = [
    "UNITS_HIGH",
    "inferred_delay",
    "progress_batches",
    "real_watermark",
    "usable_event_max",
]

#: event times from here on are unit mistakes (``event_time_units``), never a data's progression
UNITS_HIGH = datetime(2200, 1, 1, tzinfo=UTC)

_TIME = attrgetter("observed_at")


def real_watermark(sample: Sample) -> datetime | None:
    """``sample.watermark``, or ``None`` when unknown or Spark's "no watermark yet" value
    (:func:`rules.common.is_epoch`, the one definition)."""
    wm = sample.watermark
    return None if wm is None or is_epoch(wm) else wm


def usable_event_max(sample: Sample) -> datetime | None:
    """The batch's ``event_time_max`` when it can have moved the watermark as a real event time: the batch had
    rows, and the value is neither Spark's null/epoch marker (:func:`rules.common.is_epoch`) nor a unit
    mistake (year 2200 or later, :data:`UNITS_HIGH`); else ``None``."""
    value = sample.event_time_max
    if value is None or not sample.num_input_rows or is_epoch(value) or value >= UNITS_HIGH:
        return None
    return value


def inferred_delay(batches: Sequence[Sample]) -> timedelta | None:
    """The watermark delay a job runs with, inferred from its batches (oldest first): the smallest
    ``max event time seen before the batch - the batch's watermark`` that is not negative.

    Spark (``WatermarkTracker``): the watermark a batch runs with is ``max(previous, max event time seen -
    delay)``, so that difference is the delay exactly whenever the newest max moved the watermark, and
    larger while the watermark is held (an input holding the minimum, no new maximum). The minimum over the
    batches is therefore the delay (the median or the newest difference overstate it). Event times are
    those of :func:`usable_event_max`; Spark's "no watermark yet" is skipped. ``None``: no batch shows it
    (no watermark, no event-time stats, as for Flink polls). The one definition (``watermark_stall``,
    ``future_timestamp``'s leaps, the job facts and the reports).
    """
    running: datetime | None = None
    best: timedelta | None = None
    for batch in batches:
        wm = batch.watermark
        if running is not None and wm is not None and not is_epoch(wm) and running >= wm:
            seen = running - wm
            best = seen if best is None or seen < best else best
        value = usable_event_max(batch)
        if value is not None and (running is None or value > running):
            running = value
    return best


def progress_batches(samples: Sequence[Sample]) -> list[Sample]:
    """The query-scope ``PROGRESS`` samples of ``samples`` (one query), in time order.

    Idle events, lifecycle events and per-source samples are left out: detectors reason about batches.
    A batch seen twice (the same ``run_id`` and ``batch_id`` read from two inputs) is kept once.
    """
    progress = SampleKind.PROGRESS
    batches = [s for s in samples if s.kind is progress and s.scope.is_job()]
    times = list(map(_TIME, batches))
    if all(map(lt, times, islice(times, 1, None))):
        return batches  # strictly increasing times: in order already, and no batch can repeat
    seen: set[tuple[str | None, int | None, datetime]] = set()
    out: list[Sample] = []
    for sample in batches:
        key = (sample.job.run_id, sample.batch_id, sample.observed_at)
        if key in seen:
            continue
        seen.add(key)
        out.append(sample)
    out.sort(key=lambda s: (s.observed_at, s.batch_id if s.batch_id is not None else -1))
    return out
