"""The store's limits are the model's (issue 19): identifiers, names and descriptions are checked once, in
``monitor.model`` (:func:`check_name`, :class:`JobRef`, :class:`Scope`), by every parser with its own field
names first; an error's own text is made storable, never refused; a SQLite file removed or replaced under
an engine fails every use; a busy SQLite store is still healthy. The same inputs against a real
PostgreSQL: tests/hostile/test_store.py."""

from __future__ import annotations

import os
import shutil
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from collectors.flink import FlinkRestCollector
from collectors.http import make_client
from collectors.kafka.collector import groups_samples
from collectors.kafka.lag import GroupLag, PartitionLag
from collectors.spark.progress import EVENT_PROGRESS, parse_listener_event
from monitor.errors import ProgressFormatError, StoreError
from monitor.model import (
    MAX_DESCRIPTION_CHARS,
    MAX_ID_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_NAME_CHARS,
    CollectorError,
    Engine,
    ErrorKind,
    JobRef,
    Scope,
    check_name,
)
from monitor.store import check_store, open_store, upgrade
from tests.flink_replay import mock_transport, standalone_routes

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


# ------------------------------------------------------------------------------------------- the model


@pytest.mark.parametrize(
    ("value", "limit", "problem"),
    [
        ("q" * 513, 512, "513 characters, more than the 512 allowed"),
        ("q\x00", 512, "holds a NUL character (U+0000, at character 1), which cannot be stored"),
        ("q\ud800", 512, "not valid Unicode (a lone surrogate at character 1)"),
    ],
)
def test_check_name_refuses_naming_the_field(value: str, limit: int, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_name(value, "progress.id", limit)
    assert str(caught.value) == f"progress.id: {problem}"


def test_check_name_takes_text_at_the_limit() -> None:
    at_limit = "\U0001d11e" * 512  # 2,048 UTF-8 bytes
    assert check_name(at_limit, "progress.id", 512) is at_limit


def test_the_limits_fit_postgresql_s_index_entries() -> None:
    # PostgreSQL refuses a B-tree entry over 2,704 bytes (8 kB pages); the unique indexes on identifiers
    # hold an id (4 bytes a character at most) with the engine (String(16)) beside it
    assert MAX_ID_CHARS * 4 + 16 <= 2704
    assert MAX_ID_CHARS <= MAX_NAME_CHARS <= MAX_DESCRIPTION_CHARS


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: JobRef(Engine.SPARK, "q" * (MAX_ID_CHARS + 1)), "JobRef.job_id"),
        (lambda: JobRef(Engine.SPARK, "q", run_id="r\x00"), "JobRef.run_id"),
        (lambda: JobRef(Engine.SPARK, "q", name="n" * (MAX_NAME_CHARS + 1)), "JobRef.name"),
        (lambda: JobRef(Engine.SPARK, "q", app_id="a\x00"), "JobRef.app_id"),
        (lambda: Scope(source="s" * (MAX_DESCRIPTION_CHARS + 1)), "Scope.source"),
        (lambda: Scope(operator="o\x00"), "Scope.operator"),
    ],
)
def test_job_refs_and_scopes_hold_only_storable_text(make: Any, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        make()


def test_an_error_s_text_is_made_storable_not_refused() -> None:
    error = CollectorError("c", "t\x00", "m" * (MAX_MESSAGE_CHARS + 10) + "\x00\ud800", NOW)
    assert error.target == "t\\x00"
    assert len(error.message) == MAX_MESSAGE_CHARS and error.message.endswith("mmm...")
    short = CollectorError("c", "t", "bad \x00 and \ud800", NOW)
    assert short.message == "bad \\x00 and ?"


# ----------------------------------------------------------------------------------------- parsers


def _event(**progress: Any) -> dict[str, Any]:
    base = {"id": "q-1", "runId": "r-1", "name": "n", "batchId": 1, "timestamp": "2026-11-29T12:00:00.000Z",
            "sources": [{"description": "Kafka[t]", "numInputRows": 1}]}  # fmt: skip
    return {"Event": EVENT_PROGRESS, "progress": {**base, **progress}}


@pytest.mark.parametrize(
    ("progress", "field"),
    [
        ({"id": "q\x00"}, "progress.id"),
        ({"runId": "r" * (MAX_ID_CHARS + 1)}, "progress.runId"),
        ({"name": "n\x00"}, "progress.name"),
        ({"sources": [{"description": "d\x00"}]}, "progress.sources[0].description"),
    ],
)
def test_the_spark_parser_names_the_field_it_cannot_store(progress: dict[str, Any], field: str) -> None:
    with pytest.raises(ProgressFormatError) as caught:
        parse_listener_event(_event(**progress), collector="c", where="events.log: line 3")
    assert str(caught.value).startswith(f"events.log: line 3: field {field}: ")
    assert caught.value.field == field


def test_the_spark_parser_takes_text_at_the_limits() -> None:
    samples = parse_listener_event(
        _event(id="\U0001d11e" * MAX_ID_CHARS, name="n" * MAX_NAME_CHARS, sources=[{"description": "d" * MAX_DESCRIPTION_CHARS}]),
        collector="c",
    )
    assert len(samples[0].job.job_id) == MAX_ID_CHARS and samples[1].scope.source == "d" * MAX_DESCRIPTION_CHARS


def test_a_kafka_group_the_model_cannot_hold_is_a_field_error_and_the_others_are_kept() -> None:
    partition = PartitionLag("t", 0, committed=5, log_start=0, log_end=10, lag=5)
    lags = [GroupLag("good", partitions=(partition,)), GroupLag("bad\x00", partitions=(partition,))]
    samples, refused = groups_samples("c1", lags, NOW, "kafka-lag", "broker:9092")
    assert {s.job.job_id for s in samples} == {"c1/good"}
    assert [(e.kind, e.target) for e in refused] == [(ErrorKind.FIELD, "broker:9092")]
    assert refused[0].message.startswith("consumer group 'bad\\x00': JobRef.job_id: holds a NUL character")


def test_a_flink_job_name_the_model_cannot_hold_is_a_field_error_of_that_job() -> None:
    routes = standalone_routes()
    (jid,) = [k.split("/")[2] for k in routes if k.count("/") == 2 and k.startswith("/jobs/") and k != "/jobs/overview"]
    routes[f"/jobs/{jid}"] = {**routes[f"/jobs/{jid}"], "name": "j" * (MAX_ID_CHARS + 1)}
    result = FlinkRestCollector("http://jm:8081", make_client(transport=mock_transport(routes))).poll(NOW)
    assert result.samples == ()
    assert [(e.kind, e.target) for e in result.errors] == [(ErrorKind.FIELD, f"http://jm:8081/jobs/{jid}")]
    assert result.errors[0].message == (
        f"/jobs/{jid}: field name (the job's identity): 513 characters, more than the 512 allowed"
    )


# ------------------------------------------------------------------------------------------ the store


def test_a_removed_sqlite_file_fails_every_use_and_is_not_made_again(tmp_path: Path) -> None:
    path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{path}")
    store = open_store(f"sqlite:///{path}")
    try:
        with store.sessions.begin() as session:
            session.execute(text("SELECT 1"))  # a pooled connection to the file
        path.unlink()
        removed = f"^no database at {path} \\(removed while in use\\)$"
        with pytest.raises(StoreError, match=removed), store.sessions.begin() as session:
            session.execute(text("SELECT 1"))
        assert check_store(store.sessions) == (False, {"store": "unreachable", "store_error": f"no database at {path}"})
        assert not path.exists()
    finally:
        store.dispose()


def test_a_replaced_sqlite_file_fails_every_use(tmp_path: Path) -> None:
    path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{path}")
    store = open_store(f"sqlite:///{path}")
    try:
        assert check_store(store.sessions) == (True, {"store": "ok"})
        shutil.copyfile(path, tmp_path / "copy.db")
        os.replace(tmp_path / "copy.db", path)
        ok, body = check_store(store.sessions)
        assert not ok
        assert body["store_error"] == (
            f"StoreError: {path} was replaced by another file while in use (restart tidegauge to use the new file)"
        )
    finally:
        store.dispose()


def test_a_sqlite_file_removed_inside_a_transaction_is_not_committed(tmp_path: Path) -> None:
    path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{path}")
    store = open_store(f"sqlite:///{path}")
    try:
        with pytest.raises(StoreError, match="removed while in use"), store.sessions.begin() as session:
            session.execute(text("SELECT 1"))
            path.unlink()  # the commit is refused: nothing is reported as stored
    finally:
        store.dispose()


def test_a_busy_sqlite_store_is_healthy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    store = open_store(url)
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with store.sessions.begin() as session:  # BEGIN IMMEDIATE: SQLite's write lock, held
            session.execute(text("SELECT 1"))
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(30)
        assert check_store(store.sessions) == (True, {"store": "ok"})  # not queued behind the writer
    finally:
        release.set()
        thread.join()
        store.dispose()

