"""Store functions the daemon needs: retention clean-up (purge_before) and per-job recent history
(load_recent_samples, load_samples_after), on a migrated SQLite database and a real PostgreSQL one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.model import CollectorError, Engine, JobRef, PollResult, Sample
from monitor.store import (
    get_cursor,
    load_recent_samples,
    load_samples,
    load_samples_after,
    make_engine,
    make_session_factory,
    max_sample_id,
    purge_before,
    save_poll,
    set_cursor,
    upgrade,
)

T0 = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
A = JobRef(Engine.SPARK, "job-a", "run-1", "a")
B = JobRef(Engine.SPARK, "job-b", "run-1", "b")
F = JobRef(Engine.FLINK, "job-f", None, "f")


def _sample(job: JobRef, minutes: int, batch: int) -> Sample:
    return Sample(job=job, observed_at=T0 + timedelta(minutes=minutes), collector="test", batch_id=batch)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres]),
    ]
)
def sessions(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'tg.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    upgrade(url)
    engine = make_engine(url)
    yield make_session_factory(engine)
    engine.dispose()


def test_purge_deletes_only_rows_older_than_the_cutoff(sessions) -> None:  # type: ignore[no-untyped-def]
    error_old = CollectorError("test", "/logs/x", "gone", T0)
    error_new = CollectorError("test", "/logs/x", "gone", T0 + timedelta(minutes=30))
    raw_old = (A, T0, "progress", {"batchId": 0})
    raw_new = (A, T0 + timedelta(minutes=30), "progress", {"batchId": 3})
    poll = PollResult(
        samples=tuple(_sample(A, m, i) for i, m in enumerate((0, 10, 20, 30))),
        errors=(error_old, error_new),
        raw=(raw_old, raw_new),
    )
    with sessions.begin() as s:
        save_poll(s, poll, collector="test")
        set_cursor(s, "test", "/logs/x", {"offset": 10}, T0)
    # cutoff T0+20min: samples at 0 and 10 min go (strictly older), 20 and 30 stay; one raw doc and one
    # error (both at T0) go.
    with sessions.begin() as s:
        counts = purge_before(s, T0 + timedelta(minutes=20))
    assert (counts.samples, counts.raw_documents, counts.collector_errors) == (2, 1, 1)
    with sessions() as s:
        left = load_samples(s)
        assert [x.batch_id for x in left] == [2, 3]
        # the cursor is kept: dropping it would make the collector read the file again
        assert get_cursor(s, "test", "/logs/x") == {"offset": 10}
    with sessions.begin() as s:
        again = purge_before(s, T0 + timedelta(minutes=20))
    assert again.samples == again.raw_documents == again.collector_errors == 0


def test_purge_refuses_naive_cutoff(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions.begin() as s, pytest.raises(ValueError, match="cutoff"):
        purge_before(s, datetime(2026, 1, 1))


def test_recent_samples_are_anchored_at_each_jobs_newest_sample(sessions) -> None:  # type: ignore[no-untyped-def]
    # job a: samples at 0, 10, 20, 30 min -> newest 30, lookback 15 min keeps 20 and 30 (and 15 would be
    # kept: the bound is inclusive). job b: samples at 100, 101 -> both kept. job f (Flink): one sample.
    samples = [_sample(A, m, i) for i, m in enumerate((0, 10, 20, 30))]
    samples += [_sample(B, 100, 0), _sample(B, 101, 1), _sample(F, 5, 0)]
    with sessions.begin() as s:
        save_poll(s, PollResult(samples=tuple(samples)))
    with sessions() as s:
        recent = load_recent_samples(s, timedelta(minutes=15))
        spark_only = load_recent_samples(s, timedelta(minutes=15), engine=Engine.SPARK)
        exact = load_recent_samples(s, timedelta(minutes=10))
    assert sorted(recent) == [(Engine.FLINK, "job-f"), (Engine.SPARK, "job-a"), (Engine.SPARK, "job-b")]
    assert [x.batch_id for x in recent[(Engine.SPARK, "job-a")]] == [2, 3]
    assert [x.batch_id for x in recent[(Engine.SPARK, "job-b")]] == [0, 1]
    assert recent[(Engine.SPARK, "job-a")][0] == samples[2]
    assert sorted(spark_only) == [(Engine.SPARK, "job-a"), (Engine.SPARK, "job-b")]
    # lookback 10 min: 30 - 20 = 10 is not more than the lookback, so batch 2 is still in
    assert [x.batch_id for x in exact[(Engine.SPARK, "job-a")]] == [2, 3]
    with sessions() as s, pytest.raises(ValueError, match="lookback"):
        load_recent_samples(s, timedelta(minutes=-1))


def test_samples_after_an_id_continue_a_recent_window(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        save_poll(s, PollResult(samples=(_sample(A, 0, 0), _sample(A, 10, 1))))
    with sessions() as s:
        top = max_sample_id(s)
        window = load_recent_samples(s, timedelta(hours=1), upto_id=top)
    assert [x.batch_id for x in window[(Engine.SPARK, "job-a")]] == [0, 1]
    # stored later: a new batch, and a late sample observed before the others (a slow collector)
    with sessions.begin() as s:
        save_poll(s, PollResult(samples=(_sample(A, 20, 2), _sample(B, -5, 0))))
    with sessions() as s:
        new, newer_top = load_samples_after(s, top)
        nothing, same_top = load_samples_after(s, newer_top)
    assert {k: [x.batch_id for x in v] for k, v in new.items()} == {
        (Engine.SPARK, "job-a"): [2],
        (Engine.SPARK, "job-b"): [0],
    }
    assert newer_top == top + 2
    assert (nothing, same_top) == ({}, newer_top)
    with sessions() as s:
        assert max_sample_id(s) == newer_top
        # a window read up to the old id does not include what was stored after it
        assert sorted(load_recent_samples(s, timedelta(hours=1), upto_id=top)) == [(Engine.SPARK, "job-a")]
