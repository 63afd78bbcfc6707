"""The open database handle (:class:`Store`) and :func:`open_store`, which refuses an outdated schema."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, sessionmaker

from monitor.store.database import database_errors, make_engine, make_session_factory
from monitor.store.migrate import check_schema, target_url

__all__ = ["Store", "open_store"]


@dataclass(frozen=True, slots=True)
class Store:
    """An open database: its engine and a session factory (``with store.sessions.begin() as s:``)."""

    engine: Engine
    sessions: sessionmaker[Session]

    def dispose(self) -> None:
        """Close the engine's pooled connections."""
        self.engine.dispose()


def open_store(url: str | URL | None, *, environ: Mapping[str, str] | None = None) -> Store:
    """Open the database at ``url`` (or the default of ``environ``) after checking its schema is current.

    Raises:
        SchemaOutdatedError: see :func:`monitor.store.migrate.check_schema` (the engine is disposed first).
        StoreError: the database cannot be reached, its driver is not installed, or there is no SQLite
            file at the path (none is created): one line with the password hidden.
        monitor.errors.ConfigError: invalid URL, or no URL and no default location.
    """
    target = target_url(url, environ)
    engine = make_engine(target)
    try:
        with database_errors(target):
            check_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine, make_session_factory(engine))
