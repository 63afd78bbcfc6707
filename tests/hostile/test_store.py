"""The store's limits are the model's, and its health is real (issue 19).

* SQLite and a real PostgreSQL accept and refuse the same listener pushes and the same event-log lines:
  an identifier, name or description with a NUL, or longer than the model holds
  (:data:`monitor.model.MAX_ID_CHARS` ...), is a 422 naming the field on ingest and a quarantined line
  naming file, line and field when tailed, with the rest stored; text at the limits (4-byte characters,
  the most UTF-8 bytes PostgreSQL's indexes must hold) is stored on both.
* A real daemon (``tidegauge run`` in a subprocess) whose SQLite file is removed or replaced, or whose
  PostgreSQL server stops, answers ``/healthz`` 503 and reports the poll as not stored; a PostgreSQL server
  started again is used again.

Lines and events are the recorded real Spark 4.3.0 ones (tests/live_eventlog.py) with one value changed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from collectors.spark.eventlog import EventLogCollector
from monitor.commands.serve import store_sink
from monitor.daemon.ingest import EVENTS_PATH, create_ingest_app
from monitor.daemon.poll import PollStage, StoreCursors, Target
from monitor.metrics.latest import LatestSamples
from monitor.model import MAX_DESCRIPTION_CHARS, MAX_ID_CHARS, MAX_NAME_CHARS, ErrorKind
from monitor.redaction import Redactor
from monitor.store import load_samples, open_store, upgrade
from monitor.store.tables import JobRow
from tests.daemon_process import DaemonProcess, free_port, wait_for
from tests.live_eventlog import LiveEventLog
from tests.pg import start_postgres
from tests.servers import serve_in_thread

pytestmark = [pytest.mark.integration]

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TOKEN = "store-limits-token-0123456789"

Mutation = Callable[[dict[str, Any]], None]


def _longest(chars: int) -> str:
    """``chars`` characters of 4 UTF-8 bytes each, in a fixed pseudo-random order: text at a limit that is
    the most bytes the database must index and that does not compress (PostgreSQL compresses index entries
    before it measures them: a repeated character would pass far beyond the limit)."""
    rng = random.Random(19)
    return "".join(chr(rng.randrange(0x10000, 0x30000)) for _ in range(chars))


def _set(path: str, value: str) -> Mutation:
    """Set ``progress.<path>`` (dots; ``sources.0.description``) of a progress event to ``value``."""

    def mutate(event: dict[str, Any]) -> None:
        node: Any = event["progress"]
        *parents, last = path.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value

    return mutate


# (case, mutation, the field named when refused or None when stored)
CASES: list[tuple[str, Mutation, str | None]] = [
    ("NUL in id", _set("id", "q\x00id"), "progress.id"),
    ("NUL in runId", _set("runId", "run\x00"), "progress.runId"),
    ("NUL in name", _set("name", "na\x00me"), "progress.name"),
    ("NUL in a source description", _set("sources.0.description", "Kafka\x00[x]"), "progress.sources[0].description"),
    ("1 MB id", _set("id", "q" * 1_000_000), "progress.id"),
    ("id one over the limit", _set("id", "q" * (MAX_ID_CHARS + 1)), "progress.id"),
    ("name one over the limit", _set("name", "n" * (MAX_NAME_CHARS + 1)), "progress.name"),
    ("id at the limit in 4-byte characters", _set("id", _longest(MAX_ID_CHARS)), None),
    ("runId at the limit in 4-byte characters", _set("runId", _longest(MAX_ID_CHARS)), None),
    ("name at the limit in 4-byte characters", _set("name", _longest(MAX_NAME_CHARS)), None),
    ("description at the limit", _set("sources.0.description", "d" * MAX_DESCRIPTION_CHARS), None),
    ("NUL in a value that is no identity (a source's offsets)", _set("sources.0.endOffset", "{\x00}"), None),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An upgraded empty database on each backend (PostgreSQL: the session's real server)."""
    url = f"sqlite:///{tmp_path / 'tg.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    upgrade(url)
    return str(url)


