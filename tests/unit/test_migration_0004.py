"""Migration 0004_flink_sample_fields on SQLite and a real PostgreSQL: it adds the two nullable Flink
sample columns (failed checkpoints, the +infinity watermark flag), drops them again on downgrade without
touching the other columns, and samples with and without those values round-trip."""

from __future__ import annotations

from datetime import UTC, datetime

from monitor.model import Engine, JobRef, PollResult, Sample, SampleKind, Scope
from monitor.store.database import make_engine, make_session_factory
from monitor.store.migrate import current, downgrade, head, upgrade
from monitor.store.repo import load_samples, save_poll
from tests.migration_cases import migration_url, sample_columns  # noqa: F401 (the `url` fixture)

NEW_COLUMNS = {"checkpoints_failed", "watermark_end_of_input"}


def test_upgrade_adds_and_downgrade_drops_the_columns(url: str) -> None:
    upgrade(url, "0003_sample_rule_inputs")
    before = sample_columns(url)
    assert before & NEW_COLUMNS == set()
    assert upgrade(url, "0004_flink_sample_fields") == ("0003_sample_rule_inputs", "0004_flink_sample_fields")
    assert sample_columns(url) == before | NEW_COLUMNS
    assert downgrade(url, "0003_sample_rule_inputs") == (
        "0004_flink_sample_fields",
        "0003_sample_rule_inputs",
    )
    assert sample_columns(url) == before
    upgrade(url)
    assert current(url) == head()


def test_new_fields_round_trip(url: str) -> None:
    upgrade(url)
    at = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    job = JobRef(Engine.FLINK, "tg-idle", run_id="ff68")
    whole = Sample(job, at, SampleKind.GAUGE, "flink-rest", checkpoints_failed=3)
    infinite = Sample(
        job, at, SampleKind.GAUGE, "flink-rest", Scope(subtask=1, operator="v"), watermark_end_of_input=True
    )
    unknown = Sample(job, at, SampleKind.GAUGE, "flink-rest", Scope(subtask=0, operator="v"))
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    try:
        with sessions.begin() as session:
            save_poll(session, PollResult(samples=(whole, infinite, unknown)))
        with sessions() as session:
            loaded = {s.scope.subtask: s for s in load_samples(session)}
    finally:
        engine.dispose()
    assert (loaded[None].checkpoints_failed, loaded[None].watermark_end_of_input) == (3, None)
    assert (loaded[1].watermark_end_of_input, loaded[1].watermark) == (True, None)
    assert (loaded[0].checkpoints_failed, loaded[0].watermark_end_of_input) == (
        None,
        None,
    )  # unknown, not 0/False
