"""Small helpers driving the test broker with real clients (confluent-kafka): topics, producers, consumers
that commit exactly what a test says. Every test names its own topics and groups (:func:`unique`), so
the one session broker is shared without interference."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka_broker import quiet_logger

__all__ = [
    "FUTURE_OFFSET",
    "admin",
    "commit",
    "consume",
    "create_topic",
    "polling_member",
    "produce",
    "produce_orders_with_future",
    "unique",
]


def unique(prefix: str) -> str:
    """``prefix-<8 hex>``."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    """Create ``topic`` and wait until it is in the metadata."""
    a = admin(bootstrap)
    for fut in a.create_topics([NewTopic(topic, partitions, 1, config=config)]).values():
        fut.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if topic in a.list_topics(timeout=5).topics:
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} did not appear")


def produce(
    bootstrap: str, topic: str, count: int, partition: int = 0, timestamp_ms: int | None = None, step_ms: int = 0
) -> None:
    """Produce ``count`` records to one partition (timestamps ``timestamp_ms + i * step_ms`` if given)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    for i in range(count):
        kw: dict[str, Any] = {}
        if timestamp_ms is not None:
            kw["timestamp"] = timestamp_ms + i * step_ms
        p.produce(topic, value=f"r{i}".encode(), partition=partition, **kw)
    assert p.flush(30) == 0


#: The offset of the 2099 record of :func:`produce_orders_with_future`.
FUTURE_OFFSET = 30


def produce_orders_with_future(bootstrap: str, topic: str, count: int = 60) -> None:
    """Partition 0 of ``topic``: ``count`` records, key ``order-<i>``, value ``{"order": i, "ts": "..."}``
    with ``ts`` and the record timestamp 2020-01-01T12:00:00 + i seconds, except offset
    :data:`FUTURE_OFFSET`: both 2099-01-01T00:00:00 (the topic must allow timestamps ahead of the broker's
    clock: ``message.timestamp.after.max.ms``). Fails on any delivery error."""
    import json
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2020, 1, 1, 12, 0, tzinfo=UTC)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    failed: list[str] = []
    for i in range(count):
        at = datetime(2099, 1, 1, tzinfo=UTC) if i == FUTURE_OFFSET else t0 + timedelta(seconds=i)
        value = json.dumps({"order": i, "ts": at.strftime("%Y-%m-%dT%H:%M:%S")}).encode()
        p.produce(
            topic, key=f"order-{i}".encode(), value=value, partition=0, timestamp=int(at.timestamp() * 1000),
            on_delivery=lambda err, _m: failed.append(str(err)) if err is not None else None,
        )  # fmt: skip
    assert p.flush(30) == 0 and failed == [], failed


def consumer(bootstrap: str, group: str, **conf: Any) -> Consumer:
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "logger": quiet_logger(),
    }
    base.update(conf)
    return Consumer(base)


def consume(c: Consumer, count: int, timeout_s: float = 60.0) -> list[Any]:
    """Poll until ``count`` records arrived (raises AssertionError on timeout)."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    assert len(got) == count, f"consumed {len(got)} of {count}"
    return got


def commit(bootstrap: str, group: str, offsets: Iterable[tuple[str, int, int]]) -> None:
    """Commit ``(topic, partition, offset)`` for ``group`` without joining it (a standalone consumer)."""
    c = consumer(bootstrap, group)
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=False)
    finally:
        c.close()


@contextmanager
def polling_member(
    bootstrap: str, group: str, topic: str, on_message: Callable[[Consumer, Any], None] | None = None, **conf: Any
) -> Iterator[Consumer]:
    """A live member of ``group`` subscribed to ``topic``: a thread polls it (so it heartbeats, joins
    rebalances and keeps its partitions) until the block ends, then it leaves the group (``close``).
    ``on_message(consumer, msg)`` runs in that thread for each record; ``conf``: more consumer settings
    (e.g. ``{"group.protocol": "consumer"}`` for KIP-848)."""
    c = consumer(bootstrap, group, **conf)
    c.subscribe([topic])
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None and on_message is not None:
                on_message(c, msg)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield c
    finally:
        stop.set()
        t.join(10)
        c.close()
