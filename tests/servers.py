"""Real loopback servers for tests: an ASGI app under uvicorn in a thread, fixed pages served as a scrape
target would serve them, and ports that refuse or hang.

Not a test module (no ``test_`` prefix); imported by unit and integration tests.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn


@contextmanager
def serve_in_thread(app: Any, *, startup_timeout_s: float = 10.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free ``127.0.0.1`` port; yields the base URL (``http://127.0.0.1:N``).

    The socket is bound before uvicorn starts, so the port is known without races. Stops the server on exit.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def refused_port() -> int:
    """A loopback port nothing listens on (bound then closed): connecting is refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


@contextmanager
def black_hole() -> Iterator[int]:
    """A loopback port that accepts TCP connections (the kernel completes the handshake) but never answers.

    Yields the port. A client's request hangs until its own read timeout.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@contextmanager
def static_pages(pages: Mapping[str, bytes], content_type: str = "text/plain; version=0.0.4") -> Iterator[str]:
    """A loopback HTTP server answering ``GET path`` with ``200`` and ``pages[path]`` (Prometheus text by
    default); yields its base URL ``http://127.0.0.1:PORT``. Stands in for a scrape target (a Spark driver's
    servlet, an exporter) replaying recorded real pages."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages[self.path]
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serve_handler(Handler) as base:
        yield base


@contextmanager
def serve_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a threaded loopback HTTP server (one thread per connection); yields its base URL
    ``http://127.0.0.1:PORT``. Shut down and closed on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
