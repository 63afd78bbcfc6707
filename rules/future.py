"""Future-timestamp jump: a batch's event-time max (or watermark) is ahead of the batch's own time.

Spark semantics followed (``MicroBatchExecution`` / ``WatermarkTracker``): after each batch the watermark
becomes ``max(old watermark, max event time seen - delay)`` and never goes back; the progress of batch
``n`` reports the watermark batch ``n`` *ran with* (computed after batch ``n - 1``) and the event-time
stats (``eventTime.max``) of batch ``n``'s own rows. So one mis-dated row in batch ``n`` shows as
``event_time_max`` far ahead of the batch ``timestamp`` in batch ``n``, and as a watermark far ahead in
batch ``n + 1``; from then on every correctly dated row is older than the watermark and is dropped as late.
The batch ``timestamp`` (trigger time) stands in for "now": no wall clock is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from monitor.model import Finding, Sample, Severity
from rules.batches import fmt_duration, fmt_time, progress_batches

__all__ = ["RULE", "FutureConfig", "detect_future_timestamps"]

RULE = "future_timestamp"


@dataclass(frozen=True, slots=True)
class FutureConfig:
    """``skew``: how far ahead of the batch time an event time may be before it counts as mis-dated."""

    skew: timedelta = timedelta(hours=1)


def detect_future_timestamps(config: FutureConfig, samples: Sequence[Sample]) -> list[Finding]:
    """Findings for one query's samples (any order): at most one per jump.

    A jump starts at the first batch whose ``event_time_max`` exceeds its ``observed_at + skew`` (the
    finding names that batch and, when seen, the next batch whose watermark jumped); if the history starts
    after the jump (only the watermark is ahead), the first batch with ``watermark > observed_at + skew``
    is named instead. Once a jump is reported, later future batches are part of it until a batch is back
    within the skew on both counts. Severity CRITICAL.
    """
    batches = progress_batches(samples)
    findings: list[Finding] = []
    in_jump = False
    for i, batch in enumerate(batches):
        limit = batch.observed_at + config.skew
        max_ahead = batch.event_time_max is not None and batch.event_time_max > limit
        wm_ahead = batch.watermark is not None and batch.watermark > limit
        if not (max_ahead or wm_ahead):
            in_jump = False
            continue
        if in_jump:
            continue
        in_jump = True
        later_wm = next(
            (
                (b.batch_id, b.watermark)
                for b in batches[i + 1 :]
                if b.watermark is not None and b.watermark > b.observed_at + config.skew
            ),
            None,
        )
        if max_ahead:
            assert batch.event_time_max is not None
            ahead = batch.event_time_max - batch.observed_at
            message = (
                f"batch {batch.batch_id}: event-time max {fmt_time(batch.event_time_max)} is "
                f"{fmt_duration(ahead)} ahead of the batch time {fmt_time(batch.observed_at)} "
                f"(allowed skew {fmt_duration(config.skew)}); "
            )
            if later_wm is not None and later_wm[1] is not None:
                message += (
                    f"the watermark jumps to {fmt_time(later_wm[1])} in batch {later_wm[0]} and every honest "
                    "row after it is dropped as late"
                )
            else:
                message += (
                    "the watermark will jump to that time minus the watermark delay in the next batch and "
                    "every honest row after it is dropped as late"
                )
            details = {
                "event_time_max": fmt_time(batch.event_time_max),
                "ahead_seconds": ahead.total_seconds(),
            }
        else:
            assert batch.watermark is not None
            ahead = batch.watermark - batch.observed_at
            message = (
                f"batch {batch.batch_id}: the watermark {fmt_time(batch.watermark)} is {fmt_duration(ahead)} "
                f"ahead of the batch time {fmt_time(batch.observed_at)} (allowed skew "
                f"{fmt_duration(config.skew)}): a row with a future event time moved it there earlier, and "
                "every honest row is now dropped as late"
            )
            details = {"watermark": fmt_time(batch.watermark), "ahead_seconds": ahead.total_seconds()}
        message += (
            f" — filter rows with event_time > now + {fmt_duration(config.skew)} before withWatermark "
            "(and restart from a checkpoint taken before the jump: the watermark never goes back)."
        )
        findings.append(
            Finding(
                rule=RULE,
                severity=Severity.CRITICAL,
                job=batch.job,
                message=message,
                observed_at=batch.observed_at,
                batch_id=batch.batch_id,
                details=details,
            )
        )
    return findings
