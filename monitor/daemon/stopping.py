"""How a long-running command stops on SIGTERM or SIGINT (``run``, ``serve``, ``demo``, ``dashboard``).

One contract for every long-running command:

* the first SIGTERM/SIGINT sets :attr:`StopSignals.stop` (the command then stops its parts in reverse,
  each with what is left of its stop budget) and starts a deadline of :data:`STOP_DEADLINE_S`;
* if the process has not exited when the deadline passes, it exits anyway (``os._exit``), abandoning what
  is still running: a poll blocked on an endpoint that never answers, a scheduler waiting for it, a child
  process that ignores SIGTERM (``before_exit`` kills it first);
* a second SIGTERM/SIGINT exits at once, the same way (exit code ``128 + signal``);
* after a stop, :func:`leave` exits without joining the threads still running (Python would otherwise
  wait for every non-daemon thread at exit, forever for a poll blocked in a read).

Abandoning is safe for the store: every poll, evaluation and delivery writes in one transaction, so what
an abandoned thread had not committed is rolled back by the database (SQLite's journal, PostgreSQL's
closed connection) and the state is the one of the last committed transaction; the cursors, alerts and
outbox rows say what was done, and a delivery sent but not recorded is sent once more at most.

The signals are noticed by a thread reading :func:`signal.set_wakeup_fd`'s socket, not by the Python-level
handler: the C-level handler writes the signal's number there at once, so a main thread busy in a long C
call (a database wait, a decompression) does not delay the deadline or the second-signal exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import NoReturn

__all__ = ["STOP_DEADLINE_S", "STOP_SIGNALS", "StopSignals", "exit_now", "leave"]

log = logging.getLogger("tidegauge.stop")

#: Seconds from the first SIGTERM/SIGINT to the forced exit: under the 10 s every long-running command
#: must stop within, leaving a second for the interpreter to go.
STOP_DEADLINE_S = 9.0
#: The signals that stop a long-running command.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def exit_now(code: int, before_exit: Callable[[], None] | None = None) -> NoReturn:
    """Run ``before_exit`` (errors logged), flush the log handlers and standard streams, and end the process
    with ``code`` at once (``os._exit``: no thread is joined, no ``atexit`` handler runs)."""
    if before_exit is not None:
        try:
            before_exit()
        except Exception:
            log.exception("clean-up before exiting failed")
    for flushable in [*logging.getLogger().handlers, sys.stdout, sys.stderr]:
        with contextlib.suppress(Exception):  # nothing left to report it to
            flushable.flush()
    os._exit(code)


def leave(code: int) -> int:
    """``code`` when only the main thread and daemon threads are left (the interpreter exits normally);
    otherwise log the threads still running and :func:`exit_now` with ``code`` without waiting for them
    (a scheduler's worker blocked in a poll would hold the interpreter's exit forever)."""
    stuck = [
        t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon
    ]
    if stuck:
        log.warning("exiting without waiting for %d thread(s) still running: %s", len(stuck), ", ".join(stuck))
        exit_now(code)
    return code


class StopSignals:
    """SIGTERM/SIGINT handling of a long-running command (see the module docstring); a context manager
    entered in the main thread, restoring the previous handlers on exit.

    Args:
        deadline_s: seconds from the first signal to the forced exit.
        on_stop: called (in the watcher thread) on the first signal, after :attr:`stop` is set: e.g. pass
            the signal on to a child process.
        before_exit: called before a forced exit (deadline or second signal): e.g. kill a child process.
        deadline_code: the exit code of a forced exit at the deadline (a stop was asked for: ``0``).

    Attributes:
        stop: set on the first signal.
        received: the first signal's name (``"SIGTERM"``), or ``None``.
    """

    def __init__(
        self,
        *,
        deadline_s: float = STOP_DEADLINE_S,
        on_stop: Callable[[], None] | None = None,
        before_exit: Callable[[], None] | None = None,
        deadline_code: int = 0,
    ) -> None:
        self.stop = threading.Event()
        self.received: str | None = None
        self._deadline_s = deadline_s
        self._on_stop = on_stop
        self._before_exit = before_exit
        self._deadline_code = deadline_code
        self._lock = threading.Lock()
        self._previous: dict[signal.Signals, object] = {}
        self._previous_fd = -1
        self._pair: tuple[socket.socket, socket.socket] | None = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("StopSignals must be entered in the main thread (signal handlers live there)")
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        self._pair = (reader, writer)
        self._previous = {sig: signal.signal(sig, self._python_handler) for sig in STOP_SIGNALS}
        self._previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(reader,), name="tidegauge-signals", daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        signal.set_wakeup_fd(self._previous_fd)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if self._pair is not None:
            for sock in self._pair:
                sock.close()
            self._pair = None

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait up to ``timeout_s`` for the first signal; whether it came."""
        return self.stop.wait(timeout_s)

    @staticmethod
    def _python_handler(signum: int, frame: FrameType | None) -> None:
        """Installed so the C-level handler writes to the wakeup socket; the watcher thread acts."""

    def _watch(self, reader: socket.socket) -> None:
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in STOP_SIGNALS:
                    self.notice(signal.Signals(signum))

    def notice(self, sig: signal.Signals) -> None:
        """Act on ``sig`` as if it was received: the first stops, a second exits at once."""
        with self._lock:
            first = not self.stop.is_set()
            if first:
                self.received = sig.name
                self.stop.set()
                self._timer = threading.Timer(self._deadline_s, self._expire)
                self._timer.daemon = True
                self._timer.name = "tidegauge-stop-deadline"
                self._timer.start()
        if not first:
            log.warning("%s received again: exiting now, abandoning what is still running", sig.name)
            exit_now(128 + int(sig), self._before_exit)
        log.info("%s received: stopping (at most %.0fs)", sig.name, self._deadline_s)
        if self._on_stop is not None:
            try:
                self._on_stop()
            except Exception:
                log.exception("passing the stop on failed")

    def _expire(self) -> None:
        log.warning(
            "not stopped %.0fs after %s: exiting now, abandoning what is still running", self._deadline_s, self.received
        )
        exit_now(self._deadline_code, self._before_exit)
