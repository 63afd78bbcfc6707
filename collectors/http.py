"""HTTP pieces shared by the pull collectors (Spark PrometheusServlet, Flink REST, Flink's Prometheus
reporters, Kafka lag exporters) and ``tidegauge check flink``.

One place decides how a collector's :class:`httpx.Client` is built (timeouts, no redirects, a
``User-Agent``, ``Accept-Encoding: gzip, deflate``) and how a response is read: **every read is bounded**
(:class:`ReadLimits`, one per target) and a failed or refused read becomes a
:class:`monitor.model.CollectorError` entry instead of an exception (Telegraf's accumulator habit, see
DESIGN.md). The client is always a parameter of the collector: tests pass
``httpx.Client(transport=httpx.MockTransport(...))`` or point at a loopback server.

The bounds (a hostile or broken endpoint must not take the process's memory or hang a poll):

* **Body size**: at most ``max_body_bytes`` on the wire, counted while the body streams
  (:meth:`httpx.Response.iter_raw`), so a 500 MB or an endless chunked body is cut at the limit; a
  ``Content-Length`` above it is refused before reading.
* **Decompressed size**: ``gzip`` and ``deflate`` bodies are inflated here, at most 64 KiB per step
  (:meth:`zlib.Decompress.decompress` with ``max_length``), and the decoded bytes are counted against
  ``max_decompressed_bytes``: a gzip bomb never expands beyond the limit plus one step. httpx's own decoders
  are not used, since they inflate a whole network chunk at once (a zstd chunk of 64 KiB can expand to
  GiBs). Only ``gzip, deflate`` are asked for; any other ``Content-Encoding`` (``br``, ``zstd``) is refused,
  not decoded.
* **Deadline**: a request ends within ``request_deadline_s`` in all (connect, TLS, headers and body, not
  per read: a body sent one byte every 2 s ends at the deadline), and all requests of one poll share
  ``poll_deadline_s`` (:meth:`ReadLimits.poll_deadline`). Every socket operation's timeout is cut to what
  is left of the active deadline (the client's network backend reads it), so a poll ends within its
  deadline whatever the endpoint does (DNS resolution aside).
* **Redirects** are never followed; one to another host is named as such.
* **JSON depth** (:func:`get_json`): orjson refuses nesting deeper than :data:`MAX_JSON_DEPTH` levels; the
  standard library's decoder, used for what orjson refuses (``NaN``, ``Infinity``, ``1e400``), stops at
  CPython's recursion limit. Both are the same named error, never a ``RecursionError``.

Error mapping of :func:`get_text` / :func:`get_json` (``retryable`` says whether the next poll may succeed;
``kind`` is the :class:`~monitor.model.ErrorKind`, the ``kind`` label on ``/metrics`` and ``/healthz``):

=========================================  ==========================================  =========  ==========================
what happened                              message starts with                          retryable  kind
=========================================  ==========================================  =========  ==========================
connection refused / DNS / TLS failure     ``cannot connect``                           yes        ``unreachable``
connect/read/write/pool timeout            ``timed out``                                yes        ``unreachable``
reset, protocol error, bad compression    ``request failed``                           yes        ``unreachable``
HTTP 408, 429, 5xx                         ``HTTP <code>``                              yes        ``unreachable``
other HTTP 4xx (404 wrong path, 401 ...)   ``HTTP <code>``                              no         ``unreachable``
3xx to the same host                       ``HTTP <code>``                              no         ``unreachable``
3xx to another host                        ``redirect to another host``                 no         ``redirect_other_host``
more than ``max_body_bytes`` on the wire   ``body too large``                           no         ``body_too_large``
more than ``max_decompressed_bytes``       ``decompressed too large``                   no         ``decompressed_too_large``
request or poll deadline passed            ``deadline exceeded``                        yes        ``deadline_exceeded``
JSON nested too deeply                     ``too deeply nested``                        no         ``too_deeply_nested``
not JSON                                   ``invalid JSON``                             no         ``unreachable``
client abandoned (:func:`abandon`)         ``abandoned``                                yes        ``unreachable``
=========================================  ==========================================  =========  ==========================

Bad compression: a corrupt ``gzip``/``deflate`` body, or another ``Content-Encoding``. Messages and targets
never contain credentials: URLs are shown without user-info and query string.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import socket
import ssl
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import httpcore
import httpx
import orjson

from monitor import __version__
from monitor.model import CollectorError, ErrorKind

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_POLL_DEADLINE_S",
    "DEFAULT_READ_LIMITS",
    "DEFAULT_READ_TIMEOUT_S",
    "DEFAULT_REQUEST_DEADLINE_S",
    "MAX_JSON_DEPTH",
    "Deadline",
    "HttpFailure",
    "ReadLimits",
    "abandon",
    "check_url",
    "get_json",
    "get_text",
    "make_client",
    "safe_url",
]

#: Seconds to wait for a TCP connection to a monitored endpoint.
DEFAULT_CONNECT_TIMEOUT_S = 2.0
#: Seconds to wait for each read/write of a response; a driver busy in GC can be slow, not dead.
DEFAULT_READ_TIMEOUT_S = 5.0
#: Bytes a response body may have on the wire (8 MiB: a Flink ``/jobs/overview`` of ~20,000 jobs, a Spark
#: driver's servlet page with hundreds of executors).
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
#: Bytes a compressed body may decode to (16 MiB: Prometheus text compresses ~10x; memory, not wire, bound).
DEFAULT_MAX_DECOMPRESSED_BYTES = 16 * 1024 * 1024
#: Seconds one request may take in all: connect, headers and the whole body.
DEFAULT_REQUEST_DEADLINE_S = 30.0
#: Seconds all requests of one poll may take together.
DEFAULT_POLL_DEADLINE_S = 60.0
#: JSON nesting orjson accepts (its fixed limit; Flink's REST answers nest fewer than 10 levels).
MAX_JSON_DEPTH = 1024

_USER_AGENT = f"tidegauge/{__version__}"
_ACCEPT_ENCODING = "gzip, deflate"
_INFLATE_STEP_BYTES = 64 * 1024  # decoded bytes per inflate step (the most a step can overshoot the cap)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


# ------------------------------------------------------------------------------------------------ bounds


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point on a monotonic clock by which reads must have ended.

    Attributes:
        at_s: the deadline on ``clock``, seconds.
        budget_s: the seconds it was given (for messages).
        what: ``"request"`` or ``"poll"`` (for messages: which deadline ran out).
        clock: the monotonic clock, seconds (:func:`time.monotonic`; tests pass a fake one).
    """

    at_s: float
    budget_s: float
    what: str
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def start(cls, budget_s: float, what: str, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """A deadline ``budget_s`` seconds from now on ``clock``."""
        return cls(clock() + budget_s, budget_s, what, clock)

    def remaining_s(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at_s - self.clock()

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self.remaining_s() <= 0

    def failure(self, shown: str) -> HttpFailure:
        """The ``deadline exceeded`` failure of a request to ``shown`` (a URL without credentials)."""
        if self.what == "poll":
            within = f"the poll's deadline of {self.budget_s:g} s (shared by all requests of one poll)"
        else:
            within = f"the request deadline of {self.budget_s:g} s"
        return HttpFailure(
            f"deadline exceeded: no complete answer from {shown} within {within}",
            retryable=True,
            kind=ErrorKind.DEADLINE_EXCEEDED,
        )


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """The bounds of every read of one target (see the module docstring).

    Attributes:
        max_body_bytes: bytes a body may have on the wire.
        max_decompressed_bytes: bytes a ``gzip``/``deflate`` body may decode to.
        request_deadline_s: seconds one request may take in all (connect to last body byte).
        poll_deadline_s: seconds all requests of one poll may take together.
        clock: the monotonic clock the deadlines run on, seconds (tests pass a fake one).

    Raises:
        ValueError: a limit that is not positive.
    """

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    request_deadline_s: float = DEFAULT_REQUEST_DEADLINE_S
    poll_deadline_s: float = DEFAULT_POLL_DEADLINE_S
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_decompressed_bytes", "request_deadline_s", "poll_deadline_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")

    def poll_deadline(self) -> Deadline:
        """The deadline of a poll starting now: pass it to every :func:`get_text`/:func:`get_json` of
        that poll."""
        return Deadline.start(self.poll_deadline_s, "poll", self.clock)

    def request_deadline(self, poll: Deadline | None) -> Deadline:
        """The deadline of a request starting now: its own, or the poll's if that comes first."""
        own = Deadline.start(self.request_deadline_s, "request", self.clock)
        return poll if poll is not None and poll.at_s < own.at_s else own


#: The limits of a target that configures none.
DEFAULT_READ_LIMITS = ReadLimits()


# The deadline of the request this thread is making; the network backend cuts every socket operation's
# timeout to what is left of it (httpx runs a sync request's I/O in the calling thread).
_ACTIVE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("tidegauge_http_deadline", default=None)


def _cut(timeout: float | None, expired: type[Exception], abandoned: threading.Event) -> float | None:
    if abandoned.is_set():
        raise expired("abandoned")
    deadline = _ACTIVE.get()
    if deadline is None:
        return timeout
    left = deadline.remaining_s()
    if left <= 0:
        raise expired("deadline exceeded")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every blocking operation ends by the active :class:`Deadline`, or at once
    when its client is abandoned (:func:`abandon` shuts the socket down, which wakes a blocked read)."""

    def __init__(self, inner: httpcore.NetworkStream, backend: _DeadlineBackend) -> None:
        self._inner = inner
        self._backend = backend
        backend.track(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _cut(timeout, httpcore.ReadTimeout, self._backend.abandoned))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _cut(timeout, httpcore.WriteTimeout, self._backend.abandoned))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        timeout = _cut(timeout, httpcore.ConnectTimeout, self._backend.abandoned)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout), self._backend)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def shut_down(self) -> None:
        """Shut the socket down for reading and writing (wakes a thread blocked on it)."""
        sock = self._inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also under TLS


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with every stream a :class:`_DeadlineStream`; it keeps its open streams
    (weakly) so that :meth:`abandon` can end their reads."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner
        self._streams: weakref.WeakSet[_DeadlineStream] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.abandoned = threading.Event()

    def track(self, stream: _DeadlineStream) -> None:
        """Keep ``stream`` until it is garbage (for :meth:`abandon`)."""
        with self._lock:
            self._streams.add(stream)

    def abandon(self) -> None:
        """Refuse every later socket operation and shut down every open stream's socket."""
        self.abandoned.set()
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.shut_down()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _cut(timeout, httpcore.ConnectTimeout, self.abandoned)
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream, self)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = _cut(timeout, httpcore.ConnectTimeout, self.abandoned)
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options), self)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _BoundedTransport(httpx.HTTPTransport):
    """httpx's own transport, its connection pool's network backend wrapped in :class:`_DeadlineBackend`.

    httpx has no public hook for the network backend; the pool's ``_network_backend`` attribute is
    httpcore's (1.x). ``tests/unit/test_http_bounds.py`` fails if a release changes it (headers sent one
    byte at a time would then be read past the deadline).
    """

    def __init__(self, *, verify: ssl.SSLContext | bool, limits: httpx.Limits) -> None:
        super().__init__(verify=verify, limits=limits)
        pool = self._pool
        if not isinstance(getattr(pool, "_network_backend", None), httpcore.NetworkBackend):
            raise RuntimeError("httpcore's connection pool has no _network_backend: deadlines cannot be set")
        self.backend = _DeadlineBackend(pool._network_backend)
        pool._network_backend = self.backend


