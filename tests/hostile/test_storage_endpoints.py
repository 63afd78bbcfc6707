"""Hostile object-store endpoints (issue 19): an S3 endpoint on loopback that answers the bucket listing with
an endless chunked body, and one that never answers.

Spark event logs on S3 are read through s3fs/aiobotocore (:mod:`collectors.storage`), not the bounded HTTP
client of the pull collectors, so these cases check the store's own bounds: ``max_response_bytes`` on each
answer and the request/poll deadlines. The server is a fake (a threaded HTTP server answering every ``HEAD``
with 404, so the key is looked up as a prefix, and every ``GET`` the hostile way): nothing of S3 is needed
beyond the first request.

``tidegauge scan s3://...`` with ``AWS_ENDPOINT_URL`` at it must end with the named error (exit 2).
``tidegauge run`` with that target and a good local event log must store the good log's batches while
``/healthz`` names the hostile target's error kind, then stop on SIGTERM. Outcomes are asserted; time and
peak memory are recorded (:func:`tests.hostile.harness.record`) for ``tests/benchmarks/bench_hostile.py``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from monitor.store import upgrade
from tests.daemon_process import free_port
from tests.hostile.harness import record, run_measured, tidegauge_argv

MIB = 1024 * 1024
#: What a scan may take beyond its request deadline: the interpreter's start-up and imports.
STARTUP_ALLOWANCE_S = 10.0
#: ``scan`` has no deadline option: the default request deadline applies (collectors.http).
SCAN_REQUEST_DEADLINE_S = 30.0
BATCHES = list(range(12))  # progress batches of the recorded log
FAKE_KEYS = {"AWS_ACCESS_KEY_ID": "hostile-test-key", "AWS_SECRET_ACCESS_KEY": "hostile-test-secret"}


class _FakeS3(BaseHTTPRequestHandler):
    """Answers a ``HEAD`` with 404 (no such key: s3fs then lists the prefix) and a ``GET`` as its server's
    ``mode`` says (see :data:`MODES`)."""

    protocol_version = "HTTP/1.1"
    server: _FakeS3Server

    def do_HEAD(self) -> None:
        if self.server.mode == "never answering":
            self.server.release.wait()
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        try:
            MODES[self.server.mode](self)
        except OSError:  # the client gave up, which is the point
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _FakeS3Server(ThreadingHTTPServer):
    daemon_threads = True
    mode: str
    base: str
    #: set at teardown: a handler that never answers returns
    release: threading.Event


def _endless_listing(h: _FakeS3) -> None:
    """200, chunked, 1 MiB chunks of spaces (XML white space), never a last chunk."""
    h.send_response(200)
    h.send_header("Content-Type", "application/xml")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    block = b" " * MIB
    while True:
        h.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))


def _never_answer(h: _FakeS3) -> None:
    """The request is read, no answer is ever sent (until teardown)."""
    h.server.release.wait()


MODES: dict[str, Callable[[_FakeS3], None]] = {
    "endless listing body": _endless_listing,
    "never answering": _never_answer,
}

#: mode -> (the start of the error message, the error's kind on /healthz)
EXPECTED = {
    "endless listing body": ("body too large: ", "body_too_large"),
    "never answering": ("deadline exceeded: ", "deadline_exceeded"),
}


@contextmanager
def fake_s3(mode: str) -> Iterator[_FakeS3Server]:
    server = _FakeS3Server(("127.0.0.1", 0), _FakeS3)
    server.mode = mode
    server.base = f"http://127.0.0.1:{server.server_address[1]}"
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("mode", list(MODES))
def test_scan_s3_ends_with_the_named_error(mode: str) -> None:
    start, _kind = EXPECTED[mode]
    with fake_s3(mode) as server:
        measured = run_measured(
            tidegauge_argv("scan", "s3://spark/spark-events"),
            env={**FAKE_KEYS, "AWS_ENDPOINT_URL": server.base},
        )
    record(f"scan s3: {mode}", measured, deadline_s=SCAN_REQUEST_DEADLINE_S + STARTUP_ALLOWANCE_S)
    assert not measured.killed
    assert measured.returncode == 2, measured.stderr
    assert f"tidegauge: error: {start}" in measured.stderr, measured.stderr
    assert "s3://spark/spark-events" in measured.stderr  # the URL is named
    assert "Traceback" not in measured.stderr and "hostile-test-secret" not in measured.stderr


# -------------------------------------------------------------------------------------------- daemon


def _stored_batches(db_path: Path) -> list[int]:
    try:
        with sqlite3.connect(db_path, timeout=5) as conn:
            rows = conn.execute(
                "SELECT samples.batch_id FROM samples WHERE samples.kind = 'progress' AND samples.scope_source IS NULL"
            ).fetchall()
    except sqlite3.OperationalError:
        return []
    return sorted(r[0] for r in rows)


@pytest.mark.parametrize("mode", list(MODES))
def test_daemon_keeps_the_good_log_and_names_the_store_error(
    mode: str, recorded_fixtures: Path, tmp_path: Path
) -> None:
    start, kind = EXPECTED[mode]
    good = tmp_path / "good" / "local-1795951957158.jsonl"
    good.parent.mkdir()
    good.write_bytes((recorded_fixtures / "spark" / "real-4.3.0" / "eventlog_trimmed.jsonl").read_bytes())
    db_path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{db_path}")
    port = free_port()
    seen: dict[str, Any] = {}

    def probe() -> bool:
        """True once /healthz names the hostile target's error and the good log's batches are stored."""
        try:
            health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2.0).json()
        except (httpx.HTTPError, ValueError):
            return False
        targets = {t["name"]: t for t in health.get("targets", [])}
        bad = targets.get("hostile")
        if not bad or not bad["errors_by_kind"].get(kind):
            return False
        batches = _stored_batches(db_path)
        if not batches:
            return False
        seen.update(health=health, bad=bad, good=targets.get("good"), batches=batches)
        return True

    with fake_s3(mode) as server:
        config = {
            "server": {"host": "127.0.0.1", "port": port},
            "evaluation_interval": "500ms",
            "targets": {
                "spark_event_logs": [
                    {
                        "name": "hostile",
                        "path": "s3://spark/spark-events",
                        "poll_interval": "1s",
                        "request_deadline": "3s",
                        "poll_deadline": "4s",
                        "storage_options": {
                            "endpoint_url": server.base,
                            "key": {"env": "AWS_ACCESS_KEY_ID"},
                            "secret": {"env": "AWS_SECRET_ACCESS_KEY"},
                        },
                    },
                    {"name": "good", "path": str(good.parent), "poll_interval": "500ms"},
                ]
            },
        }
        config_path = tmp_path / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        measured = run_measured(
            tidegauge_argv("run", "-c", str(config_path), "--db", f"sqlite:///{db_path}"),
            env=FAKE_KEYS,
            terminate_when=probe,
            kill_after_s=90.0,
        )
    record(f"run (hostile s3 + good event log): {mode}", measured, deadline_s=10.0)
    assert seen, f"the daemon never showed the error:\n{measured.stderr[-3000:]}"
    assert not measured.killed and measured.returncode == 0, measured.stderr[-3000:]
    bad, good_target = seen["bad"], seen["good"]
    assert bad["up"] is False and bad["last_error"].startswith(start), bad
    assert set(bad["errors_by_kind"]) == {kind}, bad  # named, never "unreachable", "store" or "internal"
    assert good_target["errors_total"] == 0, good_target
    assert seen["batches"] == BATCHES
    assert "hostile-test-secret" not in measured.stderr
