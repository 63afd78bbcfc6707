"""End to end: a real Flink 2.3.0 job reads a topic of the test broker with Flink's Kafka connector
(``flink-sql-connector-kafka`` 5.0.0-2.2 from Maven Central; ``tests/flink_kafka_job.py``), event time = the
record timestamp, ``forBoundedOutOfOrderness(1 s)``. Offsets 0-29 are dated now; then offsets 30-59, of
which offset 30 is dated 2099-01-01. The REST collector reads the source subtask's ``KafkaSourceReader``
``currentOffset`` on every poll; the ``future_timestamp`` finding of the source subtask carries the offsets
read between the polls around the jump, and ``locate_flink`` (the daemon's and ``check flink``'s locating)
names offset 30 in them; ``check flink --locate-event-time --kafka`` names it too, from two polls after the
jump (the partition searched from its start by ListOffsets maxTimestamp).

``TIDEGAUGE_RECORD_FLINK_KAFKA=DIR`` writes every poll's REST responses to ``DIR/poll-NN.json`` (how
``tests/fixtures/flink/real-2.3.0/kafka_culprit`` was recorded).
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from collectors.flink import FlinkRestCollector
from collectors.kafka import KafkaOptions
from monitor.daemon.culprits import CulpritTarget, locate_flink
from monitor.model import Engine, Sample
from rules.config import RulesConfig
from rules.future import KAFKA_RANGES, RULE, with_culprit
from rules.registry import evaluate
from tests.cli import run_cli
from tests.flink_cluster import FlinkCluster
from tests.flink_kafka_job import submit_kafka_job
from tests.kafka_broker import KafkaBroker, quiet_logger
from tests.kafka_clients import create_topic, unique

pytestmark = [pytest.mark.integration, pytest.mark.flink, pytest.mark.kafka, pytest.mark.slow]

#: the 2099 record's offset and timestamp (ms)
BAD_OFFSET = 30
BAD_MS = int(datetime(2099, 1, 1, tzinfo=UTC).timestamp() * 1000)
#: topics of a 2099 record allow timestamps ahead of the broker's clock (Kafka 4 rejects > 1 h by default)
ANY_TIMESTAMP = {"message.timestamp.after.max.ms": str(2**63 - 1)}


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    for i in range(first, first + count):
        ts = BAD_MS if i == BAD_OFFSET else int(time.time() * 1000)
        p.produce(topic, key=f"order-{i}".encode(), value=json.dumps({"order": i}).encode(), partition=0, timestamp=ts)
    assert p.flush(30) == 0


class _Recorder(httpx.BaseTransport):
    """The network, keeping each response body of the current poll by route (``?get`` chunks merged)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.routes: dict[str, Any] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = self._inner.handle_request(request)
        try:
            body = resp.read()
        finally:
            resp.close()
        key = f"{request.url.path}?get" if "get" in request.url.params else request.url.path
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if isinstance(doc, list) and isinstance(self.routes.get(key), list) and key.endswith("?get"):
            self.routes[key] = self.routes[key] + doc
        else:
            self.routes[key] = doc
        return httpx.Response(resp.status_code, headers=resp.headers, content=body, request=request)

    def close(self) -> None:
        self._inner.close()


def _source_sample(samples: list[Sample]) -> Sample | None:
    return next((s for s in samples if s.scope.source is not None and s.scope.subtask == 0), None)


def _offset(sample: Sample | None) -> int | None:
    entries = sample.extra.get("kafka_offsets") if sample is not None else None
    return entries[0]["offset"] if entries else None


