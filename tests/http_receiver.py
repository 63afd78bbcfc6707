"""A loopback HTTP receiver for notifier/dispatcher tests (a real server on 127.0.0.1 in a thread).

It stands in for a webhook consumer that honours ``Idempotency-Key``: the first request with a key is
"processed" (kept in ``processed``), later ones with the same key are acknowledged without processing.
``fail_status`` makes it answer every request with that status (after recording it, before processing);
``delay_seconds`` makes it process the request and then wait before answering (to provoke a client
timeout after the work was done, the case idempotency keys exist for).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float = field(default_factory=time.time)
    """When the request arrived (Unix seconds)."""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str = ""
    requests: list[Request] = field(default_factory=list)
    processed: list[Request] = field(default_factory=list)
    fail_status: int | None = None
    fail_body: str = ""
    delay_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, request: Request) -> tuple[int, str]:
        with self.lock:
            self.requests.append(request)
            if self.fail_status is not None:
                return self.fail_status, self.fail_body
            key = request.headers.get("idempotency-key")
            if key is None or all(p.headers.get("idempotency-key") != key for p in self.processed):
                self.processed.append(request)
            delay = self.delay_seconds
        if delay:
            time.sleep(delay)
        return 200, "ok"


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, text = receiver.handle(Request(self.path, headers, body))
            data = text.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and went away

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="test-receiver", daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def keys_by_notification(rx: Receiver) -> dict[tuple[str, str, str], set[str]]:
    """(job id, status, fired_at) of every alert in every webhook request the receiver got (failed ones
    included) -> the idempotency keys it came under."""
    keys: dict[tuple[str, str, str], set[str]] = {}
    with rx.lock:
        for r in rx.requests:
            for a in r.json()["alerts"]:
                keys.setdefault((a["labels"]["job_id"], a["status"], a["fired_at"]), set()).add(
                    r.headers["idempotency-key"]
                )
    return keys


def processed_alerts(rx: Receiver) -> list[tuple[str, str]]:
    """(job id, status) of every alert in the webhook requests the receiver processed (once per key)."""
    with rx.lock:
        return [(a["labels"]["job_id"], a["status"]) for r in rx.processed for a in r.json()["alerts"]]
