"""Rebalance churn of a consumer group between two polls: members that joined or left, partitions that
moved to another member, and whether the group was caught rebalancing.

Pure functions over what ``DescribeGroups`` (classic groups) or ``ConsumerGroupDescribe`` (KIP-848
``consumer`` protocol groups) returned, through the AdminClient's ``describe_consumer_groups``
(:class:`collectors.kafka.admin.GroupDescription`). Neither answer carries the classic generation id or the
KIP-848 group epoch in the client used here (confluent-kafka's ``ConsumerGroupDescription`` has no such
field), so a rebalance is read off its effects, as Kafka defines them:

- **classic protocol** (``JoinGroup``/``SyncGroup``, ``ConsumerConfig`` ``group.protocol=classic``): every
  rebalance starts a new generation; a member that joins gets a new member id (unless static,
  ``group.instance.id``), one that leaves (``LeaveGroup``, a missed ``session.timeout.ms`` or a
  ``max.poll.interval.ms`` exceeded) is removed, and the assignor's result moves partitions; the group's
  state is ``PreparingRebalance``/``CompletingRebalance`` while it runs;
- **consumer protocol** (KIP-848, ``group.protocol=consumer``): members join and leave by heartbeat, each
  change bumps the group epoch and moves partitions incrementally; no group-wide stop.

So between two polls a group **rebalanced** when a member joined or left, a partition changed owner, or
the group was seen in a rebalancing state. Several rebalances between two polls are seen as one: counts
are lower bounds, and the rule (:mod:`rules.consumer_lag.churn`) says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from collectors.kafka.lag import TopicPartition

__all__ = ["REBALANCING_STATES", "Churn", "Membership", "churn"]

#: Group states of a rebalance in progress (classic: ``PreparingRebalance``, ``CompletingRebalance``; KIP-848's
#: ``Assigning``/``Reconciling`` as the broker names them).
REBALANCING_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})


@dataclass(frozen=True, slots=True)
class Membership:
    """A group's members at one poll: member ids and which member owns each partition, and its state."""

    members: frozenset[str]
    owners: Mapping[TopicPartition, str]
    state: str


@dataclass(frozen=True, slots=True)
class Churn:
    """What changed in a group between two polls (the module docstring).

    Attributes:
        joined / left: member ids that appeared / disappeared.
        moved: partitions owned by another member than at the previous poll (including partitions that gained
            or lost their owner).
        rebalancing: the group's state now is a rebalance in progress.
    """

    joined: int
    left: int
    moved: int
    rebalancing: bool

    @property
    def rebalanced(self) -> bool:
        """Whether the group rebalanced (at least once) since the previous poll."""
        return bool(self.joined or self.left or self.moved or self.rebalancing)


def churn(previous: Membership | None, now: Membership) -> Churn | None:
    """The change from ``previous`` to ``now``; ``None`` without a previous poll (nothing to compare:
    the first poll, or the first after a restart of the collector). A state in :data:`REBALANCING_STATES`
    counts as a rebalance even on its own."""
    if previous is None:
        return None
    keys = set(previous.owners) | set(now.owners)
    moved = sum(1 for k in keys if previous.owners.get(k) != now.owners.get(k))
    return Churn(
        joined=len(now.members - previous.members),
        left=len(previous.members - now.members),
        moved=moved,
        rebalancing=now.state in REBALANCING_STATES,
    )
