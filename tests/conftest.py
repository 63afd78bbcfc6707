"""Shared test fixtures: paths to the recorded real outputs and a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

# One real Apache Kafka broker per session (see tests/kafka_broker.py): `kafka_broker`.
from tests.kafka_broker import kafka_broker  # noqa: F401

# Real PostgreSQL server fixtures (see tests/pg.py): `postgres_server` (session), `postgres_url` (fresh DB).
from tests.pg import postgres_server, postgres_url  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[1]
RECORDED_FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCAL_FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def recorded_fixtures() -> Path:
    """``tests/fixtures`` (recorded real Spark/Flink/Kafka outputs, provenance in ``RECORDED.md``)."""
    return RECORDED_FIXTURES


@pytest.fixture(scope="session")
def spark_fixtures(recorded_fixtures: Path) -> Path:
    """``tests/fixtures/spark/real-4.3.0``."""
    return recorded_fixtures / "spark" / "real-4.3.0"


@pytest.fixture
def fixed_now() -> datetime:
    """A fixed, timezone-aware 'now' for pure functions (tests step clocks, never sleep)."""
    return datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