@pytest.fixture
def log(tmp_path: Path, spark_fixtures: Path) -> LiveEventLog:
    return LiveEventLog(tmp_path / "events" / "app-1.inprogress", spark_fixtures, T0, query_id="q-store-limits")


@pytest.mark.parametrize(("case", "mutate", "field"), CASES, ids=[c[0] for c in CASES])
def test_ingest_accepts_and_refuses_alike_on_sqlite_and_postgresql(
    db_url: str, log: LiveEventLog, case: str, mutate: Mutation, field: str | None
) -> None:
    event = log.next_progress(4)
    mutate(event)
    store = open_store(db_url)
    try:
        app = create_ingest_app(token=TOKEN, sink=store_sink(store), clock=lambda: T0)
        with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
            response = client.post(
                EVENTS_PATH,
                content=json.dumps(event).encode(),
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            )
        with store.sessions() as session:
            jobs = session.scalar(select(func.count()).select_from(JobRow))
    finally:
        store.dispose()
    if field is None:
        assert response.status_code == 202, response.text
        assert jobs == 1
    else:
        assert response.status_code == 422, response.text
        assert f"field {field}:" in response.json()["error"]
        assert jobs == 0  # nothing of a refused request is stored


def _poll_stage(db_url: str, root: Path) -> tuple[PollStage, Target, Callable[[], None]]:
    store = open_store(db_url)
    cursors = StoreCursors(store.sessions, "spark-eventlog")
    target = Target("live", EventLogCollector([root], cursors), interval=timedelta(seconds=1), cursors=cursors)
    stage = PollStage(store.sessions, [target], LatestSamples(), monotonic=lambda: 0.0, redactor=lambda: Redactor())
    return stage, target, store.dispose


@pytest.mark.parametrize(
    ("case", "mutate", "field"), [c for c in CASES if c[2] is not None], ids=[c[0] for c in CASES if c[2] is not None]
)
def test_tailing_quarantines_the_line_and_stores_the_rest_alike_on_sqlite_and_postgresql(
    db_url: str, log: LiveEventLog, case: str, mutate: Mutation, field: str
) -> None:
    good_before = log.batches(*([4] * 7))
    bad = log.next_progress(4)
    mutate(bad)
    log.append_line(json.dumps(bad, separators=(",", ":")))
    bad_line = 2 + len(good_before)  # the started event, the good lines, then this one
    good_after = log.batches(*([4] * 8))
    stage, target, dispose = _poll_stage(db_url, log.path.parent)
    try:
        result = stage.poll(target, T0)
        again = stage.poll(target, T0)  # the cursor moved past it: not read (nor reported) again
        store = open_store(db_url)
        try:
            with store.sessions() as session:
                stored = sorted(s.batch_id for s in load_samples(session) if s.scope.is_job() and s.batch_id is not None)
        finally:
            store.dispose()
    finally:
        dispose()
    assert stored == good_before + good_after  # the 15 good lines
    assert [(e.kind, e.message.split(": ")[:3]) for e in result.errors] == [
        (ErrorKind.FIELD, [str(log.path.absolute()), f"line {bad_line}", f"field {field}"])
    ]
    assert stage.target_health()[0]["up"] is True
    assert again.errors == ()


# ----------------------------------------------------------------------------------------- health


def _config(root: Path) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {"spark_event_logs": [{"name": "live", "path": str(root), "poll_interval": "200ms"}]},
        "evaluation_interval": "500ms",
    }


def _healthz(daemon: DaemonProcess) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{daemon.base}/healthz", timeout=10)
    return response.status_code, response.json()


def _unhealthy(daemon: DaemonProcess) -> dict[str, Any] | None:
    status, body = _healthz(daemon)
    return body if status == 503 else None


