"""1,000 listener posts at 50 concurrent into one SQLite file through ``tidegauge serve``'s sink: none is
lost to SQLite's "database is locked" (the endpoint retries a busy database inside the server).

The SQLite busy timeout is cut to 20 ms for this test so that writers really collide (with the
production 10 s a collision needs a slower disk than CI's to show): a collision is then an
``OperationalError: database is locked`` that only the retry turns into a stored event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from collectors.spark.progress import EVENT_PROGRESS
from monitor.commands.serve import store_sink
from monitor.daemon.ingest import EVENTS_PATH, create_ingest_app
from monitor.store import database as store_engine
from monitor.store import open_store, upgrade
from monitor.store.tables import SampleRow
from tests.servers import serve_in_thread

TOKEN = "test-token-0123456789abcdef"
POSTS, CONCURRENCY = 1000, 50


def _events(spark_fixtures: Path) -> list[dict[str, Any]]:
    """1,000 distinct progress events: the recorded batch 2 with batch ids 0..999 and timestamps a
    second apart (so each is its own sample)."""
    lines = (spark_fixtures / "eventlog_trimmed.jsonl").read_text().splitlines()
    base = next(json.loads(x) for x in lines if EVENT_PROGRESS in x)
    out = []
    for i in range(POSTS):
        event = json.loads(json.dumps(base))
        event["progress"]["batchId"] = i
        event["progress"]["timestamp"] = f"2026-11-29T{10 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z"
        out.append(event)
    return out


async def _post_all(url: str, events: list[dict[str, Any]]) -> list[int]:
    limit = asyncio.Semaphore(CONCURRENCY)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    # Idle connections expire on the client before uvicorn's 5 s keep-alive closes them on the server: on a
    # loaded machine a connection reused just as the server closes it is a ReadError, not a lost post.
    limits = httpx.Limits(max_connections=CONCURRENCY, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as c:

        async def one(event: dict[str, Any]) -> int:
            async with limit:
                response = await c.post(EVENTS_PATH, content=json.dumps(event).encode(), headers=headers)
                return response.status_code

        return list(await asyncio.gather(*(one(e) for e in events)))


def _run(
    tmp_path: Path, spark_fixtures: Path, monkeypatch: pytest.MonkeyPatch, posts: int = POSTS, **app_args: Any
) -> tuple[list[int], int]:
    monkeypatch.setattr(store_engine, "SQLITE_BUSY_TIMEOUT_MS", 20)
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    store = open_store(url)
    try:
        app = create_ingest_app(
            token=TOKEN, sink=store_sink(store), clock=lambda: datetime(2026, 11, 29, 12, tzinfo=UTC), **app_args
        )
        with serve_in_thread(app) as base:
            statuses = asyncio.run(_post_all(base, _events(spark_fixtures)[:posts]))
        with store.sessions() as session:
            stored = session.scalar(
                select(func.count()).select_from(SampleRow).where(SampleRow.scope_source.is_(None))
            )
    finally:
        store.dispose()
    return statuses, int(stored or 0)


@pytest.mark.slow
def test_1000_posts_at_50_concurrent_lose_nothing(
    tmp_path: Path, spark_fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statuses, stored = _run(tmp_path, spark_fixtures, monkeypatch)
    assert {s: statuses.count(s) for s in set(statuses)} == {202: POSTS}
    assert stored == POSTS  # one whole-query sample per event


@pytest.mark.slow
def test_without_the_retry_writers_do_collide(
    tmp_path: Path, spark_fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control: the same load with retrying switched off loses events to "database is locked",
    # so the test above measures the retry, not a lucky run.
    never: Callable[[BaseException], bool] = lambda exc: False  # noqa: E731
    statuses, stored = _run(tmp_path, spark_fixtures, monkeypatch, posts=300, transient=never)
    assert statuses.count(503) > 0
    assert stored == statuses.count(202) < 300
