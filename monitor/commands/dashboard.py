"""``tidegauge dashboard [--db URL | -c FILE] [--host 127.0.0.1] [--port 8501]``: the Streamlit dashboard.

A composition root: it resolves the database URL (``--db``, else the config file's ``database``, else the
per-user default) and the dashboard token (the config's ``dashboard.token``, an ``{env:}``/``{file:}``
reference), checks that the schema is current, and runs ``streamlit run dashboard/app.py`` bound to
``--host`` (loopback unless told otherwise). The URL and the token reach the Streamlit process through its
environment (:data:`DB_ENV`, :data:`TOKEN_ENV`), never its command line, where ``ps`` would show them.
SIGTERM/SIGINT are passed on to the Streamlit process, killed if it is still there at the stop deadline
(:mod:`monitor.daemon.stopping`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dashboard.env import DB_ENV, PIPELINES_ENV, REPORTS_ENV, TOKEN_ENV
from monitor.daemon.stopping import StopSignals

if TYPE_CHECKING:
    from monitor.config import Config

__all__ = ["DB_ENV", "TOKEN_ENV", "dashboard_command", "dashboard_environ", "pipelines_json", "register"]



def app_path() -> Path:
    """The Streamlit entry script (``dashboard/app.py``, package data of the ``dashboard`` package)."""
    return Path(str(files("dashboard").joinpath("app.py")))


def dashboard_command(host: str, port: int) -> list[str]:
    """The ``streamlit run`` command line (no secrets on it)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(app_path()),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
        "--global.developmentMode", "false", "--client.toolbarMode", "viewer",
    ]


def dashboard_environ(
    environ: Mapping[str, str], db_url: str, token: str | None, reports_dir: Path | None = None,
    pipelines: str | None = None,
) -> dict[str, str]:
    """The Streamlit process's environment: ``environ`` plus the database URL and the token (and the
    pipelines' JSON, :func:`pipelines_json`)."""
    out = {k: v for k, v in environ.items() if k not in (DB_ENV, TOKEN_ENV, REPORTS_ENV, PIPELINES_ENV)}
    if pipelines is not None:
        out[PIPELINES_ENV] = pipelines
    out[DB_ENV] = db_url
    if token:
        out[TOKEN_ENV] = token
    if reports_dir is not None:
        out[REPORTS_ENV] = str(reports_dir)
    return out


def launch(
    db_url: str, token: str | None, host: str, port: int, environ: Mapping[str, str], *, reports_dir: Path | None = None,
    quiet: bool = False, pipelines: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start the dashboard process (the caller stops it with ``terminate()``)."""
    out = subprocess.DEVNULL if quiet else None
    env = dashboard_environ(environ, db_url, token, reports_dir, pipelines)
    return subprocess.Popen(dashboard_command(host, port), env=env, stdout=out, stderr=out)


def pipelines_json(cfg: Config) -> str:
    """The config's ``pipelines:`` and ``rules.pipeline_freshness.target`` (seconds, ``null``: off) as the
    JSON the Pipelines page reads (:data:`PIPELINES_ENV`); each pipeline's ``slo`` is left out (the page
    shows the SLO from the stored ``pipeline_slo`` findings)."""
    from rules.params import parse_params
    from rules.pipeline import RULE, PipelineParams

    params = parse_params(PipelineParams, (cfg.rules.model_extra or {}).get(RULE), f"rules.{RULE}")
    target = None if params.target is None or not params.enabled else params.target.total_seconds()
    return json.dumps({"target_s": target, "pipelines": [p.model_dump(mode="json", exclude={"slo"}) for p in cfg.pipelines]})


def register(app: typer.Typer) -> None:
    """Add the ``dashboard`` command to ``app``."""

    @app.command("dashboard")
    def dashboard_cmd(
        db: str | None = typer.Option(None, "--db", metavar="URL", help="SQLAlchemy database URL."),
        config: Path | None = typer.Option(None, "-c", "--config", metavar="FILE", help="YAML configuration file."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
        port: int = typer.Option(8501, "--port", help="Port to serve on."),
    ) -> None:
        """Serve the Streamlit dashboard over the database the daemon writes."""
        from monitor.config import database_url, load_config, resolve_secret
        from monitor.store import default_db_url, open_store

        token: str | None = None
        url = db
        pipelines: str | None = None
        if config is not None:
            cfg = load_config(config)
            pipelines = pipelines_json(cfg)
            if url is None:
                url = database_url(cfg, os.environ, str(config))
            if cfg.dashboard.token is not None:
                token = resolve_secret(cfg.dashboard.token, os.environ, "dashboard.token").get_secret_value()
        if url is None:
            url = default_db_url(os.environ)
        open_store(url, environ=os.environ).dispose()  # refuses a missing database or an outdated schema
        typer.echo(f"tidegauge dashboard on http://{host}:{port} ({'read-write' if token else 'read-only'})", err=True)
        # SIGTERM/SIGINT are passed on to Streamlit, which is killed if it has not gone by the deadline
        # (monitor.daemon.stopping): it never outlives this process with its port bound
        child: list[subprocess.Popen[bytes]] = []
        with StopSignals(on_stop=lambda: _signal_child(child, signal.SIGTERM),
                         before_exit=lambda: _signal_child(child, signal.SIGKILL)) as signals:
            child.append(launch(url, token, host, port, os.environ, pipelines=pipelines))
            if signals.stop.is_set():  # the signal came while it was being started
                _signal_child(child, signal.SIGTERM)
            code = child[0].wait()
        raise typer.Exit(0 if signals.stop.is_set() else code)


def _signal_child(child: list[subprocess.Popen[bytes]], sig: signal.Signals) -> None:
    """Send ``sig`` to the Streamlit process unless it is gone (or not started yet); after ``SIGKILL``, wait
    a moment for it to be gone (its port is free once it is)."""
    for process in child:
        process.send_signal(sig)  # Popen does nothing for a process already reaped
        if sig == signal.SIGKILL:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1.0)