# The backend of each client built by make_client with its own transport (for abandon).
_BACKENDS: weakref.WeakKeyDictionary[httpx.Client, _DeadlineBackend] = weakref.WeakKeyDictionary()
# Clients abandoned (also those with a test's transport, whose requests are refused from then on).
_ABANDONED: weakref.WeakSet[httpx.Client] = weakref.WeakSet()


def abandon(client: httpx.Client) -> None:
    """End ``client``'s requests in flight now and refuse later ones (a stopping daemon: the poll using
    it ends at once, with an ``abandoned`` failure per request, instead of at its deadline).

    A read or write in flight ends at once (its socket is shut down); a TCP connect in flight ends by its
    connect timeout. Thread-safe; the client should be closed afterwards.
    """
    _ABANDONED.add(client)
    backend = _BACKENDS.get(client)
    if backend is not None:
        backend.abandon()


# ------------------------------------------------------------------------------------------------ client


def make_client(
    *,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    headers: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    auth: tuple[str, str] | None = None,
    tls_verify: bool = True,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    max_connections: int = 10,
) -> httpx.Client:
    """Build the :class:`httpx.Client` a pull collector uses (the composition root owns and closes it).

    Args:
        connect_timeout_s: TCP connect timeout, seconds.
        read_timeout_s: read/write/pool timeout, seconds (each operation; the whole request is bounded by
            the :class:`ReadLimits` deadlines given to :func:`get_text`/:func:`get_json`).
        headers: extra headers (e.g. ``Authorization`` for a secured Flink REST endpoint).
        transport: an ``httpx`` transport (tests: :class:`httpx.MockTransport`); default: httpx's
            :class:`httpx.HTTPTransport` whose sockets end by the active request's deadline.
        auth: ``(username, password)`` for HTTP basic authentication.
        tls_verify: verify the server's TLS certificate (default); ``False`` turns verification off.
        ca_file: a PEM bundle of CAs to verify the server against (instead of the system's).
        cert_file / key_file: a client certificate (PEM) and its key (omit ``key_file`` when the
            certificate file holds the key).
        max_connections: connection pool size (a collector polling concurrently needs one per worker).

    Raises:
        OSError / ssl.SSLError: a TLS file cannot be read or is not PEM.

    Redirects are not followed: a monitored metrics endpoint that redirects is misconfigured, and following
    could send credentials elsewhere. Environment proxy variables (``HTTP_PROXY``) are not used: monitored
    endpoints are expected to be reachable directly (as the Spark listener's sender does).
    """
    timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
    all_headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": _ACCEPT_ENCODING}
    if headers:
        all_headers.update(headers)
    verify: bool | ssl.SSLContext = tls_verify
    if ca_file is not None or cert_file is not None:
        context = ssl.create_default_context(cafile=ca_file)
        if not tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cert_file is not None:
            context.load_cert_chain(cert_file, key_file)
        verify = context
    bounded: _BoundedTransport | None = None
    if transport is None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        transport = bounded = _BoundedTransport(verify=verify, limits=limits)
    client = httpx.Client(
        timeout=timeout,
        headers=all_headers,
        transport=transport,
        follow_redirects=False,
        auth=auth,
    )
    if bounded is not None:
        _BACKENDS[client] = bounded.backend
    return client


