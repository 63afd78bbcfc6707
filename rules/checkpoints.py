"""Checkpoint failures: a Flink job's failed-checkpoint counter rises while it runs.

Flink semantics (``CheckpointStatsCounts``, ``/jobs/<jid>/checkpoints`` ``counts.failed``, the collector's
:attr:`Sample.checkpoints_failed`): the count is kept per job id since submission. Every job start counts
one failed trigger — the ``CheckpointCoordinator`` fires before all tasks are ``RUNNING`` and that attempt
is declined — so only rises between two polls that both fall within one running attempt count (the
attempt's start is the collector's ``extra["running_since_ms"]``, the job's ``RUNNING`` timestamp); a new
job id (resubmission) starts a new count. A failed checkpoint means a recovery would replay from an older
one and the checkpoint duration is likely near ``execution.checkpointing.timeout``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise

from pydantic import Field

from monitor.model import Engine, Finding, Sample, Severity, ms_to_datetime
from monitor.timefmt import format_duration, format_instant_short
from rules.common import tail_since
from rules.history import JobHistory
from rules.params import Duration, RuleParams

__all__ = ["RULE", "CheckpointParams", "evaluate_checkpoints"]

RULE = "checkpoint_failures"


class CheckpointParams(RuleParams):
    """``checkpoint_failures`` parameters.

    Attributes:
        window: failures are counted over this much sample time before the newest poll (default 15m).
        min_failures: this many failed checkpoints in the window make a finding (default 1).
    """

    window: Duration = timedelta(minutes=15)
    min_failures: int = Field(1, ge=1)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """The window plus the poll just before it (job scope)."""
        return self.window + timedelta(minutes=5), timedelta(0)


def _attempt_start(sample: Sample) -> datetime | None:
    value = sample.extra.get("running_since_ms")
    return ms_to_datetime(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _same_attempt(a: Sample, b: Sample) -> bool:
    if a.job.run_id != b.job.run_id:
        return False  # resubmitted: a new job id counts from zero (plus its own start)
    started = _attempt_start(b)
    return started is None or started <= a.observed_at


def evaluate_checkpoints(params: CheckpointParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``checkpoint_failures`` finding of a Flink job (``WARNING``, job scope): the failed-checkpoint
    count rose by at least ``min_failures`` between polls of one running attempt within ``window``. Unknown
    counts never count; the last failure message (``extra["checkpoint_failure"]``) is quoted when known."""
    if history.engine is not Engine.FLINK or not history.batches:
        return []
    batches = history.batches
    recent = tail_since(batches, batches[-1].observed_at - params.window)
    start = len(batches) - len(recent)
    window = batches[max(0, start - 1) :]
    known = [b for b in window if b.checkpoints_failed is not None]
    failures = 0
    first_at: datetime | None = None
    for a, b in pairwise(known):
        assert a.checkpoints_failed is not None and b.checkpoints_failed is not None
        if b.checkpoints_failed > a.checkpoints_failed and _same_attempt(a, b):
            failures += b.checkpoints_failed - a.checkpoints_failed
            first_at = first_at or b.observed_at
    if failures < params.min_failures or first_at is None:
        return []
    newest = known[-1]
    last = newest.extra.get("checkpoint_failure")
    reason = f" The latest failure: {last}." if last else ""
    return [
        Finding(
            rule=RULE,
            severity=Severity.WARNING,
            job=history.job,
            message=(
                f"{failures} checkpoint{'s' if failures != 1 else ''} failed in the last "
                f"{format_duration(params.window)} (first seen at {format_instant_short(first_at)}) while the job ran.{reason} A "
                "recovery now replays from an older checkpoint. Look for back-pressure delaying the barriers "
                "(consider unaligned checkpoints), a checkpoint timeout (execution.checkpointing.timeout) "
                "shorter than the checkpoint duration, or failing checkpoint storage."
            ),
            observed_at=now,
            details={"failed": failures, "checkpoints_failed": newest.checkpoints_failed},
        )
    ]
