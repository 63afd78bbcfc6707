"""Lag in seconds, interpolated: when did the log reach the group's committed offset?

kafka-lag-exporter's method (``LookupTable`` in its ``com.lightbend.kafkalagexporter`` package): per
partition keep a table of sampled ``(log_end_offset, time)`` points, one per poll; the time of the record
at the committed offset ``c`` is read off the table by linear interpolation, and ``lag_seconds = now -
that time``. Two corrections to the exporter, both deliberate:

- **the record at ``c`` exists once the log-end offset is above ``c``** (the log-end offset is one past the
  last record), so the table is read at ``c + 1``;
- **no extrapolation**: when ``c + 1`` is at or below the *oldest* point (the record is older than
  anything the table saw, e.g. right after start-up, or the partition was idle for longer than the
  table spans) there is no estimate, only a lower bound (``now - oldest time``); kafka-lag-exporter
  extrapolates the first segment there, which gives figures such as 75 hours for a partition idle since
  the last restart. Fewer than two points also give no estimate.

A run of equal log-end offsets (an idle partition) keeps its *first* time: that is when the log reached
that offset. A log-end offset below the newest point (the topic was recreated) starts a new table.
All times are epoch milliseconds; the table never reads a clock.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Estimate", "OffsetTimeTable"]


@dataclass(frozen=True, slots=True)
class Estimate:
    """A lag-in-seconds estimate.

    Attributes:
        seconds: the lag in seconds, ``None`` when no estimate is possible.
        at_least: a lower bound in seconds when ``seconds`` is ``None`` but the record is known to be
            older than the oldest point.
        note: why there is no estimate (``None`` when there is one).
    """

    seconds: float | None
    at_least: float | None = None
    note: str | None = None


@dataclass(slots=True)
class OffsetTimeTable:
    """Sampled ``(log_end_offset, time_ms)`` points of one partition, oldest first, offsets increasing.

    Attributes:
        max_points: the table keeps at most this many points (the oldest go first), default 60.
    """

    max_points: int = 60
    _offsets: deque[int] = field(default_factory=deque)
    _times: deque[int] = field(default_factory=deque)

    def __len__(self) -> int:
        return len(self._offsets)

    def add(self, log_end_offset: int, time_ms: int) -> None:
        """Record that the log-end offset was ``log_end_offset`` at ``time_ms``."""
        if self._offsets:
            last = self._offsets[-1]
            if log_end_offset == last:
                return
            if log_end_offset < last:
                self._offsets.clear()
                self._times.clear()
        self._offsets.append(log_end_offset)
        self._times.append(time_ms)
        while len(self._offsets) > self.max_points:
            self._offsets.popleft()
            self._times.popleft()

    def estimate(self, committed: int, log_end: int, now_ms: int) -> Estimate:
        """Lag in seconds of a group at ``committed`` when the log ends at ``log_end``, judged at ``now_ms``.

        Returns 0 when the group is caught up (``committed >= log_end``).
        """
        if committed >= log_end:
            return Estimate(0.0)
        if not self._offsets:
            return Estimate(None, note="no sample of the log-end offset yet")
        if len(self._offsets) < 2:
            return Estimate(
                None,
                at_least=max(0.0, (now_ms - self._times[0]) / 1000.0),
                note=(
                    "the log-end offset has not changed in the samples so far (an idle partition, or the "
                    "first poll): no estimate without extrapolating"
                ),
            )
        target = committed + 1
        offsets = self._offsets
        i = bisect_left(offsets, target)  # a deque indexes in O(1) at this size (max_points, default 60)
        if i == 0:
            oldest = self._times[0]
            return Estimate(
                None,
                at_least=max(0.0, (now_ms - oldest) / 1000.0),
                note=(
                    "the committed offset is older than the oldest sample of the log-end offset "
                    "(idle partition or recent start): no estimate without extrapolating"
                ),
            )
        if i == len(offsets):
            return Estimate(None, note="the log-end offset was not sampled at this poll")
        o0, o1 = offsets[i - 1], offsets[i]
        t0, t1 = self._times[i - 1], self._times[i]
        reached = t0 + (target - o0) * (t1 - t0) / (o1 - o0)
        return Estimate(max(0.0, (now_ms - reached) / 1000.0))
