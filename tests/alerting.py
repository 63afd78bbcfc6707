"""Helpers shared by the alerting and store tests: a migrated database (and the ``sessions`` fixture on SQLite
and PostgreSQL) and one evaluation tick."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.lifecycle import AlertEvent, RuleTiming, step_all
from monitor.alerts.routing import Route
from monitor.model import Finding
from monitor.store.alert_repo import apply_transitions, load_alerts
from monitor.store.database import make_engine, make_session_factory
from monitor.store.migrate import upgrade
from tests.dependencies import missing

NO_DELAY = RuleTiming()
ALERTMANAGER_BINARIES = ("prometheus-alertmanager", "alertmanager")


def alertmanager_binary() -> str:
    """Path of Alertmanager (Debian names it ``prometheus-alertmanager``); missing: see
    :func:`tests.dependencies.missing`."""
    for name in ALERTMANAGER_BINARIES:
        path = shutil.which(name)
        if path:
            return path
    missing(
        f"Alertmanager (none of {ALERTMANAGER_BINARIES} on PATH)",
        "apt-get install prometheus-alertmanager (bash .ci/system-deps.sh; make test does it)",
    )


@contextmanager
def migrated_sessions(url: str) -> Iterator[sessionmaker[Session]]:
    """Upgrade the database at ``url`` to head and yield a session factory on it."""
    upgrade(url)
    engine = make_engine(url)
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


def sqlite_url(directory: Path) -> str:
    return f"sqlite:///{directory / 'tg.db'}"


@pytest.fixture(
    name="sessions",
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres])],
)
def sessions_on_both_databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """The ``sessions`` fixture (import it into a test module): a migrated database, a SQLite file and a fresh
    database on the real PostgreSQL of tests/pg.py."""
    url = sqlite_url(tmp_path) if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    with migrated_sessions(url) as factory:
        yield factory


def tick(
    sessions: sessionmaker[Session],
    findings: Sequence[Finding],
    now: datetime,
    routes: Sequence[Route],
    timing: RuleTiming = NO_DELAY,
) -> list[AlertEvent]:
    """One evaluation tick as the daemon will run it: load, step, store alerts + outbox in one transaction."""
    with sessions.begin() as session:
        changed, events = step_all(load_alerts(session), findings, lambda _rule: timing, now)
        apply_transitions(session, changed.values(), events, routes, now)
    return events
