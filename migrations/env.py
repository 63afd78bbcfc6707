"""Alembic environment: runs migrations against ``Base.metadata``.

The connection comes from ``config.attributes["connection"]`` when tidegauge runs the migration
(:mod:`monitor.store.migrate`, which opens it with :func:`monitor.store.database.make_engine` so SQLite gets
WAL, foreign keys and transactional DDL). When a developer runs ``alembic`` directly, the URL comes from
``-x db=URL`` or ``sqlalchemy.url``.

SQLite uses batch mode (``render_as_batch``): it cannot ALTER most things in place, so Alembic recreates
the table. A migration that recreates a table referenced by foreign keys must handle ``PRAGMA foreign_keys``
itself (it cannot be changed inside the migration's transaction).
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy.engine import Connection

# Import every table module, so autogenerate sees all tables on Base.metadata.
import monitor.store.alert_tables
import monitor.store.episode_tables
import monitor.store.fleet_tables
import monitor.store.tables  # noqa: F401
from monitor.store.base import Base
from monitor.store.database import make_engine
from monitor.store.types import UTCDateTime

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("db") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("no database: pass -x db=URL (or use `tidegauge db upgrade --db URL`)")
    return url


def _render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Autogenerate writes our column types as plain SQLAlchemy types, so a migration keeps meaning the
    same DDL when the Python-side type changes later."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=_render_item,
    )


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of running it (``alembic upgrade --sql``)."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against the given connection, or one opened from the URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url(), create=True)  # the alembic CLI path of `db upgrade`
    try:
        with engine.begin() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
