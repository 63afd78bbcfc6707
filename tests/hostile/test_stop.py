"""Stopping always stops (issue 19): SIGTERM ends ``run``, ``serve``, ``demo`` and ``dashboard`` in every state.

Each long-running command runs in a process of its own (:func:`tests.hostile.harness.run_measured`, in a
new session: its process group holds it and its children) and is sent SIGTERM while it is busy: starting,
polling an endpoint that dribbles its answer a byte a second (it never ends, and no read times out), catching
up on a large event log, serving a request whose body never arrives, serving the Streamlit dashboard. Each
test asserts the outcome: the process exited by itself (the harness's guard did not kill it), with exit code
0, no process of its group is left, its ports are free, and the store holds what was committed. How long
the stop took is measured for the report (``record(..., deadline_s=10)``), never asserted.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from monitor.store import upgrade
from tests.conftest import REPO_ROOT
from tests.daemon_process import free_port
from tests.hostile.harness import Measured, record, run_measured, tidegauge_argv
from tests.live_eventlog import LiveEventLog

pytestmark = [pytest.mark.slow]

STOP_DEADLINE_S = 10.0


@dataclass
class Dribbler:
    """A loopback HTTP server answering every request with a chunked body of one byte a second, forever:
    a client waiting for the end of the body waits for ever (each read gets a byte well within any read
    timeout). ``connections`` counts the requests it is answering."""

    port: int
    connections: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def dribbling_server(*, silent: bool = False) -> Iterator[Dribbler]:
    """A :class:`Dribbler`; ``silent``: it accepts connections (counted) and never sends a byte, as a
    database server that stopped answering."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server = Dribbler(int(listener.getsockname()[1]))
    closing = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                if silent:
                    server.connections += 1
                    closing.wait()
                    return
                conn.recv(65536)  # the request head (a GET has no body)
                server.connections += 1
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                conn.sendall(b"1\r\n[\r\n")
                while not closing.wait(1.0):
                    conn.sendall(b"1\r\n \r\n")
            except OSError:
                return

    def accept() -> None:
        while not closing.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server
    finally:
        closing.set()
        listener.close()


def _config(tmp_path: Path, targets: dict[str, Any], port: int) -> Path:
    path = tmp_path / "config.yaml"
    config = {"server": {"host": "127.0.0.1", "port": port}, "targets": targets, "evaluation_interval": "500ms"}
    path.write_text(yaml.safe_dump(config))
    return path


def _sqlite(tmp_path: Path) -> tuple[str, Path]:
    db_path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{db_path}")
    return f"sqlite:///{db_path}", db_path


def _healthz(port: int) -> dict[str, Any] | None:
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    except httpx.TransportError:
        return None
    body: dict[str, Any] = response.json()
    return body


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _group_left(group: int) -> bool:
    """Whether any process of the (ended) command's process group is still there."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _after(seconds: float, probe: Callable[[], bool]) -> Callable[[], bool]:
    """A ``terminate_when`` probe: ``probe`` has held, then ``seconds`` more have passed."""
    held_at: list[float] = []

    def check() -> bool:
        if not held_at:
            if probe():
                held_at.append(time.monotonic())
            return False
        return time.monotonic() - held_at[0] >= seconds

    return check


def _stopped(measured: Measured) -> None:
    """It exited by itself, cleanly, after the SIGTERM."""
    assert not measured.killed, measured.stderr[-3000:]
    assert measured.stop_s is not None
    assert measured.returncode == 0, measured.stderr[-3000:]


def test_run_stops_while_starting_on_a_database_that_never_answers(tmp_path: Path) -> None:
    config = _config(tmp_path, {"spark_event_logs": [{"name": "logs", "path": str(tmp_path)}]}, free_port())
    with dribbling_server(silent=True) as database:
        db_url = f"postgresql+psycopg://tidegauge@127.0.0.1:{database.port}/tidegauge"
        measured = run_measured(
            tidegauge_argv("run", "-c", str(config), "--db", db_url),
            terminate_when=lambda: database.connections > 0,  # it waits for the database's answer
        )
    record("stop: run, SIGTERM while starting on a silent database", measured, deadline_s=STOP_DEADLINE_S)
    assert not measured.killed
    assert measured.stop_s is not None
    # the start fails on its own (connect_timeout) or is abandoned at the deadline, whichever comes first
    assert measured.returncode in (0, 2), measured.stderr[-3000:]


def test_run_stops_mid_poll_blocked_on_an_endpoint_that_never_finishes(tmp_path: Path) -> None:
    db_url, _ = _sqlite(tmp_path)
    port = free_port()
    with dribbling_server() as flink:
        config = _config(tmp_path, {"flink_rest": [{"name": "flink", "url": flink.url, "poll_interval": "1s"}]}, port)
        measured = run_measured(
            tidegauge_argv("run", "-c", str(config), "--db", db_url),
            terminate_when=_after(1.0, lambda: flink.connections > 0),
        )
    record("stop: run, SIGTERM mid-poll on a dribbling Flink endpoint", measured, deadline_s=STOP_DEADLINE_S)
    _stopped(measured)
    # the blocked read was ended by the stop (its client abandoned), so the daemon stopped in order, not by
    # the deadline's forced exit
    assert "stopped http clients" in measured.stderr
    assert "exiting now" not in measured.stderr
    assert _port_free(port)


def test_a_second_sigterm_exits_at_once(tmp_path: Path, spark_fixtures: Path) -> None:
    db_url, _ = _sqlite(tmp_path)
    log = LiveEventLog(
        tmp_path / "events" / "app-1.inprogress", spark_fixtures, datetime.now(UTC) - timedelta(days=1),
        query_id="q-second-signal",
    )  # fmt: skip
    log.batches(*([4] * 20_000))  # a catch-up long enough that the first SIGTERM meets a poll in flight
    port = free_port()
    config = _config(tmp_path, {"spark_event_logs": [{"name": "logs", "path": str(log.path.parent)}]}, port)
    proc = subprocess.Popen(
        tidegauge_argv("run", "-c", str(config), "--db", db_url),
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            body = _healthz(port)
            if body is not None and body["targets"][0]["polls"] == 0:  # the first poll is running
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err.decode(errors="replace")[-3000:]
    assert b"SIGTERM received again: exiting now" in err


def test_run_stops_mid_catch_up_and_keeps_what_it_committed(tmp_path: Path, spark_fixtures: Path) -> None:
    db_url, db_path = _sqlite(tmp_path)
    log = LiveEventLog(
        tmp_path / "events" / "app-1.inprogress", spark_fixtures, datetime.now(UTC) - timedelta(days=1),
        query_id="q-catch-up",
    )  # fmt: skip
    written = log.batches(*([4] * 20_000))
    port = free_port()
    config = _config(tmp_path, {"spark_event_logs": [{"name": "logs", "path": str(log.path.parent)}]}, port)

    def polling() -> bool:
        body = _healthz(port)
        return body is not None and body["targets"][0]["polls"] == 0  # the first poll is still running

    measured = run_measured(
        tidegauge_argv("run", "-c", str(config), "--db", db_url), terminate_when=_after(0.5, polling)
    )
    record("stop: run, SIGTERM mid catch-up of 20,000 batches", measured, deadline_s=STOP_DEADLINE_S)
    _stopped(measured)
    with sqlite3.connect(db_path) as conn:
        cursor_rows = conn.execute("SELECT COUNT(*) FROM collector_cursors WHERE collector = 'spark-eventlog'").fetchone()[0]
        batches = {r[0] for r in conn.execute("SELECT batch_id FROM samples WHERE scope_source IS NULL AND kind = 'progress'")}
    # as of the last committed transaction: what is stored is a prefix of the log, and a cursor exists
    # exactly when something was committed
    assert batches == set(written[: len(batches)])
    assert (cursor_rows > 0) == bool(batches)


def _dribble_a_body(port: int) -> socket.socket:
    """A client that sends a request head announcing a body, and a few bytes of it, then nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /api/v1/spark/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer stop-test-token-0123456789\r\nContent-Length: 1000\r\n\r\n{\"Ev"
    )
    return sock


