"""The daemon's HTTP server: ``/metrics``, ``/healthz`` and (optionally) the Spark listener ingest endpoint.

=====================  =====================================================================================
``GET /metrics``       Prometheus text exposition of a private :class:`prometheus_client.CollectorRegistry`
                       (tidegauge's metrics only, see :mod:`monitor.exporter`).
``GET /healthz``       200 ``{"status": "ok", ...}`` with the store, targets and scheduler status;
                       503 ``{"status": "unavailable", ...}`` when the store is unreachable or rule
                       evaluation or delivery failed 3 times in a row (``degraded`` names which).
other paths            the ingest app (:func:`monitor.ingest.create_ingest_app`) when one is given.
=====================  =====================================================================================

:class:`HttpService` serves an app with uvicorn in a background thread and follows the
:class:`monitor.service.Service` contract (``start`` returns once the socket listens).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp

__all__ = ["HealthProbe", "HttpService", "create_app"]

#: Returns ``(healthy, JSON body)``; unhealthy answers 503.
HealthProbe = Callable[[], tuple[bool, dict[str, Any]]]


def create_app(registry: CollectorRegistry, health: HealthProbe, ingest: ASGIApp | None = None) -> Starlette:
    """The Starlette app (see the module docstring).

    Args:
        registry: what ``/metrics`` renders.
        health: called per ``/healthz`` request (in a worker thread: it may block on the database).
        ingest: mounted at ``/`` after ``/metrics`` and ``/healthz`` (its own ``/healthz`` is shadowed).
    """

    def metrics(request: Request) -> Response:
        # content negotiation as prometheus_client's own handlers do (OpenMetrics when asked for;
        # otherwise the text format 0.0.4 every Prometheus version reads)
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(registry), headers={"Content-Type": content_type})

    def healthz(request: Request) -> JSONResponse:
        healthy, body = health()
        status = "ok" if healthy else "unavailable"
        return JSONResponse({"status": status, **body}, status_code=200 if healthy else 503)

    routes: list[BaseRoute] = [
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    if ingest is not None:
        routes.append(Mount("/", app=ingest))
    return Starlette(routes=routes)


class HttpService:
    """uvicorn serving ``app`` on ``host:port`` in a daemon thread (a :class:`monitor.service.Service`).

    Args:
        app: the ASGI app.
        host / port: where to listen (port 0 picks a free port; see :attr:`port` after start).
        start_timeout_s: how long :meth:`start` waits for the socket.
    """

    def __init__(self, app: ASGIApp, host: str, port: int, *, start_timeout_s: float = 10.0) -> None:
        self._config = uvicorn.Config(
            app, host=host, port=port, lifespan="off", log_level="warning", access_log=False
        )
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._start_timeout_s = start_timeout_s
        self.port = port

    @property
    def name(self) -> str:
        """Name for logs."""
        return f"http {self._config.host}:{self.port}"

    def start(self) -> None:
        """Serve in a thread; return once listening.

        Raises:
            RuntimeError: the server did not start (e.g. the port is taken) within the start timeout.
        """
        if self._thread is not None:
            return
        self._failure = None
        self._thread = threading.Thread(target=self._serve, name="tidegauge-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._server.should_exit = True
                self._thread = None
                reason = f": {self._failure!r}" if self._failure is not None else ""
                raise RuntimeError(
                    f"HTTP server did not start on {self._config.host}:{self.port} (port in use?){reason}"
                )
            time.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    def _serve(self) -> None:
        try:
            self._server.run()
        except BaseException as exc:  # uvicorn exits with SystemExit when it cannot bind
            self._failure = exc

    def stop(self, timeout_s: float) -> None:
        """Ask uvicorn to exit (it finishes open requests) and wait up to ``timeout_s``; idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._server.should_exit = True
        thread.join(timeout_s)
        if thread.is_alive():
            self._server.force_exit = True
            thread.join(1.0)
