"""``tidegauge run -c FILE [--db URL] [--instance NAME]``: the monitoring daemon (see :mod:`monitor.daemon.compose`).

The database is ``--db`` if given, else the config file's ``database``, else the per-user default SQLite
file. The schema must be current (``tidegauge db upgrade`` first); logs go to stderr.
"""

from __future__ import annotations

from pathlib import Path

import typer

from monitor.config import load_config

__all__ = ["register"]

_CONFIG_OPTION = typer.Option(..., "-c", "--config", metavar="FILE", help="YAML configuration file.")
_DB_OPTION = typer.Option(
    None, "--db", metavar="URL", help="SQLAlchemy database URL (overrides the config file's `database`)."
)
_LOG_LEVEL_OPTION = typer.Option("info", "--log-level", help="Log level: debug, info, warning, error.")
_INSTANCE_OPTION = typer.Option(
    None,
    "--instance",
    metavar="NAME",
    help="This instance's name in a fleet of daemons on one PostgreSQL database (default: host:pid).",
)


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to ``app``."""

    @app.command("run")
    def run_cmd(
        config: Path = _CONFIG_OPTION,
        db: str | None = _DB_OPTION,
        log_level: str = _LOG_LEVEL_OPTION,
        instance: str | None = _INSTANCE_OPTION,
    ) -> None:
        """Poll the configured targets, evaluate rules, deliver notifications and serve /metrics and
        /healthz until SIGTERM or SIGINT. Several instances on one PostgreSQL database share the targets
        and receivers (leases); on SQLite only one may run."""
        from monitor.commands._logging import configure_logging
        from monitor.daemon.compose import run

        configure_logging(log_level)
        raise typer.Exit(run(load_config(config), db_url=db, instance=instance))
