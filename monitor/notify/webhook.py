"""Generic webhook receiver: one signed JSON POST per batch.

Request::

    POST <url>
    Content-Type: application/json
    Idempotency-Key: <batch idempotency key, identical on every retry>
    X-Tidegauge-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>

The body is documented by ``webhook_payload.schema.json`` (JSON Schema 2020-12, beside this module):
either the alerts of one job (:func:`webhook_payload`) or a scheduled health report
(:func:`report_payload`, ``"type": "report"``), signed and keyed the same way.
A receiver verifies the signature by recomputing the HMAC over the ASCII timestamp, a ``.`` and the raw
body bytes, comparing in constant time, and rejecting stale ``t`` values (Stripe's scheme); it deduplicates
by ``Idempotency-Key``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any

import httpx

from monitor.alerts.notification import NotificationBatch, format_time
from monitor.notify.base import DEFAULT_TIMEOUT_SECONDS, ReportBatch, dashboard_link, post

__all__ = [
    "IDEMPOTENCY_HEADER",
    "PAYLOAD_VERSION",
    "SIGNATURE_HEADER",
    "WebhookNotifier",
    "payload_schema",
    "report_payload",
    "sign",
    "webhook_payload",
]

SIGNATURE_HEADER = "X-Tidegauge-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
PAYLOAD_VERSION = "1"


def webhook_payload(batch: NotificationBatch, dashboard_url: str | None = None) -> dict[str, Any]:
    """The JSON document sent for ``batch`` (shape: ``webhook_payload.schema.json``)."""
    first = batch.alerts[0].labels if batch.alerts else {}
    return {
        "version": PAYLOAD_VERSION,
        "receiver": batch.receiver,
        "status": batch.status.value,
        "group_key": batch.group_key,
        "idempotency_key": batch.idempotency_key,
        "sent_at": format_time(batch.sent_at),
        "job": {
            "engine": first.get("engine"),
            "job_id": first.get("job_id"),
            "name": batch.alerts[0].annotations.get("job_name") if batch.alerts else None,
        },
        "dashboard_url": dashboard_link(dashboard_url, first),
        "alerts": [a.to_json() for a in batch.alerts],
    }


def report_payload(batch: ReportBatch, dashboard_url: str | None = None) -> dict[str, Any]:
    """The JSON document sent for a health report (``"type": "report"``; shape: the schema's
    ``report_payload``)."""
    return {
        "version": PAYLOAD_VERSION,
        "type": "report",
        "receiver": batch.receiver,
        "idempotency_key": batch.idempotency_key,
        "sent_at": format_time(batch.sent_at),
        "dashboard_url": dashboard_url,
        "report": batch.report.to_json(),
    }


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of ``b"<timestamp>." + body`` keyed by ``secret`` (UTF-8)."""
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def payload_schema() -> dict[str, Any]:
    """The JSON Schema of the webhook body, as shipped in the package."""
    text = resources.files("monitor.notify").joinpath("webhook_payload.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@dataclass(frozen=True)
class WebhookNotifier:
    """Signed JSON webhook.

    Attributes:
        name: receiver name.
        url: endpoint (secret: not in ``repr`` or messages).
        secret: HMAC key (secret).
        dashboard_url: base URL of the dashboard, for the payload's ``dashboard_url`` link.
        timeout_seconds: per-request timeout.
    """

    name: str
    url: str = field(repr=False)
    secret: str = field(repr=False)
    dashboard_url: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    #: Receivers deduplicate by ``Idempotency-Key``.
    honours_idempotency_key: bool = field(default=True, init=False)

    def send(self, batch: NotificationBatch, client: httpx.Client) -> None:
        """POST the signed payload. Raises :class:`~monitor.errors.DeliveryError` (see :func:`post`)."""
        self._post(webhook_payload(batch, self.dashboard_url), batch.idempotency_key, batch.sent_at, client)

    def send_report(self, batch: ReportBatch, client: httpx.Client) -> None:
        """POST the signed report payload. Raises :class:`~monitor.errors.DeliveryError` (see :func:`post`)."""
        self._post(report_payload(batch, self.dashboard_url), batch.idempotency_key, batch.sent_at, client)

    def _post(self, doc: dict[str, Any], idempotency_key: str, sent_at: datetime, client: httpx.Client) -> None:
        body = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        timestamp = int(sent_at.timestamp())
        headers = {
            SIGNATURE_HEADER: f"t={timestamp},v1={sign(self.secret, timestamp, body)}",
            IDEMPOTENCY_HEADER: idempotency_key,
        }
        post(
            client,
            self.url,
            receiver=self.name,
            content=body,
            headers=headers,
            secrets=(self.url, self.secret),
            timeout_seconds=self.timeout_seconds,
        )
