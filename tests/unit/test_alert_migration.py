"""Migration 0002_alerts on SQLite and on a real PostgreSQL: upgrade/downgrade cycle, the ORM tables
match what the migration creates, and the outbox's unique (receiver, idempotency_key) holds."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from monitor.store.alert_tables import AlertRow, NotificationLogRow, OutboxRow, SilenceRow
from monitor.store.base import Base
from monitor.store.database import make_engine, make_session_factory
from monitor.store.migrate import current, downgrade, head, upgrade
from tests.alerting import sqlite_url

ALERT_TABLES = {"alerts", "outbox", "silences", "notification_log"}
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres])]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return sqlite_url(tmp_path) if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_revision_chain() -> None:
    # 0002 follows 0001; later revisions (0003_sample_rule_inputs...) build on it, so only the chain is fixed.
    assert head() >= "0002_alerts"
    assert {c.__tablename__ for c in (AlertRow, OutboxRow, SilenceRow, NotificationLogRow)} == ALERT_TABLES


def test_upgrade_downgrade_cycle(url: str) -> None:
    assert upgrade(url, "0001_initial") == (None, "0001_initial")
    assert tables(url) & ALERT_TABLES == set()
    assert upgrade(url, "0002_alerts") == ("0001_initial", "0002_alerts")
    assert tables(url) >= ALERT_TABLES
    assert downgrade(url, "0001_initial") == ("0002_alerts", "0001_initial")
    assert tables(url) & ALERT_TABLES == set()
    assert "samples" in tables(url)  # 0001's tables are untouched
    assert upgrade(url)[1] == head()
    assert current(url) == head()


def test_models_match_migration(url: str) -> None:
    upgrade(url)

    def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = obj if type_ == "table" else getattr(obj, "table", None)
        return table is None or table.name in ALERT_TABLES

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"include_object": include_object, "compare_type": True}
            )
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_idempotency_key_is_unique_per_receiver(url: str) -> None:
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)

    def row(receiver: str) -> OutboxRow:
        return OutboxRow(
            receiver=receiver, fingerprint="0" * 16, group_key="spark/q", status="firing", idempotency_key="k" * 32,
            payload={}, created_at=T0, state="pending", attempts=0, next_attempt_at=T0,
        )  # fmt: skip

    try:
        with sessions.begin() as session:
            session.add_all([row("hook"), row("slack")])  # same key, different receivers: fine
        with pytest.raises(sa.exc.IntegrityError), sessions.begin() as session:
            session.add(row("hook"))
    finally:
        engine.dispose()
