"""Migrations and the store on a real PostgreSQL server (started by the ``postgres_server`` fixture,
tests/pg.py): the same checks as on SQLite (tests/store_cases.py), plus PostgreSQL's own column types."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from monitor.errors import SchemaOutdatedError
from monitor.model import Engine, JobRef, PollResult, Sample
from monitor.store import open_store, save_poll, upgrade
from tests import store_cases

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_upgrade_downgrade_upgrade(postgres_url: str) -> None:
    store_cases.check_migration_cycle(postgres_url)


def test_models_match_migrations(postgres_url: str) -> None:
    store_cases.check_models_match_migrations(postgres_url)


def test_sample_round_trip(postgres_url: str, spark_fixtures: Path) -> None:
    store_cases.check_round_trip(postgres_url, spark_fixtures)


def test_duplicate_save_is_idempotent(postgres_url: str, spark_fixtures: Path) -> None:
    store_cases.check_idempotent(postgres_url, spark_fixtures)


def test_times_are_timestamptz_in_utc(postgres_url: str) -> None:
    upgrade(postgres_url)
    store = open_store(postgres_url)
    job = JobRef(Engine.SPARK, "q")
    try:
        with store.sessions.begin() as session:
            save_poll(session, PollResult((Sample(job, datetime(2099, 1, 1, 0, 10, tzinfo=UTC)),)))
        with store.engine.connect() as conn:
            conn.exec_driver_sql("SET TIME ZONE 'Asia/Kolkata'")  # +05:30: the stored instant must not move
            column_type = conn.scalar(
                sa.text(
                    "SELECT data_type FROM information_schema.columns "
                    "WHERE table_name = 'samples' AND column_name = 'observed_at'"
                )
            )
            text = conn.scalar(
                sa.text("SELECT to_char(observed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') FROM samples")
            )
        assert column_type == "timestamp with time zone"
        assert text == "2099-01-01 00:10"
    finally:
        store.dispose()


def test_empty_database_is_refused(postgres_url: str) -> None:
    with pytest.raises(
        SchemaOutdatedError, match=r"empty database.*tidegauge db upgrade --db postgresql\+psycopg://"
    ):
        open_store(postgres_url)
