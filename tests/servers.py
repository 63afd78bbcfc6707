"""Real loopback servers for tests: an ASGI app under uvicorn in a thread, and ports that refuse or hang.

Not a test module (no ``test_`` prefix); imported by unit and integration tests.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
