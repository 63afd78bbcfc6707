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


def test_each_fault_prints_its_injected_detected_and_notified_lines(tmp_path: Path) -> None:
    # the future-dated row (injected at 16 s) is found and notified in the tick it is injected: still
    # three lines, in order; the alert's first sentence is shortened at a word boundary with an ellipsis
    fleet = build_fleet(int(START.timestamp() * 1000), 120_000)
    tracker = FaultTracker(fleet, START)
    clicks = next(s.job_id for s in tracker.statuses if s.fault.key == "future_row")
    now = START + timedelta(seconds=17)
    message = (
        "batch 38 at 2031-03-04T05:06:23Z: event-time max 2032-04-07T05:06:23Z is 1.1 years ahead of the "
        "observation time (allowed skew 1 h); the watermark follows it. Filter the rows."
    )
    alert = Alert("d" * 16, "future_timestamp", {"engine": "spark", "job_id": clicks}, Severity.CRITICAL,
                  AlertState.FIRING, now, fired_at=now, message=message)  # fmt: skip
    inbox = [Received(now, "k", {"alerts": [{"status": "firing", "rule": "future_timestamp",
                                             "labels": {"job_id": clicks}}]})]  # fmt: skip
    lines = [line for line in tracker.update(now, [alert], inbox) if "clicks_per_window" in line]
    first_sentence = (  # 110 characters at most: cut after "observation", before "time"
        "batch 38 at 2031-03-04T05:06:23Z: event-time max 2032-04-07T05:06:23Z is 1.1 years ahead of the "
        "observation…"
    )
    assert lines == [
        "[  17s] injected  future-dated row in clicks_per_window",
        f"[  17s] DETECTED  future-dated row in clicks_per_window -> future_timestamp (critical): {first_sentence}",
        f"[  17s] NOTIFIED  future-dated row in clicks_per_window -> future_timestamp (critical): {first_sentence}",
    ]
    assert tracker.update(now + timedelta(seconds=1), [alert], inbox) == []  # no step is printed twice


#: What the seeded demo run (tests/dashboard_seed.py: the demo's fleet and config through the daemon's
#: pipeline on a fake clock, 60 s after a 60 s warm-up) raises: each fault's own finding and what the fault
#: causes on the same job (the future-dated row's watermark drops honest rows and then stays put; an idle
#: input pins the min watermark), nothing on the healthy Kafka group, nothing from the warm-up, nothing that
#: resolves again (the state of a fresh window aggregation grows until the first window closes, ~20 s in: no
#: state_growth fire/resolve pair, since the demo's rule wants 20 points and 10 watermark steps in 40 s).
SEEDED_ALERTS = [
    ("consumer_lag", "ledger-writer"),  # three partitions, three alerts
    ("consumer_lag", "ledger-writer"),
    ("consumer_lag", "ledger-writer"),
    ("falling_behind", "clickstream_enrich"),
    ("future_timestamp", "clicks_per_window"),
    ("idle_source", "device-telemetry-windows"),
    ("idle_source", "orders_payments"),
    ("late_drop_surge", "clicks_per_window"),
    ("late_drop_surge", "payments_fraud"),
    ("state_growth", "sessions_dedup"),
    ("target_health", "inventory_updates"),
    ("watermark_stall", "clicks_per_window"),
    ("watermark_stall", "device-telemetry-windows"),
    ("watermark_stall", "orders_payments"),
]


def test_the_demo_notifies_only_the_faults_it_injected(tmp_path: Path) -> None:
    from sqlalchemy import select

    from monitor.store import open_store
    from monitor.store.alert_repo import load_alerts
    from monitor.store.alert_tables import OutboxRow
    from tests.dashboard_seed import START as SEED_START
    from tests.dashboard_seed import seed

    seeded = seed(tmp_path, 60, report_at=None)
    store = open_store(seeded.url)
    try:
        with store.sessions() as s:
            alerts = list(load_alerts(s).values())
            outbox = [(o.status, o.created_at) for o in s.scalars(select(OutboxRow))]
    finally:
        store.dispose()
    tracker = FaultTracker(seeded.fleet, SEED_START)
    job_names = {st.job_id: st.fault.job for st in tracker.statuses}
    assert sorted((a.rule, job_names.get(a.labels["job_id"], a.labels["job_id"])) for a in alerts) == SEEDED_ALERTS
    assert all(a.state is AlertState.FIRING and a.active_at >= SEED_START for a in alerts)
    assert sorted({status for status, _ in outbox}) == ["firing"]  # nothing resolved, so nothing to say so
    assert len(outbox) == len(SEEDED_ALERTS) and min(at for _, at in outbox) >= SEED_START


def test_no_spark_query_of_the_demo_raises_a_finding_before_its_fault(tmp_path: Path) -> None:
    # Every Spark query's batches (the 60 s warm-up written at once, then 30 s) replayed through the demo's
    # rules at each batch, as the daemon catches up: state_growth, stall, late drops... must hold on a job
    # only from its fault's injection on (fault times count from the demo's start). The trial's demo
    # notified sessions_dedup's state_growth at a warm-up instant (40 sessions first seen over the first 7
    # batches: "grew from 17 to 40 in 38 s"), before the fresh-key fault at 8 s.
    from monitor.daemon.ingest import parse_event_document
    from rules.registry import Evaluator
    from rules.replay import replay

    start_ms = int(START.timestamp() * 1000)
    fleet = build_fleet(start_ms, 60_000)
    config = demo_config(demo_paths(tmp_path), port=0, receiver_port=9, dashboard_url="http://127.0.0.1:8501/job")
    evaluator = Evaluator(config.rules)
    early: list[tuple[str, str, float]] = []
    for job in fleet.jobs:
        events: list[dict[str, object]] = []
        while job.due(start_ms + 30_000):
            events.extend(job.step(fleet.rng))
        samples = sorted(parse_event_document(events, received_at=START, app_id=job.app_id).samples,
                         key=lambda s: s.observed_at)
        injected = START + timedelta(seconds=job.fault.at_s if job.fault is not None else 10**6)
        for instant in replay(evaluator, samples):
            if instant.at < injected:
                early += [(job.name, f.rule, (instant.at - START).total_seconds()) for f in instant.findings]
    assert early == []
