"""The store's insert-if-new (:func:`monitor.store.upsert.insert_new`) on SQLite and PostgreSQL: rows whose
key is stored already are skipped and named (``ON CONFLICT DO NOTHING RETURNING``: no read of the keys first)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from monitor.store.tables import CollectorErrorRow
from monitor.store.upsert import CHUNK, insert_new
from tests.alerting import migrated_sessions, sqlite_url

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres])]
)
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    url = sqlite_url(tmp_path) if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    with migrated_sessions(url) as factory:
        yield factory


def _rows(names: list[str]) -> dict[str, dict[str, Any]]:
    return {
        f"key-{n}": {"dedup_key": f"key-{n}", "collector": "c", "target": "t", "message": f"m {n}", "observed_at": T0,
                     "retryable": False}
        for n in names
    }  # fmt: skip


def test_insert_new_skips_and_counts_the_stored_keys(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        assert insert_new(session, CollectorErrorRow, _rows(["a", "b", "c"]), "dedup_key") == set()
    statements: list[str] = []
    first = [str(i) for i in range(CHUNK + 5)]  # two chunks
    with sessions.begin() as session:
        bind = session.get_bind()
        event.listen(bind, "before_cursor_execute", lambda *a: statements.append(a[2]))
        skipped = insert_new(session, CollectorErrorRow, _rows(["b", "c", "d", *first]), "dedup_key")
    assert skipped == {"key-b", "key-c"}
    assert not any(s.lstrip().upper().startswith("SELECT") for s in statements)  # no read of the keys first
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    assert len(inserts) == 2  # one multi-row statement per chunk
    with sessions() as session:
        keys = set(session.scalars(select(CollectorErrorRow.dedup_key)))
        messages = {k: m for k, m in session.execute(select(CollectorErrorRow.dedup_key, CollectorErrorRow.message))}
    assert keys == {f"key-{n}" for n in ["a", "b", "c", "d", *first]}
    assert messages["key-b"] == "m b"
