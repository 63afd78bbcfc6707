"""The demo's built-in webhook receiver: verifies what tidegauge's webhook notifier sends and shows it.

A Starlette app (served on loopback by the demo)::

    POST /hook                   a signed notification (monitor.notify.webhook): 401 on a bad signature
    GET  /                       an HTML page listing what arrived, newest first (refreshes itself)
    GET  /api/notifications      the same as JSON: [{"received_at", "idempotency_key", "body"}]

The signature is checked as a receiver should (``X-Tidegauge-Signature: t=<unix s>,v1=<hex HMAC-SHA256>``
over ``"<t>." + raw body``, compared with :func:`hmac.compare_digest`); a repeated ``Idempotency-Key`` is
acknowledged and not stored twice. It stands in for a user's own endpoint; nothing here reads the clock
(``clock`` is a parameter).
"""

from __future__ import annotations

import hmac
import html
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from monitor.notify.webhook import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, sign

__all__ = ["Inbox", "Received", "create_receiver_app"]


@dataclass(frozen=True, slots=True)
class Received:
    """One accepted notification."""

    received_at: datetime
    idempotency_key: str
    body: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``/api/notifications``."""
        return {
            "received_at": self.received_at.isoformat(),
            "idempotency_key": self.idempotency_key,
            "body": self.body,
        }

    def summaries(self) -> list[tuple[str, str, str, str]]:
        """``(status, rule, job, message)`` per alert in the body (one line for a report)."""
        if self.body.get("type") == "report":
            report = self.body.get("report", {})
            return [("report", str(report.get("name")), f"{len(report.get('jobs', []))} jobs", str(report.get("health")))]
        job = self.body.get("job") or {}
        who = str(job.get("name") or job.get("job_id"))
        return [
            (str(a.get("status", self.body.get("status"))), str(a.get("rule")), who, str(a.get("message", "")))
            for a in self.body.get("alerts", [])
        ]


@dataclass
class Inbox:
    """Accepted notifications, thread-safe."""

    items: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, item: Received) -> bool:
        """Store ``item`` unless its idempotency key was seen; returns whether it was new."""
        with self.lock:
            if any(i.idempotency_key == item.idempotency_key for i in self.items):
                return False
            self.items.append(item)
            return True

    def snapshot(self) -> list[Received]:
        """A copy of the items, oldest first."""
        with self.lock:
            return list(self.items)


def _verify(secret: str, header: str | None, body: bytes) -> bool:
    if not header:
        return False
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), parts.get("v1", ""))


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="3">
<title>tidegauge demo: webhook receiver</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse;width:100%}}
td,th{{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}}
.firing{{color:#b00020;font-weight:600}}.resolved{{color:#1b7f3b}}</style></head><body>
<h1>Webhook receiver</h1><p>{count} notifications received (signatures verified), newest first.</p>
<table><tr><th>received (UTC)</th><th>status</th><th>rule</th><th>job</th><th>message</th></tr>{rows}</table>
</body></html>"""


def create_receiver_app(secret: str, clock: Callable[[], datetime], inbox: Inbox | None = None) -> Starlette:
    """The receiver app; ``app.state.inbox`` is the :class:`Inbox` it fills."""
    box = inbox if inbox is not None else Inbox()

    async def hook(request: Request) -> JSONResponse:
        body = await request.body()
        if not _verify(secret, request.headers.get(SIGNATURE_HEADER), body):
            return JSONResponse({"error": "bad or missing signature"}, status_code=401)
        try:
            doc = json.loads(body)
        except ValueError:
            return JSONResponse({"error": "body is not JSON"}, status_code=400)
        key = request.headers.get(IDEMPOTENCY_HEADER) or ""
        new = box.add(Received(clock(), key, doc if isinstance(doc, dict) else {"value": doc}))
        return JSONResponse({"stored": new})

    def page(request: Request) -> HTMLResponse:
        items = list(reversed(box.snapshot()))
        rows = []
        for item in items:
            for status, rule, job, message in item.summaries():
                rows.append(
                    f"<tr><td>{item.received_at:%H:%M:%S}</td><td class='{html.escape(status)}'>{html.escape(status)}"
                    f"</td><td>{html.escape(rule)}</td><td>{html.escape(job)}</td><td>{html.escape(message)}</td></tr>"
                )
        return HTMLResponse(_PAGE.format(count=len(items), rows="".join(rows)))

    def api(request: Request) -> JSONResponse:
        return JSONResponse([i.to_json() for i in box.snapshot()])

    app = Starlette(
        routes=[
            Route("/hook", hook, methods=["POST"]),
            Route("/", page, methods=["GET"]),
            Route("/api/notifications", api, methods=["GET"]),
        ]
    )
    app.state.inbox = box
    return app
