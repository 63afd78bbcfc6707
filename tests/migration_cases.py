"""Pieces shared by the per-migration tests (tests/unit/test_migration_000N.py): the database URL fixture,
once on SQLite and once on a real PostgreSQL, and the sample table's column names."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from monitor.store.database import make_engine
from tests.alerting import sqlite_url


@pytest.fixture(
    name="url",
    params=["sqlite", pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres])],
)
def migration_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The ``url`` fixture, an empty database: a SQLite file, or a fresh database on the session's PostgreSQL server."""
    return sqlite_url(tmp_path) if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


def sample_columns(url: str) -> set[str]:
    """The column names of the ``samples`` table at ``url``."""
    engine = make_engine(url)
    try:
        return {c["name"] for c in sa.inspect(engine).get_columns("samples")}
    finally:
        engine.dispose()
