"""The sample id the evaluation reads up to (:func:`monitor.store.max_sample_id`) never passes a row still
being written. Ids are taken at insert, not at commit: with polls storing in parallel (and other instances),
a poll holding a lower id can commit after one holding a higher id; a reader that had moved past the higher
id never loaded the lower one (measured: 228 of 1,000 simulated queries never evaluated in a benchmark run).
On PostgreSQL the read waits for the sample writes in flight."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from monitor.model import Engine, JobRef, PollResult, Sample, SampleKind
from monitor.store import load_samples_after, max_sample_id, save_poll
from tests.alerting import migrated_sessions

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def pg_sessions(postgres_url: str) -> Iterator[sessionmaker[Session]]:
    with migrated_sessions(postgres_url) as factory:
        yield factory


def _sample(job_id: str) -> Sample:
    return Sample(job=JobRef(Engine.SPARK, job_id, run_id="run-1"), observed_at=T0, kind=SampleKind.PROGRESS,
                  collector="spark-eventlog", batch_id=0)  # fmt: skip


@pytest.mark.integration
@pytest.mark.postgres
def test_the_sample_horizon_waits_for_the_writes_in_flight(pg_sessions: sessionmaker[Session]) -> None:
    with pg_sessions.begin() as slow:
        save_poll(slow, PollResult(samples=(_sample("slow"),)))  # the lower id, not committed yet
        with pg_sessions.begin() as fast:
            save_poll(fast, PollResult(samples=(_sample("fast"),)))  # the higher id, committed first
        with pg_sessions.begin() as reader:
            reader.execute(text("SET LOCAL lock_timeout = '1s'"))
            with pytest.raises(OperationalError, match="lock timeout"):
                max_sample_id(reader)  # before: the higher id at once, and the lower one was never read
    with pg_sessions.begin() as reader:
        top = max_sample_id(reader)
        loaded, after = load_samples_after(reader, 0, top)
    assert after == top
    assert sorted(job_id for _engine, job_id in loaded) == ["fast", "slow"]


@pytest.mark.integration
@pytest.mark.postgres
def test_samples_stored_after_the_horizon_are_read_next_time(pg_sessions: sessionmaker[Session]) -> None:
    with pg_sessions.begin() as session:
        save_poll(session, PollResult(samples=(_sample("first"),)))
    with pg_sessions.begin() as reader:
        top = max_sample_id(reader)
    with pg_sessions.begin() as session:
        save_poll(session, PollResult(samples=(_sample("second"),)))
    with pg_sessions.begin() as reader:
        loaded, after = load_samples_after(reader, 0, top)
        assert [job_id for _e, job_id in loaded] == ["first"] and after == top
        loaded, _ = load_samples_after(reader, after, max_sample_id(reader))
    assert [job_id for _e, job_id in loaded] == ["second"]
