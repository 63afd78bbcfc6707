"""``tidegauge db upgrade|downgrade|current``: manage the database schema (Alembic migrations).

``--db URL`` takes any SQLAlchemy URL (``sqlite:///path.db``, ``postgresql+psycopg://user@host/db``);
``-c FILE`` uses the configuration file's ``database`` (as ``run`` does); without either the per-user
default SQLite file is used (see :func:`monitor.store.database.default_db_path`).
URLs are printed with the password hidden. Only ``db upgrade`` creates a new SQLite file; the other
commands report ``no database at PATH`` (exit code 2) for a missing one.

``db current`` exits with code 0 when the schema is at the newest revision and 1 when it is empty or not
at head (so scripts can test it); a database that cannot be opened is exit code 2.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from monitor.commands._database import CONFIG_OPTION, DB_OPTION, database_of
from monitor.store.database import default_db_url, redact_url
from monitor.store.migrate import current, downgrade, head, upgrade


def _url(db: str | None, config: Path | None) -> str:
    url = database_of(db, config)
    return url if url is not None else default_db_url(os.environ)


def _show(revision: str | None) -> str:
    return revision if revision is not None else "empty (no schema)"


def register(app: typer.Typer) -> None:
    """Add the ``db`` command group to ``app``."""
    db_app = typer.Typer(help="Manage the database schema (migrations).", no_args_is_help=True)

    @db_app.command("upgrade")
    def upgrade_cmd(
        revision: str = typer.Argument("head", help="Target revision (default: head)."),
        db: str | None = DB_OPTION,
        config: Path | None = CONFIG_OPTION,
    ) -> None:
        """Create or migrate the database schema up to REVISION (default: the newest)."""
        url = _url(db, config)
        before, after = upgrade(url, revision)
        verb = "already at" if before == after else f"upgraded from {_show(before)} to"
        typer.echo(f"{redact_url(url)}: {verb} {_show(after)}")

    @db_app.command("downgrade")
    def downgrade_cmd(
        revision: str = typer.Argument(..., help="Target revision, or 'base' to drop every table."),
        db: str | None = DB_OPTION,
        config: Path | None = CONFIG_OPTION,
    ) -> None:
        """Migrate the database schema down to REVISION (data in dropped tables is lost)."""
        url = _url(db, config)
        before, after = downgrade(url, revision)
        verb = "already at" if before == after else f"downgraded from {_show(before)} to"
        typer.echo(f"{redact_url(url)}: {verb} {_show(after)}")

    @db_app.command("current")
    def current_cmd(db: str | None = DB_OPTION, config: Path | None = CONFIG_OPTION) -> None:
        """Print the database's schema revision; exit code 1 if it is empty or not the newest."""
        url = _url(db, config)
        have = current(url)
        need = head()
        fix = "tidegauge db upgrade" + (
            f" --db {redact_url(url)}" if db is not None else f" -c {config}" if config is not None else ""
        )
        status = "head" if have == need else f"code needs {need}: run `{fix}`"
        typer.echo(f"{redact_url(url)}: {_show(have)} ({status})")
        if have != need:
            raise typer.Exit(1)

    app.add_typer(db_app, name="db")
