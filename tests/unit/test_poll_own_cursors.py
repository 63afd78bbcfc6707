"""A poll reads only its own target's cursors (issue 16, fleet scaling): with many event-log targets under
one collector, each poll used to read every cursor of the collector (targets x files rows per poll
interval). Now it reads the cursors of the files its listing shows, and a file whose cursor was not read
ahead (renamed at the end of its application, or a new file) is looked up alone: never read twice, never lost.

Real recorded Spark 4.3.0 progress lines (tests/live_eventlog.py), a real SQLite and PostgreSQL store.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from collectors.spark.eventlog import COLLECTOR_NAME, EventLogCollector
from monitor.daemon.poll import PollStage, StoreCursors, Target
from monitor.metrics.latest import LatestSamples
from monitor.redaction import Redactor
from monitor.store import Store, get_cursors, open_store
from monitor.store.migrate import upgrade
from tests.live_eventlog import LiveEventLog, stored_progress_batches

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
STEP = timedelta(seconds=10)


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres])]
)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'tg.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    upgrade(url)
    opened = open_store(url)
    yield opened
    opened.dispose()


def _target(store: Store, name: str, path: Path) -> Target:
    """A fresh target (a fresh collector: nothing in memory, as after a restart or a takeover)."""
    cursors = StoreCursors(store.sessions, COLLECTOR_NAME)
    return Target(name, EventLogCollector([path], cursors), STEP, cursors)


def _stage(store: Store, *targets: Target) -> PollStage:
    return PollStage(store.sessions, list(targets), LatestSamples(), lambda: 0.0, Redactor)


class CursorReads:
    """The cursor keys each ``SELECT`` of ``collector_cursors`` asked for while listening (``None``: no key
    condition, every cursor of the collector)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads: list[list[str] | None] = []

    def __enter__(self) -> CursorReads:
        event.listen(self.store.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *_: object) -> None:
        event.remove(self.store.engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if not re.match(r"\s*SELECT\b.*\bFROM collector_cursors\b", statement, re.S):
            return
        if "collector_cursors.target" not in statement.split("WHERE", 1)[-1]:
            self.reads.append(None)
            return
        values = parameters.values() if isinstance(parameters, dict) else parameters
        flat = [v for p in values for v in (p if isinstance(p, list | tuple) else [p])]
        self.reads.append([v for v in flat if isinstance(v, str) and v != COLLECTOR_NAME])

    def keys(self) -> set[str]:
        return {k for r in self.reads if r is not None for k in r}


def test_a_poll_reads_only_its_own_targets_cursors(tmp_path: Path, spark_fixtures: Path, any_store: Store) -> None:
    logs = {
        name: [LiveEventLog(tmp_path / name / f"app-{i}.inprogress", spark_fixtures, T0) for i in range(3)]
        for name in ("a", "b")
    }
    for group in logs.values():
        for log in group:
            log.batches(4, 4)
    a, b = _target(any_store, "a", tmp_path / "a"), _target(any_store, "b", tmp_path / "b")
    stage = _stage(any_store, a, b)
    stage.poll(a, T0)
    stage.poll(b, T0)
    for group in logs.values():
        for log in group:
            log.batches(5)
    with CursorReads(any_store) as reads:
        result = stage.poll(a, T0 + STEP)
    assert {s.batch_id for s in result.samples} == {2}
    assert None not in reads.reads, "read every cursor of the collector"
    b_keys = {str(log.path) for log in logs["b"]}
    assert reads.keys() & b_keys == set()
    assert {str(log.path) for log in logs["a"]} <= reads.keys()
    assert len(reads.reads) == 1  # one read of the listed files' cursors, none per file
    stage.poll(b, T0 + STEP)
    assert stored_progress_batches(any_store) == {log.query_id: [0, 1, 2] for group in logs.values() for log in group}


def test_a_taken_over_target_resumes_from_its_cursors_renamed_and_new_files_included(
    tmp_path: Path, spark_fixtures: Path, any_store: Store
) -> None:
    """A fresh collector (another instance took the target over) reads on from the stored cursors: a file
    renamed from ``.inprogress`` (its cursor under the old name), a new file, and files appended to, each
    batch stored once; then a glob target over the same files reads nothing again."""
    root = tmp_path / "events"
    logs = [LiveEventLog(root / f"app-{i}.inprogress", spark_fixtures, T0) for i in range(3)]
    for log in logs:
        log.batches(4, 4)
    first = _target(any_store, "t", root)
    _stage(any_store, first).poll(first, T0)
    logs[0].batches(5)
    ended = logs[0].path.with_name("app-0")
    logs[0].path.rename(ended)  # Spark renames app.inprogress -> app when the application ends
    logs[1].batches(5)
    late = LiveEventLog(root / "app-3.inprogress", spark_fixtures, T0)
    late.batches(4)
    taker = _target(any_store, "t", root)
    with CursorReads(any_store) as reads:
        result = _stage(any_store, taker).poll(taker, T0 + STEP)
    assert result.errors == ()
    assert {(s.job.job_id, s.batch_id) for s in result.samples if s.batch_id is not None} == {
        (logs[0].query_id, 2), (logs[1].query_id, 2), (late.query_id, 0),
    }  # fmt: skip
    assert None not in reads.reads
    assert stored_progress_batches(any_store) == {
        logs[0].query_id: [0, 1, 2], logs[1].query_id: [0, 1, 2], logs[2].query_id: [0, 1], late.query_id: [0],
    }  # fmt: skip
    with any_store.sessions() as session:
        cursors = get_cursors(session, COLLECTOR_NAME)
    assert str(ended) in cursors
    assert cursors[str(ended)]["offset"] == ended.stat().st_size
    glob = _target(any_store, "g", root / "app-*")
    again = _stage(any_store, glob).poll(glob, T0 + 2 * STEP)
    assert [s for s in again.samples if s.batch_id is not None] == []
