"""The start/stop contract of long-running parts, and a group that starts them in order.

Every long-running part of the daemon (the HTTP server, the scheduler running polls, rule evaluation and
the dispatcher, the database engine) is a :class:`Service`: ``start()`` returns once the part is running,
``stop(timeout_s)`` returns once it has stopped (or the timeout passed) and may be called any number of
times. The composition root (:mod:`monitor.daemon.compose`) puts them in a :class:`ServiceGroup`, which starts them
in order and stops them in reverse, so nothing is stopped while a later part still uses it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from monitor.errors import TidegaugeError

__all__ = ["CallbackService", "Service", "ServiceGroup"]

log = logging.getLogger(__name__)


@runtime_checkable
class Service(Protocol):
    """A long-running part with a start/stop lifecycle.

    Contract:
        * ``start()`` returns when the part is ready (e.g. the socket is bound); it raises if it could not
          start, leaving nothing running.
        * ``stop(timeout_s)`` waits at most about ``timeout_s`` seconds for the part to finish its
          in-flight work, then returns. It is idempotent: a second call (or a call before ``start``)
          does nothing.
    """

    @property
    def name(self) -> str:
        """Short name for logs."""
        ...

    def start(self) -> None:
        """Start and return once running."""
        ...

    def stop(self, timeout_s: float) -> None:
        """Stop (idempotent), waiting up to ``timeout_s`` seconds for in-flight work."""
        ...


class CallbackService:
    """A :class:`Service` made of two callables (e.g. ``stop=engine.dispose``); ``stop`` runs once.

    Args:
        name: name for logs.
        start: called by :meth:`start` (default: nothing).
        stop: called with no arguments by the first :meth:`stop` after a start.
    """

    def __init__(
        self,
        name: str,
        *,
        start: Callable[[], None] | None = None,
        stop: Callable[[], None] | None = None,
    ) -> None:
        self._name = name
        self._start = start
        self._stop = stop
        self._lock = threading.Lock()
        self._running = False

    @property
    def name(self) -> str:
        """Name for logs."""
        return self._name

    def start(self) -> None:
        """Call the start callable and mark running."""
        with self._lock:
            if self._running:
                return
            if self._start is not None:
                self._start()
            self._running = True

    def stop(self, timeout_s: float) -> None:
        """Call the stop callable once (``timeout_s`` is not used: the callable is expected to be quick)."""
        with self._lock:
            if not self._running:
                return
            self._running = False
        if self._stop is not None:
            self._stop()


class ServiceGroup:
    """Starts services in the given order and stops them in reverse (itself a :class:`Service`).

    If a service fails to start, the ones already started are stopped (in reverse) and the error is
    raised (logged with its traceback unless it is one of tidegauge's own errors, which the CLI prints
    on one line). :meth:`stop` stops every started service even if one of them raises, then re-raises the
    first error. Stopping twice is a no-op.

    Args:
        services: in start order.
        name: name for logs.
    """

    def __init__(self, services: Sequence[Service], name: str = "services") -> None:
        self._services = list(services)
        self._name = name
        self._started: list[Service] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Name for logs."""
        return self._name

    @property
    def started(self) -> list[str]:
        """Names of the services currently started, in start order."""
        with self._lock:
            return [s.name for s in self._started]

    def start(self) -> None:
        """Start every service in order.

        Raises:
            Exception: whatever the failing service's ``start`` raised (after stopping the started ones).
        """
        with self._lock:
            if self._started:
                return
            for service in self._services:
                try:
                    service.start()
                except BaseException as exc:
                    if isinstance(exc, TidegaugeError):  # one line, said by whoever reports the error
                        log.info("%s failed to start; stopping the %d started before it", service.name, len(self._started))
                    else:
                        log.exception("%s failed to start; stopping the %d started before it", service.name, len(self._started))
                    started, self._started = self._started, []
                    self._stop_all(started, 10.0)
                    raise
                self._started.append(service)
                log.info("started %s", service.name)

    def stop(self, timeout_s: float) -> None:
        """Stop the started services in reverse order, sharing ``timeout_s`` seconds between them.

        Each service gets what is left of the overall deadline (at least a small positive amount).

        Raises:
            Exception: the first error a service's ``stop`` raised (all services were still stopped).
        """
        with self._lock:
            started, self._started = self._started, []
        self._stop_all(started, timeout_s)

    @staticmethod
    def _stop_all(started: list[Service], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        first: BaseException | None = None
        for service in reversed(started):
            left = max(deadline - time.monotonic(), 0.1)
            try:
                service.stop(left)
            except BaseException as exc:
                log.exception("%s failed to stop cleanly", service.name)
                first = first or exc
            else:
                log.info("stopped %s", service.name)
        if first is not None:
            raise first
