"""Shared test fixtures: paths to the recorded real outputs, a fixed clock and a fresh SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.store import Store, open_store, upgrade

# Missing dependencies: a bare `pytest` may skip (saying what to install), `make test` (--require-all) fails.
# The hooks are imported here rather than named in pytest_plugins: the fixture modules import the module first.
from tests.dependencies import (  # noqa: F401
    pytest_addoption,
    pytest_configure,
    pytest_make_collect_report,
    pytest_runtest_makereport,
)
from tests.flink_cluster import FlinkCluster, cluster_fixture, submit_test_jobs

# One real HDFS (Hadoop's MiniDFSCluster) per session, started on first use (see tests/hdfs_cluster.py).
from tests.hdfs_cluster import hdfs_cluster  # noqa: F401

# One real Apache Kafka broker per session (see tests/kafka_broker.py): `kafka_broker`.
from tests.kafka_broker import kafka_broker  # noqa: F401

# Real PostgreSQL server fixtures (see tests/pg.py): `postgres_server` (session), `postgres_url` (fresh DB).
from tests.pg import postgres_server, postgres_url  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[1]
RECORDED_FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCAL_FIXTURES = Path(__file__).resolve().parent / "fixtures"

pytest_plugins = ["pytester"]  # tests/unit/test_dependencies.py runs small suites of its own


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A store on a fresh SQLite database in ``tmp_path``, migrated to head; disposed after the test."""
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    opened = open_store(url)
    yield opened
    opened.dispose()


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


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlinkCluster]:
    """One real Flink 2.3.0 standalone cluster for the whole test session (tests/flink_cluster.py), started
    on first use (~20 s) and stopped at the end. Skipped when Flink/JDK are missing, failed under CI."""
    yield from cluster_fixture(tmp_path_factory.mktemp("flink"))


@pytest.fixture(scope="session")
def flink_test_jobs(flink_cluster: FlinkCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The test job's modes running on :func:`flink_cluster` (``mode -> job id``; names ``tg-<mode>``)."""
    return submit_test_jobs(flink_cluster, tmp_path_factory.mktemp("flink-job"))


@pytest.fixture(scope="session")
def s3_server_session() -> Iterator[Any]:
    """One moto S3 server process on loopback per session (tests/s3_server.py)."""
    from tests.dependencies import missing

    try:
        import moto  # noqa: F401
        import s3fs  # noqa: F401

        from tests.s3_server import s3_server
    except ImportError:
        missing("moto[server] and s3fs", "pip install -e '.[dev]' (make test installs them)")
    with s3_server() as server:
        yield server


@pytest.fixture
def s3(s3_server_session: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    """The session's S3 server with a fresh bucket (``s3.bucket``) and its credentials and
    ``AWS_ENDPOINT_URL`` in the environment; request counts and faults reset."""
    import hashlib
    import re

    server = s3_server_session
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]
    bucket = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-") + "-" + digest
    server.client().create_bucket(Bucket=bucket)
    server.faults([])
    server.reset_counts()
    server.bucket = bucket
    return server
