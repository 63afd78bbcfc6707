"""Database engines and sessions.

The default database is a per-user SQLite file::

    $XDG_DATA_HOME/tidegauge/tidegauge.db        (when XDG_DATA_HOME is set to an absolute path)
    $HOME/.local/share/tidegauge/tidegauge.db    (otherwise)

Any SQLAlchemy URL works, e.g. ``postgresql+psycopg://user:password@host/dbname`` for a shared
PostgreSQL. Nothing here reads the environment: callers (the composition root, the CLI) pass
``os.environ`` in.

SQLite connections get, from a ``connect`` event: ``journal_mode=WAL`` (readers do not block the writer),
``busy_timeout`` (wait for a lock rather than fail at once), ``foreign_keys=ON``, and SQLAlchemy-emitted
``BEGIN`` (so DDL is transactional and SAVEPOINTs work; see SQLAlchemy's "Enabling Non-Legacy SQLite
Transactional Modes"), and a check at every connect, transaction start and commit that the file at the
path is still the one first opened (a file removed or replaced under the process fails every use rather
than losing writes: :class:`_SqliteFileGuard`). PostgreSQL connections get ``pool_pre_ping`` (a restarted
server is reconnected) and a ``connect_timeout`` of :data:`PG_CONNECT_TIMEOUT_S`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    OperationalError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.orm import Session, sessionmaker

from monitor import redaction
from monitor.errors import ConfigError, StoreError

__all__ = [
    "PG_CONNECT_TIMEOUT_S",
    "READ_ONLY",
    "SQLITE_BUSY_TIMEOUT_MS",
    "check_store",
    "database_errors",
    "decode_json_column",
    "default_db_path",
    "default_db_url",
    "is_data_error",
    "is_transient",
    "make_engine",
    "make_session_factory",
    "parse_url",
    "read_session",
    "redact_url",
]

#: How long a SQLite connection waits for another writer's lock before failing, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 10_000
#: How long a PostgreSQL connection attempt may take before failing, seconds (libpq's ``connect_timeout``).
PG_CONNECT_TIMEOUT_S = 5
#: Execution option of an engine (``engine.execution_options(**{READ_ONLY: True})``) whose transactions only
#: read: on SQLite they begin deferred, without waiting for the write lock (:func:`check_store`).
READ_ONLY = "tidegauge_read_only"


def default_db_path(environ: Mapping[str, str]) -> Path:
    """The per-user default SQLite file, from the XDG base-directory rules.

    ``$XDG_DATA_HOME/tidegauge/tidegauge.db`` if ``XDG_DATA_HOME`` is an absolute path (the XDG spec says
    to ignore relative values), else ``$HOME/.local/share/tidegauge/tidegauge.db``.

    Raises:
        ConfigError: neither an absolute ``XDG_DATA_HOME`` nor ``HOME`` is set (pass ``--db URL``).
    """
    xdg = environ.get("XDG_DATA_HOME", "")
    if xdg and Path(xdg).is_absolute():
        base = Path(xdg)
    elif environ.get("HOME"):
        base = Path(environ["HOME"]) / ".local" / "share"
    else:
        raise ConfigError(
            "cannot place the default database: neither XDG_DATA_HOME nor HOME is set; pass --db URL"
        )
    return base / "tidegauge" / "tidegauge.db"


def default_db_url(environ: Mapping[str, str]) -> str:
    """``sqlite:///`` URL of :func:`default_db_path`."""
    return f"sqlite:///{default_db_path(environ)}"


def parse_url(url: str | URL) -> URL:
    """Parse a SQLAlchemy URL.

    Raises:
        ConfigError: the text is not a database URL (the message does not repeat it: it may hold a
            password).
    """
    if isinstance(url, URL):
        return url
    try:
        return make_url(url)
    except ArgumentError:
        raise ConfigError(
            "invalid database URL: expected e.g. sqlite:///path/to/file.db or "
            "postgresql+psycopg://user@host/dbname"
        ) from None


def redact_url(url: str | URL) -> str:
    """The URL as text, safe for logs and messages: the password and every query parameter value
    (``?password=...``) replaced by ``***`` (:func:`monitor.redaction.redact_url`)."""
    return redaction.redact_url(parse_url(url).render_as_string(hide_password=True))


_SQLITE_BUSY = ("database is locked", "database table is locked", "database is busy")
#: PostgreSQL SQLSTATEs worth retrying: serialization_failure, deadlock_detected, lock_not_available.
_PG_RETRY_STATES = frozenset({"40001", "40P01", "55P03"})


def is_transient(exc: BaseException) -> bool:
    """Whether a database failure is worth retrying as is: SQLite's ``database is locked``/``busy``
    (another writer held the lock beyond ``busy_timeout``) or PostgreSQL's serialization failure,
    deadlock or lock timeout (SQLSTATE 40001, 40P01, 55P03). Anything else (a full disk, a refused
    login, a bad value) fails the same way again."""
    if not isinstance(exc, OperationalError | DBAPIError):
        return False
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in _PG_RETRY_STATES:
        return True
    text = str(orig if orig is not None else exc).lower()
    return any(marker in text for marker in _SQLITE_BUSY)


