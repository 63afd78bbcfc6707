"""The Job page reads its header row, facts, findings and alerts at one moment: a Kafka group's page showed
the findings of the newest poll ("partition 1: lag 1738") above a header and lag table from an earlier poll,
because its header row and window end came from the Fleet data cached before that poll."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import streamlit as st

from dashboard import data
from monitor.model import Engine, JobRef, PollResult, Sample, SampleKind, Scope
from monitor.store import open_store, save_poll, upgrade

GROUP = JobRef(Engine.KAFKA, "prod/ledger-writer", "ledger-writer")
T0 = datetime(2026, 3, 1, 1, 22, 0, tzinfo=UTC)


def _poll(at: datetime, lags: dict[int, int]) -> PollResult:
    parts = [
        Sample(GROUP, at, SampleKind.GAUGE, "kafka", scope=Scope(source="settlements", partition=p), lag_offsets=lag)
        for p, lag in lags.items()
    ]
    whole = Sample(GROUP, at, SampleKind.GAUGE, "kafka", lag_offsets=sum(lags.values()), extra={"members": 2})
    return PollResult(samples=(*parts, whole))


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    monkeypatch.setenv(data.DB_ENV, url)
    monkeypatch.setattr(data, "now", lambda: T0 + timedelta(minutes=5))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()
    st.cache_data.clear()


def _write(url: str, poll: PollResult) -> None:
    store = open_store(url)
    try:
        with store.sessions.begin() as session:
            save_poll(session, poll)
    finally:
        store.dispose()


def test_job_page_header_and_lag_table_are_the_newest_poll_even_after_a_cached_fleet_read(db: str) -> None:
    _write(db, _poll(T0, {0: 1560, 1: 1567, 2: 1644}))
    before = data.fleet()  # cached for a few seconds, as the Fleet page leaves it
    assert list(before["lag"]) == ["4,771 offsets"]
    _write(db, _poll(T0 + timedelta(seconds=51), {0: 1600, 1: 1738, 2: 1650}))  # the next poll
    detail = data.job_detail("kafka", GROUP.job_id)
    assert detail is not None
    assert detail.summary["lag"] == "4,988 offsets"  # 1600 + 1738 + 1650: the newest poll, not the cached 4,771
    assert dict(zip(detail.lag["partition"], detail.lag["lag_offsets"], strict=True)) == {0: 1600, 1: 1738, 2: 1650}
