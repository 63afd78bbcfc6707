"""The demo's simulated Kafka topic and consumer groups, served as kafka_exporter's ``/metrics``.

One topic (``settlements``, three partitions) is written by producers at a steady rate with noise; two
consumer groups read it and commit once a second (``enable.auto.commit`` with
``auto.commit.interval.ms=1000``): ``audit-archiver`` always keeps up, ``ledger-writer`` keeps up until its
fault. Per partition and second ``k``, a group's consumer processes at most ``capacity[k]`` records, so
its committed offset is ``committed[k] = min(log_end[k], committed[k-1] + capacity[k])`` (a queue);
kafka_exporter's lag is the log-end offset at the scrape minus the committed offset.

Fault (``group_lag``): from its time on, ``ledger-writer`` processes records at a third of the production
rate (its database slowed down): its committed offsets still move, but the lag of every partition climbs —
Burrow's ``WARN`` ("lag not decreasing over the window"), which the ``consumer_lag`` rule reports.

All offsets are generated up front for the whole run (seeded); :meth:`KafkaSim.exposition` gives the text
at a processing time passed in (nothing here reads the clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.demo.kafkafmt import GroupOffsets, TopicOffsets, exposition

__all__ = ["KafkaSim", "SimGroup"]

I64 = npt.NDArray[np.int64]


@dataclass(eq=False)
class SimGroup:
    """One consumer group of the simulated topic.

    Attributes:
        group: the group id. members: consumers in the group.
        headroom: processing capacity over the production rate while healthy (1.6: keeps up).
        fault_at_ms: when its capacity drops to ``fault_headroom`` of the rate (``None``: never).
    """

    group: str
    members: int = 3
    headroom: float = 1.6
    fault_headroom: float = 0.33
    fault_at_ms: int | None = None
    committed: I64 = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))  # [partition, second]


@dataclass(eq=False)
class KafkaSim:
    """The topic and its groups (see the module docstring)."""

    groups: list[SimGroup]
    topic: str = "settlements"
    partitions: int = 3
    rate_per_s: float = 60.0
    base_offset: int = 1_284_000
    _start_ms: int = 0
    _log_end: I64 = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))  # [partition, second]

    def group(self, group_id: str) -> SimGroup:
        """The group named ``group_id``. Raises KeyError."""
        for g in self.groups:
            if g.group == group_id:
                return g
        raise KeyError(group_id)

    def prepare(self, start_ms: int, horizon_ms: int, rng: np.random.Generator) -> None:
        """Generate the offsets per second from ``start_ms`` for ``horizon_ms``."""
        self._start_ms = start_ms
        seconds = horizon_ms // 1000 + 2
        produced = rng.poisson(self.rate_per_s, (self.partitions, seconds)).astype(np.int64)
        self._log_end = self.base_offset + np.cumsum(produced, axis=1)
        for g in self.groups:
            committed = np.empty_like(self._log_end)
            at = self.base_offset * np.ones(self.partitions, dtype=np.int64)
            for k in range(seconds):
                t = start_ms + k * 1000
                faulty = g.fault_at_ms is not None and t >= g.fault_at_ms
                share = g.fault_headroom if faulty else g.headroom
                capacity = rng.poisson(self.rate_per_s * share, self.partitions)
                at = np.minimum(self._log_end[:, k], at + capacity)
                committed[:, k] = at
            g.committed = committed

    def _second(self, now_ms: int) -> int:
        return int(min(max(0, (now_ms - self._start_ms) // 1000), self._log_end.shape[1] - 1))

    def log_end(self, now_ms: int) -> list[int]:
        """Each partition's log-end offset at ``now_ms`` (records produced so far, linear within a second)."""
        k = self._second(now_ms)
        frac = min(1.0, max(0.0, (now_ms - self._start_ms) / 1000 - k))
        before = self._log_end[:, k - 1] if k else np.full(self.partitions, self.base_offset)
        return [int(b + (e - b) * frac) for b, e in zip(before.tolist(), self._log_end[:, k].tolist(), strict=True)]

    def committed(self, group: SimGroup, now_ms: int) -> list[int]:
        """The group's committed offsets at ``now_ms`` (the last once-a-second commit)."""
        k = self._second(now_ms)
        return [int(c) for c in (group.committed[:, k - 1] if k else np.full(self.partitions, self.base_offset))]

    def exposition(self, now_ms: int) -> str:
        """kafka_exporter's ``/metrics`` text at ``now_ms``."""
        topic = TopicOffsets(self.topic, [0] * self.partitions, self.log_end(now_ms))
        groups = [GroupOffsets(g.group, self.topic, self.committed(g, now_ms), g.members) for g in self.groups]
        return exposition([topic], groups)
