"""One ``tidegauge run`` per SQLite file: an exclusive ``flock`` on ``<database>.run.lock``.

SQLite has one writer and no row locks to lease targets with, so a second instance on the same file would
poll every target and notify every alert a second time. The lock is the kernel's (``flock(2)``): it is
released when the process ends, however it ends (``kill -9`` too), so a crashed daemon never blocks its
restart. Several instances share the work only on PostgreSQL (:mod:`monitor.daemon.fleet`).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from monitor.errors import StartupError

__all__ = ["SqliteRunLock"]


class SqliteRunLock:
    """Holds ``<database>.run.lock`` exclusively while the daemon runs (a :class:`~monitor.daemon.service.Service`).

    Args:
        database: the SQLite database file.
    """

    def __init__(self, database: Path) -> None:
        self._database = database
        self._path = database.with_name(database.name + ".run.lock")
        self._file: IO[str] | None = None

    @property
    def name(self) -> str:
        """Name for logs."""
        return "sqlite run lock"

    def start(self) -> None:
        """Take the lock, writing this process's id into the file.

        Raises:
            StartupError: another process holds it (named with its pid), or the file cannot be opened.
        """
        if self._file is not None:
            return
        try:
            handle = open(self._path, "a+", encoding="utf-8")  # noqa: SIM115 - held until stop()
        except OSError as exc:
            raise StartupError(f"cannot open the run lock {self._path}: {exc.strerror}") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            other = handle.read().strip() or "unknown"
            handle.close()
            raise StartupError(
                f"another `tidegauge run` (pid {other}) is using {self._database}; on SQLite only one instance "
                "may run: stop it first, or put several instances on one PostgreSQL database"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def stop(self, timeout_s: float) -> None:
        """Release the lock (idempotent)."""
        handle, self._file = self._file, None
        if handle is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
