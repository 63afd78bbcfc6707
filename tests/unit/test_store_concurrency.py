"""SQLite: a read-then-write transaction must not fail when another connection writes in between.

Found by a user trial of the daemon: the alert tick (load alerts, then update them) failed on every tick
with ``database is locked`` while a poll thread kept writing collector errors, because a deferred SQLite
transaction cannot become a writer after another connection committed (SQLITE_BUSY_SNAPSHOT, returned
at once, busy_timeout not consulted).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select

from monitor.model import CollectorError, PollResult
from monitor.store import make_engine, make_session_factory, save_poll
from monitor.store.migrate import upgrade
from monitor.store.tables import CollectorErrorRow

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _error(n: int) -> PollResult:
    return PollResult(errors=(CollectorError("c", f"t{n}", f"message {n}", NOW),))


def test_read_then_write_survives_a_concurrent_writer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    other_done = threading.Event()
    failures: list[BaseException] = []

    def other_writer() -> None:
        try:
            with sessions.begin() as s:
                save_poll(s, _error(2), collector="c")
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
        finally:
            other_done.set()

    try:
        with sessions.begin() as s:
            before = s.scalar(select(func.count()).select_from(CollectorErrorRow))  # read first
            writer = threading.Thread(target=other_writer)
            writer.start()
            other_done.wait(0.5)  # a deferred transaction lets the other writer commit here
            save_poll(s, _error(1), collector="c")  # ...and then this write failed with "database is locked"
        writer.join(timeout=30)
        assert not failures, failures
        with sessions() as s:
            assert s.scalar(select(func.count()).select_from(CollectorErrorRow)) == (before or 0) + 2
    finally:
        engine.dispose()
