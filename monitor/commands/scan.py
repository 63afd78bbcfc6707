"""``tidegauge scan``: placeholder until the event-log collector lands (issue 2)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ``scan`` command to ``app``."""

    @app.command("scan")
    def scan(demo: bool = typer.Option(False, "--demo", help="Scan the bundled recorded event log.")) -> None:
        """Scan Spark event logs and progress files (not implemented yet)."""
        raise typer.Exit(code=2)
