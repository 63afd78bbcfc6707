"""End to end: split-level watermarks (Flink 2.1+, FLIP-513) read from a real Flink 2.3.0 job.

The job (``tests/flink_job/tidegauge/KafkaSplitsJob.java``, mode ``align``: Flink's Kafka connector from Maven
Central, ``withWatermarkAlignment("tg-align", 5 s, 200 ms)``) reads four partitions of the test broker with
two source subtasks while :class:`tests.flink_split_record.Producing` writes to every partition, partition 3
dated 600 s in the past. Watermark alignment pauses the other three partitions; ``check flink --format json``
names the paused partitions and partition 3 (``split_watermark``, ``alignment_paused``), and the subtask
whose splits are all paused is not reported as idle even with ``--idle-for`` shorter than its
``sourceIdleTime``. (The recordings replayed by tests/unit/test_flink_splits.py come from the same job,
``python -m tests.flink_split_record``.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli import run_cli
from tests.flink_cluster import FlinkCluster
from tests.flink_kafka_job import SPLITS_JOB_CLASS, submit_kafka_job
from tests.flink_split_record import LAGGING_PARTITION, PARTITIONS, Producing
from tests.kafka_broker import KafkaBroker
from tests.kafka_clients import create_topic, unique

pytestmark = [pytest.mark.integration, pytest.mark.flink, pytest.mark.kafka, pytest.mark.slow]


def _paused(cluster: FlinkCluster, jid: str) -> bool:
    """Whether a split of the job's source reports pausedTimeMsPerSecond 1000 (alignment has kicked in)."""
    source = cluster.get_json(f"/jobs/{jid}")["vertices"][0]["id"]
    ids = [m["id"] for m in cluster.get_json(f"/jobs/{jid}/vertices/{source}/metrics")]
    paused = [i for i in ids if i.endswith(".watermark.pausedTimeMsPerSecond")]
    if not paused:
        return False
    values = cluster.get_json(f"/jobs/{jid}/vertices/{source}/metrics?get={','.join(paused)}")
    return any(float(v["value"]) >= 1000 for v in values)


def test_split_paused_by_alignment_is_named_with_the_partition_that_trails(
    kafka_broker: KafkaBroker, flink_cluster: FlinkCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = unique("splits-align")
    create_topic(kafka_broker.bootstrap, topic, PARTITIONS)
    with Producing(kafka_broker.bootstrap, topic):
        jid = submit_kafka_job(
            flink_cluster, tmp_path / "job", kafka_broker.bootstrap, topic, "align", main_class=SPLITS_JOB_CLASS
        )
        try:
            flink_cluster.wait_for(lambda: _paused(flink_cluster, jid), "a split paused by alignment", 180, 2.0)
            time.sleep(3)  # the metric store serves what the request before fetched: one more round
            code, out, err = run_cli(
                ["check", "flink", flink_cluster.rest_url, "--interval", "2s", "--idle-for", "1s", "--format", "json"],
                capsys,
            )
        finally:
            flink_cluster.cancel(jid)
    assert code == 0, (out, err)
    doc: dict[str, Any] = json.loads(out)
    mine = [f for f in doc["findings"] if f["jid"] == jid]
    (aligned,) = [f for f in mine if f["rule"] == "split_watermark"]
    assert aligned["labels"] == {"check": "alignment_paused"}, aligned
    assert (aligned["split"]["topic"], aligned["split"]["partition"]) == (topic, LAGGING_PARTITION), aligned
    assert f"ahead of Kafka partition {LAGGING_PARTITION} of topic `{topic}`" in aligned["message"]
    paused = {s["partition"] for s in aligned_details(doc, jid) if (s["paused_ms_per_s"] or 0) >= 500}
    assert paused and LAGGING_PARTITION not in paused
    # a subtask whose splits are all paused reads nothing: never reported as idle
    fully_paused = {
        t["subtask"]
        for v in _job(doc, jid)["vertices"]
        for t in v["subtasks"]
        if t.get("splits") and all((s["paused_ms_per_s"] or 0) >= 500 for s in t["splits"])
    }
    idle = {f["subtask"] for f in mine if f["rule"] == "idle_source"}
    assert not (idle & fully_paused), (idle, fully_paused, mine)


def _job(doc: dict[str, Any], jid: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [j for j in doc["jobs"] if j["jid"] == jid]
    (job,) = found
    return job


def aligned_details(doc: dict[str, Any], jid: str) -> list[dict[str, Any]]:
    """Every split of the job's source subtasks as ``check flink --format json`` shows them."""
    return [s for v in _job(doc, jid)["vertices"] for t in v["subtasks"] for s in t.get("splits", [])]
