"""A poll of many files is stored in one transaction with batched writes (issue 16): the statements a poll
executes do not grow with the files it read, every file's cursor is written, and a piece the store refuses
among many is still quarantined alone (the others stored).

Real recorded Spark 4.3.0 progress lines (tests/live_eventlog.py), a real SQLite store, a stepped clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event, select

from collectors.spark.eventlog import COLLECTOR_NAME, EventLogCollector
from monitor.daemon.poll import PollStage, StoreCursors, Target
from monitor.metrics.latest import LatestSamples
from monitor.model import Engine, JobRef, PollResult
from monitor.redaction import Redactor
from monitor.store import Store, get_cursors
from monitor.store.tables import JobRow
from tests.live_eventlog import LiveEventLog, stored_progress_batches

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FILES = 40


def _stage(store: Store, root: Path) -> tuple[PollStage, Target]:
    cursors = StoreCursors(store.sessions, COLLECTOR_NAME)
    target = Target("logs", EventLogCollector([root], cursors), timedelta(seconds=10), cursors)
    return PollStage(store.sessions, [target], LatestSamples(), lambda: 0.0, Redactor), target


def test_a_poll_of_many_files_costs_a_few_statements_not_a_dozen_per_file(
    tmp_path: Path, spark_fixtures: Path, store: Store
) -> None:
    root = tmp_path / "events"
    logs = [LiveEventLog(root / f"app-{i:03d}.inprogress", spark_fixtures, T0) for i in range(FILES)]
    for log in logs:
        log.batches(4, 4)
    stage, target = _stage(store, root)
    stage.poll(target, T0)
    for log in logs:
        log.batches(5)
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        result = stage.poll(target, T0 + timedelta(seconds=10))
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert result.errors == ()
    assert {s.batch_id for s in result.samples} == {2}
    assert stored_progress_batches(store) == {log.query_id: [0, 1, 2] for log in logs}
    # before batching: 13 statements per file (520 here); now one read of all cursors, the jobs and runs,
    # the stored sample and raw keys, the inserts, one cursor upsert (statements were 15 when measured)
    assert len(statements) < 40, statements
    with store.sessions() as session:
        cursors = get_cursors(session, COLLECTOR_NAME)
    assert sorted(cursors) == sorted(str(log.path) for log in logs)
    sizes = {str(log.path): log.path.stat().st_size for log in logs}
    assert {path: state["offset"] for path, state in cursors.items()} == sizes
    # nothing new: nothing read again, nothing stored twice
    assert stage.poll(target, T0 + timedelta(seconds=20)).samples == ()


def test_a_piece_the_store_refuses_among_many_is_quarantined_alone(
    tmp_path: Path, spark_fixtures: Path, store: Store
) -> None:
    root = tmp_path / "events"
    logs = [LiveEventLog(root / f"app-{i}.inprogress", spark_fixtures, T0) for i in range(3)]
    for log in logs:
        log.batches(4, 4)
    stage, target = _stage(store, root)
    real = target.source

    class SecondPieceBad:
        """The real pieces; the second file's carries a raw document with a naive time (refused as data)."""

        name = real.name

        def iter_poll(self, now: datetime) -> Iterator[PollResult]:
            for index, piece in enumerate(real.iter_poll(now)):
                if index == 1:
                    bad: tuple[JobRef, datetime, str, dict[str, Any]] = (JobRef(Engine.SPARK, "q"), datetime(2026, 1, 1), "progress", {})
                    piece = piece.merged(PollResult(raw=(bad,)))
                yield piece

    target.source = SecondPieceBad()  # type: ignore[assignment]
    result = stage.poll(target, T0)
    assert [e.kind.value for e in result.errors] == ["unstorable"]
    assert "raw progress document of job 'q'" in result.errors[0].message
    assert stored_progress_batches(store) == {log.query_id: [0, 1] for log in logs}
    with store.sessions() as session:
        assert len(get_cursors(session, COLLECTOR_NAME)) == 3  # every file's cursor moved past what it read
    target.source = real
    assert stage.poll(target, T0 + timedelta(seconds=1)).samples == ()


def test_first_sight_of_many_jobs_and_runs_inserts_them_in_a_few_statements(store: Store) -> None:
    """A catch-up poll that sees 60 new jobs (two runs each) inserts the jobs and the runs in one multi-row
    statement each, not one INSERT per job and run (181 INSERTs before); names, app ids and the runs'
    first/last seen are what one INSERT per row stored (a job's latest non-null name, a run's time span)."""
    from monitor.model import Sample, SampleKind
    from monitor.store import save_poll
    from monitor.store.tables import RunRow

    samples = []
    for j in range(60):
        for r, minute in ((1, 0), (1, 5), (2, 10), (2, 20)):
            job = JobRef(Engine.SPARK, f"q-{j:02d}", run_id=f"r{r}", name=None if minute == 0 else f"name-{minute}",
                         app_id="app-1" if minute == 5 else None)  # fmt: skip
            samples.append(Sample(job, T0 + timedelta(minutes=minute), SampleKind.PROGRESS, "spark-eventlog",
                                  batch_id=minute, num_input_rows=1))  # fmt: skip
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        with store.sessions.begin() as session:
            counts = save_poll(session, PollResult(tuple(samples)))
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert counts.samples_inserted == 240
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    assert len(inserts) <= 6, inserts  # jobs, runs, samples (a chunk or two each)
    assert len(statements) < 20, statements
    with store.sessions() as session:
        jobs = {row.job_id: (row.name, row.app_id) for row in session.scalars(select(JobRow))}
        runs = {
            (job_id, run.run_id): (run.first_seen.replace(tzinfo=UTC), run.last_seen.replace(tzinfo=UTC))
            for job_id, run in session.execute(select(JobRow.job_id, RunRow).join(RunRow, RunRow.job_pk == JobRow.id))
        }  # fmt: skip
    assert jobs == {f"q-{j:02d}": ("name-20", "app-1") for j in range(60)}
    assert runs == {
        **{(f"q-{j:02d}", "r1"): (T0, T0 + timedelta(minutes=5)) for j in range(60)},
        **{(f"q-{j:02d}", "r2"): (T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)) for j in range(60)},
    }