def test_flink_source_subtask_jump_names_the_offset_of_the_2099_record(
    kafka_broker: KafkaBroker, flink_cluster: FlinkCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = unique("orders-flink")
    create_topic(kafka_broker.bootstrap, topic, 1, **ANY_TIMESTAMP)
    _produce(kafka_broker.bootstrap, topic, 0, BAD_OFFSET)
    jid = submit_kafka_job(flink_cluster, tmp_path / "job", kafka_broker.bootstrap, topic)
    record_dir = os.environ.get("TIDEGAUGE_RECORD_FLINK_KAFKA")
    recorder = _Recorder()
    samples: list[Sample] = []
    polls = 0

    def poll() -> Sample | None:
        nonlocal polls
        recorder.routes = {}
        now = datetime.now(UTC)
        got = collector.poll(now)
        mine = [s for s in got.samples if s.job.run_id == jid]
        samples.extend(mine)
        if record_dir:
            Path(record_dir).mkdir(parents=True, exist_ok=True)
            doc = {"_provenance": f"Flink 2.3.0 standalone, flink-sql-connector-kafka 5.0.0-2.2, topic {topic}, "
                   f"tests/integration/test_flink_kafka_culprit.py", "now": now.isoformat(), "routes": recorder.routes}
            (Path(record_dir) / f"poll-{polls:02d}.json").write_text(json.dumps(doc, indent=1))
        polls += 1
        time.sleep(1.0)
        return _source_sample(mine)

    try:
        with httpx.Client(transport=recorder, timeout=10) as client:
            collector = FlinkRestCollector(flink_cluster.rest_url, client, metric_list_every=1)
            deadline = time.monotonic() + 180
            # the reader handed on offsets 0-29 (currentOffset 29) and the watermark follows them (now - 1 s);
            # the rule starts the range after the older of the two polls before the jump (the watermark may
            # lag the offset by one poll), so two polls must report 29 (an earlier -1, "nothing read yet",
            # would widen the range to the log's start)
            at_29 = 0
            while at_29 < 2 or polls < 3:
                at_29 = at_29 + 1 if _offset(poll()) == BAD_OFFSET - 1 else 0
                assert time.monotonic() < deadline, flink_cluster.log_tail()
            _produce(kafka_broker.bootstrap, topic, BAD_OFFSET, 30)
            while True:
                sub = poll()
                if sub is not None and sub.watermark is not None and sub.watermark.year >= 2098:
                    break  # forBoundedOutOfOrderness: 2099-01-01 - 1 s - 1 ms
                assert time.monotonic() < deadline, flink_cluster.log_tail()
            poll()
            # the one-shot check: two polls, both after the jump (no earlier offsets: the partition is
            # searched from its start, by ListOffsets maxTimestamp)
            code, out, err = run_cli(
                ["check", "flink", flink_cluster.rest_url, "--interval", "1s", "--locate-event-time", "--kafka",
                 kafka_broker.bootstrap, "--format", "json"], capsys,
            )  # fmt: skip
    finally:
        flink_cluster.cancel(jid)
    doc = json.loads(out)
    (cli,) = [f for f in doc["findings"] if f["jid"] == jid and f["rule"] == RULE and "culprit" in f]
    assert code == 0, (out, err)
    cli_record = cli["culprit"]["record"]
    assert (cli_record["topic"], cli_record["offset"], cli_record["key"]) == (topic, BAD_OFFSET, "order-30"), cli
    assert cli["culprit"]["ranges"][0]["start"] == 0 and cli["culprit"]["method"] == "max_timestamp"
    assert "offset 30, key 'order-30'" in cli["message"]
    newest = max(s.observed_at for s in samples)
    history = {(Engine.FLINK, samples[0].job.job_id): samples}
    findings = [f for f in evaluate(RulesConfig(), history, newest) if f.rule == RULE and f.scope.subtask == 0]
    (finding,) = [f for f in findings if KAFKA_RANGES in f.details]
    (searched,) = finding.details[KAFKA_RANGES]
    # offsets 0-29 were read before the jump; the poll that saw the jump had read past 30
    assert (searched["topic"], searched["partition"], searched["start"]) == (topic, 0, BAD_OFFSET)
    assert searched["end"] > BAD_OFFSET
    target = CulpritTarget(KafkaOptions("test", kafka_broker.bootstrap, request_timeout_s=10.0))
    culprit = locate_flink(target, finding)
    assert culprit is not None and culprit["record"] is not None, culprit
    record = culprit["record"]
    assert (record["topic"], record["partition"], record["offset"], record["key"]) == (topic, 0, BAD_OFFSET, "order-30")
    assert record["event_time"].startswith("2099-01-01") and culprit["method"] == "max_timestamp"
    message = with_culprit(finding, culprit).message
    assert f"topic {topic} partition 0 offset 30, key 'order-30', event time 2099-01-01" in message
