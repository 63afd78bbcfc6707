"""Store functions the daemon needs: retention clean-up (purge_before), per-job recent history
(load_recent_samples, load_samples_after) and a poll's batched writes (one save of many jobs, every cursor in
one upsert: set_cursors / get_cursors), on a migrated SQLite database and a real PostgreSQL one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.model import CollectorError, Engine, JobRef, PollResult, Sample
from monitor.store import (
    get_cursor,
    get_cursors,
    load_recent_samples,
    load_samples,
    load_samples_after,
    max_sample_id,
    purge_before,
    save_poll,
    set_cursor,
    set_cursors,
)
from tests.alerting import sessions_on_both_databases  # noqa: F401 (the `sessions` fixture)

T0 = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
A = JobRef(Engine.SPARK, "job-a", "run-1", "a")
B = JobRef(Engine.SPARK, "job-b", "run-1", "b")
F = JobRef(Engine.FLINK, "job-f", None, "f")


def _sample(job: JobRef, minutes: int, batch: int) -> Sample:
    return Sample(job=job, observed_at=T0 + timedelta(minutes=minutes), collector="test", batch_id=batch)


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


def test_cursors_of_a_poll_are_written_and_read_in_one_batch(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions.begin() as s:
        set_cursor(s, "spark-eventlog", "/logs/a", {"offset": 10}, T0)
    later = T0 + timedelta(seconds=10)
    with sessions.begin() as s:  # one existing target updated, two new ones, one of another collector
        set_cursors(s, "spark-eventlog", {"/logs/a": {"offset": 20}, "/logs/b": {"offset": 5}, "/logs/c": {}}, later)
        set_cursors(s, "flink-rest", {"/logs/a": {"offset": 99}}, later)
        set_cursors(s, "spark-eventlog", {}, later)  # nothing to write
    with sessions() as s:
        assert get_cursors(s, "spark-eventlog") == {"/logs/a": {"offset": 20}, "/logs/b": {"offset": 5}, "/logs/c": {}}
        assert get_cursors(s, "flink-rest") == {"/logs/a": {"offset": 99}}
        assert get_cursors(s, "kafka") == {}
        assert get_cursor(s, "spark-eventlog", "/logs/a") == {"offset": 20}


def test_a_cursor_state_not_storable_as_json_writes_none_of_the_batch(sessions) -> None:  # type: ignore[no-untyped-def]
    with sessions.begin() as s, pytest.raises(ValueError, match="/logs/bad"):
        set_cursors(s, "spark-eventlog", {"/logs/good": {"offset": 1}, "/logs/bad": {"offset": object()}}, T0)
    with sessions.begin() as s, pytest.raises(ValueError, match="now"):
        set_cursors(s, "spark-eventlog", {"/logs/good": {"offset": 1}}, datetime(2026, 1, 1))
    with sessions() as s:
        assert get_cursors(s, "spark-eventlog") == {}


def test_one_save_of_many_jobs_stores_each_jobs_samples_and_runs(sessions) -> None:  # type: ignore[no-untyped-def]
    # a poll of many files is stored by one save_poll: jobs and runs looked up together, some new, some not
    with sessions.begin() as s:
        save_poll(s, PollResult(samples=(_sample(A, 0, 0),)))
    jobs = [JobRef(Engine.SPARK, f"job-{i:03d}", "run-1", f"q{i}") for i in range(700)]  # more than one IN chunk
    poll = PollResult(samples=(_sample(A, 10, 1), *(_sample(job, 10, 0) for job in jobs), _sample(F, 10, 0)))
    with sessions.begin() as s:
        counts = save_poll(s, poll)
    assert (counts.samples_inserted, counts.samples_skipped) == (702, 0)
    with sessions.begin() as s:  # the same poll again: every sample is already stored
        counts = save_poll(s, poll)
    assert (counts.samples_inserted, counts.samples_skipped) == (0, 702)
    with sessions() as s:
        loaded = load_samples(s)
    assert len(loaded) == 703
    assert [x.batch_id for x in loaded if x.job.job_id == "job-a"] == [0, 1]
    assert {x.job.job_id: x.job.run_id for x in loaded}["job-f"] is None
    assert sorted(str(x.job.name) for x in loaded if x.job.job_id.startswith("job-0"))[:2] == ["q0", "q1"]
    assert {x.job.run_id for x in loaded if x.job.job_id.startswith("job-0")} == {"run-1"}
