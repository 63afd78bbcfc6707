"""``tidegauge config check``: validate a configuration file without starting anything.

Every problem of the file is reported in one run, one line each (exit code 2): the schema (pydantic
reports every field), then, on whatever parts are valid, the references between sections, the rule
parameters, every secret reference (each missing variable or unreadable file), the database URL, and
the checks ``tidegauge run`` makes before it starts (routes, silences), so a file that passes does not
stop ``run``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from monitor.config import (
    Config,
    SecretRef,
    database_url,
    load_document,
    parse_config,
    reference_problems,
    resolve_secret,
    secret_refs,
)
from monitor.errors import ConfigError
from rules.config import RulesConfig
from rules.registry import validate as validate_rules

__all__ = ["check_problems", "register"]


def _lines(exc: ConfigError, prefix: str = "") -> list[str]:
    return [f"{prefix}{line}" for line in str(exc).splitlines()]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _items(value: Any) -> list[Mapping[str, Any]]:
    """The mapping entries of a list in the raw document (anything else: none)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _section(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name)
    return value if isinstance(value, Mapping) else {}


def _raw_secret_refs(raw: Mapping[str, Any]) -> list[tuple[str, SecretRef]]:
    """The well-formed secret references of a document that failed validation elsewhere."""
    candidates: list[tuple[str, Any]] = [
        ("server.ingest_token", _section(raw, "server").get("ingest_token")),
        ("dashboard.token", _section(raw, "dashboard").get("token")),
    ]
    for i, r in enumerate(_list(raw.get("receivers"))):
        if isinstance(r, Mapping):
            candidates += [(f"receivers[{i}].url", r.get("url")), (f"receivers[{i}].secret", r.get("secret"))]
    targets = _section(raw, "targets")
    for group in ("spark_prometheus", "flink_rest", "kafka_exporters"):
        for i, t in enumerate(_list(targets.get(group))):
            if isinstance(t, Mapping):
                candidates.append((f"targets.{group}[{i}].bearer_token", t.get("bearer_token")))
    for i, f in enumerate(_list(targets.get("flink_rest"))):
        auth = f.get("basic_auth") if isinstance(f, Mapping) else None
        if isinstance(auth, Mapping):
            candidates.append((f"targets.flink_rest[{i}].basic_auth.password", auth.get("password")))
    for i, k in enumerate(_list(targets.get("kafka"))):
        if isinstance(k, Mapping):
            candidates += [(f"targets.kafka[{i}].{f}", k.get(f)) for f in ("sasl_password", "ssl_key_password")]
    refs: list[tuple[str, SecretRef]] = []
    for where, value in candidates:
        if isinstance(value, Mapping):
            try:
                refs.append((where, SecretRef.model_validate(value)))
            except ValidationError:
                continue  # reported by the schema
    return refs


def _raw_references(raw: Mapping[str, Any]) -> list[str]:
    """:func:`monitor.config.reference_problems` of the entries that name what they reference."""
    receivers = [
        (r["name"], str(r.get("type"))) for r in _items(raw.get("receivers")) if isinstance(r.get("name"), str)
    ]
    routes = [r["receiver"] for r in _items(raw.get("routes")) if isinstance(r.get("receiver"), str)]
    reports = [
        (r["name"], r["receiver"])
        for r in _items(raw.get("reports"))
        if isinstance(r.get("name"), str) and isinstance(r.get("receiver"), str)
    ]
    return reference_problems(receivers, routes, reports)


def check_problems(path: Path, environ: Mapping[str, str]) -> tuple[Config | None, list[str]]:
    """Every problem of the config file at ``path``, one line each, prefixed with the file name.

    Returns:
        The validated config (``None`` when the schema failed) and the problems (empty: the file is good).
    """
    source = str(path)
    try:
        raw_document = load_document(path)
    except ConfigError as exc:
        return None, _lines(exc)  # nothing else can be read
    problems: list[str] = []
    cfg: Config | None = None
    try:
        cfg = parse_config(raw_document, source)
    except ConfigError as exc:
        problems += _lines(exc)
    raw: Mapping[str, Any] = raw_document if isinstance(raw_document, Mapping) else {}

    if cfg is None:  # the model's cross-section checks did not run: run them on what can be read
        problems += [f"{source}: {p}" for p in _raw_references(raw)]
        try:
            rules: RulesConfig | None = RulesConfig.model_validate(_section(raw, "rules"))
        except ValidationError:
            rules = None  # reported by the schema
    else:
        rules = cfg.rules
    if rules is not None:
        try:
            validate_rules(rules)
        except ConfigError as exc:
            problems += _lines(exc, f"{source}: ")

    if cfg is not None:
        try:
            database_url(cfg, environ, source)
        except ConfigError as exc:
            problems += _lines(exc)
    refs = secret_refs(cfg) if cfg is not None else _raw_secret_refs(raw)
    for where, ref in refs:
        if where == "database":
            continue  # resolved and checked as a URL above
        try:
            resolve_secret(ref, environ, f"{source}: {where}")
        except ConfigError as exc:
            problems += _lines(exc)

    if cfg is not None:
        from monitor.daemon.compose import build_routes, build_silences  # what `run` checks before it starts

        for check in (build_routes, build_silences):
            try:
                check(cfg)
            except ConfigError as exc:
                problems += [line if line.startswith(f"{source}: ") else f"{source}: {line}" for line in _lines(exc)]
    unique: list[str] = []
    for line in problems:
        if line not in unique:
            unique.append(line)
    return cfg, unique


def register(app: typer.Typer) -> None:
    """Add the ``config`` command group to ``app``."""
    group = typer.Typer(help="Configuration file tools.", no_args_is_help=True)

    @group.command("check")
    def check(
        config: Path = typer.Option(..., "--config", "-c", help="YAML configuration file."),
    ) -> None:
        """Validate CONFIG: schema, references between sections, rule parameters, and that every secret resolves.

        Prints a one-line summary on success; otherwise every problem, one line each naming the file and
        the field path (exit code 2). Secret values are never printed.
        """
        cfg, problems = check_problems(config, os.environ)
        if problems or cfg is None:
            raise ConfigError("\n".join(problems))
        t = cfg.targets
        groups = (
            t.spark_event_logs, t.spark_prometheus, t.flink_rest, t.flink_prometheus, t.kafka, t.kafka_exporters
        )
        n_targets = sum(len(g) for g in groups)
        typer.echo(
            f"{config}: ok ({n_targets} targets, {len(cfg.receivers)} receivers, {len(cfg.routes)} routes)"
        )

    app.add_typer(group, name="config")
