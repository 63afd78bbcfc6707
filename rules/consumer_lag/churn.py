"""``rebalance_churn``: a consumer group that rebalances again and again.

Every rebalance pauses consumption: under the classic protocol (``JoinGroup``/``SyncGroup``) with an eager
assignor every member stops and gives up all its partitions until the new generation is assigned; under
KIP-848's ``consumer`` protocol or a cooperative assignor only the partitions that move pause. A group
that keeps rebalancing falls behind without any one consumer being slow. The Kafka collector compares each
poll's members and partition owners with the previous poll's (:mod:`collectors.kafka.churn`) and puts
``rebalanced``, ``members_joined``, ``members_left`` and ``partitions_moved`` on the group's job-scope
sample. This rule counts the polls within ``window`` (before the group's newest poll, on the data's own
clock) that saw a rebalance; more than ``max_rebalances`` is a ``WARNING`` naming the numbers. Several
rebalances between two polls look like one, so the count is a lower bound ("at least").
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field

from monitor.model import Engine, Finding, Severity
from monitor.timefmt import format_duration, format_instant_short
from rules.history import JobHistory
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

__all__ = ["RULE", "ChurnParams", "evaluate_churn"]

RULE = "rebalance_churn"


class ChurnParams(RuleParams):
    """``rebalance_churn`` parameters.

    Attributes:
        max_rebalances: polls with a rebalance within ``window`` above which the group is reported (default 3).
        window: how far back from the group's newest poll to count (default 15m).
    """

    max_rebalances: int = Field(3, ge=0)
    window: Duration = timedelta(minutes=15)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """``window`` of the group's polls."""
        return self.window, timedelta(0)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def evaluate_churn(params: ChurnParams, history: JobHistory, now: datetime) -> list[Finding]:
    """The group's ``rebalance_churn`` finding when more than ``max_rebalances`` of its polls within
    ``window`` saw a rebalance (the module docstring), else nothing. Polls without the churn fields (the
    first poll of a collector, other lag sources) are not counted either way."""
    if history.engine is not Engine.KAFKA or not history.batches:
        return []
    newest = history.batches[-1].observed_at
    polls = [b for b in history.batches if b.observed_at > newest - params.window and "rebalanced" in b.extra]
    seen = [b for b in polls if b.extra.get("rebalanced") is True]
    if len(seen) <= params.max_rebalances:
        return []
    joined = sum(_count(b.extra.get("members_joined")) for b in seen)
    left = sum(_count(b.extra.get("members_left")) for b in seen)
    moved = sum(_count(b.extra.get("partitions_moved")) for b in seen)
    members = history.batches[-1].extra.get("members")
    protocol = history.batches[-1].extra.get("group_type")
    span = f"{format_instant_short(seen[0].observed_at)} to {format_instant_short(seen[-1].observed_at)}"
    kind = {"classic": " (classic protocol: each rebalance stops every member)",
            "consumer": " (KIP-848 consumer protocol: each one pauses the partitions that move)"}.get(str(protocol), "")
    return [
        Finding(
            rule=RULE,
            severity=Severity.WARNING,
            job=history.job,
            message=(
                f"consumer group {history.job.name or history.job.job_id} rebalanced at least {len(seen)} times in "
                f"{format_duration(params.window)} (more than {params.max_rebalances}; {len(seen)} of {len(polls)} "
                f"polls from {span} saw one){kind}: {joined} member join(s), {left} leave(s), {moved} partition "
                f"move(s)" + (f"; {members} member(s) now" if isinstance(members, int) else "") + ". "
                + remedy(Engine.KAFKA, Cause.REBALANCE_CHURN)
            ),
            observed_at=now,
            details={"rebalances": len(seen), "polls": len(polls), "members_joined": joined, "members_left": left,
                     "partitions_moved": moved, "window_seconds": params.window.total_seconds(),
                     "group_type": protocol if isinstance(protocol, str) else None},
        )
    ]
