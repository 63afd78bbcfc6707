"""Migration 0003_sample_rule_inputs on SQLite and a real PostgreSQL: it adds the four nullable sample
columns the rules read (committed/log-end offsets, back-pressure ratio, restart count), drops them again on
downgrade without touching the other sample columns, and a sample with those values round-trips."""

from __future__ import annotations

from datetime import UTC, datetime

from monitor.model import Engine, JobRef, PollResult, Sample, SampleKind, Scope
from monitor.store.database import make_engine, make_session_factory
from monitor.store.migrate import current, downgrade, upgrade
from monitor.store.repo import load_samples, save_poll
from tests.migration_cases import migration_url, sample_columns  # noqa: F401 (the `url` fixture)

NEW_COLUMNS = {"committed_offset", "log_end_offset", "backpressure_ratio", "restart_count"}


def test_upgrade_adds_and_downgrade_drops_the_columns(url: str) -> None:
    upgrade(url, "0002_alerts")
    before = sample_columns(url)
    assert before & NEW_COLUMNS == set()
    assert upgrade(url, "0003_sample_rule_inputs") == ("0002_alerts", "0003_sample_rule_inputs")
    assert sample_columns(url) == before | NEW_COLUMNS
    assert downgrade(url, "0002_alerts") == ("0003_sample_rule_inputs", "0002_alerts")
    assert sample_columns(url) == before  # the other sample columns are untouched
    upgrade(url, "0003_sample_rule_inputs")
    assert current(url) == "0003_sample_rule_inputs"


def test_new_fields_round_trip(url: str) -> None:
    upgrade(url)
    job = JobRef(Engine.KAFKA, "cluster/group")
    at = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    kafka = Sample(
        job,
        at,
        SampleKind.GAUGE,
        "kafka-lag",
        Scope(source="clicks", partition=3),
        committed_offset=1_000,
        log_end_offset=1_250,
        lag_offsets=250,
    )
    flink = Sample(
        JobRef(Engine.FLINK, "f1"),
        at,
        SampleKind.GAUGE,
        "flink-rest",
        Scope(subtask=1),
        backpressure_ratio=0.75,
        restart_count=4,
    )
    unknown = Sample(job, at, SampleKind.GAUGE, "kafka-lag", Scope(source="clicks", partition=4))
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    try:
        with sessions.begin() as session:
            save_poll(session, PollResult(samples=(kafka, flink, unknown)))
        with sessions() as session:
            loaded = load_samples(session)
    finally:
        engine.dispose()
    by_scope = {(s.job.engine, s.scope.partition, s.scope.subtask): s for s in loaded}
    got_kafka = by_scope[(Engine.KAFKA, 3, None)]
    assert (got_kafka.committed_offset, got_kafka.log_end_offset) == (1_000, 1_250)
    got_flink = by_scope[(Engine.FLINK, None, 1)]
    assert (got_flink.backpressure_ratio, got_flink.restart_count) == (0.75, 4)
    got_unknown = by_scope[(Engine.KAFKA, 4, None)]
    # unknown stays None, never 0
    assert (got_unknown.committed_offset, got_unknown.log_end_offset, got_unknown.restart_count) == (
        None,
    ) * 3
