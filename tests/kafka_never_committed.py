"""A consumer-group member that subscribes, gets its partitions and never commits one of them while a
producer writes (issue 17 §4): the scenario, shared by the integration test
(tests/integration/test_kafka_collector.py) and the recorder of tests/fixtures/kafka/never-committed, and
a replay of that recording through the real :class:`collectors.kafka.admin.KafkaAdminSource` parsing.

Scenario (:func:`start_member`, :func:`produce_more`): topic ``T`` with two partitions; 4 records on
partition 0 and :data:`BEFORE` records on partition 1 (record timestamps :data:`FIRST_RECORD_MS` + i s);
one member of group ``G`` (``enable.auto.commit=false``, ``auto.offset.reset=earliest``) subscribes, polls
until it owns both partitions, reads the records of both and commits partition 0's — never partition 1; then
:data:`AFTER` more records go to partition 1 while it keeps polling (alive, still the owner).

Run ``python -m tests.kafka_never_committed OUT.json`` to record (starts the test broker,
tests/kafka_broker.py): each poll's AdminClient answers as plain JSON (``describe_consumer_groups``,
``list_consumer_group_offsets`` for all partitions and for both partitions named, ``list_offsets``
earliest/latest, and the timestamp of the record at partition 1's log start). What it shows: asked for all
the group's partitions, ``OffsetFetch`` leaves the never-committed one out; asked by name, the broker's
``-1`` comes back from confluent-kafka as ``-1001`` (librdkafka's ``RD_KAFKA_OFFSET_INVALID``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ConsumerGroupDescription,
    ListOffsetsResultInfo,
    MemberAssignment,
    MemberDescription,
    OffsetSpec,
)

from collectors.kafka.admin import KafkaAdminSource, RecordTime
from collectors.kafka.options import KafkaOptions
from tests.kafka_clients import admin, create_topic, polling_member, produce

__all__ = ["AFTER", "BEFORE", "FIRST_RECORD_MS", "RecordedSource", "member", "produce_more", "record_poll"]

#: Records on partition 1 before the member joins, and produced while it owns it without committing.
BEFORE, AFTER = 12, 7
#: The timestamp of partition 1's first record (2026-11-29T11:00:00Z), then one per second.
FIRST_RECORD_MS = 1_795_950_000_000


@contextmanager
def member(bootstrap: str, topic: str, group: str) -> Iterator[None]:
    """Create ``topic``, write the first records, and keep one member of ``group`` alive (polling in a
    thread) that owns both partitions, committed partition 0 and never partition 1."""
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 4, partition=0, timestamp_ms=FIRST_RECORD_MS, step_ms=1000)
    produce(bootstrap, topic, BEFORE, partition=1, timestamp_ms=FIRST_RECORD_MS, step_ms=1000)
    ready = threading.Event()

    def commit_partition_0(c: Any, msg: Any) -> None:
        if msg.partition() == 0 and msg.offset() == 3:
            c.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
            ready.set()

    # enable.auto.commit false, auto.offset.reset earliest (tests.kafka_clients.consumer)
    with polling_member(bootstrap, group, topic, commit_partition_0):
        if not ready.wait(90):
            raise AssertionError("the member did not get its partitions and read partition 0 within 90 s")
        yield


def produce_more(bootstrap: str, topic: str) -> None:
    """:data:`AFTER` more records on partition 1 (timestamps continuing one per second)."""
    produce(bootstrap, topic, AFTER, partition=1, timestamp_ms=FIRST_RECORD_MS + BEFORE * 1000, step_ms=1000)


def _tp(tp: Any) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition, "offset": tp.offset,
            "error": None if tp.error is None else str(tp.error)}


def record_poll(bootstrap: str, topic: str, group: str) -> dict[str, Any]:
    """One poll's AdminClient answers as plain JSON (see the module docstring)."""
    a = admin(bootstrap)
    d = a.describe_consumer_groups([group], request_timeout=10)[group].result()
    describe = {
        "group_id": d.group_id, "state": d.state.name, "type": getattr(d.type, "name", str(d.type)),
        "partition_assignor": d.partition_assignor, "is_simple_consumer_group": d.is_simple_consumer_group,
        "members": [
            {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
             "assignment": [_tp(tp) for tp in (m.assignment.topic_partitions if m.assignment else [])]}
            for m in d.members
        ],
    }
    every = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)[group].result()
    named = a.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])], request_timeout=10
    )[group].result()
    log: dict[str, list[dict[str, Any]]] = {}
    for which, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest())):  # type: ignore[no-untyped-call]
        futs = a.list_offsets({TopicPartition(topic, p): spec for p in (0, 1)}, request_timeout=10)
        log[which] = [{"topic": tp.topic, "partition": tp.partition, "offset": f.result().offset,
                       "timestamp": f.result().timestamp, "leader_epoch": f.result().leader_epoch}
                      for tp, f in sorted(futs.items(), key=lambda kv: kv[0].partition)]
    start = next(r["offset"] for r in log["earliest"] if r["partition"] == 1)
    rec = KafkaAdminSource(KafkaOptions("record", bootstrap)).record_times({(topic, 1): start}, 10.0)
    first = rec.get((topic, 1))
    return {
        "describe_consumer_groups": describe,
        "list_consumer_group_offsets_all": [_tp(tp) for tp in every.topic_partitions or []],
        "list_consumer_group_offsets_named": [_tp(tp) for tp in named.topic_partitions or []],
        "list_offsets": log,
        "record_at_log_start": None if first is None else {"offset": first.offset, "timestamp_ms": first.timestamp_ms},
    }


