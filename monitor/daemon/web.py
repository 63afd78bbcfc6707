"""The daemon's HTTP server: ``/metrics``, ``/healthz`` and (optionally) the Spark listener ingest endpoint.

=====================  =====================================================================================
``GET /metrics``       Prometheus text exposition of a private :class:`prometheus_client.CollectorRegistry`
                       (tidegauge's metrics only, see :mod:`monitor.metrics.exporter`).
``GET /healthz``       200 ``{"status": "ok", ...}`` with the store, targets and scheduler status;
                       503 ``{"status": "unavailable", ...}`` when the store is unreachable or rule
                       evaluation or delivery failed 3 times in a row (``degraded`` names which).
other paths            the ingest app (:func:`monitor.daemon.ingest.create_ingest_app`) when one is given.
=====================  =====================================================================================

``tidegauge serve`` serves the same app without ``/metrics``; its ``/healthz`` is the store's part only
(:func:`monitor.store.check_store`, the same check as the daemon's).

``/healthz`` says ``"degraded"`` (still 200) when the probe's body has a ``degraded`` list but the probe
is healthy (a receiver that keeps failing: monitoring works, notifications do not arrive).

:class:`HttpService` serves an app with uvicorn in a background thread and follows the
:class:`monitor.daemon.service.Service` contract (``start`` returns once the socket listens); ``tidegauge serve``
serves through the same :func:`server_config` and :func:`bind_socket`, so both:

* bind the socket before uvicorn starts: a taken port is one :class:`~monitor.errors.StartupError`
  line (``cannot listen on HOST:PORT: address already in use``), never a uvicorn traceback;
* close a connection whose request headers are not complete ``header_timeout_s`` after it opened (or after
  its previous response): a client dribbling its headers holds no connection for long (uvicorn has no
  such deadline of its own; its ``timeout_keep_alive`` covers only idle keep-alive connections). The
  body deadline is the ingest app's (``408``);
* log each request through :class:`AccessLog` (``tidegauge.access``): client, method, path, status and
  duration, never the query string (it may carry ``?token=...``); uvicorn's own access log is off.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import h11
import uvicorn
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from monitor.errors import StartupError

__all__ = [
    "DEFAULT_HEADER_TIMEOUT_S",
    "AccessLog",
    "HealthProbe",
    "HttpService",
    "StopAware",
    "bind_socket",
    "create_app",
    "server_config",
]

log = logging.getLogger("tidegauge.http")
access_log = logging.getLogger("tidegauge.access")

#: How long a client may take to send a request's headers, seconds.
DEFAULT_HEADER_TIMEOUT_S = 10.0
#: How long an idle keep-alive connection stays open, seconds (uvicorn's ``timeout_keep_alive``).
KEEP_ALIVE_S = 5
#: Largest request head (request line + headers) h11 buffers, bytes (h11's default is 16 KiB).
MAX_HEAD_BYTES = 16 * 1024
#: How long a stopping server lets open requests finish before it cancels them, seconds (uvicorn's
#: ``timeout_graceful_shutdown``; without it a client dribbling its body holds the stop up to the 408).
GRACEFUL_SHUTDOWN_S = 3
#: How long after a stop a request still open (a client dribbling its body) may go on before it is answered
#: 503 ``tidegauge is stopping`` (before uvicorn cancels it at :data:`GRACEFUL_SHUTDOWN_S`), seconds.
STOPPING_ANSWER_AFTER_S = 1.0

#: Returns ``(healthy, JSON body)``; unhealthy answers 503.
HealthProbe = Callable[[], tuple[bool, dict[str, Any]]]


def create_app(registry: CollectorRegistry | None, health: HealthProbe, ingest: ASGIApp | None = None) -> Starlette:
    """The Starlette app (see the module docstring); the daemon's and ``tidegauge serve``'s.

    Args:
        registry: what ``/metrics`` renders; ``None``: no ``/metrics`` (``tidegauge serve`` has no metrics).
        health: called per ``/healthz`` request (in a worker thread: it may block on the database); the
            store's part comes from :func:`monitor.store.check_store` in both.
        ingest: mounted at ``/`` after ``/metrics`` and ``/healthz``.
    """

    def metrics(request: Request) -> Response:
        # content negotiation as prometheus_client's own handlers do (OpenMetrics when asked for;
        # otherwise the text format 0.0.4 every Prometheus version reads)
        assert registry is not None  # the route exists only with a registry
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(registry), headers={"Content-Type": content_type})

    def healthz(request: Request) -> JSONResponse:
        healthy, body = health()
        status = ("degraded" if body.get("degraded") else "ok") if healthy else "unavailable"
        return JSONResponse({"status": status, **body}, status_code=200 if healthy else 503)

    routes: list[BaseRoute] = [Route("/healthz", healthz, methods=["GET"])]
    if registry is not None:
        routes.insert(0, Route("/metrics", metrics, methods=["GET"]))
    if ingest is not None:
        routes.append(Mount("/", app=ingest))
    return Starlette(routes=routes)


class AccessLog:
    """ASGI middleware: one ``tidegauge.access`` INFO line per request,
    ``127.0.0.1:51234 "POST /api/v1/spark/events" 202 3.1ms``; a query string is never printed (the line
    says ``?<query not logged>`` instead)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``scope`` through the wrapped app and log it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        started = time.monotonic()

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            client = scope.get("client")
            who = f"{client[0]}:{client[1]}" if client else "-"
            query = "?<query not logged>" if scope.get("query_string") else ""
            elapsed_ms = (time.monotonic() - started) * 1000.0
            access_log.info(
                '%s "%s %s%s" %d %.1fms', who, scope.get("method", "-"), scope.get("path", ""), query,
                status or 500, elapsed_ms,
            )  # fmt: skip


