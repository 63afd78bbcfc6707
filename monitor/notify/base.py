"""What every notifier shares: the :class:`Notifier` protocol, the HTTP POST with the one status ->
retryable classification, secret redaction and the dashboard link.

A notifier formats and sends one :class:`~monitor.alerts.notification.NotificationBatch` and raises
:class:`~monitor.errors.DeliveryError` when it cannot; it never retries, sleeps or swallows errors: retry,
grouping, repeats and silences live in :mod:`monitor.notify.dispatcher` (Alertmanager's split between
``notify.Notifier`` implementations and its ``RetryStage``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable
from urllib.parse import urlencode

import httpx

from monitor import redaction
from monitor.alerts.notification import NotificationBatch
from monitor.errors import DeliveryError
from monitor.reports.scheduled import HealthReport

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "USER_AGENT",
    "Notifier",
    "ReportBatch",
    "ReportNotifier",
    "dashboard_link",
    "is_retryable_status",
    "job_title",
    "post",
    "raise_for_status",
    "redact",
]

USER_AGENT = "tidegauge-notifier/0.1"
#: Per-request timeout (connect, read, write and pool), seconds.
DEFAULT_TIMEOUT_SECONDS = 10.0
_BODY_SNIPPET_CHARS = 200


@runtime_checkable
class Notifier(Protocol):
    """A receiver: ``name`` (used by routes and the outbox) and ``send``.

    ``send`` delivers one batch or raises :class:`DeliveryError` with ``retryable`` set (see
    :func:`is_retryable_status`). Implementations keep secrets out of ``repr`` and exception messages.
    """

    @property
    def name(self) -> str:
        """Receiver name."""
        ...

    def send(self, batch: NotificationBatch, client: httpx.Client) -> None:
        """Deliver ``batch`` through ``client``; raise :class:`DeliveryError` on failure."""
        ...


@dataclass(frozen=True, slots=True)
class ReportBatch:
    """One health report for one receiver: ``idempotency_key`` is the same on every retry (from the
    report name and scheduled minute, :func:`monitor.reports.scheduled.report_key`); ``sent_at`` is the
    dispatcher's ``now`` for this attempt."""

    receiver: str
    idempotency_key: str
    report: HealthReport
    sent_at: datetime


@runtime_checkable
class ReportNotifier(Protocol):
    """A receiver that can also deliver health reports (webhook, Slack; not Alertmanager)."""

    @property
    def name(self) -> str:
        """Receiver name."""
        ...

    def send_report(self, batch: ReportBatch, client: httpx.Client) -> None:
        """Deliver one report; raise :class:`DeliveryError` on failure (as :meth:`Notifier.send`)."""
        ...


def job_title(engine: str | None, job_id: str | None, name: str | None) -> str:
    """How a job is named in messages: ``"clicks (spark q-1)"``, or ``"spark q-1"`` without a name."""
    ident = f"{engine or '?'} {job_id or '?'}"
    return f"{name} ({ident})" if name else ident


def is_retryable_status(status_code: int) -> bool:
    """The one place deciding what a non-2xx status means: 429 and 5xx are worth retrying, the rest
    (other 4xx, unfollowed 3xx, 1xx) will fail the same way again."""
    return status_code == 429 or status_code >= 500


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` through the process's redactor (:mod:`monitor.redaction`) that also knows ``secrets``
    (the notifier's URL and keys): whole values and their secret parts, so a receiver echoing only its
    URL's path (Slack's ``no_service`` answers do) leaks nothing either."""
    return redaction.current().with_secrets(secrets).redact(text)


def raise_for_status(response: httpx.Response, receiver: str, secrets: Iterable[str] = ()) -> None:
    """Return on 2xx; otherwise raise :class:`DeliveryError` naming the receiver, status and the start
    of the response body (with ``secrets`` redacted), ``retryable`` per :func:`is_retryable_status`."""
    status = response.status_code
    if 200 <= status < 300:
        return
    snippet = " ".join(response.text[:_BODY_SNIPPET_CHARS].split())
    detail = f": {redact(snippet, secrets)}" if snippet else ""
    raise DeliveryError(
        f"receiver {receiver!r}: HTTP {status}{detail}",
        retryable=is_retryable_status(status),
        status_code=status,
    )


def post(
    client: httpx.Client,
    url: str,
    *,
    receiver: str,
    content: bytes,
    headers: Mapping[str, str],
    secrets: Iterable[str] = (),
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> httpx.Response:
    """POST ``content`` to ``url`` and classify the outcome.

    Timeouts and connection errors raise a retryable :class:`DeliveryError`; statuses go through
    :func:`raise_for_status`. Messages name the receiver, never the URL (which may hold a token), and the
    httpx exception is not chained (its message and request carry the URL).

    Returns:
        The 2xx response.
    """
    all_headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json", **headers}
    failure: str | None = None
    try:
        response = client.post(url, content=content, headers=all_headers, timeout=timeout_seconds)
    except httpx.TimeoutException as exc:
        failure = f"timed out ({type(exc).__name__})"
    except httpx.TransportError as exc:
        failure = f"connection failed ({type(exc).__name__})"
    if failure is not None:
        # Raised outside the except block so that no httpx exception (holding the URL) is attached.
        raise DeliveryError(f"receiver {receiver!r}: {failure}", retryable=True)
    raise_for_status(response, receiver, secrets)
    return response


def dashboard_link(dashboard_url: str | None, labels: Mapping[str, str]) -> str | None:
    """Link to the job's dashboard page: ``<dashboard_url>?engine=..&job_id=..``; ``None`` without a URL."""
    if not dashboard_url:
        return None
    query = urlencode({k: labels[k] for k in ("engine", "job_id") if k in labels})
    sep = "&" if "?" in dashboard_url else "?"
    return f"{dashboard_url}{sep}{query}" if query else dashboard_url
