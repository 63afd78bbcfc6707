"""Late rows dropped by the watermark, per batch and in total.

Spark semantics followed: stateful operators (``StateStoreSaveExec``, ``StreamingDeduplicateExec``,
stream-stream joins) drop input rows whose event time is older than the watermark the batch runs with and
count them in ``StateOperatorProgress.numRowsDroppedByWatermark`` (``numLateInputs`` before Spark 3.1;
the progress parser sums both over operators into ``Sample.dropped_by_watermark``). Spark drops them
silently: the count is the only trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from monitor.model import Finding, Sample, Severity
from rules.batches import fmt_duration, fmt_time, progress_batches

__all__ = ["RULE", "LateConfig", "detect_late_rows"]

RULE = "late_rows_dropped"


@dataclass(frozen=True, slots=True)
class LateConfig:
    """``skew``: a watermark further than this ahead of the batch time is reported as the likely cause."""

    skew: timedelta = timedelta(hours=1)


def detect_late_rows(config: LateConfig, samples: Sequence[Sample]) -> list[Finding]:
    """One WARNING finding per batch with ``dropped_by_watermark > 0``, then one total finding.

    The total (``batch_id`` ``None``) is added only when rows were dropped in two or more batches. Zero or
    unknown counts give nothing. When the batch's watermark is ahead of its own time by more than ``skew``
    the message names the future watermark as the cause instead of suggesting a longer delay.
    """
    findings: list[Finding] = []
    total = 0
    dropping: list[Sample] = []
    for batch in progress_batches(samples):
        dropped = batch.dropped_by_watermark
        if not dropped:
            continue
        total += dropped
        dropping.append(batch)
        wm = batch.watermark
        rows = "row" if dropped == 1 else "rows"
        message = f"batch {batch.batch_id}: {dropped} {rows} dropped as later than the watermark"
        if wm is not None and wm > batch.observed_at + config.skew:
            message += (
                f" {fmt_time(wm)}, which is {fmt_duration(wm - batch.observed_at)} ahead of the batch time: a "
                "future event time moved it there, so honest rows are being dropped — filter rows with "
                "future event times before withWatermark."
            )
        else:
            wm_text = f" {fmt_time(wm)}" if wm is not None else ""
            message += (
                f"{wm_text}; Spark drops them silently — if these rows matter, raise the withWatermark delay "
                "to cover how late they arrive, or write the raw input to a side table before the aggregation."
            )
        findings.append(
            Finding(
                rule=RULE,
                severity=Severity.WARNING,
                job=batch.job,
                message=message,
                observed_at=batch.observed_at,
                batch_id=batch.batch_id,
                details={"dropped_by_watermark": dropped},
            )
        )
    if len(dropping) >= 2:
        listed = ", ".join(f"{b.batch_id}" for b in dropping)
        findings.append(
            Finding(
                rule=RULE,
                severity=Severity.WARNING,
                job=dropping[-1].job,
                message=f"{total} rows dropped by the watermark in total, in {len(dropping)} batches ({listed}).",
                observed_at=dropping[-1].observed_at,
                batch_id=None,
                labels={"scope": "total"},
                details={"dropped_by_watermark": total, "batches": [b.batch_id for b in dropping]},
            )
        )
    return findings
