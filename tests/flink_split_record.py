"""Record split-level watermarks (Flink 2.1+, FLIP-513) of a real Flink 2.3.0 job reading Kafka.

The job (``tests/flink_job/tidegauge/KafkaSplitsJob.java``, Flink's Kafka connector from Maven Central) reads
a topic of :data:`PARTITIONS` partitions with two source subtasks, so each subtask reads two splits. While
it runs a producer thread writes :data:`RATE_PER_S` records a second to every partition, dated now, except
partition :data:`LAGGING_PARTITION`, dated :data:`LAG_S` seconds in the past: that split holds its subtask's
(and the job's) minimum watermark. Two runs, each on its own topic: mode ``lag`` (no alignment) and mode
``align`` (``withWatermarkAlignment("tg-align", 5 s, 200 ms)``: the splits ahead of the lagging one are
paused by alignment).

Per run, after ``SECONDS_BEFORE_FIRST_POLL`` the recorder lists each vertex's metrics once (Flink's REST
metric store is empty until a request triggers a fetch), waits 3 s and runs ``check flink URL --format json
--interval INTERVAL_SECONDS`` through :class:`tests.flink_record.RecordingTransport` (``OUT/<mode>/
exchanges.json``, replayed by ``tests.flink_record.replay_transport`` / ``replay_clock``); then it keeps, as
read straight from the REST API, the source vertex's metric list (``source_metric_ids.json``), every split
metric's values per subtask (``split_metrics.json``) and ``/config`` (``flink_config.json``)::

    PYTHONPATH=$PWD python -m tests.flink_split_record OUT_DIR [SECONDS_BEFORE_FIRST_POLL] [INTERVAL_SECONDS]
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["LAGGING_PARTITION", "LAG_S", "PARTITIONS", "RATE_PER_S", "Producing"]

PARTITIONS = 4
LAGGING_PARTITION = 3
LAG_S = 600
RATE_PER_S = 10
MODES = ("lag", "align")


def _produce_until(bootstrap: str, topic: str, stop: threading.Event) -> None:  # pragma: no cover - needs Kafka
    from confluent_kafka import Producer

    from tests.kafka_broker import quiet_logger

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    n = 0
    while not stop.is_set():
        now_ms = int(time.time() * 1000)
        for partition in range(PARTITIONS):
            ts = now_ms - LAG_S * 1000 if partition == LAGGING_PARTITION else now_ms
            p.produce(topic, value=f"p{partition}-{n}".encode(), partition=partition, timestamp=ts)
        n += 1
        p.poll(0)
        stop.wait(1.0 / RATE_PER_S)
    p.flush(30)


class Producing:  # pragma: no cover - needs Kafka
    """A context manager: :data:`RATE_PER_S` records a second to every partition of ``topic`` (partition
    :data:`LAGGING_PARTITION` dated :data:`LAG_S` seconds in the past) from a thread, until exit."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=_produce_until, args=(bootstrap, topic, self._stop), daemon=True)

    def __enter__(self) -> Producing:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def _split_metrics(cluster: Any, jid: str, vid: str, ids: list[str]) -> dict[str, Any]:  # pragma: no cover
    """Every split metric id of the source vertex with its value, per subtask (``?get=``, 40 ids a request)."""
    wanted = [i for i in ids if ".split." in i]
    out: dict[str, Any] = {}
    for start in range(0, len(wanted), 40):
        chunk = ",".join(wanted[start : start + 40])
        for row in cluster.get_json(f"/jobs/{jid}/vertices/{vid}/metrics?get={chunk}"):
            out[row["id"]] = row["value"]
    return out


def _run(cluster: Any, bootstrap: str, out: Path, mode: str, wait_s: float, interval_s: float) -> None:  # pragma: no cover
    from tests.flink_kafka_job import SPLITS_JOB_CLASS, submit_kafka_job
    from tests.kafka_clients import create_topic, unique

    topic = unique(f"splits-{mode}")
    create_topic(bootstrap, topic, PARTITIONS)
    with Producing(bootstrap, topic):
        jid = submit_kafka_job(cluster, out / "job", bootstrap, topic, mode, main_class=SPLITS_JOB_CLASS)
        print(mode, "job", jid, "topic", topic, "waiting", wait_s, "s", file=sys.stderr)
        try:
            _record_job(cluster, jid, topic, out / mode, mode, wait_s, interval_s)
        finally:
            cluster.cancel(jid)


def _record_job(
    cluster: Any, jid: str, topic: str, folder: Path, mode: str, wait_s: float, interval_s: float
) -> None:  # pragma: no cover - needs Flink
    from monitor.commands._check_flink import run_check_flink
    from tests.flink_record import RecordingTransport, save

    time.sleep(wait_s)
    vertices = cluster.get_json(f"/jobs/{jid}")["vertices"]
    for vertex in vertices:
        cluster.get_json(f"/jobs/{jid}/vertices/{vertex['id']}/metrics")
    time.sleep(3)
    rec = RecordingTransport()
    polls: list[datetime] = []

    def clock() -> datetime:
        now = datetime.now(UTC)
        rec.poll = len(polls)
        polls.append(now)
        return now

    run_check_flink(
        cluster.rest_url, fmt="json", interval=timedelta(seconds=interval_s), clock=clock, transport=rec
    )
    save(folder, polls, rec.exchanges)
    source = vertices[0]["id"]
    ids = [m["id"] for m in cluster.get_json(f"/jobs/{jid}/vertices/{source}/metrics")]
    meta = {"job": jid, "topic": topic, "mode": mode, "read_at": datetime.now(UTC).isoformat()}
    (folder / "source_metric_ids.json").write_text(json.dumps({**meta, "ids": sorted(ids)}, indent=1) + "\n")
    values = _split_metrics(cluster, jid, source, ids)
    (folder / "split_metrics.json").write_text(json.dumps({**meta, "values": values}, indent=1) + "\n")
    (folder / "flink_config.json").write_text(json.dumps(cluster.get_json("/config"), indent=1) + "\n")


def _record(out: Path, wait_s: float, interval_s: float) -> None:  # pragma: no cover - needs Flink and Kafka
    from tests.flink_cluster import start_cluster
    from tests.kafka_broker import start_kafka

    broker = start_kafka()
    try:
        with start_cluster(out / "cluster.work", extra_config={"metrics.fetcher.update-interval": 1000}) as cluster:
            for mode in MODES:
                _run(cluster, broker.bootstrap, out, mode, wait_s, interval_s)
    finally:
        broker.stop()


if __name__ == "__main__":  # pragma: no cover
    _record(
        Path(sys.argv[1]),
        float(sys.argv[2]) if len(sys.argv) > 2 else 40.0,
        float(sys.argv[3]) if len(sys.argv) > 3 else 11.0,
    )
