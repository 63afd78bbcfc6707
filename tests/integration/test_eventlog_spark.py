"""Real PySpark writes event logs with every codec, rolling and not; the collector reads them all.

ONE subprocess (one JVM) runs 8 tiny apps sequentially (spark_eventlog_apps.py): zstd, lz4, snappy, lzf,
each with spark.eventLog.rolling.enabled false/true (uncompressed logs are covered by the recorded real files
in the unit tests; the script also writes them with the spec ``none:0``). Measured on the shared 2-core dev
box: 35-75 s in total depending on load (first app ~15 s with the JVM start, then ~2-5 s each).
Expected values come from the app's input (see spark_eventlog_apps.py): batch 0 reads 4 rows with
event-time max 2024-01-01T12:07Z and runs with the initial watermark (epoch); the next batch has no rows
and runs with watermark 12:07 - 10 min = 11:57.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from collectors.spark.eventlog import EventLogCollector, discover_event_logs
from monitor.model import SampleKind

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("spark_eventlog_apps.py")
SPECS = ["zstd:0", "zstd:1", "lz4:0", "lz4:1", "snappy:0", "snappy:1", "lzf:0", "lzf:1"]


@pytest.fixture(scope="module")
def spark_logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    out = tmp_path_factory.mktemp("spark-eventlogs")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), *SPECS], capture_output=True, text=True, timeout=600, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"spark apps failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    apps = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            info = json.loads(line)
            apps[info["label"]] = info["app_id"]
    print(f"spark apps: {time.monotonic() - started:.1f} s for {len(SPECS)} apps")
    return out, apps


@pytest.mark.parametrize("spec", SPECS)
def test_collector_reads_real_spark_log(spark_logs: tuple[Path, dict[str, str]], spec: str) -> None:
    out, apps = spark_logs
    codec, rolling = spec.split(":")
    label = f"{codec}-{rolling}"
    app_id = apps[label]
    files = discover_event_logs(out / label)
    assert len(files) == 1 and files[0].complete  # the app stopped: no .inprogress anywhere
    name = files[0].name
    expected = f"{app_id}.{codec}"  # Spark's naming: <app>.<codec short name> (EventLogFileWriter)
    assert name == (f"events_1_{expected}" if rolling == "1" else expected)
    if rolling == "1":
        assert Path(files[0].path).parent.name == f"eventlog_v2_{app_id}"
    result = EventLogCollector([out / label]).poll(datetime.now(UTC))
    assert result.errors == ()
    query = [s for s in result.samples if s.scope.is_job()]
    assert query[0].kind is SampleKind.STARTED
    assert query[-1].kind is SampleKind.TERMINATED
    progress = [s for s in query if s.kind is SampleKind.PROGRESS]
    assert progress[0].batch_id == 0 and progress[0].num_input_rows == 4
    assert progress[0].event_time_max == datetime(2024, 1, 1, 12, 7, tzinfo=UTC)
    assert progress[0].watermark == datetime(1970, 1, 1, tzinfo=UTC)
    assert progress[1].num_input_rows == 0
    assert progress[1].watermark == datetime(2024, 1, 1, 11, 57, tzinfo=UTC)
    assert {s.job.app_id for s in query} == {app_id}
    assert {s.job.name for s in query} == {f"q_{codec}_{rolling}"}
