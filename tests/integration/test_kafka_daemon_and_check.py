"""`tidegauge run` with a kafka target and `tidegauge check kafka`, both against the real test broker.

The daemon runs in process (build + start + stop, the real wall clock: it polls every 300 ms); the check
runs as the real console script in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from monitor.config import parse_config
from monitor.daemon.compose import build, wall_clock
from monitor.store import upgrade
from tests.daemon_process import free_port, metric_values, wait_for
from tests.kafka_broker import KafkaBroker
from tests.kafka_clients import commit, create_topic, produce, unique

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _lag(text: str, name: str, job_id: str, **labels: str) -> list[float]:
    return [
        v for lv, v in metric_values(text, name)
        if lv.get("job_id") == job_id and all(lv.get(k) == w for k, w in labels.items())
    ]


def test_daemon_polls_kafka_serves_lag_and_fires_the_lag_rules(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic, group = unique("daemon"), unique("g")
    create_topic(kafka_broker.bootstrap, topic, 2)
    produce(kafka_broker.bootstrap, topic, 50, partition=0)
    produce(kafka_broker.bootstrap, topic, 10, partition=1)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 20), (topic, 1, 10)])
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    port = free_port()
    config = parse_config({
        "server": {"host": "127.0.0.1", "port": port},
        "targets": {"kafka": [{"name": "local", "bootstrap_servers": kafka_broker.bootstrap, "groups": [group],
                               "poll_interval": "300ms", "lag_seconds": "exact"}]},
        "evaluation_interval": "300ms",
        "rules": {"consumer_lag_seconds": {"threshold": "1m"}},
    })
    daemon = build(config, db_url=url, environ={}, clock=wall_clock)
    daemon.start()
    job_id = f"local/{group}"
    base = f"http://127.0.0.1:{port}"
    try:
        def scraped() -> str | None:
            text = httpx.get(f"{base}/metrics").text
            return text if _lag(text, "tidegauge_consumer_lag_offsets", job_id, partition="0") else None

        text = wait_for("consumer lag on /metrics", scraped, 60.0)
        assert _lag(text, "tidegauge_consumer_lag_offsets", job_id, partition="0") == [30.0]
        assert _lag(text, "tidegauge_consumer_lag_offsets", job_id, partition="1") == [0.0]
        # the producer wrote these records just now (CreateTime): a few seconds behind at most
        (secs,) = _lag(text, "tidegauge_consumer_lag_seconds", job_id, partition="0")
        assert 0.0 <= secs < 120.0
        assert ({"collector": "kafka-lag", "target": "local"}, 1.0) in metric_values(text, "tidegauge_target_up")

        # the group has no member and stops committing while behind: Burrow's STOP, a firing alert
        def firing() -> str | None:
            text = httpx.get(f"{base}/metrics").text
            got = [v for lv, v in metric_values(text, "tidegauge_alerts")
                   if lv == {"rule": "consumer_lag", "severity": "critical", "state": "firing"}]
            return text if got and got[0] >= 1 else None

        wait_for("the consumer_lag alert firing", firing, 60.0)
        health = httpx.get(f"{base}/healthz").json()
        assert any(t["name"] == "local" and t["up"] for t in health["targets"])
    finally:
        daemon.stop()


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "check", "kafka", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_check_kafka_json_text_and_exit_codes(kafka_broker: KafkaBroker) -> None:
    topic, group, caught_up = unique("check"), unique("g"), unique("ok")
    create_topic(kafka_broker.bootstrap, topic, 2)
    produce(kafka_broker.bootstrap, topic, 8, partition=0)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 3)])
    commit(kafka_broker.bootstrap, caught_up, [(topic, 0, 8)])
    run = _check(kafka_broker.bootstrap, "--group", group, "--group", caught_up, "--format", "json",
                 "--interval", "1s", "--fail-on", "critical")
    doc = json.loads(run.stdout)
    by_name = {g["group"]: g for g in doc["groups"]}
    g = by_name[group]
    assert (g["state"], g["lag"]) == ("Empty", 5)
    p0, p1 = g["partitions"]
    assert {k: p0[k] for k in ("topic", "partition", "committed", "log_start", "log_end", "lag")} == {
        "topic": topic, "partition": 0, "committed": 3, "log_start": 0, "log_end": 8, "lag": 5,
    }
    assert p0["lag_seconds"] is not None and p0["lag_seconds"] >= 0
    assert p1["committed"] is None and p1["lag"] is None and p1["lag_seconds"] is None  # never committed
    # an empty group behind and not committing over the two polls: STOP, critical -> exit code 1
    assert g["status"] == "STOP" and p0["status"] == "STOP"
    assert by_name[caught_up]["status"] == "OK" and by_name[caught_up]["lag"] == 0
    assert [f["rule"] for f in doc["findings"]] == ["consumer_lag"] and doc["polls"] == 2
    assert run.returncode == 1, run.stderr
    text = _check(kafka_broker.bootstrap, "--group", caught_up)
    assert text.returncode == 0, text.stderr
    assert f"group {caught_up}  state Empty  members 0  status OK  lag 0" in text.stdout
    down = _check("127.0.0.1:1", "--timeout", "2s")
    assert down.returncode == 2 and "tidegauge: error: kafka check (127.0.0.1:1, PLAINTEXT)" in down.stderr
    assert _check(kafka_broker.bootstrap, "--format", "yaml").returncode == 2


def test_check_kafka_spark_progress_compares_end_offset_with_the_broker(
    kafka_broker: KafkaBroker, recorded_fixtures: Path, tmp_path: Path
) -> None:
    topic = unique("spark-ckpt")
    create_topic(kafka_broker.bootstrap, topic, 1)
    produce(kafka_broker.bootstrap, topic, 30)
    # the recorded Kafka-source progress (sqsps_testProgress5), pointed at this broker's topic: Spark read up
    # to offset 12 of the topic, and thought it 18 behind the latest offset when it planned the batch
    doc = json.loads((recorded_fixtures / "spark/public/sqsps_testProgress5_kafka_offsets_behind_latest.json").read_text())
    src = doc["sources"][0]
    src["endOffset"] = {topic: {"0": 12}}
    src["latestOffset"] = {topic: {"0": 30}}
    src["metrics"] = {"avgOffsetsBehindLatest": "18.0", "maxOffsetsBehindLatest": "18", "minOffsetsBehindLatest": "18"}
    path = tmp_path / "progress.json"
    path.write_text(json.dumps(doc))
    run = _check(kafka_broker.bootstrap, "--spark-progress", str(path), "--format", "json")
    assert run.returncode == 0, run.stderr
    (g,) = json.loads(run.stdout)["groups"]  # only the query: no --group given
    assert (g["group"], g["state"], g["lag"]) == ("spark:KafkaMetricsTest", "Spark checkpoint", 18)
    (p,) = g["partitions"]
    assert (p["committed"], p["log_end"], p["lag"]) == (12, 30, 18)
    assert "Spark's own maxOffsetsBehindLatest: 18 (when the batch was planned)" in g["notes"]
