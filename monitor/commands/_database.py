"""Which database a command uses: ``--db URL``, else the ``database:`` of ``-c FILE``, else the per-user
default (shared by ``db``, ``silence``, ``run``); not a command itself."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import typer

from monitor.config import database_url, load_config
from monitor.store import Store, database_errors, open_store

__all__ = ["CONFIG_OPTION", "DB_OPTION", "database_of", "with_store"]

T = TypeVar("T")

DB_OPTION = typer.Option(
    None,
    "--db",
    metavar="URL",
    help="SQLAlchemy database URL (default: the config file's `database`, else "
    "$XDG_DATA_HOME/tidegauge/tidegauge.db or ~/.local/share/tidegauge/tidegauge.db).",
)
CONFIG_OPTION = typer.Option(
    None, "-c", "--config", metavar="FILE", help="Configuration file whose `database` to use (as `run`)."
)


def database_of(db: str | None, config: Path | None) -> str | None:
    """The database URL a command uses: ``db``, else ``config``'s ``database`` (a secret reference is
    resolved from the environment), else ``None`` (the per-user default).

    Raises:
        ConfigError: the config file is invalid or its database reference does not resolve.
    """
    if db is not None:
        return db
    if config is None:
        return None
    return database_url(load_config(config), os.environ, str(config))


def with_store(db: str | None, config: Path | None, action: Callable[[Store], T]) -> T:
    """Open the store of ``db``/``config`` (schema must be current), run ``action``, dispose; database
    errors -> :class:`monitor.errors.StoreError` (one line)."""
    store = open_store(database_of(db, config), environ=os.environ)
    try:
        with database_errors(store.engine.url):
            return action(store)
    finally:
        store.dispose()