def _not_stored(daemon: DaemonProcess) -> dict[str, Any] | None:
    """The target's health once a poll was reported as not stored (a ``store`` error, target down)."""
    _, body = _healthz(daemon)
    target = body["targets"][0]
    return target if not target["up"] and "poll not stored" in (target["last_error"] or "") else None


@pytest.fixture
def sqlite_daemon(tmp_path: Path, log: LiveEventLog) -> Iterator[tuple[DaemonProcess, Path]]:
    db_path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{db_path}")
    log.batches(4, 4)
    daemon = DaemonProcess(_config(log.path.parent), f"sqlite:///{db_path}", tmp_path)
    try:
        daemon.start()
        wait_for("the first poll", lambda: _healthz(daemon)[1]["targets"][0]["polls"] > 0)
        yield daemon, db_path
    finally:
        daemon.close()


def test_a_removed_sqlite_file_fails_healthz_and_no_poll_is_reported_as_stored(
    sqlite_daemon: tuple[DaemonProcess, Path], log: LiveEventLog
) -> None:
    daemon, db_path = sqlite_daemon
    db_path.unlink()
    body = wait_for("/healthz to fail", lambda: _unhealthy(daemon), timeout_s=10)
    assert body["store"] == "unreachable"
    assert body["store_error"].startswith(f"no database at {db_path}")
    log.batches(4)
    target = wait_for("the poll to be reported as not stored", lambda: _not_stored(daemon), timeout_s=10)
    assert "removed while in use" in target["last_error"]
    assert not db_path.exists()  # and no empty file was made in its place
    assert daemon.terminate() == 0


def test_a_replaced_sqlite_file_fails_healthz_and_no_poll_is_reported_as_stored(
    sqlite_daemon: tuple[DaemonProcess, Path], log: LiveEventLog, tmp_path: Path
) -> None:
    daemon, db_path = sqlite_daemon
    copy_path = tmp_path / "copy.db"
    shutil.copyfile(db_path, copy_path)
    os.replace(copy_path, db_path)  # another file (a restored backup) at the same path
    body = wait_for("/healthz to fail", lambda: _unhealthy(daemon), timeout_s=10)
    assert "was replaced by another file while in use" in body["store_error"]
    log.batches(4)
    target = wait_for("the poll to be reported as not stored", lambda: _not_stored(daemon), timeout_s=10)
    assert "replaced by another file" in target["last_error"]
    assert daemon.terminate() == 0


def test_a_lost_postgresql_fails_healthz_and_a_restarted_one_is_used_again(
    tmp_path: Path, log: LiveEventLog
) -> None:
    server = start_postgres(os.environ)  # its own server: the test stops it
    daemon: DaemonProcess | None = None
    try:
        db_url = server.create_database()
        upgrade(db_url)
        log.batches(4, 4)
        daemon = DaemonProcess(_config(log.path.parent), db_url, tmp_path)
        daemon.start()
        wait_for("the first poll", lambda: _healthz(daemon)[1]["targets"][0]["polls"] > 0)  # type: ignore[union-attr]
        server.halt()
        body = wait_for("/healthz to fail", lambda: _unhealthy(daemon), timeout_s=15)  # type: ignore[arg-type]
        assert body["store"] == "unreachable"
        wait_for("the poll to be reported as not stored", lambda: _not_stored(daemon), timeout_s=15)  # type: ignore[arg-type]
        server.resume()
        wait_for("/healthz to recover", lambda: _healthz(daemon)[0] == 200, timeout_s=30)  # type: ignore[union-attr]
        written = log.batches(4)
        store = open_store(db_url)
        try:

            def stored_it() -> bool:
                with store.sessions() as session:
                    return written[0] in {s.batch_id for s in load_samples(session)}

            wait_for("the batch written after the restart to be stored", stored_it, timeout_s=30)
        finally:
            store.dispose()
        assert daemon.terminate() == 0
    finally:
        if daemon is not None:
            daemon.close()
        server.stop()

