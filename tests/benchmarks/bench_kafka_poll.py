"""Kafka lag poll cost: ``--groups`` consumer groups × ``--partitions`` partitions on the real test broker
(tests/kafka_broker.py: Apache Kafka 4.4.0, single-node KRaft, 512 MB heap).

Set-up (not timed): ``--topics`` topics sharing the partitions, three records per partition, then every
group commits offset 1 on every partition (lag 2: no transaction-marker probe) (so a poll reads groups × partitions committed offsets). Then
``--polls`` polls of :class:`collectors.kafka.KafkaLagCollector` (interpolated lag seconds, the default
method: no record fetches) are timed one by one, and the collector process's RSS (VmRSS/VmHWM) and the
broker's are read from /proc. "offsets/s" is committed offsets read and turned into lag per second of
poll wall time, the unit KMinion's figure of 100–120k offsets/s on 2 cores is quoted in.

Run: ``.venv/bin/python -m tests.benchmarks.bench_kafka_poll [--groups 100] [--partitions 1000] [--topics 10]``.
Not a test: it prints figures for the issue note.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from collectors.kafka import KafkaLagCollector, KafkaOptions
from tests.kafka_broker import quiet_logger, start_kafka


def _rss_mib(pid: int | str) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, seconds (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000, help="partitions in total")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    per_topic = args.partitions // args.topics
    t0 = time.monotonic()
    broker = start_kafka()
    print(f"broker up in {broker.startup_seconds:.1f} s ({broker.bootstrap})", flush=True)
    try:
        conf = {"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()}
        admin = AdminClient(conf)
        topics = [f"bench-{i}" for i in range(args.topics)]
        for fut in admin.create_topics([NewTopic(t, per_topic, 1) for t in topics], request_timeout=300).values():
            fut.result(600)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            md = admin.list_topics(timeout=30)
            if all(t in md.topics and len(md.topics[t].partitions) == per_topic for t in topics):
                break
            time.sleep(1)
        parts = [(t, p) for t in topics for p in range(per_topic)]
        producer = Producer({**conf, "linger.ms": 50})
        for t, p in parts:
            for value in (b"x", b"y", b"z"):
                producer.produce(t, value=value, partition=p)
        producer.flush(300)
        committer = Consumer({**conf, "group.id": "bench-setup", "enable.auto.commit": False})
        for g in range(args.groups):
            c = Consumer({**conf, "group.id": f"bench-group-{g:03d}", "enable.auto.commit": False})
            c.commit(offsets=[TopicPartition(t, p, 1) for t, p in parts], asynchronous=False)
            c.close()
        committer.close()
        print(f"set-up: {args.topics} topics, {len(parts)} partitions, {args.groups} groups "
              f"({args.groups * len(parts)} committed offsets) in {time.monotonic() - t0:.0f} s", flush=True)
        options = KafkaOptions("bench", broker.bootstrap, include=("bench-group-.*",),
                               concurrency=args.concurrency, request_timeout_s=120)
        collector = KafkaLagCollector(options)
        now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
        times: list[float] = []
        cpu: list[float] = []
        broker_cpu: list[float] = []
        assert broker.process is not None
        for i in range(args.polls):
            started, cpu0, b0 = time.monotonic(), time.process_time(), _cpu_s(broker.process.pid)
            result = collector.poll(now + timedelta(seconds=30 * i))
            times.append(time.monotonic() - started)
            cpu.append(time.process_time() - cpu0)
            broker_cpu.append(_cpu_s(broker.process.pid) - b0)
            n = sum(1 for s in result.samples if s.scope.partition is not None)
            lagged = sum(1 for s in result.samples if s.scope.partition is not None and s.lag_offsets == 2)
            print(f"poll {i}: {times[-1]:.2f} s wall, {cpu[-1]:.2f} s CPU here, {broker_cpu[-1]:.2f} s CPU in the "
                  f"broker, {n} partition samples ({lagged} with lag 2), "
                  f"{len(result.samples)} samples, {len(result.errors)} errors", flush=True)
        offsets = args.groups * len(parts)
        med = statistics.median(times)
        rss, hwm = _rss_mib("self")
        b_rss, b_hwm = _rss_mib(broker.process.pid) if broker.process else (0.0, 0.0)
        print(f"median poll {med:.2f} s (min {min(times):.2f}, max {max(times):.2f}) for {offsets} offsets: "
              f"{offsets / med:,.0f} offsets/s")
        cpu_med = statistics.median(cpu)
        print(f"median CPU per poll: {cpu_med:.2f} s in the collector ({offsets / cpu_med:,.0f} offsets per CPU "
              f"second), {statistics.median(broker_cpu):.2f} s in the broker; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"collector process RSS {rss:.0f} MiB (peak {hwm:.0f}); broker RSS {b_rss:.0f} MiB (peak {b_hwm:.0f})")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
