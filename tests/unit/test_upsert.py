"""The store's insert-if-new (:func:`monitor.store.upsert.insert_new`) on SQLite and PostgreSQL: rows whose
key is stored already are skipped and named (``ON CONFLICT DO NOTHING RETURNING``: no read of the keys first)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from monitor.store.tables import CollectorErrorRow
from monitor.store.upsert import CHUNK, insert_new
from tests.alerting import (
    sessions_on_both_databases,  # noqa: F401 (the `sessions` fixture)
    )

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


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
