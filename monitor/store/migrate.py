"""Schema migrations (Alembic) and opening a store whose schema is current.

The Alembic configuration is built here from the ``migrations`` package shipped in the wheel, so no
``alembic.ini`` is needed at run time. The application refuses to run on a database whose schema is not
at the code's head revision (:func:`check_schema`, :func:`open_store`); ``tidegauge db upgrade`` fixes it.

Every function taking ``url`` accepts a URL string, a :class:`sqlalchemy.engine.URL`, an existing
:class:`sqlalchemy.Engine` (used as is, not disposed), or ``None`` for the default per-user SQLite database
of ``environ`` (see :func:`monitor.store.database.default_db_path`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine
from sqlalchemy.engine import URL

from monitor.errors import InputError, SchemaOutdatedError
from monitor.store.database import (
    database_errors,
    default_db_url,
    make_engine,
    redact_url,
)

__all__ = [
    "MIGRATIONS_DIR",
    "alembic_config",
    "check_schema",
    "current",
    "downgrade",
    "head",
    "target_url",
    "upgrade",
]

def _migrations_dir() -> Path:
    """The directory of the shipped ``migrations`` package, found without importing it.

    The store never imports ``migrations`` (the migrations import the store's tables, not the other way
    round): Alembic loads ``env.py`` from this directory itself.
    """
    spec = importlib.util.find_spec("migrations")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the `migrations` package is not installed beside `monitor`")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


#: Directory of ``env.py`` and ``versions/`` (inside the installed ``migrations`` package).
MIGRATIONS_DIR = _migrations_dir()

DbTarget = str | URL | Engine | None


def alembic_config() -> Config:
    """An Alembic :class:`~alembic.config.Config` for the shipped migrations (no ini file, no URL).

    The connection is passed to ``env.py`` through ``config.attributes["connection"]``.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.set_main_option("file_template", "%%(rev)s")  # versions/<revision id>.py
    return config


def head() -> str:
    """The head revision of the shipped migrations (e.g. ``"0001_initial"``).

    Raises:
        RuntimeError: the migrations have several heads (a broken branch merge in the code).
    """
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads {sorted(heads)}; expected exactly one")
    return heads[0]


def target_url(url: str | URL | None, environ: Mapping[str, str] | None) -> str | URL:
    """``url``, or the default database of ``environ`` when ``url`` is None.

    Raises:
        ValueError: neither is given.
    """
    if url is not None:
        return url
    if environ is None:
        raise ValueError("need a URL or the environment to derive the default database from")
    return default_db_url(environ)


@contextmanager
def _engine(url: DbTarget, environ: Mapping[str, str] | None, *, create: bool = False) -> Iterator[Engine]:
    """The engine of ``url``; database failures in the block become :class:`StoreError`."""
    if isinstance(url, Engine):
        with database_errors(url.url):
            yield url
        return
    target = target_url(url, environ)
    engine = make_engine(target, create=create)
    try:
        with database_errors(target):
            yield engine
    finally:
        engine.dispose()


def _current(engine: Engine) -> str | None:
    with engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    return ",".join(sorted(heads)) if heads else None


def _run(engine: Engine, action: str, revision: str) -> None:
    config = alembic_config()
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            if action == "upgrade":
                command.upgrade(config, revision)
            else:
                command.downgrade(config, revision)
    except CommandError as exc:
        raise InputError(
            f"cannot {action} database {redact_url(engine.url)} to {revision!r}: {exc}"
        ) from None


def upgrade(
    url: DbTarget, revision: str = "head", *, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """Migrate the database up to ``revision`` in one transaction; returns (revision before, after).

    ``None`` as a revision means an empty (never migrated) database. This is the one function that
    creates a new SQLite file (and its directory).

    Raises:
        InputError: unknown ``revision`` (or a downgrade target given to upgrade).
        StoreError: the database cannot be reached or a migration failed (rolled back where the database
            has transactional DDL: PostgreSQL and SQLite do); the message hides the password.
    """
    with _engine(url, environ, create=True) as engine:
        before = _current(engine)
        _run(engine, "upgrade", revision)
        return before, _current(engine)


def downgrade(
    url: DbTarget, revision: str, *, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """Migrate the database down to ``revision`` (``"base"`` drops every table); returns (before, after).

    Raises:
        InputError: unknown ``revision``.
        StoreError: as for :func:`upgrade`, or no SQLite file at the path.
    """
    with _engine(url, environ) as engine:
        before = _current(engine)
        _run(engine, "downgrade", revision)
        return before, _current(engine)


def current(url: DbTarget, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The database's revision (``None``: empty, never migrated).

    Raises:
        StoreError: the database cannot be reached, or no SQLite file at the path (none is created).
    """
    with _engine(url, environ) as engine:
        return _current(engine)


def check_schema(engine: Engine) -> None:
    """Return if the database schema is at the code's head revision.

    Raises:
        SchemaOutdatedError: the database is empty, behind, or at a revision this code does not know
            (written by a newer tidegauge). The message names the URL (password hidden) and the command
            to run.
    """
    have = _current(engine)
    need = head()
    if have == need:
        return
    url = redact_url(engine.url)
    fix = f"run `tidegauge db upgrade --db {url}`"
    if have is None:
        raise SchemaOutdatedError(f"database {url} has no tidegauge schema (empty database): {fix}")
    known = {rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if not set(have.split(",")) <= known:
        raise SchemaOutdatedError(
            f"database schema at {have}, which this tidegauge does not know (code needs {need}): "
            "the database was migrated by a newer tidegauge; upgrade tidegauge"
        )
    raise SchemaOutdatedError(f"database schema at {have}, code needs {need}: {fix}")
