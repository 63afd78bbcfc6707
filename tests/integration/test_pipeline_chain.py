"""A real two-job pipeline on the real broker: Spark query ``chain_a`` reads topic ``in`` and writes ``mid``,
query ``chain_b`` reads ``mid`` and writes ``out`` (``spark_pipeline_app.py``; the event time ``ts`` travels
with the rows). A producer writes ``in`` five times a second, each row dated by its own clock.

tidegauge watches as a user's deployment would: every second it parses the streaming-listener events the
driver received (progress and idle events, Spark's event-log shape, with the collector's parser) and runs
``pipeline_freshness`` (target 20 s) through the one evaluation path (:class:`rules.registry.Evaluator`),
with the ``pipelines:`` section saying what Spark's Kafka sink does not: ``chain_a`` writes ``mid``.

Then ``chain_a`` is stalled (its Python UDF blocks: a stuck task). Asserted: the graph is ``chain_a → chain_b``
through ``mid``; once the end (``chain_b``) is more than the target behind the sources, the finding is on
``chain_a`` (``WARNING``: the staleness enters there) and ``chain_b`` gets only an ``INFO`` that links to it
and says it adds little; ``chain_a``'s local lag is its global lag, ``chain_b``'s a small part of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from collectors.spark.progress import parse_listener_event
from monitor.model import Finding, Sample, Severity
from rules.config import RulesConfig
from rules.history import job_history
from rules.pipeline import build_pipelines, job_endpoints, parse_pipelines
from rules.registry import Evaluator
from tests.conftest import REPO_ROOT
from tests.kafka_broker import KafkaBroker, quiet_logger
from tests.kafka_clients import create_topic, unique
from tests.spark_kafka_jars import ensure_spark_kafka_jars

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

DRIVER = Path(__file__).with_name("spark_pipeline_app.py")
RULES = RulesConfig.model_validate({"pipeline_freshness": {"target": "20s"}})
TARGET_S = 20.0


class _Producer(threading.Thread):
    """Writes ``{"ts": now, "n": i}`` to the topic every 200 ms."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "logger": quiet_logger()})
        while not self.stop.is_set():
            p.produce(self.topic, json.dumps({"ts": datetime.now(UTC).isoformat(), "n": self.sent}).encode())
            self.sent += 1
            p.poll(0)
            self.stop.wait(0.2)
        p.flush(30)


def _samples(events: Path) -> dict[str, list[Sample]]:
    """The driver's listener events parsed by the collector's parser, by query id (idle events carry no
    name: the name of the query's progress events fills it, as the event-log collector does)."""
    names: dict[str, str] = {}
    by_job: dict[str, list[Sample]] = {}
    if not events.is_file():
        return by_job
    for i, line in enumerate(events.read_text().splitlines()):
        if not line.endswith("}"):
            continue  # a line still being written
        event = json.loads(line)
        progress = event.get("progress")
        if progress:
            names[progress["id"]] = progress["name"]
        query = progress["id"] if progress else event["id"]
        for s in parse_listener_event(event, collector="test", where=f"line {i + 1}", fallback_name=names.get(query)):
            by_job.setdefault(s.job.job_id, []).append(s)
    return {k: sorted(v, key=lambda s: s.observed_at) for k, v in by_job.items()}


def _watermarked_batches(samples: list[Sample]) -> int:
    return sum(1 for s in samples if s.scope.is_job() and s.watermark is not None and s.watermark.year > 1970)


@pytest.fixture
def chain(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    import pyspark

    _, jars = ensure_spark_kafka_jars(pyspark.__version__)
    topics = {name: unique(f"chain-{name}") for name in ("in", "mid", "out")}
    for topic in topics.values():
        create_topic(kafka_broker.bootstrap, topic, 1)
    producer = _Producer(kafka_broker.bootstrap, topics["in"])
    producer.start()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    log = (tmp_path / "driver.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), kafka_broker.bootstrap, topics["in"], topics["mid"], topics["out"],
         str(tmp_path), ",".join(map(str, jars))],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Spark queries did not start"
            time.sleep(0.5)
        yield tmp_path, topics
    finally:
        (tmp_path / "stall").unlink(missing_ok=True)
        (tmp_path / "stop").write_text("")
        producer.stop.set()
        producer.join(30)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def test_a_stalled_job_is_where_the_staleness_enters(chain: tuple[Path, dict[str, str]]) -> None:
    out, topics = chain
    ids = json.loads((out / "started").read_text())
    a_id, b_id = ids["a"], ids["b"]
    config = parse_pipelines([{"name": "chain", "jobs": [{"job": "chain_a", "writes": [topics["mid"]]}]}])
    evaluator = Evaluator(RULES, config)
    events = out / "events.jsonl"

    # 1. both queries run with a real watermark (their first batch runs with Spark's 1970 "none yet")
    deadline = time.monotonic() + 240
    while True:
        samples = _samples(events)
        if all(_watermarked_batches(samples.get(q, [])) >= 2 for q in (a_id, b_id)):
            break
        assert (out / "failed").exists() is False, (out / "failed").read_text()
        assert time.monotonic() < deadline, {q: _watermarked_batches(v) for q, v in samples.items()}
        time.sleep(1.0)
    hists = [h for v in samples.values() if (h := job_history(v)) is not None]
    (pipeline,) = build_pipelines([(h.job, *job_endpoints(h)) for h in hists], config)
    assert [n.job.job_id for n in pipeline.nodes] == [a_id, b_id]
    assert [(e.upstream, e.downstream, e.dataset) for e in pipeline.edges] == [
        (f"spark:{a_id}", f"spark:{b_id}", topics["mid"])
    ]
    assert pipeline.node(f"spark:{a_id}").reads == (topics["in"],)

    # 2. stall chain_a; chain_b goes idle (Spark posts QueryIdleEvent each second) and falls behind
    (out / "stall").write_text("")
    stalled_at = time.monotonic()
    found: list[Finding] = []
    while not any(f.severity is Severity.WARNING for f in found):
        assert time.monotonic() - stalled_at < 180, "no pipeline_freshness finding 180 s into the stall"
        time.sleep(1.0)
        found = evaluator.evaluate_pipelines(_samples(events).values())
    by_job = {f.job.job_id: f for f in found}
    entry = by_job[a_id]
    assert entry.severity is Severity.WARNING, found
    assert entry.details["entry"] == f"spark:{a_id}" and entry.details["end"] == f"spark:{b_id}"
    assert "The staleness enters at this job" in entry.message
    nodes: dict[str, dict[str, Any]] = {n["job"]: n for n in entry.details["nodes"]}
    a, b = nodes["chain_a"], nodes["chain_b"]
    assert a["global_lag_s"] > TARGET_S and a["local_lag_s"] == a["global_lag_s"], nodes
    assert b["global_lag_s"] > TARGET_S > b["local_lag_s"], nodes
    # chain_b is not blamed: an INFO that names chain_a, linked to its finding
    down = by_job[b_id]
    assert down.severity is Severity.INFO
    assert down.details["caused_by"] == {"rule": "pipeline_freshness", "engine": "spark", "job_id": a_id}
    assert "enters upstream at `chain_a`" in down.message
    print(f"\nstalled {time.monotonic() - stalled_at:.0f} s: {json.dumps(entry.details['nodes'])}\n{entry.message}")
