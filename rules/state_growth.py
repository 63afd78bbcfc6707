"""State growth: state rows keep rising, nothing is removed, while the watermark advances.

Spark semantics followed: stateful operators evict state older than the watermark at the end of each
batch (``StateStoreSaveExec`` / ``StreamingDeduplicateExec`` ``removeKeysOlderThanWatermark``), and report
``numRowsTotal`` / ``numRowsRemoved`` in ``StateOperatorProgress``. When the watermark moves forward and
still nothing is removed, the state key does not contain the event-time column (e.g. ``groupBy("user")``
or ``dropDuplicates("id")`` without the event time), so the state grows without bound. A growing state
while the watermark is still flat is normal (nothing is old enough to evict yet); rising state with
removals is a window working as intended. One watermark step without removals is normal too: the watermark
may move without passing the end of any window (a 5-minute window evicts nothing while the watermark moves
3 minutes inside it), so the rule needs several steps of the watermark without a single removal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.model import Finding, Sample, Severity
from rules.batches import fmt_time, progress_batches

__all__ = ["RULE", "StateGrowthConfig", "detect_state_growth"]

RULE = "state_growth"


@dataclass(frozen=True, slots=True)
class StateGrowthConfig:
    """``min_watermark_steps``: how many times the watermark must advance inside the run, none evicting."""

    min_watermark_steps: int = 3


def detect_state_growth(config: StateGrowthConfig, samples: Sequence[Sample]) -> list[Finding]:
    """One WARNING finding per maximal run of batches in which state rows never fell and none were removed.

    A run is consecutive batches with known ``state_rows_total``, ``state_rows_removed == 0`` (unknown
    removal counts break a run) and state rows never falling. It is reported when it ends with more state
    rows than it started with and the watermark advanced ``min_watermark_steps`` times between its batches.
    """
    batches = [b for b in progress_batches(samples) if b.state_rows_total is not None]
    findings: list[Finding] = []
    i = 0
    while i < len(batches):
        if batches[i].state_rows_removed != 0:
            i += 1
            continue
        j = i
        while (
            j + 1 < len(batches)
            and batches[j + 1].state_rows_removed == 0
            and (batches[j + 1].state_rows_total or 0) >= (batches[j].state_rows_total or 0)
        ):
            j += 1
        first, last = batches[i], batches[j]
        grew = (last.state_rows_total or 0) > (first.state_rows_total or 0)
        steps = sum(
            1
            for prev, cur in zip(batches[i:j], batches[i + 1 : j + 1], strict=True)
            if prev.watermark is not None and cur.watermark is not None and cur.watermark > prev.watermark
        )
        if grew and steps >= config.min_watermark_steps:
            assert first.watermark is not None and last.watermark is not None
            findings.append(
                Finding(
                    rule=RULE,
                    severity=Severity.WARNING,
                    job=last.job,
                    message=(
                        f"batches {first.batch_id}-{last.batch_id}: state rows grew from "
                        f"{first.state_rows_total} to {last.state_rows_total} with none removed while the "
                        f"watermark advanced {steps} times, from {fmt_time(first.watermark)} to {fmt_time(last.watermark)}: "
                        "the state key does not include event time, so the watermark cannot evict it. Group "
                        "by a window of the event-time column (or use dropDuplicatesWithinWatermark / a state "
                        "TTL) so old state is removed."
                    ),
                    observed_at=last.observed_at,
                    batch_id=last.batch_id,
                    details={
                        "first_batch_id": first.batch_id,
                        "watermark_steps": steps,
                        "state_rows_from": first.state_rows_total,
                        "state_rows_to": last.state_rows_total,
                    },
                )
            )
        i = j + 1
    return findings
