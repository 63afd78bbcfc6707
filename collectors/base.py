"""The one collector interface every collector implements.

A collector is polled with the tick's ``now`` (aware UTC, chosen by the scheduler; collectors never read
the wall clock) and returns a :class:`monitor.model.PollResult`: the samples it read and the errors it met.
One unreachable job or unreadable file is an error entry, never an exception that loses other samples.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Protocol, runtime_checkable

from monitor.model import PollResult

__all__ = ["Collector", "PollsOnce"]


@runtime_checkable
class Collector(Protocol):
    """A source of samples.

    Attributes:
        name: collector kind, e.g. ``"spark-eventlog"``; copied into ``Sample.collector``.
    """

    name: str

    def poll(self, now: datetime) -> PollResult:
        """Read what is new since the last poll. Must not raise for per-target failures."""
        ...

    def iter_poll(self, now: datetime) -> Iterator[PollResult]:
        """The same as :meth:`poll`, in pieces: the daemon stores each piece before asking for the next,
        so a collector that reads much (a long event log) keeps memory bounded and advances its cursor
        only past what was stored. A collector with nothing to split inherits :class:`PollsOnce`."""
        ...


class PollsOnce:
    """Mixin for collectors whose poll is one piece: ``iter_poll`` yields ``poll(now)``."""

    def poll(self, now: datetime) -> PollResult:  # pragma: no cover - always overridden
        raise NotImplementedError

    def iter_poll(self, now: datetime) -> Iterator[PollResult]:
        """Yield the one result of :meth:`poll`."""
        yield self.poll(now)
