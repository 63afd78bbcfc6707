"""``tidegauge serve``: token sources, the store sink, and the real command in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from collectors.spark.progress import EVENT_PROGRESS
from monitor.commands.serve import TOKEN_ENV, read_token, store_sink
from monitor.daemon.ingest import parse_event_document
from monitor.errors import InputError
from monitor.model import UTC, SampleKind
from monitor.store import load_samples, open_store, upgrade
from tests.conftest import REPO_ROOT
from tests.servers import refused_port

TOKEN = "serve-test-token-0123456789abcdef"
RECEIVED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_token_from_file_first_line(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text(f"  {TOKEN}  \nsecond line ignored\n")
    assert read_token(f, {TOKEN_ENV: "from-env"}) == TOKEN


def test_token_from_env() -> None:
    assert read_token(None, {TOKEN_ENV: f" {TOKEN}\n"}) == TOKEN


@pytest.mark.parametrize("environ", [{}, {TOKEN_ENV: "   "}])
def test_token_missing(environ: dict[str, str]) -> None:
    with pytest.raises(InputError, match=f"no ingest token: pass --token-file FILE or set {TOKEN_ENV}"):
        read_token(None, environ)


def test_token_file_empty_or_missing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="the file is empty"):
        read_token(empty, {})
    with pytest.raises(InputError, match="cannot read"):
        read_token(tmp_path / "absent", {})


def _progress_events(spark_fixtures: Path) -> list[dict[str, object]]:
    lines = (spark_fixtures / "eventlog_trimmed.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if EVENT_PROGRESS in x]


def test_store_sink_saves_into_sqlite(tmp_path: Path, spark_fixtures: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    store = open_store(url)
    try:
        events = _progress_events(spark_fixtures)[:3]  # batches 0, 1, 2
        result = parse_event_document(events, received_at=RECEIVED)
        sink = store_sink(store)
        sink(result)
        sink(result)  # the same events again (a listener retry, a duplicate POST): no duplicate rows
        with store.sessions() as session:
            samples = load_samples(session, job_id="be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8")
    finally:
        store.dispose()
    query = [s for s in samples if s.scope.is_job()]
    assert [s.batch_id for s in query] == [0, 1, 2]
    assert {s.collector for s in samples} == {"spark-listener"}
    assert all(s.kind is SampleKind.PROGRESS for s in samples)


@dataclass
class Served:
    """A ``tidegauge serve`` subprocess: its client, and its stdout/stderr once it has stopped."""

    client: httpx.Client
    out: str = ""
    err: str = ""


@contextmanager
def serving(tmp_path: Path, db: str) -> Iterator[Served]:
    """Run ``tidegauge serve`` on ``db`` (token from a file, info logs) until ``/healthz`` answers 200; on
    exit SIGTERM it and keep what it printed."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    port = refused_port()
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env["PYTHONPATH"] = str(REPO_ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "serve", "--port", str(port), "--db", db,
         "--token-file", str(token_file), "--log-level", "info"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    served = Served(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if served.client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                _, err = proc.communicate(timeout=5)
                pytest.fail(f"serve did not come up (rc={proc.returncode}): {err[-2000:]}")
            time.sleep(0.1)
        yield served
    finally:
        served.client.close()
        proc.send_signal(signal.SIGTERM)
        served.out, served.err = proc.communicate(timeout=30)


def test_serve_command_end_to_end(tmp_path: Path, spark_fixtures: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db)
    with serving(tmp_path, db) as served:
        client = served.client
        assert client.get("/healthz").json() == {"status": "ok", "store": "ok"}  # no token needed
        assert client.get("/metrics").status_code == 404  # serve has no metrics of its own
        event = _progress_events(spark_fixtures)[6]  # batch 6
        denied = client.post("/api/v1/spark/events", json=event)
        assert denied.status_code == 401
        ok = client.post("/api/v1/spark/events", json=event, headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 202, ok.text
        # a client that puts its token in the query string: the access log must not print it
        leaked = client.get("/healthz", params={"token": "query-token-must-not-be-logged"})
        assert leaked.status_code == 200
    out, err = served.out, served.err
    assert TOKEN not in out + err
    # the access log names every request, never a query string
    assert '"POST /api/v1/spark/events" 202' in err
    assert '"GET /healthz?<query not logged>" 200' in err
    assert "query-token-must-not-be-logged" not in out + err
    store = open_store(db)
    try:
        with store.sessions() as session:
            samples = load_samples(session)
    finally:
        store.dispose()
    assert [s.batch_id for s in samples if s.scope.is_job()] == [6]


def test_serve_healthz_is_503_when_the_sqlite_file_is_removed(tmp_path: Path) -> None:
    # Reproducer: /healthz of `tidegauge serve` said ok whatever the store (the daemon's checked it), and a
    # pooled connection still answers SELECT 1 from a removed file whose writes are lost with it.
    path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{path}")
    with serving(tmp_path, f"sqlite:///{path}") as served:
        path.unlink()
        response = served.client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "store": "unreachable", "store_error": f"no database at {path}"}


def test_serve_refuses_an_unmigrated_database(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), TOKEN_ENV: TOKEN}
    out = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "serve", "--db", f"sqlite:///{tmp_path / 'new.db'}"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 2
    assert "tidegauge db upgrade" in out.stderr


def test_serve_on_a_taken_port_is_one_line_exit_2(tmp_path: Path) -> None:
    import socket

    db = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), TOKEN_ENV: TOKEN}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "serve", "--port", str(port), "--db", db],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
        )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"tidegauge: error: cannot listen on 127.0.0.1:{port}: address already in use"
    ]
