"""A real S3-compatible server on loopback for tests and benchmarks: moto's standalone server (``moto[server]``
from PyPI, in the ``dev`` extra) in its own process, wrapped in a small WSGI layer that counts requests and
injects faults.

Why moto: it installs from PyPI with pip (no binary download, no JVM), implements ListObjectsV2 with
pagination, StartAfter and delimiters, ranged GETs, ETags and CopyObject as S3 does, and starts in about a
second. The wrapper adds what no S3 server offers: ``/__tidegauge__/counts`` (requests served, by kind:
``list``, ``get``, ``head``, ``put``, ``other``) and ``/__tidegauge__/faults`` (answer matching requests
with an S3 error such as ``503 SlowDown``, ``429 TooManyRequests`` or ``400 ExpiredToken``).

Run as ``python -m tests.s3_server PORT``; tests use :func:`s3_server` (a context manager). Not a test module.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.object_stores import stop_process

CONTROL = "/__tidegauge__/"
REPO = Path(__file__).resolve().parent.parent


def _kind(method: str, path: str, query: str) -> str:
    if method == "GET" and ("list-type=" in query or (path.count("/") <= 1 and "uploads" not in query)):
        return "list"
    return {"GET": "get", "HEAD": "head", "PUT": "put"}.get(method, "other")


class _Wrapper:
    """WSGI middleware: counts requests, answers injected faults, serves the control endpoints."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.faults: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def _control(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ["PATH_INFO"][len(CONTROL) :]
        with self.lock:
            if path == "counts" and environ["REQUEST_METHOD"] == "GET":
                body = json.dumps(dict(self.counts)).encode()
            elif path == "counts":  # DELETE: reset
                self.counts.clear()
                body = b"{}"
            elif path == "faults" and environ["REQUEST_METHOD"] == "POST":
                size = int(environ.get("CONTENT_LENGTH") or 0)
                self.faults = json.loads(environ["wsgi.input"].read(size) or b"[]")
                body = b"{}"
            else:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"no such control endpoint"]
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path.startswith(CONTROL):
            return self._control(environ, start_response)
        method = environ["REQUEST_METHOD"]
        query = environ.get("QUERY_STRING", "")
        with self.lock:
            self.counts[_kind(method, path, query)] += 1
            fault = next(
                (f for f in self.faults if f.get("method", method) == method and f["match"] in f"{path}?{query}"), None
            )
            if fault is not None and fault.get("times", -1) > 0:
                fault["times"] -= 1
                if fault["times"] == 0:
                    self.faults.remove(fault)
        if fault is not None:
            status = int(fault["status"])
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{fault["code"]}</Code>'
                f"<Message>injected by the test</Message><RequestId>1</RequestId></Error>"
            ).encode()
            reason = {503: "Slow Down", 429: "Too Many Requests", 400: "Bad Request", 403: "Forbidden"}.get(status, "Error")
            start_response(f"{status} {reason}", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
            return [b"" if method == "HEAD" else body]
        return self.app(environ, start_response)


def main(port: int) -> None:
    """Serve moto's S3 (all services' dispatcher) wrapped in :class:`_Wrapper` on ``127.0.0.1:port``."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = _Wrapper(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", port, app, threaded=True)
    print("ready", flush=True)
    server.serve_forever()


@dataclass
class S3Server:
    """A running server: its endpoint and the credentials it accepts (moto accepts any)."""

    endpoint: str
    process: subprocess.Popen[bytes]

    env: dict[str, str]

    def counts(self) -> Counter[str]:
        """Requests served since the last :meth:`reset_counts`, by kind."""
        return Counter(httpx.get(self.endpoint + CONTROL + "counts").json())

    def reset_counts(self) -> None:
        """Zero the counts."""
        httpx.delete(self.endpoint + CONTROL + "counts")

    def faults(self, faults: list[dict[str, Any]]) -> None:
        """Answer requests whose ``path?query`` contains ``match`` (and whose method is ``method``, when
        given) with ``status``/``code``, ``times`` times (-1: until replaced); ``[]`` clears."""
        httpx.post(self.endpoint + CONTROL + "faults", content=json.dumps(faults))

    def client(self) -> Any:
        """A boto3 S3 client of this server (for test set-up: buckets, uploads, deletes)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """Start the server in its own process on a free loopback port; stop it on exit.

    Raises:
        ModuleNotFoundError: moto (``moto[server]``) is not installed.
        RuntimeError: it did not start within 60 s.
    """
    import moto  # noqa: F401 - fail early, before the subprocess, when it is missing

    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.s3_server", str(port)],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(endpoint + CONTROL + "counts", timeout=2)
            break
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline or not line:
                process.kill()
                raise RuntimeError("the moto S3 server did not start") from None
            time.sleep(0.1)
    credentials = {
        "AWS_ACCESS_KEY_ID": "AKIATIDEGAUGETEST",
        "AWS_SECRET_ACCESS_KEY": "tidegauge-test-secret-value-0123456789",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    try:
        yield S3Server(endpoint, process, credentials)
    finally:
        stop_process(process, timeout_s=10)


if __name__ == "__main__":
    main(int(sys.argv[1]))
