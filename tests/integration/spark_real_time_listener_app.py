"""A PySpark driver: a query in real-time mode (``trigger(realTime=...)``, Spark 4.1+) reading a real Kafka
broker, with :class:`collectors.spark.listener.TidegaugeListener` pushing to a loopback receiver.

Used by ``test_spark_real_time_listener.py`` and to record ``tests/fixtures/spark/real-time-4.3.0/
listener_envelopes.jsonl`` (see the PROVENANCE.md there)::

    PYTHONPATH=. .venv/bin/python tests/integration/spark_real_time_listener_app.py OUT_DIR \\
        [--bootstrap HOST:PORT] [--topic rtl] [--batch "5 seconds"] [--phase-a-s 20] [--run-s 50] [--batches N]

Without ``--bootstrap`` a single-node KRaft broker is started (:func:`tests.kafka_broker.start_kafka`).

- topic ``rtl_in`` (``<--topic>_in``, one partition); a producer thread writes 20 records/s, JSON
  ``{"key", "event_time"}``;
  for the first ``--phase-a-s`` seconds ``event_time`` is the wall clock, after that it stays at one instant
  (phase B's start minus one minute): rows keep arriving while the watermark cannot move (a real stall);
- the query (``rtl_clicks``): Kafka ``rtl_in`` -> ``from_json`` -> ``withWatermark("event_time",
  "5 seconds")`` -> Kafka ``rtl_out`` (``<--topic>_out``), ``outputMode("update")``, ``trigger(realTime=BATCH)``;
- the listener posts to an HTTP receiver on 127.0.0.1 in this process (``tests.http_receiver``: it answers
  200 and keeps each body); after ``--run-s`` seconds (or once ``--batches`` batches have reported, if given)
  the query is stopped, the listener flushed and closed.

Writes ``OUT_DIR/listener_envelopes.jsonl`` (every event the listener sent, in order, one JSON object a line,
as decoded from the POST bodies and written compactly), ``OUT_DIR/listener_received_at.jsonl`` (the
receiver's clock for each of those lines: ``{"line": i, "received_at": ISO}``),
``OUT_DIR/listener_spark_progress.jsonl`` (Spark's own ``query.recentProgress`` JSON at the end, the expected
values) and prints one JSON line
``{"pyspark", "spark_sql_kafka", "query_id", "listener": stats, "batch_duration_ms"}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path


def _iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def _producer(bootstrap: str, topic: str, stop: threading.Event, t_phase_b: float) -> None:
    from confluent_kafka import Producer

    from tests.kafka_broker import quiet_logger

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    frozen = datetime.fromtimestamp(t_phase_b, UTC) - timedelta(minutes=1)
    i = 0
    while not stop.is_set():
        now = time.time()
        at = datetime.fromtimestamp(now, UTC) if now < t_phase_b else frozen
        producer.produce(topic, value=json.dumps({"key": f"k{i % 4}", "event_time": _iso(at)}).encode())
        producer.poll(0)
        i += 1
        time.sleep(0.05)
    producer.flush(30)


def run(
    out: Path, bootstrap: str, topic: str, batch: str, phase_a_s: float, run_s: float, batches: int | None = None
) -> dict[str, object]:
    import pyspark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from collectors.spark.listener import TidegaugeListener
    from tests.http_receiver import running_receiver
    from tests.kafka_clients import create_topic
    from tests.spark_kafka_jars import ensure_spark_kafka_jars

    out.mkdir(parents=True, exist_ok=True)
    version, jars = ensure_spark_kafka_jars(pyspark.__version__)
    work = Path(tempfile.mkdtemp(prefix="tg-rtl-"))
    stop = threading.Event()
    create_topic(bootstrap, f"{topic}_in")
    create_topic(bootstrap, f"{topic}_out")
    try:
        with running_receiver() as receiver:
            spark = (
                SparkSession.builder.master("local[2]")
                .appName("tidegauge-real-time-listener")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "1")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.driver.memory", "768m")
                .config("spark.jars", ",".join(map(str, jars)))
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            listener = TidegaugeListener(
                receiver.url, "rtl-token", app_id=spark.sparkContext.applicationId, flush_at_exit_s=None
            )
            spark.streams.addListener(listener)
            frame = (
                spark.readStream.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", f"{topic}_in")
                .option("startingOffsets", "earliest")
                .load()
                .select(F.from_json(F.col("value").cast("string"), "key STRING, event_time TIMESTAMP").alias("v"))
                .select("v.key", "v.event_time")
                .withWatermark("event_time", "5 seconds")
                .select(F.col("key").alias("key"), F.to_json(F.struct("key", "event_time")).alias("value"))
            )
            t_start = time.time()
            producer = threading.Thread(
                target=_producer, args=(bootstrap, f"{topic}_in", stop, t_start + phase_a_s), daemon=True
            )
            producer.start()
            query = (
                frame.writeStream.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", f"{topic}_out")
                .option("checkpointLocation", str(work / "ckpt"))
                .queryName("rtl_clicks")
                .outputMode("update")
                .trigger(realTime=batch)
                .start()
            )
            while time.time() - t_start < run_s:
                if batches is not None and len(query.recentProgress) >= batches:
                    break
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                time.sleep(0.5)
            progress = [p.json if isinstance(p.json, str) else p.json() for p in query.recentProgress]
            query_id = str(query.id)
            query.stop()
            deadline = time.time() + 30
            while time.time() < deadline and not any(b"QueryTerminatedEvent" in r.body for r in list(receiver.requests)):
                time.sleep(0.2)  # Spark delivers the terminated event asynchronously
            listener.close(flush_timeout_s=15)
            stats = listener.stats()
            spark.stop()
            lines: list[str] = []
            received: list[str] = []
            for request in receiver.requests:
                at = _iso(datetime.fromtimestamp(request.received_at, UTC)) + "Z"
                for event in request.json():
                    received.append(json.dumps({"line": len(lines), "received_at": at}))
                    lines.append(json.dumps(event, separators=(",", ":")))
    finally:
        stop.set()
        shutil.rmtree(work, ignore_errors=True)
    (out / "listener_envelopes.jsonl").write_text("\n".join(lines) + "\n")
    (out / "listener_received_at.jsonl").write_text("\n".join(received) + "\n")
    (out / "listener_spark_progress.jsonl").write_text("\n".join(" ".join(p.split()) for p in progress) + "\n")
    return {"pyspark": pyspark.__version__, "spark_sql_kafka": version, "query_id": query_id, "listener": stats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic", default="rtl")
    parser.add_argument("--batch", default="5 seconds")
    parser.add_argument("--phase-a-s", type=float, default=20.0)
    parser.add_argument("--run-s", type=float, default=50.0)
    parser.add_argument("--batches", type=int)
    args = parser.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.kafka_broker import start_kafka

        broker = start_kafka()
        bootstrap = broker.bootstrap
    try:
        report = run(args.out.absolute(), bootstrap, args.topic, args.batch, args.phase_a_s, args.run_s, args.batches)
    finally:
        if broker is not None:
            broker.stop()
    print(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