class StopAware:
    """ASGI middleware: once :meth:`stop` is called, a request still open after
    :data:`STOPPING_ANSWER_AFTER_S` is cancelled and, if no answer was started, answered ``503 {"error":
    "tidegauge is stopping: send again later"}`` with ``Retry-After: 5`` (a listener sends it again to the
    next server). Without it uvicorn cancels such a request (a client dribbling its body) at its
    graceful-shutdown deadline, answering 500 and logging a traceback.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._open: dict[int, tuple[asyncio.AbstractEventLoop, anyio.CancelScope]] = {}
        self._stopping = False

    def stop(self) -> None:
        """Answer the open requests (and any later one) 503 after :data:`STOPPING_ANSWER_AFTER_S`; callable from
        any thread, idempotent."""
        with self._lock:
            self._stopping = True
            still_open = list(self._open.values())
        for loop, cancel in still_open:
            loop.call_soon_threadsafe(_cancel_later, loop, cancel)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``scope`` through the wrapped app unless the server stops first."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered = False

        async def send_and_note(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        loop = asyncio.get_running_loop()
        with anyio.CancelScope() as cancel:
            key = id(cancel)
            with self._lock:
                self._open[key] = (loop, cancel)
                stopping = self._stopping
            if stopping:
                _cancel_later(loop, cancel)
            try:
                await self.app(scope, receive, send_and_note)
            finally:
                with self._lock:
                    self._open.pop(key, None)
        if cancel.cancelled_caught and not answered:
            stopping_answer = JSONResponse(
                {"error": "tidegauge is stopping: send again later"}, status_code=503, headers={"Retry-After": "5"}
            )
            await stopping_answer(scope, receive, send)


def _cancel_later(loop: asyncio.AbstractEventLoop, cancel: anyio.CancelScope) -> None:
    """Cancel ``cancel`` :data:`STOPPING_ANSWER_AFTER_S` from now (in ``loop``'s thread)."""
    loop.call_later(STOPPING_ANSWER_AFTER_S, lambda: cancel.cancel())


def _header_deadline_protocol(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing connections whose request head does not arrive in time."""

    class HeaderDeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(header_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                log.info("closed a connection that sent no complete request head within %gs", header_timeout_s)
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the head arrived; the body deadline is the app's

        def on_response_complete(self) -> None:
            self._arm()  # the next request's head (keep-alive) has its own deadline
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineProtocol


def server_config(
    app: ASGIApp, *, header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S, log_level: str = "warning"
) -> uvicorn.Config:
    """The uvicorn configuration every tidegauge server uses: ``app`` wrapped in :class:`AccessLog`, the
    header deadline, keep-alive :data:`KEEP_ALIVE_S`, head size :data:`MAX_HEAD_BYTES`, open requests cancelled
    :data:`GRACEFUL_SHUTDOWN_S` after a stop, uvicorn's access
    log off and its logging left to the root logger (so the process's redacting formatter applies)."""
    return uvicorn.Config(
        AccessLog(app),
        lifespan="off",
        log_level=log_level,
        log_config=None,
        access_log=False,
        http=_header_deadline_protocol(header_timeout_s),
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``SO_REUSEADDR``, as uvicorn binds).

    Raises:
        StartupError: the address cannot be bound: ``cannot listen on HOST:PORT: address already in use``
            (or the OS's reason: permission denied, no such address).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {host}:{port}: unknown host ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc)).lower()
        raise StartupError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


class HttpService:
    """uvicorn serving ``app`` on ``host:port`` in a daemon thread (a :class:`monitor.daemon.service.Service`).

    Args:
        app: the ASGI app.
        host / port: where to listen (port 0 picks a free port; see :attr:`port` after start).
        start_timeout_s: how long :meth:`start` waits for the socket.
        header_timeout_s: see :func:`server_config`.
        log_level: uvicorn's own log level (``"warning"``; ``tidegauge serve --log-level``).

    On :meth:`stop`, a request still open after :data:`STOPPING_ANSWER_AFTER_S` is answered 503
    (:class:`StopAware`), never cancelled into a 500.
    """

    def __init__(
        self,
        app: ASGIApp,
        host: str,
        port: int,
        *,
        start_timeout_s: float = 10.0,
        header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
        log_level: str = "warning",
    ) -> None:
        self._stop_aware = StopAware(app)
        self._config = server_config(self._stop_aware, header_timeout_s=header_timeout_s, log_level=log_level)
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._start_timeout_s = start_timeout_s
        self._socket: socket.socket | None = None
        self.host = host
        self.port = port

    @property
    def name(self) -> str:
        """Name for logs."""
        return f"http {self.host}:{self.port}"

    def start(self) -> None:
        """Bind the socket, serve in a thread; return once listening.

        Raises:
            StartupError: the port cannot be bound (taken, not permitted), or uvicorn did not start
                within the start timeout.
        """
        if self._thread is not None:
            return
        self._failure = None
        sock = bind_socket(self.host, self.port)
        self._socket = sock
        self.port = int(sock.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="tidegauge-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._server.should_exit = True
                self._thread = None
                sock.close()
                reason = f": {type(self._failure).__name__}" if self._failure is not None else ""
                raise StartupError(f"HTTP server on {self.host}:{self.port} did not start{reason}")
            time.sleep(0.02)

    def _serve(self, sock: socket.socket) -> None:
        try:
            self._server.run(sockets=[sock])
        except BaseException as exc:
            self._failure = exc

    def stop(self, timeout_s: float) -> None:
        """Ask uvicorn to exit (it finishes open requests) and wait up to ``timeout_s``; idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop_aware.stop()
        self._server.should_exit = True
        thread.join(timeout_s)
        if thread.is_alive():
            self._server.force_exit = True
            thread.join(1.0)
        if self._socket is not None:
            self._socket.close()
            self._socket = None