def _done(value: Any) -> Future[Any]:
    fut: Future[Any] = Future()
    fut.set_result(value)
    return fut


class _Topics:
    def __init__(self, partitions: int) -> None:
        self.partitions = dict.fromkeys(range(partitions))
        self.error = None


class _Metadata:
    def __init__(self, topics: Mapping[str, int]) -> None:
        self.topics = {name: _Topics(n) for name, n in topics.items()}


class _RecordedAdmin:
    """An AdminClient answering one recorded poll with the client's own result classes."""

    def __init__(self, poll: Mapping[str, Any], offsets: str) -> None:
        self.poll = poll
        self.offsets = offsets

    def list_topics(self, timeout: float) -> _Metadata:
        parts: dict[str, int] = {}
        for row in self.poll["list_offsets"]["latest"]:
            parts[row["topic"]] = max(parts.get(row["topic"], 0), row["partition"] + 1)
        return _Metadata(parts)

    def describe_consumer_groups(self, ids: list[str], request_timeout: float) -> dict[str, Future[Any]]:
        d = self.poll["describe_consumer_groups"]
        members = [
            MemberDescription(m["member_id"], m["client_id"], m["host"],
                              MemberAssignment([TopicPartition(t["topic"], t["partition"]) for t in m["assignment"]]))
            for m in d["members"]
        ]
        desc = ConsumerGroupDescription(d["group_id"], d["is_simple_consumer_group"], members, d["partition_assignor"],
                                        d["state"], None)  # type: ignore[arg-type]
        return {gid: _done(desc) for gid in ids}

    def list_consumer_group_offsets(self, request: list[Any], request_timeout: float) -> dict[str, Future[Any]]:
        rows = self.poll[f"list_consumer_group_offsets_{self.offsets}"]
        gid = request[0].group_id
        return {gid: _done(ConsumerGroupTopicPartitions(
            gid, [TopicPartition(r["topic"], r["partition"], r["offset"]) for r in rows]))}

    def list_offsets(self, request: Mapping[Any, Any], request_timeout: float) -> dict[Any, Future[Any]]:
        out: dict[Any, Future[Any]] = {}
        for tp, spec in request.items():
            which = "earliest" if type(spec).__name__ == "EarliestSpec" else "latest"
            row = next(r for r in self.poll["list_offsets"][which]
                       if r["topic"] == tp.topic and r["partition"] == tp.partition)
            out[tp] = _done(ListOffsetsResultInfo(row["offset"], row["timestamp"], row["leader_epoch"]))
        return out


class RecordedSource(KafkaAdminSource):
    """:class:`KafkaAdminSource` (its real parsing of the client's result objects) over recorded polls:
    :meth:`next_poll` moves to the next one. ``offsets``: which recorded ``list_consumer_group_offsets``
    answer to give (``all``: the partitions the group committed; ``named``: both partitions asked for,
    ``-1001`` for the one never committed)."""

    def __init__(self, options: KafkaOptions, polls: list[dict[str, Any]], offsets: str = "all") -> None:
        super().__init__(options)
        self.polls = polls
        self.offsets = offsets
        self.index = 0
        self._admin = _RecordedAdmin(polls[0], offsets)

    def next_poll(self) -> None:
        self.index += 1
        self._admin = _RecordedAdmin(self.polls[self.index], self.offsets)

    def admin(self) -> Any:
        return self._admin

    def record_times(self, wanted: Mapping[tuple[str, int], int], timeout_s: float) -> dict[tuple[str, int], RecordTime]:
        rec = self.polls[self.index]["record_at_log_start"]
        return {k: RecordTime(rec["offset"], rec["timestamp_ms"], False) for k, o in wanted.items()
                if rec is not None and rec["offset"] == o}


def main(out: str) -> None:
    from tests.kafka_broker import KAFKA_VERSION, start_kafka

    broker = start_kafka()
    try:
        topic, group = "orders-never-committed", "billing-never-commits"
        with member(broker.bootstrap, topic, group):
            first = record_poll(broker.bootstrap, topic, group)
            produce_more(broker.bootstrap, topic)
            time.sleep(1.0)  # the member keeps polling: still alive and the owner
            second = record_poll(broker.bootstrap, topic, group)
        import confluent_kafka

        doc = {
            "provenance": {
                "kafka": KAFKA_VERSION, "client": f"confluent-kafka {confluent_kafka.version()} "
                f"(librdkafka {confluent_kafka.libversion()[0]})",
                "recorded_with": "python -m tests.kafka_never_committed OUT.json",
                "scenario": (f"topic {topic} (2 partitions): 4 records on partition 0, {BEFORE} on partition 1; "
                             f"group {group}: one member, enable.auto.commit=false, subscribes, reads both "
                             f"partitions, commits partition 0 only; poll 1 recorded; {AFTER} more records on "
                             "partition 1; poll 2 recorded"),
            },
            "topic": topic, "group": group, "polls": [first, second],
        }
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    finally:
        broker.stop()


if __name__ == "__main__":
    main(sys.argv[1])
