"""Shared test fixtures: paths to the recorded real outputs and a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

# Real PostgreSQL server fixtures (see tests/pg.py): `postgres_server` (session), `postgres_url` (fresh DB).
from tests.pg import postgres_server, postgres_url  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO_ROOT.parent / "shared" / "fixtures"
LOCAL_FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """``../shared/fixtures`` (recorded real Spark/Flink/Kafka outputs; read-only)."""
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(f"recorded fixtures not found at {SHARED_FIXTURES}: the repo must sit beside shared/")
    return SHARED_FIXTURES


@pytest.fixture(scope="session")
def spark_fixtures(shared_fixtures: Path) -> Path:
    """``../shared/fixtures/spark/real-4.3.0``."""
    return shared_fixtures / "spark" / "real-4.3.0"


@pytest.fixture
def fixed_now() -> datetime:
    """A fixed, timezone-aware 'now' for pure functions (tests step clocks, never sleep)."""
    return datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
