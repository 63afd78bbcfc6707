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

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.model import Finding, Sample, Severity
from rules.batches import fmt_time, progress_batches

__all__ = ["RULE", "StallConfig", "detect_watermark_stalls"]

RULE = "watermark_stall"


@dataclass(frozen=True, slots=True)
class StallConfig:
    """Thresholds.

    Attributes:
        min_data_batches: how many batches with rows must fail to move the watermark.
        min_rows: how many rows in total those batches must have brought.
    """

    min_data_batches: int = 3
    min_rows: int = 1


def detect_watermark_stalls(config: StallConfig, samples: Sequence[Sample]) -> list[Finding]:
    """One WARNING finding per stretch of batches whose watermark stayed equal while rows arrived.

    A stretch is a maximal run of consecutive batches with the same known watermark ``W``. The rows that
    had a chance to move it are those of every batch of the stretch except the last (the last batch's
    rows show in the next batch's watermark, which is different or not seen yet). The stretch is a stall
    when those batches include ``min_data_batches`` batches with rows and ``min_rows`` rows. Batches
    without a watermark (no ``withWatermark``) break stretches and are never a stall.
    """
    batches = progress_batches(samples)
    findings: list[Finding] = []
    i = 0
    while i < len(batches):
        wm = batches[i].watermark
        j = i
        while j + 1 < len(batches) and wm is not None and batches[j + 1].watermark == wm:
            j += 1
        if wm is not None and j > i:
            movers = batches[i:j]  # rows of these batches should show in the watermark of the next one
            data = [b for b in movers if b.num_input_rows]
            rows = sum(b.num_input_rows or 0 for b in data)
            if len(data) >= config.min_data_batches and rows >= config.min_rows:
                first, last = batches[i], batches[j]
                maxes = [b.event_time_max for b in data if b.event_time_max is not None]
                max_text = f"; the newest event time in those rows was {fmt_time(max(maxes))}" if maxes else ""
                findings.append(
                    Finding(
                        rule=RULE,
                        severity=Severity.WARNING,
                        job=last.job,
                        message=(
                            f"batches {first.batch_id}-{last.batch_id}: the watermark stayed at {fmt_time(wm)} "
                            f"from {fmt_time(first.observed_at)} to {fmt_time(last.observed_at)} while "
                            f"{rows} rows arrived in {len(data)} batches{max_text}. Windows do not close and "
                            "state is not evicted: look for an input or partition whose event time does not "
                            "advance (Spark keeps the minimum watermark over inputs) or for rows all older "
                            "than the watermark."
                        ),
                        observed_at=last.observed_at,
                        batch_id=last.batch_id,
                        details={
                            "watermark": fmt_time(wm),
                            "first_batch_id": first.batch_id,
                            "data_batches": len(data),
                            "rows": rows,
                        },
                    )
                )
        i = j + 1
    return findings