def is_data_error(exc: BaseException) -> bool:
    """Whether the store refused a value (bad data: SQL ``DataError``, a value the driver cannot bind, a
    ``ValueError``/``OverflowError`` of the encoding), not failed as a database (unreachable, locked,
    a constraint): the input is to blame and storing it again fails again."""
    if isinstance(exc, DataError):
        return True
    if isinstance(exc, DBAPIError):  # OperationalError ("database is locked"), IntegrityError, ...
        return False
    if isinstance(exc, StatementError):  # raised before reaching the database: binding a value
        return isinstance(exc.orig, ValueError | OverflowError | TypeError)
    return isinstance(exc, ValueError | OverflowError)


def _reason(exc: BaseException, url: URL) -> str:
    if isinstance(exc, ModuleNotFoundError):
        return f"database driver not installed: {exc} (install the DBAPI package for {url.drivername})"
    text = str(getattr(exc, "orig", None) or exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    return redaction.current().with_secrets(urls=[url.render_as_string(hide_password=False)]).redact(reason)


@contextmanager
def database_errors(url: str | URL, *, drivers: bool = False) -> Iterator[None]:
    """Turn database failures inside the block into one-line :class:`StoreError`.

    Translated: any :class:`sqlalchemy.exc.SQLAlchemyError` (``OperationalError``: unreachable server or
    refused login; ``NoSuchModuleError``: unknown dialect; ``ArgumentError``) and, with ``drivers``,
    :class:`ModuleNotFoundError` (the dialect's DBAPI driver, e.g. ``MySQLdb``, is not installed: only
    meaningful around :func:`sqlalchemy.create_engine`). The message is
    ``database <URL with password hidden>: <first line of the cause>``.

    Raises:
        StoreError: as described; other exceptions pass through.
    """
    caught: tuple[type[BaseException], ...] = (SQLAlchemyError, ModuleNotFoundError) if drivers else (SQLAlchemyError,)
    try:
        yield
    except caught as exc:
        parsed = parse_url(url)
        raise StoreError(f"database {redact_url(parsed)}: {_reason(exc, parsed)}") from None


def _sqlite_file(url: URL) -> Path | None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy, not the sqlite3 module, emit BEGIN (see _on_sqlite_begin).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS:d}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    # IMMEDIATE: take SQLite's write lock when the transaction starts. A deferred transaction that reads
    # and then writes (the alert tick: load alerts, then update them) cannot upgrade to a writer after
    # another connection committed in between; SQLite then fails at once with "database is locked"
    # (SQLITE_BUSY_SNAPSHOT in WAL mode) without waiting for busy_timeout. Immediate transactions queue on
    # busy_timeout instead; WAL readers outside transactions are not blocked. A transaction that only
    # reads (READ_ONLY) begins deferred: it never waits for a writer (a poll catching up holds the lock
    # for as long as it reads).
    if connection.get_execution_options().get(READ_ONLY):
        connection.exec_driver_sql("BEGIN")
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class _SqliteFileGuard:
    """Refuses to use a SQLite file that is no longer the one the engine opened first.

    A connection to a file removed (or renamed, or replaced by another file) under a running process keeps
    working on the unlinked copy: ``SELECT 1`` answers and every write "succeeds" and is lost with it; a new
    connection would create an empty file at the path. So, on every connect, transaction start and commit,
    the path's identity (device, inode) is compared with the first one seen (one ``stat``); a missing or
    different file raises :class:`StoreError`, which fails the poll, the ingest request (503) and
    ``/healthz`` (:func:`check_store`) alike, and nothing is reported as stored.
    """

    def __init__(self, path: Path, *, create: bool) -> None:
        self._path = path
        self._create = create
        self._identity: tuple[int, int] | None = None

    def check(self) -> None:
        """Raise :class:`StoreError` unless the file at the path is the engine's.

        Raises:
            StoreError: ``no database at PATH (removed while in use)`` or ``PATH was replaced by another
                file while in use``.
        """
        try:
            stat = self._path.stat()
        except FileNotFoundError:
            raise StoreError(f"no database at {self._path} (removed while in use)") from None
        except OSError as exc:
            raise StoreError(f"database {self._path}: cannot stat the file ({exc.strerror})") from None
        identity = (stat.st_dev, stat.st_ino)
        if self._identity is None:
            self._identity = identity
        elif identity != self._identity:
            raise StoreError(
                f"{self._path} was replaced by another file while in use (restart tidegauge to use the new file)"
            )

    def before_connect(self, dialect: Any, record: Any, cargs: Any, cparams: Any) -> None:
        """``do_connect`` event: never let the driver create a file at the path (only ``db upgrade`` does)."""
        if self._create and self._identity is None:
            return
        self.check()

    def before_transaction(self, connection: Connection) -> None:
        """``begin`` / ``commit`` event: the file must still be the engine's."""
        self.check()


