"""End to end: a real PySpark query, both collection paths into one real SQLite store, then ``scan``.

- The ingest app (:func:`monitor.daemon.ingest.create_ingest_app`, wired to the store exactly as ``tidegauge
  serve`` wires it, :func:`monitor.commands.serve.store_sink`) runs under uvicorn on a loopback port.
- A PySpark driver in a subprocess (``spark_listener_app.py``: local[2], UI off, 2 shuffle partitions,
  event log on) runs a file-source query with a 10-minute watermark and a 5-minute windowed count, fed an
  honest file, then a file with one row dated 2099-01-01, then late rows; :class:`TidegaugeListener` pushes
  every event to the ingest endpoint over real HTTP.
- ``tidegauge scan --format json --db DB <eventlog dir>`` (a subprocess, as a user runs it) stores the
  event-log path into the same database and reports findings.

Asserts: both paths stored the same batches with the same values; the batches and values are Spark's own
(``query.recentProgress`` printed by the driver); ``scan`` names the batch that read the 2099 row in its
``future_timestamp`` finding. Measured on the 2-core dev box: see the report printed with ``-s``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.commands.serve import TOKEN_ENV, store_sink
from monitor.daemon.ingest import EVENTS_PATH, create_ingest_app
from monitor.model import Sample, SampleKind
from monitor.store import Store, iter_raw_documents, load_samples, open_store, upgrade
from tests.conftest import REPO_ROOT
from tests.servers import serve_in_thread

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

DRIVER = Path(__file__).with_name("spark_listener_app.py")
TOKEN = "end-to-end-token-0123456789abcdef"


def _utc_now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Run everything once; yields the driver's report plus the paths and timings."""
    out = tmp_path_factory.mktemp("e2e")
    db = f"sqlite:///{out / 'tidegauge.db'}"
    upgrade(db)
    store: Store = open_store(db)
    timings: dict[str, float] = {}
    try:
        app = create_ingest_app(token=TOKEN, sink=store_sink(store), clock=_utc_now)
        with serve_in_thread(app) as base_url:
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), TOKEN_ENV: TOKEN, "PYSPARK_PYTHON": sys.executable}
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, str(DRIVER), str(out), base_url + EVENTS_PATH],
                capture_output=True, text=True, timeout=900, env=env, cwd=REPO_ROOT, check=False,
            )
            timings["spark_driver_s"] = round(time.monotonic() - started, 1)
        if proc.returncode != 0:
            pytest.fail(f"spark driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        report = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])

        started = time.monotonic()
        scan = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "scan", "--format", "json", "--db", db, str(out / "eventlog")],
            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, check=False,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        timings["scan_s"] = round(time.monotonic() - started, 1)
        assert scan.returncode == 0, scan.stderr
        with store.sessions() as session:
            samples = load_samples(session, job_id=report["query_id"])
            raw = list(iter_raw_documents(session, job_id=report["query_id"]))
        report.update(samples=samples, raw=raw, scan=json.loads(scan.stdout), scan_stderr=scan.stderr, timings=timings)
        print(f"\nend-to-end timings: {timings}; driver: {report['seconds']}; listener: {report['listener']}")
        print(f"files -> batches: {report['files']}; spark progress: {report['progress']}")
        print(f"scan findings: {[(f['rule'], f['batch_id']) for f in report['scan']['findings']]}")
        yield report
    finally:
        store.dispose()


def _query_samples(samples: list[Sample], collector: str) -> list[Sample]:
    return [s for s in samples if s.collector == collector and s.scope.is_job()]


def _progress_rows(samples: list[Sample], collector: str) -> list[tuple[Any, ...]]:
    rows = [
        (
            s.job.run_id,
            s.batch_id,
            s.observed_at,
            s.watermark,
            s.event_time_max,
            s.num_input_rows,
            s.dropped_by_watermark,
            s.state_rows_total,
        )
        for s in _query_samples(samples, collector)
        if s.kind is SampleKind.PROGRESS
    ]
    return sorted(rows, key=lambda r: r[1])


def _iso(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_listener_delivered_everything(run: dict[str, Any]) -> None:
    assert run["terminated_delivered"] is True
    stats = run["listener"]
    assert stats["failed"] == 0 and stats["dropped"] == 0 and stats["queued"] == 0
    listener_events = _query_samples(run["samples"], "spark-listener")
    assert stats["sent"] == len(listener_events)  # one query-scope sample per event
    # Every pushed envelope is kept raw for replay, as the event-log path keeps its lines.
    raw_by_collector: dict[str, list[str]] = {}
    for doc in run["raw"]:
        raw_by_collector.setdefault(doc.collector, []).append(doc.document["Event"].rsplit("$", 1)[-1])
    assert len(raw_by_collector["spark-listener"]) == stats["sent"]
    assert sorted(raw_by_collector["spark-listener"]) == sorted(raw_by_collector["spark-eventlog"])


def test_both_paths_stored_the_same_batches(run: dict[str, Any]) -> None:
    samples: list[Sample] = run["samples"]
    via_listener = _progress_rows(samples, "spark-listener")
    via_eventlog = _progress_rows(samples, "spark-eventlog")
    assert via_listener  # not vacuous
    assert via_listener == via_eventlog
    # Lifecycle events too: one started and one terminated for the single run, on both paths.
    for collector in ("spark-listener", "spark-eventlog"):
        kinds = [s.kind for s in _query_samples(samples, collector)]
        assert kinds.count(SampleKind.STARTED) == 1 and kinds.count(SampleKind.TERMINATED) == 1
    # App id arrived on both paths (listener: X-Tidegauge-App-Id header; event log: application start).
    assert {s.job.app_id for s in samples} == {run["app_id"]}


def test_stored_batches_are_sparks_own(run: dict[str, Any]) -> None:
    # Expected values from the driver's query.recentProgress (Spark's objects, not our parser).
    stored = {row[1]: row for row in _progress_rows(run["samples"], "spark-listener")}
    spark = {p["batchId"]: p for p in run["progress"]}
    assert sorted(stored) == sorted(spark)
    for batch_id, p in spark.items():
        _, _, _, watermark, event_time_max, rows, _, _ = stored[batch_id]
        assert rows == p["numInputRows"]
        assert event_time_max == _iso(p["eventTimeMax"])
        assert watermark == _iso(p["watermark"])
    files = run["files"]
    # The future file's batch saw the 2099 row; the batch after it runs with the jumped watermark
    # (2099-01-01T00:00Z - 10 min), and the late file's rows are dropped by that watermark.
    assert stored[files["future"]][4] == datetime(2099, 1, 1, tzinfo=UTC)
    assert stored[files["late"]][3] == datetime(2098, 12, 31, 23, 50, tzinfo=UTC)
    assert stored[files["late"]][6] == 2  # both late rows dropped by the watermark


def test_scan_reports_the_future_jump_at_the_right_batch(run: dict[str, Any]) -> None:
    findings = [f for f in run["scan"]["findings"] if f["rule"] == "future_timestamp"]
    assert len(findings) == 1, run["scan"]["findings"]
    [finding] = findings
    assert finding["query_id"] == run["query_id"]
    assert finding["batch_id"] == run["files"]["future"]
    assert finding["severity"] == "critical"
    assert run["scan"]["errors"] == []
