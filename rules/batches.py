"""Helpers shared by the batch-history detectors: selecting a query's batches, formatting times."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice
from operator import attrgetter, lt

from monitor.model import Sample, SampleKind

__all__ = [
    "WATERMARK_PLACEHOLDER",
    "fmt_duration",
    "fmt_time",
    "is_placeholder_watermark",
    "progress_batches",
    "real_watermark",
]

WATERMARK_PLACEHOLDER = datetime(1970, 1, 1, tzinfo=UTC)
_TIME = attrgetter("observed_at")


def is_placeholder_watermark(value: datetime | None) -> bool:
    """True for Spark's "no watermark yet" value, ``1970-01-01T00:00:00.000Z`` (epoch ms 0).

    Evidence (Spark ``sql/core/.../streaming``):

    - ``ProgressReporter.extractEventTimeStats`` (``ProgressContext`` in Spark 4) puts
      ``"watermark" -> formatTimestamp(offsetSeqMetadata.batchWatermarkMs)`` into ``eventTime`` only when the
      logical plan has an ``EventTimeWatermark`` node, whatever the batch saw.
    - ``OffsetSeqMetadata.batchWatermarkMs`` defaults to 0 and ``WatermarkTracker.globalWatermarkMs`` starts
      at 0; the tracker moves the global watermark only to a *larger* value (``max event time - delay`` of
      an ``EventTimeWatermarkExec`` that saw rows), after a batch, for the next one. So a real watermark is
      always > 0, and 0 means that no batch has computed one yet.
    - A restart reads the watermark back from the checkpoint's offset log, so only a query's very first
      batch(es) show 0 — until rows with event times arrive. The recorded Spark 4.3.0 log
      (tests/fixtures/spark/real-4.3.0/eventlog_trimmed.jsonl) shows exactly that: batch 0 of the first run
      reports ``1970-01-01T00:00:00.000Z`` with 5 rows, batch 1 reports ``2024-01-01T11:57:00.000Z``, and the
      first batch of each of the 6 restarted runs reports the previous run's last watermark.

    Detectors therefore treat it as "no watermark" (:func:`real_watermark`), never as a value the
    watermark advanced from.
    """
    return value == WATERMARK_PLACEHOLDER


def real_watermark(sample: Sample) -> datetime | None:
    """``sample.watermark``, or ``None`` when unknown or Spark's placeholder (:func:`is_placeholder_watermark`)."""
    wm = sample.watermark
    return None if wm is None or is_placeholder_watermark(wm) else wm


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


def fmt_time(value: datetime) -> str:
    """ISO-8601 UTC, as short as exact: ``2099-01-01T00:00Z``, ``2026-11-29T11:32:48.289Z``."""
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if value.second:
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value.strftime("%Y-%m-%dT%H:%MZ")


def fmt_duration(delta: timedelta) -> str:
    """A rough human duration in the largest fitting unit: ``72 years``, ``1 day``, ``14 min``, ``9 s``."""
    seconds = abs(delta.total_seconds())
    for unit, size in (("year", 365.25 * 86400), ("day", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            amount = seconds / size
            text = f"{amount:.0f}" if amount >= 10 or amount == int(amount) else f"{amount:.1f}"
            plural = "s" if unit in ("year", "day") and text != "1" else ""
            return f"{text} {unit}{plural}"
    return f"{seconds:.0f} s"
