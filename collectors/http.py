"""HTTP pieces shared by the pull collectors (Spark PrometheusServlet now; Flink REST and Kafka lag later).

One place decides how a collector's :class:`httpx.Client` is built (timeouts, no redirects to other hosts,
a ``User-Agent``) and how a failed request becomes a :class:`monitor.model.CollectorError` entry instead of
an exception (Telegraf's accumulator habit, see DESIGN.md). The client is always a parameter of the
collector: tests pass ``httpx.Client(transport=httpx.MockTransport(...))`` or point at a loopback server.

Error mapping of :func:`get_text` (``retryable`` says whether the next poll may succeed):

=========================================  ==========================================  =========
what happened                              message starts with                          retryable
=========================================  ==========================================  =========
connection refused / DNS / TLS failure     ``cannot connect``                           yes
connect/read/write/pool timeout            ``timed out``                                yes
other transport error (reset, protocol)    ``request failed``                           yes
HTTP 408, 429, 5xx                         ``HTTP <code>``                              yes
other HTTP 4xx (404 wrong path, 401 ...)   ``HTTP <code>``                              no
=========================================  ==========================================  =========

Messages and targets never contain credentials: URLs are shown without user-info and query string.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import httpx

from monitor import __version__
from monitor.model import CollectorError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_READ_TIMEOUT_S",
    "HttpFailure",
    "check_url",
    "get_text",
    "make_client",
    "safe_url",
]

#: Seconds to wait for a TCP connection to a monitored endpoint.
DEFAULT_CONNECT_TIMEOUT_S = 2.0
#: Seconds to wait for each read/write of a response; a driver busy in GC can be slow, not dead.
DEFAULT_READ_TIMEOUT_S = 5.0

_USER_AGENT = f"tidegauge/{__version__}"


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
        read_timeout_s: read/write/pool timeout, seconds.
        headers: extra headers (e.g. ``Authorization`` for a secured Flink REST endpoint).
        transport: an ``httpx`` transport (tests: :class:`httpx.MockTransport`).
        auth: ``(username, password)`` for HTTP basic authentication.
        tls_verify: verify the server's TLS certificate (default); ``False`` turns verification off.
        ca_file: a PEM bundle of CAs to verify the server against (instead of the system's).
        cert_file / key_file: a client certificate (PEM) and its key (omit ``key_file`` when the
            certificate file holds the key).

    Raises:
        OSError / ssl.SSLError: a TLS file cannot be read or is not PEM.
        max_connections: connection pool size (a collector polling concurrently needs one per worker).

    Redirects are not followed: a monitored metrics endpoint that redirects is misconfigured, and following
    could send credentials elsewhere.
    """
    timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
    all_headers = {"User-Agent": _USER_AGENT}
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
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx.Client(
        timeout=timeout,
        headers=all_headers,
        transport=transport,
        follow_redirects=False,
        auth=auth,
        verify=verify,
        limits=limits,
    )


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
    """``url`` without user-info, query string and fragment (safe for messages, logs and error targets)."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))


@dataclass(frozen=True, slots=True)
class HttpFailure:
    """Why a request failed, before it is attached to a collector: see the module's mapping table.

    Attributes:
        message: one line, no secrets.
        retryable: whether a later request may succeed.
        status_code: the HTTP status if a response arrived.
    """

    message: str
    retryable: bool
    status_code: int | None = None

    def to_error(self, collector: str, target: str, observed_at: datetime) -> CollectorError:
        """The :class:`CollectorError` entry for this failure."""
        return CollectorError(
            collector=collector,
            target=target,
            message=self.message,
            observed_at=observed_at,
            retryable=self.retryable,
        )


def _status_retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


def get_text(client: httpx.Client, url: str | httpx.URL) -> str | HttpFailure:
    """GET ``url`` and return the body text, or an :class:`HttpFailure` (never raises for I/O errors).

    A 2xx response is success; anything else (including 3xx, since redirects are not followed) is a
    failure whose message names the status and the URL without credentials. A prebuilt
    :class:`httpx.URL` skips httpx's URL parsing (a collector asking for the same long URL every poll
    keeps it).
    """
    shown = safe_url(url)
    try:
        response = client.get(url)
    except httpx.ConnectError as exc:
        return HttpFailure(f"cannot connect to {shown}: {_reason(exc)}", retryable=True)
    except httpx.TimeoutException:
        return HttpFailure(f"timed out requesting {shown}", retryable=True)
    except httpx.RequestError as exc:  # other transport errors, undecodable content-encoding, ...
        return HttpFailure(
            f"request failed for {shown}: {type(exc).__name__}: {_reason(exc)}", retryable=True
        )
    if not response.is_success:
        status = response.status_code
        return HttpFailure(
            f"HTTP {status} {response.reason_phrase} from {shown}",
            retryable=_status_retryable(status),
            status_code=status,
        )
    return response.text


def _reason(exc: Exception) -> str:
    """The exception text on one line (httpx wraps OS errors such as ``[Errno 111] Connection refused``)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
