"""The demo session's wiring of the Flink and Kafka parts: the daemon config polls the loopback JobManager
and exporter, and the fault tracker follows the Flink and Kafka faults under the job ids the collectors give
them (the Flink collector: the job's name; the exporter collector: ``<target name>/<group>``). Fixed times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.alerts.lifecycle import Alert
from monitor.demo.fleet import build_fleet
from monitor.demo.receiver import Received
from monitor.demo.session import FaultTracker, demo_config, demo_paths
from monitor.model import AlertState, Severity

START = datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC)


def test_config_polls_the_loopback_jobmanager_and_exporter(tmp_path: Path) -> None:
    config = demo_config(demo_paths(tmp_path), port=0, receiver_port=9, dashboard_url="http://127.0.0.1:8501/job",
                         flink_port=18081, exporter_port=19308)
    (flink,) = config.targets.flink_rest
    (exporter,) = config.targets.kafka_exporters
    assert flink.url == "http://127.0.0.1:18081" and flink.poll_interval == 2_000
    assert exporter.url == "http://127.0.0.1:19308/metrics" and exporter.poll_interval == 2_000
    bare = demo_config(demo_paths(tmp_path), port=0, receiver_port=9, dashboard_url="http://127.0.0.1:8501/job")
    assert bare.targets.flink_rest == [] and bare.targets.kafka_exporters == []


def test_tracker_follows_the_flink_and_kafka_faults(tmp_path: Path) -> None:
    config = demo_config(demo_paths(tmp_path), port=0, receiver_port=9, dashboard_url="http://127.0.0.1:8501/job",
                         flink_port=1, exporter_port=2)
    fleet = build_fleet(int(START.timestamp() * 1000), 120_000)
    tracker = FaultTracker(fleet, START)
    ids = {s.fault.key: s.job_id for s in tracker.statuses}
    assert ids["idle_subtask"] == "device-telemetry-windows"
    assert ids["group_lag"] == f"{config.targets.kafka_exporters[0].name}/ledger-writer"

    now = START + timedelta(seconds=40)
    alerts = [
        Alert("a" * 16, "idle_source", {"engine": "flink", "job_id": ids["idle_subtask"], "subtask": "1"},
              Severity.WARNING, AlertState.FIRING, START, fired_at=now, message="subtask 1 pins it. More."),
        Alert("b" * 16, "consumer_lag", {"engine": "kafka", "job_id": ids["group_lag"], "partition": "0"},
              Severity.WARNING, AlertState.FIRING, START, fired_at=now, message="lag climbs"),
        # the right rule on another job counts for nothing
        Alert("c" * 16, "consumer_lag", {"engine": "kafka", "job_id": "demo-kafka/audit-archiver"},
              Severity.WARNING, AlertState.FIRING, START, fired_at=now),
    ]
    inbox = [Received(now, "k1", {"alerts": [{"status": "firing", "rule": "consumer_lag",
                                              "labels": {"job_id": ids["group_lag"]}}]})]
    lines = tracker.update(now, alerts, inbox)
    by_key = {s.fault.key: s for s in tracker.statuses}
    assert by_key["idle_subtask"].detected_at == now and by_key["idle_subtask"].notified_at is None
    assert by_key["group_lag"].notified_at == now
    assert any("NOTIFIED" in line and "ledger-writer -> consumer_lag" in line for line in lines)
    assert any("DETECTED" in line and "device-telemetry-windows -> idle_source" in line for line in lines)