def check_url(url: str, what: str = "url") -> str:
    """Return ``url`` if it is an absolute ``http``/``https`` URL with a host.

    Raises:
        ValueError: otherwise; the message shows the URL without credentials when it can be parsed.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise ValueError(f"{what}: not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"{what}: expected an absolute http(s) URL, got {safe_url(parsed)!r}")
    return url


def safe_url(url: str | httpx.URL) -> str:
    """``url`` without user-info, query string and fragment (safe for messages, logs and error targets).

    Every request names its URL this way, and a poll asks the same URLs again and again: the answers of
    the most recent few hundred are kept (parsing a URL with httpx is most of a request's cost here).
    """
    return _safe_url_text(str(url))


@lru_cache(maxsize=512)
def _safe_url_text(url: str) -> str:
    parsed = httpx.URL(url)
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))


# ------------------------------------------------------------------------------------------------ reads


@dataclass(frozen=True, slots=True)
class HttpFailure:
    """Why a request failed, before it is attached to a collector: see the module's mapping table.

    Attributes:
        message: one line, no secrets.
        retryable: whether a later request may succeed.
        status_code: the HTTP status if a response arrived.
        kind: the :class:`~monitor.model.ErrorKind` of the collector error it becomes.
    """

    message: str
    retryable: bool
    status_code: int | None = None
    kind: ErrorKind = ErrorKind.UNREACHABLE

    def to_error(self, collector: str, target: str, observed_at: datetime) -> CollectorError:
        """The :class:`CollectorError` entry for this failure."""
        return CollectorError(
            collector=collector,
            target=target,
            message=self.message,
            observed_at=observed_at,
            retryable=self.retryable,
            kind=self.kind,
        )


class _Refused(Exception):
    """A bound was hit while the body streamed; carries the failure."""

    def __init__(self, failure: HttpFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def get_text(
    client: httpx.Client,
    url: str | httpx.URL,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    poll: Deadline | None = None,
) -> str | HttpFailure:
    """GET ``url`` within ``limits`` and return the body text, or an :class:`HttpFailure` (never raises for
    I/O errors or a bound hit).

    A 2xx response is success; anything else (including 3xx, since redirects are not followed) is a
    failure whose message names the status and the URL without credentials. The body is decoded with the
    ``Content-Type`` charset (UTF-8 when none), undecodable bytes replaced, as :attr:`httpx.Response.text`.
    ``poll`` is the deadline of the poll this request belongs to (:meth:`ReadLimits.poll_deadline`); the
    request ends by it or by its own ``request_deadline_s``, whichever comes first. A prebuilt
    :class:`httpx.URL` skips httpx's URL parsing (a collector asking for the same long URL every poll
    keeps it).
    """
    body = _fetch(client, url, limits, poll)
    if isinstance(body, HttpFailure):
        return body
    data, charset = body
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", errors="replace")


def get_json(
    client: httpx.Client,
    url: str | httpx.URL,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    poll: Deadline | None = None,
) -> Any | HttpFailure:
    """GET ``url`` as :func:`get_text` does and decode the body as JSON (orjson; the standard library for
    the non-standard values Jackson can write and orjson refuses: ``NaN``, ``Infinity``, ``1e400``).

    Returns:
        The document, or an :class:`HttpFailure`: the request's, ``too deeply nested`` (more than
        :data:`MAX_JSON_DEPTH` levels, or CPython's recursion limit in the fallback) or ``invalid JSON``
        (both non-retryable, naming the URL without credentials).
    """
    body = _fetch(client, url, limits, poll)
    if isinstance(body, HttpFailure):
        return body
    data, _charset = body
    shown = safe_url(url)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc).lower():
            return _too_deep(shown)
    try:
        return json.loads(data)
    except RecursionError:
        return _too_deep(shown)
    except ValueError as exc:  # JSONDecodeError, undecodable bytes, CPython's int-parsing limit
        reason = " ".join(str(exc).split())[:200]
        return HttpFailure(f"invalid JSON from {shown}: {reason}", retryable=False)


def _too_deep(shown: str) -> HttpFailure:
    return HttpFailure(
        f"too deeply nested: the JSON from {shown} nests more than {MAX_JSON_DEPTH} levels",
        retryable=False,
        kind=ErrorKind.TOO_DEEPLY_NESTED,
    )


def _fetch(
    client: httpx.Client, url: str | httpx.URL, limits: ReadLimits, poll: Deadline | None
) -> tuple[bytes, str | None] | HttpFailure:
    """GET ``url`` within ``limits``: ``(body bytes, charset or None)`` or the failure."""
    shown = safe_url(url)
    if client in _ABANDONED:
        return _abandoned(shown)
    deadline = limits.request_deadline(poll)
    left = deadline.remaining_s()
    if left <= 0:
        return deadline.failure(shown)
    timeout = client.timeout
    timeout = httpx.Timeout(
        connect=_shorter(timeout.connect, left),
        read=_shorter(timeout.read, left),
        write=_shorter(timeout.write, left),
        pool=_shorter(timeout.pool, left),
    )
    token = _ACTIVE.set(deadline)
    try:
        with client.stream("GET", url, timeout=timeout) as response:
            if not response.is_success:
                return _status_failure(response, shown)
            return _read_body(response, limits, deadline, shown), response.charset_encoding
    except _Refused as exc:
        return exc.failure
    except httpx.RequestError as exc:
        if client in _ABANDONED:
            return _abandoned(shown)
        if isinstance(exc, httpx.ConnectError | httpx.TimeoutException) and deadline.expired():
            return deadline.failure(shown)
        if isinstance(exc, httpx.ConnectError):
            return HttpFailure(f"cannot connect to {shown}: {_reason(exc)}", retryable=True)
        if isinstance(exc, httpx.TimeoutException):
            return HttpFailure(f"timed out requesting {shown}{_timeout_text(exc, timeout)}", retryable=True)
        # other transport errors, a corrupt compressed body, ...
        return HttpFailure(f"request failed for {shown}: {type(exc).__name__}: {_reason(exc)}", retryable=True)
    finally:
        _ACTIVE.reset(token)


def _timeout_text(exc: httpx.TimeoutException, timeout: httpx.Timeout) -> str:
    """``": no answer within the 5s read timeout (timeout)"``: which of httpx's timeouts ran out, with its value
    and the target's knob, so a hung endpoint is told from a slow network."""
    phase, seconds = (
        ("connection", timeout.connect) if isinstance(exc, httpx.ConnectTimeout)
        else ("answer", timeout.read) if isinstance(exc, httpx.ReadTimeout)
        else ("request sent", timeout.write) if isinstance(exc, httpx.WriteTimeout)
        else ("free connection", timeout.pool)
    )  # fmt: skip
    return "" if seconds is None else f": no {phase} within {seconds:g}s (the target's `timeout`)"


