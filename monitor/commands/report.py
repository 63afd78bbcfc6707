"""``tidegauge report [--job X] [--since 7d] [--format html|md|json] [-o FILE] [--db URL | -c FILE]``.

A composition root: it reads the clock once (the period is the ``--since`` long stretch ending at the newest
stored sample, never after now: :func:`monitor.facts.source.data_period`), opens the store
(``--db``, else the config's ``database``, else the per-user default), takes the targets from the config's
``rules:`` when ``-c`` is given (:func:`monitor.reports.source.settings_from_rules`) and writes the report
(:mod:`monitor.reports.render`) to ``-o FILE`` or stdout.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from monitor.reports import DEFAULT_SINCE

if TYPE_CHECKING:
    from rules.pipeline import PipelineConfig

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""

    @app.command("report")
    def report_cmd(
        job: str | None = typer.Option(None, "--job", help="Only this job (its id or name)."),
        since: str = typer.Option(DEFAULT_SINCE, "--since", help="How far back from the newest stored sample (the data's clock), e.g. 24h, 7d."),
        fmt: str = typer.Option("html", "--format", help="html, md or json."),
        output: Path | None = typer.Option(None, "-o", "--output", metavar="FILE", help="Write here (default stdout)."),
        match: list[str] = typer.Option([], "--match", help="Label matcher on engine/job_id/job_name (repeatable)."),
        name: str = typer.Option("on-demand", "--name", help="The report's name."),
        db: str | None = typer.Option(None, "--db", metavar="URL", help="SQLAlchemy database URL."),
        config: Path | None = typer.Option(None, "-c", "--config", metavar="FILE", help="YAML configuration file."),
    ) -> None:
        """A health report: freshness SLO, late rows and their causes, alerts, state growth, lag, restarts and
        recommendations, per job; per pipeline, where its staleness enters and its freshness SLO."""
        from monitor.config import database_url, load_config
        from monitor.durations import parse_timedelta
        from monitor.errors import InputError
        from monitor.facts.source import data_period
        from monitor.reports.render import FORMATS, render
        from monitor.reports.source import collect, parse_matchers, settings_from_rules
        from monitor.store import database_errors, open_store

        if fmt not in FORMATS:
            raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
        period = parse_timedelta(since, what="--since")
        url = db
        rules = None
        pipelines: tuple[PipelineConfig, ...] = ()
        if config is not None:
            cfg = load_config(config)
            url = url or database_url(cfg, os.environ, str(config))
            rules = cfg.rules.model_dump(by_alias=True, exclude={"overrides"})
            pipelines = cfg.pipelines
        matchers = parse_matchers(match)
        now = datetime.now(UTC)
        store = open_store(url, environ=os.environ)
        try:
            with database_errors(store.engine.url), store.sessions() as session:
                start, until = data_period(session, period, now)
                report = collect(session, name, start, until, job=job, matchers=matchers,
                                 settings=settings_from_rules(rules, pipelines))
        finally:
            store.dispose()
        if job is not None and not report.jobs:
            raise InputError(f"--job {job}: no such job with samples or alerts in the last {since}")
        text = render(report, fmt)
        if output is None:
            sys.stdout.write(text)
        else:
            output.write_text(text, encoding="utf-8")
            typer.echo(f"{output}: {fmt} report, {len(report.jobs)} jobs, health {report.health}", err=True)