def test_serve_stops_mid_request(tmp_path: Path) -> None:
    db_url, _ = _sqlite(tmp_path)
    port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text("stop-test-token-0123456789\n")
    token_file.chmod(0o600)
    clients: list[socket.socket] = []

    def mid_request() -> bool:
        if not clients and _healthz(port) is not None:
            clients.append(_dribble_a_body(port))
        return bool(clients)

    try:
        measured = run_measured(
            tidegauge_argv("serve", "--port", str(port), "--db", db_url, "--token-file", str(token_file)),
            terminate_when=_after(0.5, mid_request),
        )
        clients[0].settimeout(5)
        reply = clients[0].recv(4096)
    finally:
        for client in clients:
            client.close()
    record("stop: serve, SIGTERM while a request body is dribbled", measured, deadline_s=STOP_DEADLINE_S)
    _stopped(measured)
    assert _port_free(port)
    # the client is told to send again later; no 500, no traceback in the log
    assert reply.startswith(b"HTTP/1.1 503 "), reply[:200]
    assert b"tidegauge is stopping" in reply and b"retry-after: 5" in reply.lower()
    assert "Traceback" not in measured.stderr and '" 500 ' not in measured.stderr, measured.stderr[-3000:]


def test_dashboard_stops_with_its_streamlit_child(tmp_path: Path) -> None:
    db_url, _ = _sqlite(tmp_path)
    port = free_port()
    measured = run_measured(
        tidegauge_argv("dashboard", "--db", db_url, "--port", str(port)),
        terminate_when=lambda: _answers(f"http://127.0.0.1:{port}/_stcore/health"),
    )
    record("stop: dashboard (with its Streamlit child), SIGTERM", measured, deadline_s=STOP_DEADLINE_S)
    _stopped(measured)
    assert not _group_left(measured.pid), "a process of the dashboard's group is still running"
    assert _port_free(port)


def test_demo_stops_with_its_dashboard(tmp_path: Path) -> None:
    port, dashboard_port = free_port(), free_port()
    argv = tidegauge_argv(
        "demo", "--dir", str(tmp_path / "demo"), "--port", str(port), "--receiver-port", "0",
        "--dashboard-port", str(dashboard_port),
    )  # fmt: skip
    measured = run_measured(
        argv,
        env={"XDG_DATA_HOME": str(tmp_path)},
        terminate_when=_after(
            1.0, lambda: _healthz(port) is not None and _answers(f"http://127.0.0.1:{dashboard_port}/_stcore/health")
        ),
    )
    record("stop: demo (daemon, fleet, dashboard), SIGTERM", measured, deadline_s=STOP_DEADLINE_S)
    _stopped(measured)
    assert not _group_left(measured.pid), "a process of the demo's group is still running"
    assert _port_free(port) and _port_free(dashboard_port)


def test_the_harness_itself_sees_a_child_left_behind(tmp_path: Path) -> None:
    """The group check can fail: a command that leaves a child running is caught."""
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(60)"
    measured = run_measured([sys.executable, "-c", script], terminate_after_s=1.0)
    try:
        assert measured.returncode == -15
        assert _group_left(measured.pid)
    finally:
        os.killpg(measured.pid, signal.SIGKILL)