def _abandoned(shown: str) -> HttpFailure:
    return HttpFailure(f"abandoned: {shown} was not read (tidegauge is stopping)", retryable=True)


def _shorter(timeout: float | None, left_s: float) -> float:
    return left_s if timeout is None else min(timeout, left_s)


def _status_failure(response: httpx.Response, shown: str) -> HttpFailure:
    """The failure of a non-2xx answer (the body is not read)."""
    status = response.status_code
    location = response.headers.get("location") if status in _REDIRECTS else None
    if location is not None:
        try:
            target = response.request.url.join(location)
        except httpx.InvalidURL:
            target = None
        here = response.request.url
        if target is not None and (target.scheme, target.host, target.port) != (here.scheme, here.host, here.port):
            where = target.host + (f":{target.port}" if target.port is not None else "")
            return HttpFailure(
                f"redirect to another host: {shown} answers HTTP {status} to {target.scheme}://{where} "
                "(redirects are not followed)",
                retryable=False,
                status_code=status,
                kind=ErrorKind.REDIRECT_OTHER_HOST,
            )
    return HttpFailure(
        f"HTTP {status} {response.reason_phrase} from {shown}",
        retryable=_status_retryable(status),
        status_code=status,
    )


def _status_retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


def _read_body(response: httpx.Response, limits: ReadLimits, deadline: Deadline, shown: str) -> bytes:
    """The body of ``response``, decoded from its ``Content-Encoding``, within ``limits`` and ``deadline``.

    Raises:
        _Refused: a bound was hit (the caller's ``with`` closes the response, and with it the connection).
        httpx.RequestError: a transport error, or a corrupt or unsupported compressed body
            (:class:`httpx.DecodingError`).
    """
    cap = limits.max_body_bytes
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > cap:
        raise _Refused(_too_large(shown, cap, int(length)))
    encodings = [
        e.strip().lower() for e in response.headers.get("content-encoding", "").split(",") if e.strip()
    ]
    encodings = [e for e in encodings if e != "identity"]
    if response.is_stream_consumed:  # built in memory (httpx.MockTransport): already read and decoded
        chunks: Iterable[bytes] = (response.content,)
        encodings = []
    else:
        chunks = response.iter_raw()
    for encoding in encodings:
        if encoding not in ("gzip", "x-gzip", "deflate"):
            raise httpx.DecodingError(
                f"Content-Encoding {encoding!r} not accepted (asked for {_ACCEPT_ENCODING})",
                request=response.request,
            )

    def wire() -> Iterator[bytes]:
        received = 0
        for chunk in chunks:
            received += len(chunk)
            if received > cap:
                raise _Refused(_too_large(shown, cap))
            if deadline.expired():
                raise _Refused(deadline.failure(shown))
            yield chunk

    decoded: Iterator[bytes] = wire()
    for encoding in reversed(encodings):  # the header lists them in the order they were applied
        decoded = _inflate(decoded, encoding, response.request)
    if not encodings:
        return b"".join(decoded)
    out = bytearray()
    for piece in decoded:
        out += piece
        if len(out) > limits.max_decompressed_bytes:
            raise _Refused(
                HttpFailure(
                    f"decompressed too large: the {'+'.join(encodings)} body of {shown} decodes to more than "
                    f"{limits.max_decompressed_bytes:,} bytes (max_decompressed_bytes)",
                    retryable=False,
                    kind=ErrorKind.DECOMPRESSED_TOO_LARGE,
                )
            )
    return bytes(out)


