"""Checks shared by the SQLite (tests/unit/test_store.py) and PostgreSQL
(tests/integration/test_migrations_postgres.py) store tests, so both databases run the same assertions.

Expected values are written out by hand: the Spark samples transcribe two recorded real Spark 4.3.0
progress documents (``tests/fixtures/spark/real-4.3.0/progress_*.json``) field by field, as the model's
docstring maps them; they are not produced by any tidegauge parser.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from monitor.errors import StoreError
from monitor.model import CollectorError, Engine, JobRef, PollResult, Sample, SampleKind, Scope
from monitor.store import (
    current,
    downgrade,
    head,
    iter_raw_documents,
    list_jobs,
    load_samples,
    make_engine,
    make_session_factory,
    save_poll,
    upgrade,
)
from monitor.store.base import Base
from monitor.store.tables import (
    CollectorCursorRow,
    CollectorErrorRow,
    JobRow,
    RawDocumentRow,
    RunRow,
    SampleRow,
)

#: The tables revision 0001_initial creates (from the issue, by hand).
OUR_TABLES = frozenset({"jobs", "runs", "samples", "raw_documents", "collector_cursors", "collector_errors"})
_OUR_ROW_CLASSES = (JobRow, RunRow, SampleRow, RawDocumentRow, CollectorCursorRow, CollectorErrorRow)

IDLE_FILE = "progress_pt_idle_after_14s_b12.json"
GT_FILE = "progress_gt_b2_foreachBatch_orderBy_doublecount.json"

# progress_pt_idle_after_14s_b12.json: query "wm_metrics".
IDLE_JOB = JobRef(
    Engine.SPARK,
    "92f2e0e5-46e5-49c6-98a8-cbd4e61d1c66",
    run_id="db5df2d6-3a60-41bd-9613-0c9d792cbdef",
    name="wm_metrics",
    app_id="local-1795951957158",
)
# progress_gt_b2_foreachBatch_orderBy_doublecount.json: query "wm_gt".
GT_JOB = JobRef(
    Engine.SPARK,
    "e05f6e2a-824a-42c9-8421-8e08e1d696e8",
    run_id="f692114c-669f-48ba-a3ae-da72c4eaf0af",
    name="wm_gt",
)
FLINK_JOB = JobRef(Engine.FLINK, "a1b2c3d4e5f60718293a4b5c6d7e8f90", run_id="attempt-1", name="windowed")
KAFKA_JOB = JobRef(Engine.KAFKA, "cluster1/group1")  # no run id, no name: stored as NULLs


def round_trip_samples() -> list[Sample]:
    """Samples covering the edge cases, in ``observed_at`` order (the order load_samples returns)."""
    return [
        # Epoch values as real data: min/avg event time 1970 and 2015 from gt b2; 1970 must stay 1970 (not
        # None); dropped 2 = numRowsDroppedByWatermark; state 10/8/0 rows, 3968 bytes; batchDuration 845.
        Sample(
            job=GT_JOB,
            observed_at=datetime(2026, 11, 29, 11, 32, 2, 145000, tzinfo=UTC),
            kind=SampleKind.PROGRESS,
            collector="spark-listener",
            batch_id=2,
            watermark=datetime(2024, 1, 1, 11, 57, tzinfo=UTC),
            event_time_min=datetime(1970, 1, 1, tzinfo=UTC),
            event_time_max=datetime(2024, 1, 1, 12, 15, tzinfo=UTC),
            event_time_avg=datetime(2015, 1, 1, 6, 2, 50, tzinfo=UTC),
            num_input_rows=6,
            input_rows_per_second=0.0,
            processed_rows_per_second=7.1,
            batch_duration_ms=845,
            dropped_by_watermark=2,
            state_rows_total=10,
            state_rows_updated=8,
            state_rows_removed=0,
            state_memory_bytes=3968,
            extra={"numShufflePartitions": 2, "sink": "ForeachBatchSink", "numOutputRows": -1},
        ),
        # Idle batch b12 of the real run: watermark 2099-01-01T00:10Z (the future-timestamp jump); zeros
        # everywhere must come back as 0 / 0.0, not None; no eventTime min/max in the document -> None.
        Sample(
            job=IDLE_JOB,
            observed_at=datetime(2026, 11, 29, 11, 36, 10, tzinfo=UTC),
            kind=SampleKind.PROGRESS,
            collector="spark-listener",
            scope=Scope(source="FileStreamSource[file:/data/spark-demo/metrics_default/input]"),
            batch_id=12,
            watermark=datetime(2099, 1, 1, 0, 10, tzinfo=UTC),
            num_input_rows=0,
            input_rows_per_second=0.0,
            processed_rows_per_second=0.0,
            batch_duration_ms=8,
            dropped_by_watermark=0,
            state_rows_total=1,
            state_rows_updated=0,
            state_rows_removed=0,
            state_memory_bytes=1424,
        ),
        # Same job, an idle event repeating batch 12 (a distinct observation: other time and kind); every
        # measure unknown.
        Sample(
            job=IDLE_JOB,
            observed_at=datetime(2026, 11, 29, 11, 36, 24, 999999, tzinfo=UTC),
            kind=SampleKind.IDLE,
            collector="spark-listener",
            batch_id=12,
        ),
        # Given at +05:30: 2026-11-29 17:10 +05:30 is 11:40 UTC. Flink subtask/partition 0 (not None),
        # empty-string source (not None), Flink's Long.MIN_VALUE watermark already mapped to None.
        Sample(
            job=FLINK_JOB,
            observed_at=datetime(2026, 11, 29, 17, 10, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
            kind=SampleKind.GAUGE,
            collector="flink-rest",
            scope=Scope(source="", partition=0, subtask=0, operator="cbc357ccb763df2852fee8c4fc7d55f2"),
            watermark=None,
            idle_ms=0,
            backpressure_ratio=0.0,
            restart_count=0,
            extra={"nested": {"list": [1, 2.5, None, "x"], "flag": True}},
        ),
        # Kafka: no run id; 64-bit values; a float that is not a short decimal (0.1 + 0.2).
        Sample(
            job=KAFKA_JOB,
            observed_at=datetime(2099, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            kind=SampleKind.GAUGE,
            collector="kafka-lag",
            scope=Scope(source="clicks", partition=3),
            lag_offsets=2**62 + 1,
            committed_offset=2**62,
            log_end_offset=2**63 - 1,
            lag_seconds=0.1 + 0.2,
            state_memory_bytes=2**40,
        ),
    ]


def assert_samples_equal(loaded: list[Sample], expected: list[Sample]) -> None:
    """Equal as records, equal ``extra``, same Python types per field (0 vs 0.0 vs None), aware UTC."""
    assert loaded == expected
    assert [s.extra for s in loaded] == [s.extra for s in expected]
    for got, want in zip(loaded, expected, strict=True):
        for f in fields(Sample):
            assert type(getattr(got, f.name)) is type(getattr(want, f.name)), f.name
            value = getattr(got, f.name)
            if isinstance(value, datetime):
                assert value.tzinfo is UTC, f.name


def table_names(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def check_migration_cycle(url: str) -> None:
    """upgrade head -> downgrade base -> upgrade head, checking tables and revision at each step."""
    if url.startswith("sqlite:///"):  # no file yet: only upgrade creates one
        with pytest.raises(StoreError, match=r"no database at .*: run `tidegauge db upgrade --db sqlite:///"):
            current(url)
    else:
        assert current(url) is None
    assert upgrade(url) == (None, head())
    assert table_names(url) >= OUR_TABLES
    assert current(url) == head()

    before, after = downgrade(url, "base")
    assert (before, after) == (head(), None)
    assert table_names(url) & OUR_TABLES == set()
    assert current(url) is None

    assert upgrade(url, "0001_initial") == (None, "0001_initial")
    assert table_names(url) >= OUR_TABLES
    assert upgrade(url)[1] == head()


def check_models_match_migrations(url: str) -> None:
    """After upgrading, Alembic autogenerate finds no difference between the tables of 0001 and the ORM."""
    upgrade(url)
    ours = {cls.__tablename__ for cls in _OUR_ROW_CLASSES}
    assert ours == OUR_TABLES

    def include_name(name: str | None, type_: str, _parent: Any) -> bool:
        return type_ != "table" or name in ours

    def include_object(obj: Any, name: str | None, type_: str, _reflected: bool, _compare_to: Any) -> bool:
        # Other modules' tables on Base.metadata (e.g. alert_tables, migration 0002) are compared by
        # their own tests; without this filter they would show up here as tables to add.
        return type_ != "table" or name in ours

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={"include_name": include_name, "include_object": include_object, "compare_type": True},
            )
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def real_raw_documents(spark_fixtures: Path) -> list[tuple[JobRef, datetime, str, dict[str, Any]]]:
    """The two recorded progress documents as PollResult.raw entries (times = their ``timestamp``)."""
    return [
        (GT_JOB, datetime(2026, 11, 29, 11, 32, 2, 145000, tzinfo=UTC), "progress",
         json.loads((spark_fixtures / GT_FILE).read_text())),
        (IDLE_JOB, datetime(2026, 11, 29, 11, 36, 10, tzinfo=UTC), "progress",
         json.loads((spark_fixtures / IDLE_FILE).read_text())),
    ]  # fmt: skip


def count_rows(session: Any, row_class: Any) -> int:
    return int(session.scalar(sa.select(sa.func.count()).select_from(row_class)))


def check_round_trip(url: str, spark_fixtures: Path) -> None:
    """Save samples, raw documents and an error; read them back equal."""
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    expected = round_trip_samples()
    raw = real_raw_documents(spark_fixtures)
    error = CollectorError(
        "spark-listener", "/data/events/app-1", "truncated line 7", datetime(2026, 11, 29, 11, 40, tzinfo=UTC)
    )
    try:
        with sessions.begin() as session:
            # Saved newest first: load order must come from observed_at, not insertion order.
            save_poll(
                session,
                PollResult(tuple(reversed(expected)), (error,), tuple(raw)),
                collector="spark-listener",
            )
        with sessions() as session:
            assert_samples_equal(load_samples(session), expected)
            # [since, until): 11:36:10 is included, 11:40:00.000001 (the Flink sample) is excluded.
            window = load_samples(
                session,
                since=datetime(2026, 11, 29, 11, 36, 10, tzinfo=UTC),
                until=datetime(2026, 11, 29, 11, 40, 0, 1, tzinfo=UTC),
            )
            assert_samples_equal(window, expected[1:3])
            assert_samples_equal(load_samples(session, job_id=GT_JOB.job_id), expected[:1])
            assert_samples_equal(load_samples(session, engine=Engine.KAFKA), expected[4:])

            docs = list(iter_raw_documents(session))
            assert [(d.job, d.observed_at, d.kind, d.collector, d.document) for d in docs] == [
                (job, when, kind, "spark-listener", doc) for job, when, kind, doc in raw
            ]
            assert [d.document["batchId"] for d in iter_raw_documents(session, job_id=IDLE_JOB.job_id)] == [
                12
            ]

            jobs = list_jobs(session)
            assert [(j.engine, j.job_id) for j in jobs] == [
                (Engine.FLINK, FLINK_JOB.job_id),
                (Engine.KAFKA, KAFKA_JOB.job_id),
                (Engine.SPARK, IDLE_JOB.job_id),
                (Engine.SPARK, GT_JOB.job_id),
            ]
            assert all(j.run_id is None for j in jobs)
            stored_error = session.scalars(sa.select(CollectorErrorRow)).one()
            assert (stored_error.target, stored_error.message, stored_error.observed_at) == (
                error.target, error.message, error.observed_at,
            )  # fmt: skip
            # Runs: IDLE_JOB's run spans its two samples 11:36:10 .. 11:36:24.999999; Kafka has no run.
            runs = {r.run_id: (r.first_seen, r.last_seen) for r in session.scalars(sa.select(RunRow))}
            assert runs[IDLE_JOB.run_id] == (  # type: ignore[index]
                datetime(2026, 11, 29, 11, 36, 10, tzinfo=UTC),
                datetime(2026, 11, 29, 11, 36, 24, 999999, tzinfo=UTC),
            )
            assert len(runs) == 3
    finally:
        engine.dispose()


def check_idempotent(url: str, spark_fixtures: Path) -> None:
    """Saving the same poll twice (and duplicates inside one poll) stores every row once."""
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    samples = round_trip_samples()
    error = CollectorError("kafka-lag", "broker:9092", "timeout", datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
    poll = PollResult(tuple(samples + samples[:2]), (error, error), tuple(real_raw_documents(spark_fixtures)))
    try:
        with sessions.begin() as session:
            first = save_poll(session, poll, collector="spark-listener")
        with sessions.begin() as session:
            # A re-read builds new, equal objects: identity is by value.
            again = PollResult(
                tuple(round_trip_samples()), (error,), tuple(real_raw_documents(spark_fixtures))
            )
            second = save_poll(session, again, collector="spark-listener")
        assert (first.samples_inserted, first.raw_inserted, first.errors_inserted) == (5, 2, 1)
        skipped = (second.samples_skipped, second.raw_skipped, second.errors_skipped)
        assert (second.samples_inserted, *skipped) == (0, 5, 2, 1)
        with sessions() as session:
            counts = [
                count_rows(session, c) for c in (SampleRow, RawDocumentRow, CollectorErrorRow, JobRow, RunRow)
            ]
            assert counts == [5, 2, 1, 4, 3]
            assert_samples_equal(load_samples(session), samples)
        # The same batch from another collector is another observation.
        with sessions.begin() as session:
            other = PollResult((Sample(**{**_as_kwargs(samples[0]), "collector": "spark-eventlog"}),))
            assert save_poll(session, other).samples_inserted == 1
    finally:
        engine.dispose()


def _as_kwargs(sample: Sample) -> dict[str, Any]:
    return {f.name: getattr(sample, f.name) for f in fields(Sample)}
