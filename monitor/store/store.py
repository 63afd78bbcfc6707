"""The open database handle (:class:`Store`) and :func:`open_store`, which refuses an outdated schema."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, sessionmaker

from monitor.model import Engine as JobEngine
from monitor.model import FindingEpisode
from monitor.store.database import database_errors, make_engine, make_session_factory
from monitor.store.episode_repo import EpisodeCounts, load_episodes, record_episodes
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

    def record_episodes(self, episodes: Iterable[FindingEpisode]) -> EpisodeCounts:
        """Store ``episodes`` in a transaction of their own (idempotent upsert by id, an open episode
        extended: :func:`monitor.store.episode_repo.record_episodes`)."""
        with self.sessions.begin() as session:
            return record_episodes(session, episodes)

    def episodes(
        self,
        engine: JobEngine | str | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[FindingEpisode]:
        """The stored episodes overlapping ``[since, until)``, ordered by ``first_at``
        (:func:`monitor.store.episode_repo.load_episodes`).

        Raises:
            ValueError: a naive time, or an unknown engine name.
        """
        with self.sessions() as session:
            return load_episodes(session, engine=engine, job_id=job_id, since=since, until=until)


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