def make_engine(
    url: str | URL | None, *, environ: Mapping[str, str] | None = None, create: bool = False, **kwargs: Any
) -> Engine:
    """Create an engine for ``url`` or, when ``url`` is ``None``, for :func:`default_db_url` of ``environ``.

    A SQLite file must exist unless ``create`` is true (only ``tidegauge db upgrade`` creates a database);
    with ``create`` its parent directory is made if missing. Extra keyword arguments go to
    :func:`sqlalchemy.create_engine`.

    Raises:
        ConfigError: ``url`` is invalid, or is ``None`` and ``environ`` gives no default location.
        StoreError: no SQLite file at the path (and not ``create``), unknown dialect, or the driver
            module is not installed.
        ValueError: ``url`` and ``environ`` are both ``None``.
    """
    if url is None:
        if environ is None:
            raise ValueError("make_engine needs a URL or the environment to derive the default database from")
        url = default_db_url(environ)
    parsed = parse_url(url)
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite:
        path = _sqlite_file(parsed)
        if path is not None and create:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif path is not None and not path.exists():
            raise StoreError(
                f"no database at {path}: run `tidegauge db upgrade --db {redact_url(parsed)}`"
            )
    else:
        kwargs.setdefault("pool_pre_ping", True)
    kwargs.setdefault("json_deserializer", decode_json_column)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("psycopg", "psycopg2"):
        # a server that stops answering (not refusing) must fail a connection attempt, not hang it
        kwargs["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT_S, **kwargs.get("connect_args", {})}
    with database_errors(parsed, drivers=True):
        engine = create_engine(parsed, **kwargs)
    if is_sqlite:
        path = _sqlite_file(parsed)
        event.listen(engine, "connect", _on_sqlite_connect)
        if path is not None:
            guard = _SqliteFileGuard(path.absolute(), create=create)
            event.listen(engine, "do_connect", guard.before_connect)
            event.listen(engine, "begin", guard.before_transaction)
            event.listen(engine, "commit", guard.before_transaction)
        event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def decode_json_column(text: str | bytes) -> Any:
    """A stored JSON column value (``samples.extra``, cursors) decoded with orjson, several times faster
    than the standard library; what orjson refuses but :func:`json.loads` accepts (``NaN``/``Infinity``,
    which :func:`json.dumps` writes for non-finite floats; integers beyond 64 bits) is decoded by the
    standard library, so the value never depends on the decoder.

    Raises:
        ValueError: not JSON.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def check_store(sessions: sessionmaker[Session]) -> tuple[bool, dict[str, str]]:
    """The store's part of a ``/healthz`` answer, from a real query through ``sessions``.

    A read-only session of ``sessions`` (:data:`READ_ONLY`: it does not wait for SQLite's write lock, which
    a poll catching up holds for long) runs ``SELECT 1`` on a connection of its engine's pool (for PostgreSQL
    ``pool_pre_ping`` reconnects first, so a restarted server counts as reachable). A SQLite file must still
    be at its path: a pooled connection to a removed file would answer ``SELECT 1`` from the unlinked copy
    while every write is lost with it, and a new connection would refuse it anyway (the file is never
    created outside ``db upgrade``).

    Returns:
        ``(True, {"store": "ok"})``, or ``(False, {"store": "unreachable", "store_error": REASON})`` where
        REASON is one line (``OperationalError: unable to open database file``, ``no database at PATH``)
        with the URL's password and the process's secrets redacted. Never raises for a database failure.
    """
    bind = sessions.kw.get("bind")
    url = bind.url if isinstance(bind, Engine) else None
    reason: str | None = None
    try:
        path = _sqlite_file(url) if url is not None and url.get_backend_name() == "sqlite" else None
        if path is not None and not path.is_file():
            reason = f"no database at {path}"
        else:
            with read_session(sessions) as session:  # not queued behind a writer: a busy store is up
                session.execute(text("SELECT 1"))
    except Exception as exc:
        detail = _reason(exc, url) if url is not None else redaction.redact(str(exc).strip().splitlines()[0])
        reason = f"{type(exc).__name__}: {detail}"
    if reason is None:
        return True, {"store": "ok"}
    return False, {"store": "unreachable", "store_error": redaction.redact(reason)}


def read_session(sessions: sessionmaker[Session]) -> Session:
    """A session of ``sessions`` for reading only (:data:`READ_ONLY`): on SQLite its transaction begins
    deferred, so it never waits for another connection's write lock and holds none (WAL readers see the
    last committed state); elsewhere an ordinary session. Use as ``with read_session(sessions) as s:``;
    it must not write (on SQLite a write would fail with "database is locked" when another writer holds
    the lock)."""
    bind = sessions.kw.get("bind")
    if isinstance(bind, Engine):
        return sessions(bind=bind.execution_options(**{READ_ONLY: True}))
    return sessions()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory bound to ``engine`` (``expire_on_commit=False``: loaded rows stay readable).

    Use ``with factory.begin() as session:`` for one transaction that commits on success and rolls back
    on any exception.
    """
    return sessionmaker(bind=engine, expire_on_commit=False)
