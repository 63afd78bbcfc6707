"""The daemon's histories share the equal parts of a job's samples across ticks (issue 16: memory).

The store loader shares a job's ref, scopes, collector name and times only within one load (one tick);
:class:`monitor.daemon.histories.JobHistories` makes each loaded sample share them, and its ``extra`` dict,
with the previous sample of its scope, so an hour of ticks keeps one copy of what did not change. The
values the rules read are unchanged.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.daemon.histories import JobHistories
from monitor.model import Engine, JobRef, PollResult, Sample, SampleKind, Scope
from monitor.store import open_store, save_poll, upgrade

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB = JobRef(Engine.SPARK, "q-clicks", run_id="r1", name="clicks", app_id="app-1")
SOURCE = Scope(source="KafkaV2[Subscribe[clicks]]")


def _batch(batch: int, watermark: datetime, extra: dict[str, object]) -> tuple[Sample, Sample]:
    at = T0 + timedelta(seconds=10 * batch)
    return (
        Sample(JOB, at, SampleKind.PROGRESS, "spark-eventlog", batch_id=batch, watermark=watermark,
               event_time_max=at, extra=extra),
        Sample(JOB, at, SampleKind.PROGRESS, "spark-eventlog", SOURCE, batch_id=batch, num_input_rows=batch),
    )  # fmt: skip


def test_each_tick_shares_what_did_not_change_with_the_earlier_samples(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    store = open_store(url)
    extra = {"sink": "ForeachBatchSink", "num_sources": 1, "num_state_operators": 1}
    try:
        histories = JobHistories(store.sessions, timedelta(hours=1), timedelta(hours=1))
        with store.sessions.begin() as session:
            save_poll(session, PollResult(_batch(0, T0, extra) + _batch(1, T0, extra)))
        with store.sessions() as session:
            histories.catch_up(session, T0 + timedelta(seconds=15))  # the first load
        for batch, watermark in ((2, T0), (3, T0 + timedelta(seconds=30))):  # one tick each
            with store.sessions.begin() as session:
                save_poll(session, PollResult(_batch(batch, watermark, extra)))
            with store.sessions() as session:
                histories.catch_up(session, T0 + timedelta(seconds=10 * batch + 5))
        samples = histories.all()[(Engine.SPARK, "q-clicks")]
    finally:
        store.dispose()
    assert [(s.batch_id, s.scope) for s in samples] == [(b, scope) for b in range(4) for scope in (Scope(), SOURCE)]
    jobs, sources = samples[0::2], samples[1::2]
    first = jobs[0]
    for sample in samples:
        assert sample.job is first.job and sample.collector is first.collector
        assert sample.job == JOB and sample.collector == "spark-eventlog"
    assert all(s.extra is first.extra for s in jobs) and first.extra == extra
    assert all(s.scope is sources[0].scope for s in sources) and sources[0].scope == SOURCE
    assert all(s.extra is sources[0].extra for s in sources) and sources[0].extra == {}
    # the watermark stalled for batches 0-2 (one object), then moved (its own, with its value)
    assert jobs[1].watermark is first.watermark and jobs[2].watermark is first.watermark
    assert jobs[3].watermark is not first.watermark and jobs[3].watermark == T0 + timedelta(seconds=30)
    assert [s.event_time_max for s in jobs] == [T0 + timedelta(seconds=10 * b) for b in range(4)]
