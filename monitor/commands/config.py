"""``tidegauge config check``: validate a configuration file without starting anything."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from monitor.config import database_url, load_config, resolve_secret, secret_refs
from monitor.errors import ConfigError
from rules.registry import validate as validate_rules


def register(app: typer.Typer) -> None:
    """Add the ``config`` command group to ``app``."""
    group = typer.Typer(help="Configuration file tools.", no_args_is_help=True)

    @group.command("check")
    def check(
        config: Path = typer.Option(..., "--config", "-c", help="YAML configuration file."),
    ) -> None:
        """Validate CONFIG: schema, references between sections, rule parameters, and that every secret resolves.

        Prints a one-line summary on success; errors name the file and the field path (exit code 2).
        Secret values are never printed.
        """
        cfg = load_config(config)
        try:
            validate_rules(cfg.rules)
        except ConfigError as exc:
            raise ConfigError("\n".join(f"{config}: {line}" for line in str(exc).splitlines())) from None
        database_url(cfg, os.environ, str(config))
        for where, ref in secret_refs(cfg):
            resolve_secret(ref, os.environ, f"{config}: {where}")
        t = cfg.targets
        n_targets = len(t.spark_event_logs) + len(t.spark_prometheus) + len(t.flink_rest) + len(t.kafka) + len(t.kafka_exporters)
        typer.echo(
            f"{config}: ok ({n_targets} targets, {len(cfg.receivers)} receivers, {len(cfg.routes)} routes)"
        )

    app.add_typer(group, name="config")
