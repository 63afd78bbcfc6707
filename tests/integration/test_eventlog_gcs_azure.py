"""Spark event logs in GCS and Azure Blob Storage, read from their emulators on loopback
(tests/object_stores.py: gcp-storage-emulator from PyPI, Azurite from npm): ``scan gs://`` and
``scan abfs://`` agree with ``scan`` of the same files on disk, and a rolling log is read file by file as
its files appear, through the same code as S3 (tests/integration/test_eventlog_s3.py has the failure cases).

The logs are the recorded real Spark 4.3.0 runs of tests/fixtures/spark/real-4.3.0; cut into rolled files of
lines 1-12, 13-24 and 25-34, ``eventlog_trimmed.jsonl`` holds batches [0, 1], [2..7] and [8..11].
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from collectors.spark.eventlog import EventLogCollector
from monitor.model import SampleKind
from tests.cli import run_cli
from tests.dependencies import missing

pytestmark = [pytest.mark.integration, pytest.mark.s3]

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
APP = "local-1795951957158"
ROLL_DIR = f"eventlog_v2_{APP}"


class Store:
    """One emulated store: ``url(key)`` names an object, ``put(key, body)`` writes one."""

    def __init__(self, scheme: str, container: str, put: Callable[[str, bytes], None]) -> None:
        self.scheme, self.container, self.put = scheme, container, put

    def url(self, key: str) -> str:
        return f"{self.scheme}://{self.container}/{key}"


@pytest.fixture(scope="module", params=["gcs", "azure"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    mp = pytest.MonkeyPatch()
    try:
        if request.param == "gcs":
            # gcsfs reads this when imported: its gRPC-only features off (the emulator speaks JSON)
            mp.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            try:
                import gcsfs  # noqa: F401

                from tests.object_stores import gcs_emulator
            except ImportError:
                missing("gcsfs and gcp-storage-emulator", "pip install -e '.[dev]' (make test installs them)")
            with gcs_emulator() as env:
                for k, v in env.items():
                    mp.setenv(k, v)
                import fsspec

                fs = fsspec.filesystem("gcs", token="anon", project="tidegauge-test", skip_instance_cache=True)
                fs.mkdir("tg-logs")
                yield Store("gs", "tg-logs", lambda key, body: fs.pipe(f"tg-logs/{key}", body))
        else:
            try:
                import adlfs  # noqa: F401

                from tests.object_stores import azurite
            except ImportError:
                missing("adlfs", "pip install -e '.[dev]' (make test installs it)")
            try:
                ctx = azurite(tmp_path_factory.mktemp("azurite"))
                connection = ctx.__enter__()
            except FileNotFoundError as exc:
                missing(f"{exc} (Azurite runs on Node.js)", "apt-get install nodejs npm (.ci/system-deps.sh)")
            try:
                mp.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
                from azure.storage.blob import BlobServiceClient

                service = BlobServiceClient.from_connection_string(connection)
                service.create_container("tg-logs")
                container = service.get_container_client("tg-logs")
                yield Store("abfs", "tg-logs", lambda key, body: container.upload_blob(key, body, overwrite=True))
            finally:
                ctx.__exit__(None, None, None)
    finally:
        mp.undo()


def _batches(result: Any) -> list[int]:
    return sorted(
        s.batch_id for s in result.samples if s.kind is SampleKind.PROGRESS and s.scope.is_job() and s.batch_id is not None
    )


def test_scan_reports_recorded_runs_as_scan_of_the_files_on_disk(
    store: Store, spark_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "spark-events"
    local.mkdir()
    shutil.copytree(spark_fixtures / "eventlog_v2_fixture" / ROLL_DIR, local / ROLL_DIR)
    shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", local / f"{APP}-single")
    for path in sorted(local.rglob("*")):
        if path.is_file():
            store.put(f"scan/{path.relative_to(local).as_posix()}", path.read_bytes())
    for fmt in ("text", "json"):
        expected = run_cli(["scan", "--format", fmt, str(local)], capsys)
        assert run_cli(["scan", "--format", fmt, store.url("scan")], capsys) == expected
    assert "Query wm_gt" in expected[1] or '"wm_gt"' in expected[1]


def test_rolling_log_each_rolled_file_read_once_when_it_appears(store: Store, spark_fixtures: Path) -> None:
    lines = (spark_fixtures / "eventlog_trimmed.jsonl").read_bytes().splitlines(keepends=True)
    prefix = f"roll/{ROLL_DIR}"
    store.put(f"{prefix}/appstatus_{APP}.inprogress", b"")
    store.put(f"{prefix}/events_1_{APP}", b"".join(lines[:12]))
    collector = EventLogCollector([store.url("roll")])
    assert _batches(collector.poll(NOW)) == [0, 1]
    assert _batches(collector.poll(NOW)) == [] and collector.decompressed_bytes_read == 0
    store.put(f"{prefix}/events_2_{APP}", b"".join(lines[12:24]))
    second = collector.poll(NOW)
    assert (_batches(second), second.errors) == ([2, 3, 4, 5, 6, 7], ())
    assert collector.decompressed_bytes_read == len(b"".join(lines[12:24]))  # only the new file
