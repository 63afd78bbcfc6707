"""``tidegauge serve``: run the ingest endpoint that :class:`collectors.spark.listener.TidegaugeListener` posts to.

This is a composition root: it reads the token (``--token-file`` or ``TIDEGAUGE_INGEST_TOKEN``), opens the
store (``--db``, refusing an outdated schema: run ``tidegauge db upgrade`` first), wires the store's
:func:`monitor.store.save_poll` as the ingest sink, the wall clock as the ingest clock, and serves
:func:`monitor.daemon.ingest.create_ingest_app` under :func:`monitor.daemon.web.create_app` (whose ``/healthz`` runs
:func:`monitor.store.check_store`, the daemon's store check: 503 with the reason when the store fails) with
uvicorn through :class:`monitor.daemon.web.HttpService` (the daemon's server: header deadline, an access log
without query strings, a socket bound by :func:`monitor.daemon.web.bind_socket`: a taken port is one error
line, exit code 2). SIGTERM/SIGINT stop it as they stop the daemon (:mod:`monitor.daemon.stopping`). Logs go to stderr through the process's redactor
(:mod:`monitor.redaction`), which knows the token and the database URL.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import typer

from monitor import redaction
from monitor.commands._logging import configure_logging
from monitor.daemon.ingest import COLLECTOR_NAME, DEFAULT_MAX_BODY_BYTES, Sink, create_ingest_app
from monitor.daemon.stopping import StopSignals, leave
from monitor.daemon.web import HttpService, create_app
from monitor.errors import InputError
from monitor.model import PollResult
from monitor.store import Store, check_store, open_store, save_poll

__all__ = ["TOKEN_ENV", "read_token", "register", "store_sink"]

#: Environment variable holding the ingest token when ``--token-file`` is not given.
TOKEN_ENV = "TIDEGAUGE_INGEST_TOKEN"  # noqa: S105 (a variable name, not a secret)
_MIN_TOKEN_CHARS = 16
#: How long open requests may take to finish after SIGTERM (then the server closes them).
_STOP_TIMEOUT_S = 5.0
_LOG = logging.getLogger("tidegauge.serve")


def read_token(token_file: Path | None, environ: Mapping[str, str]) -> str:
    """The ingest token: the first line of ``token_file`` (stripped) if given, else ``environ[TOKEN_ENV]``.

    Raises:
        InputError: the file cannot be read, or the token is missing or empty (the message never
            contains the token).
    """
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"--token-file {token_file}: cannot read: {exc.strerror or exc}") from None
        lines = text.strip().splitlines()
        token = lines[0].strip() if lines else ""
        if not token:
            raise InputError(f"--token-file {token_file}: the file is empty")
        return token
    token = environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise InputError(f"no ingest token: pass --token-file FILE or set {TOKEN_ENV}")
    return token


def store_sink(store: Store, collector: str = COLLECTOR_NAME) -> Sink:
    """A sink saving each accepted request's :class:`PollResult` in one transaction of ``store``."""

    def sink(result: PollResult) -> None:
        with store.sessions.begin() as session:
            save_poll(session, result, collector=collector)

    return sink


_HOST_OPTION = typer.Option("127.0.0.1", "--host", help="Address to listen on.")
_PORT_OPTION = typer.Option(8321, "--port", min=1, max=65535, help="TCP port.")
_DB_OPTION = typer.Option(
    None, "--db", metavar="URL", help="SQLAlchemy database URL (default: the per-user SQLite file)."
)
_TOKEN_FILE_OPTION = typer.Option(
    None,
    "--token-file",
    metavar="FILE",
    help=f"File whose first line is the bearer token clients must send (else ${TOKEN_ENV}).",
)
_MAX_BODY_OPTION = typer.Option(
    DEFAULT_MAX_BODY_BYTES, "--max-body-bytes", min=1024, help="Largest accepted request body, in bytes."
)
_LOG_LEVEL_OPTION = typer.Option(
    "info", "--log-level", help="Log level (debug, info, warning, error); info logs each request."
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""

    @app.command("serve")
    def serve(
        host: str = _HOST_OPTION,
        port: int = _PORT_OPTION,
        db: str | None = _DB_OPTION,
        token_file: Path | None = _TOKEN_FILE_OPTION,
        max_body_bytes: int = _MAX_BODY_OPTION,
        log_level: str = _LOG_LEVEL_OPTION,
    ) -> None:
        """Serve POST /api/v1/spark/events (listener push) and GET /healthz (503 when the database fails),
        storing into the database."""
        configure_logging(log_level)
        token = read_token(token_file, os.environ)
        redaction.install(redaction.Redactor(secrets=[token], urls=[db] if db else []))
        if len(token) < _MIN_TOKEN_CHARS:
            typer.echo(f"tidegauge: warning: the ingest token is shorter than {_MIN_TOKEN_CHARS} characters", err=True)
        if token_file is not None and token_file.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            typer.echo(f"tidegauge: warning: {token_file} is readable by other users (chmod 600 it)", err=True)
        with StopSignals() as signals:
            store = open_store(db, environ=os.environ)
            try:
                try:
                    ingest = create_ingest_app(
                        token=token, sink=store_sink(store), clock=_utc_now, max_body_bytes=max_body_bytes
                    )
                except ValueError as exc:
                    raise InputError(str(exc)) from None
                app = create_app(None, lambda: check_store(store.sessions), ingest)
                http = HttpService(app, host, port, log_level=log_level.lower())
                if not signals.stop.is_set():
                    http.start()
                    _LOG.info("tidegauge serve on http://%s:%d", host, http.port)
                try:
                    signals.wait()
                finally:
                    http.stop(_STOP_TIMEOUT_S)
            finally:
                store.dispose()
        raise typer.Exit(leave(0))
