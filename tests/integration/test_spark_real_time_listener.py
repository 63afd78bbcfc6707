"""End to end: a real PySpark query in real-time mode (``trigger(realTime="5 seconds")``, Spark 4.1+) on the
test broker, with :class:`collectors.spark.listener.TidegaugeListener` pushing its events
(``spark_real_time_listener_app.py``: a 12 s flowing phase, then frozen event times; stopped once 4 batches
reported, about 30 s).

Asserted: every progress envelope the listener sent names the query's trigger as the JVM has it
(``tidegauge.triggerClass`` = ``RealTimeTrigger``, ``batchDurationMs`` = 5000), the ingest parser turns them
into batches marked ``real_time`` and the rules' cadence reads real-time mode with Spark's own batch
durations; the batches are Spark's own (``query.recentProgress``). The same driver recorded
``tests/fixtures/spark/real-time-4.3.0/listener_envelopes.jsonl`` (15 s batches), on which the unit tests
check the rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.daemon.ingest import parse_event_document
from monitor.model import SampleKind, TriggerKind
from rules.cadence import report_cadence
from rules.history import job_history
from tests.conftest import REPO_ROOT
from tests.kafka_broker import KafkaBroker
from tests.kafka_clients import unique

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

DRIVER = Path(__file__).with_name("spark_real_time_listener_app.py")


def test_the_listener_names_real_time_mode(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic = unique("rtl").replace("-", "_")
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path), "--bootstrap", kafka_broker.bootstrap, "--topic", topic,
         "--batch", "5 seconds", "--phase-a-s", "12", "--run-s", "120", "--batches", "4"],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"spark driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    report = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert report["listener"]["failed"] == 0 and report["listener"]["dropped"] == 0

    envelopes = [json.loads(line) for line in (tmp_path / "listener_envelopes.jsonl").read_text().splitlines()]
    progress = [e for e in envelopes if e["Event"].endswith("$QueryProgressEvent")]
    spark_own = [json.loads(line) for line in (tmp_path / "listener_spark_progress.jsonl").read_text().splitlines()]
    assert len(progress) >= 4, proc.stderr[-2000:]  # the driver stops the query once 4 batches reported
    assert [e["progress"]["batchId"] for e in progress] == [p["batchId"] for p in spark_own][: len(progress)]
    assert {json.dumps(e["tidegauge"], sort_keys=True) for e in progress} == {
        json.dumps(
            {"batchDurationMs": 5000, "triggerClass": "org.apache.spark.sql.execution.streaming.RealTimeTrigger"},
            sort_keys=True,
        )
    }
    assert all("tidegauge" not in e for e in envelopes if e not in progress)  # only progress carries it

    result = parse_event_document(envelopes, received_at=datetime.now(UTC), app_id="local-rtl")
    batches = [s for s in result.samples if s.kind is SampleKind.PROGRESS and s.scope.is_job()]
    assert [b.batch_id for b in batches] == [e["progress"]["batchId"] for e in progress]
    assert {b.extra.get("trigger") for b in batches} == {"real_time"}
    history = job_history([s for s in result.samples if s.kind is not SampleKind.TERMINATED])
    assert history is not None
    cadence = report_cadence(history)
    assert cadence.kind is TriggerKind.REAL_TIME
    durations = sorted(e["progress"]["batchDuration"] for e in progress)
    assert cadence.batch_duration is not None
    assert cadence.batch_duration.total_seconds() * 1000 == durations[len(durations) // 2]
