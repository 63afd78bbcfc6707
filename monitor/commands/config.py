"""``tidegauge config check``: validate a configuration file without starting anything."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from monitor.config import Config, SecretRef, database_url, load_config, resolve_secret
from monitor.errors import ConfigError
from rules.registry import validate as validate_rules


def _secret_refs(cfg: Config) -> list[tuple[str, SecretRef]]:
    refs: list[tuple[str, SecretRef]] = []
    if cfg.server.ingest_token is not None:
        refs.append(("server.ingest_token", cfg.server.ingest_token))
    for i, r in enumerate(cfg.receivers):
        if isinstance(r.url, SecretRef):
            refs.append((f"receivers[{i}].url", r.url))
        if r.secret is not None:
            refs.append((f"receivers[{i}].secret", r.secret))
    for group in ("spark_prometheus", "flink_rest", "kafka_exporters"):
        for i, t in enumerate(getattr(cfg.targets, group)):
            if t.bearer_token is not None:
                refs.append((f"targets.{group}[{i}].bearer_token", t.bearer_token))
    for i, f in enumerate(cfg.targets.flink_rest):
        if f.basic_auth is not None:
            refs.append((f"targets.flink_rest[{i}].basic_auth.password", f.basic_auth.password))
    for i, k in enumerate(cfg.targets.kafka):
        for field in ("sasl_password", "ssl_key_password"):
            ref = getattr(k, field)
            if ref is not None:
                refs.append((f"targets.kafka[{i}].{field}", ref))
    return refs


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
        for where, ref in _secret_refs(cfg):
            resolve_secret(ref, os.environ, f"{config}: {where}")
        t = cfg.targets
        n_targets = (
            len(t.spark_event_logs) + len(t.spark_prometheus) + len(t.flink_rest) + len(t.flink_prometheus)
            + len(t.kafka) + len(t.kafka_exporters)
        )
        typer.echo(
            f"{config}: ok ({n_targets} targets, {len(cfg.receivers)} receivers, {len(cfg.routes)} routes)"
        )

    app.add_typer(group, name="config")