def _too_large(shown: str, cap: int, announced: int | None = None) -> HttpFailure:
    what = f"announces {announced:,} bytes" if announced is not None else "sent more"
    return HttpFailure(
        f"body too large: {shown} {what} than the {cap:,} bytes allowed (max_body_bytes)"
        if announced is None
        else f"body too large: {shown} {what}, more than the {cap:,} allowed (max_body_bytes)",
        retryable=False,
        kind=ErrorKind.BODY_TOO_LARGE,
    )


def _inflate(chunks: Iterator[bytes], encoding: str, request: httpx.Request) -> Iterator[bytes]:
    """Inflate a ``gzip`` or ``deflate`` stream in steps of at most 64 KiB of output.

    ``deflate`` is a zlib stream, or a raw deflate stream as some servers send (as httpx's decoder accepts
    both). Data after the end of the compressed stream is ignored and not read.

    Raises:
        httpx.DecodingError: the stream is corrupt.
    """
    decoder: Any = None
    try:
        for chunk in chunks:
            if decoder is None:
                if not chunk:
                    continue
                decoder = zlib.decompressobj(_wbits(encoding, chunk))
            data = chunk
            while data and not decoder.eof:
                out = decoder.decompress(data, _INFLATE_STEP_BYTES)
                data = decoder.unconsumed_tail
                if out:
                    yield out
            if decoder.eof:
                return
        if decoder is not None:
            while out := decoder.decompress(b"", _INFLATE_STEP_BYTES):
                yield out
    except zlib.error as exc:
        raise httpx.DecodingError(f"corrupt {encoding} body: {exc}", request=request) from None


def _wbits(encoding: str, first: bytes) -> int:
    """zlib's ``wbits`` for ``encoding`` given the stream's first bytes."""
    if encoding != "deflate":
        return zlib.MAX_WBITS | 16  # gzip header and trailer
    if len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0:
        return zlib.MAX_WBITS  # a zlib header (RFC 1950)
    return -zlib.MAX_WBITS  # raw deflate


def _reason(exc: Exception) -> str:
    """The exception text on one line (httpx wraps OS errors such as ``[Errno 111] Connection refused``)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
