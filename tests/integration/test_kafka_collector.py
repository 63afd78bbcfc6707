"""The Kafka lag collector against the real broker (tests/kafka_broker.py): lag in offsets and seconds and
every case the usual exporters get wrong. Time: the collector's ``now`` is a fixed fake clock stepped by the
tests (interpolation tables are keyed by it); record timestamps are set by the producer."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer, TopicPartition

from collectors.kafka import KafkaLagCollector, KafkaOptions, group_samples
from collectors.kafka.admin import KafkaAdminSource
from collectors.kafka.lag import group_lag
from monitor.model import datetime_to_ms
from tests.kafka_broker import SASL_PASSWORD, SASL_USER, KafkaBroker, quiet_logger
from tests.kafka_clients import admin, commit, consume, consumer, create_topic, produce, unique

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def collector(broker: KafkaBroker, *groups: str, **kw: object) -> KafkaLagCollector:
    return KafkaLagCollector(KafkaOptions("test", broker.bootstrap, groups=tuple(groups), **kw))  # type: ignore[arg-type]


def only_group(c: KafkaLagCollector, now: datetime):  # type: ignore[no-untyped-def]
    snap = c.snapshot(now)
    assert len(snap.groups) == 1, snap
    return snap.groups[0]


def test_lag_per_partition_topic_and_group(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("orders"), unique("g")
    create_topic(kafka_broker.bootstrap, topic, 3)
    for p, n in enumerate((10, 20, 30)):
        produce(kafka_broker.bootstrap, topic, n, partition=p)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 4), (topic, 1, 20), (topic, 2, 5)])
    g = only_group(collector(kafka_broker, group, lag_seconds="none"), T0)
    assert g.state == "Empty" and g.members == 0 and g.error is None
    assert [(p.partition, p.committed, p.log_start, p.log_end, p.lag) for p in g.partitions] == [
        (0, 4, 0, 10, 6), (1, 20, 0, 20, 0), (2, 5, 0, 30, 25),
    ]
    assert g.lag == 31 and g.topic_lag() == {topic: 31} and g.unknown_partitions == 0
    samples = collector(kafka_broker, group, lag_seconds="none").poll(T0).samples
    by_scope = {(s.scope.source, s.scope.partition): s for s in samples}
    assert by_scope[(None, None)].lag_offsets == 31 and by_scope[(None, None)].job.job_id == f"test/{group}"
    assert by_scope[(topic, None)].lag_offsets == 31
    assert by_scope[(topic, 2)].committed_offset == 5 and by_scope[(topic, 2)].log_end_offset == 30


def test_group_selection_lists_include_and_exclude(kafka_broker: KafkaBroker) -> None:
    topic = unique("sel")
    create_topic(kafka_broker.bootstrap, topic)
    produce(kafka_broker.bootstrap, topic, 3)
    stem = unique("team")
    for name in ("etl", "etl-canary", "web"):
        commit(kafka_broker.bootstrap, f"{stem}-{name}", [(topic, 0, 1)])
    opts = KafkaOptions("test", kafka_broker.bootstrap, include=(f"{stem}-.*",), exclude=(".*-canary",),
                        lag_seconds="none")
    names = [g.group for g in KafkaLagCollector(opts).snapshot(T0).groups]
    assert names == [f"{stem}-etl", f"{stem}-web"]


def test_stable_group_with_a_partition_never_committed_has_unknown_lag(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("nocommit"), unique("g")
    create_topic(kafka_broker.bootstrap, topic, 2)
    produce(kafka_broker.bootstrap, topic, 5, partition=0)
    produce(kafka_broker.bootstrap, topic, 7, partition=1)
    c = consumer(kafka_broker.bootstrap, group)
    c.subscribe([topic])
    try:
        msgs = consume(c, 12)
        last0 = max(m.offset() for m in msgs if m.partition() == 0)
        c.commit(offsets=[TopicPartition(topic, 0, last0 + 1)], asynchronous=False)  # partition 1 never
        g = only_group(collector(kafka_broker, group, lag_seconds="none"), T0)
    finally:
        c.close()
    assert g.state == "Stable" and g.members == 1
    p0, p1 = g.partitions
    assert (p0.lag, p0.assigned) == (0, True)
    # not log_end + 1 (8), not -1, not 0: unknown; the group total skips it and says how many records wait
    assert p1.committed is None and p1.lag is None and p1.assigned
    assert p1.note == (
        "never committed: 7 record(s) wait if auto.offset.reset=earliest, 0 if latest "
        "(the group's setting is not visible to tidegauge)"
    )
    assert g.lag == 0 and g.unknown_partitions == 1
    assert any("1 partition(s) owned by a live member were never committed" in n for n in g.notes)


def test_a_member_that_never_commits_while_records_wait_is_a_finding(kafka_broker: KafkaBroker) -> None:
    """The issue-17 case on the real broker: a live member owns partition 1, reads it and never commits it
    while a producer writes (tests/kafka_never_committed.py); two polls of the collector on a fake clock
    six minutes apart; the consumer_lag rule's finding carries both readings of auto.offset.reset."""
    from monitor.model import Severity
    from rules.consumer_lag import LagParams, evaluate_lag
    from rules.history import job_history
    from tests.kafka_never_committed import AFTER, BEFORE, FIRST_RECORD_MS, member, produce_more

    topic, group = unique("never"), unique("g")
    c = collector(kafka_broker, group, lag_seconds="exact")
    samples = []
    with member(kafka_broker.bootstrap, topic, group):
        g1 = only_group(c, T0)
        samples += list(group_samples("test", g1, T0))
        produce_more(kafka_broker.bootstrap, topic)
        later = T0 + timedelta(minutes=6)
        g2 = only_group(c, later)
        samples += list(group_samples("test", g2, later))
    assert (g2.state, g2.members, g2.lag) == ("Stable", 1, 0)  # partition 0 committed and caught up
    u = g2.partitions[1].uncommitted
    assert u is not None and g2.partitions[1].committed is None
    # earliest: every record of the partition (12 + 7); latest: the 7 produced after the first poll
    assert (u.if_earliest, u.if_latest, u.since_ms, u.oldest_record_ms) == (
        BEFORE + AFTER, AFTER, datetime_to_ms(T0), FIRST_RECORD_MS,
    )
    h = job_history(samples)
    assert h is not None
    [f] = evaluate_lag(LagParams(), h, later)
    assert (f.severity, f.scope.partition, f.details["status"]) == (Severity.WARNING, 1, "NEVER_COMMITTED")
    assert (f.details["waiting_if_earliest"], f.details["waiting_if_latest"]) == (19, 7)
    assert f.details["oldest_waiting"] == "2026-11-29T11:00Z"


def test_transaction_marker_leaves_lag_one_that_is_caught_up(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("txn"), unique("g")
    create_topic(kafka_broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": unique("tx"),
                  "logger": quiet_logger()})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"t{i}".encode(), partition=0)
    p.commit_transaction(30)
    c = consumer(kafka_broker.bootstrap, group, **{"isolation.level": "read_committed"})
    c.subscribe([topic])
    try:
        last = consume(c, 10)[-1]
        c.commit(message=last, asynchronous=False)  # commits last.offset() + 1 = 10
    finally:
        c.close()
    for method in ("exact", "interpolated"):
        col = collector(kafka_broker, group, lag_seconds=method)
        (row,) = only_group(col, T0).partitions
        # 10 records + the commit marker at offset 10: log-end 11, lag 1 in offsets ...
        assert (row.committed, row.log_end, row.lag) == (10, 11, 1)
        # ... but no record is left to read: 0 s behind, found by reading at the committed offset
        assert row.lag_seconds == 0.0 and row.lag_seconds_method == "exact", method
        assert "transaction marker" in (row.lag_seconds_note or "")


def test_negative_lag_from_sampling_skew_is_clamped_and_counted(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("skew"), unique("g")
    create_topic(kafka_broker.bootstrap, topic)
    produce(kafka_broker.bootstrap, topic, 5)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 5)])
    src = KafkaAdminSource(KafkaOptions("test", kafka_broker.bootstrap))
    # the log-end offset read first, then the producer and the consumer move on, then the commit is read
    log_offsets, _ = src.log_offsets([(topic, 0)])
    produce(kafka_broker.bootstrap, topic, 3)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 8)])
    committed = src.committed([group])[group]
    assert isinstance(committed, dict)
    g = group_lag(group, state="Empty", members=0, committed=committed, assigned=(),
                  partitions_of=src.topics(), log_offsets=log_offsets)
    (row,) = g.partitions
    assert (row.committed, row.log_end) == (8, 5)
    assert row.lag == 0 and row.skew and g.skew_partitions == 1 and g.lag == 0
    assert any("sampling skew" in n for n in g.notes)


def test_committed_below_log_start_after_retention_is_data_lost(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("retention"), unique("g")
    create_topic(kafka_broker.bootstrap, topic)
    produce(kafka_broker.bootstrap, topic, 100)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 10)])
    a = admin(kafka_broker.bootstrap)
    for fut in a.delete_records([TopicPartition(topic, 0, 60)]).values():
        fut.result(30)  # what retention does: the log now starts at 60
    g = only_group(collector(kafka_broker, group, lag_seconds="none"), T0)
    (row,) = g.partitions
    assert (row.committed, row.log_start, row.log_end) == (10, 60, 100)
    # 50 records were lost to this consumer; it can still read 40, which is its lag (not 90)
    assert row.lost == 50 and row.lag == 40 and g.lost_records == 50
    assert "below the log-start offset" in (row.note or "")


def test_empty_rebalancing_and_dead_groups(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("states"), unique("g")
    create_topic(kafka_broker.bootstrap, topic, 2)
    produce(kafka_broker.bootstrap, topic, 4, partition=0)
    produce(kafka_broker.bootstrap, topic, 4, partition=1)
    dead = unique("never-existed")
    first = consumer(kafka_broker.bootstrap, group, **{"session.timeout.ms": 45000, "max.poll.interval.ms": 90000})
    first.subscribe([topic])
    second = None
    try:
        first.commit(message=consume(first, 8)[-1], asynchronous=False)
        # a second member joins; the first one does not poll, so the rebalance cannot complete
        second = consumer(kafka_broker.bootstrap, group)
        second.subscribe([topic])
        deadline = time.monotonic() + 30
        state = None
        col = collector(kafka_broker, group, dead, lag_seconds="none")
        while time.monotonic() < deadline:
            second.poll(0.2)
            snap = col.snapshot(T0)
            state = snap.groups[0].state
            if state == "PreparingRebalance":
                break
        assert state == "PreparingRebalance"
        rebalancing, gone = snap.groups
        assert rebalancing.error is None and rebalancing.lag is not None  # lag still reported
        assert gone.group == dead and gone.state == "Dead" and gone.partitions == [] and gone.error is None
        assert any("no members and no committed offsets" in n for n in gone.notes)
    finally:
        first.close()
        if second is not None:
            second.close()
    g = only_group(collector(kafka_broker, group, lag_seconds="none"), T0)
    assert g.state == "Empty" and g.members == 0 and g.lag is not None


def test_deleted_topic_is_reported_not_a_failed_poll(kafka_broker: KafkaBroker) -> None:
    keep, gone, group = unique("keep"), unique("gone"), unique("g")
    create_topic(kafka_broker.bootstrap, keep)
    create_topic(kafka_broker.bootstrap, gone)
    produce(kafka_broker.bootstrap, keep, 5)
    produce(kafka_broker.bootstrap, gone, 5)
    commit(kafka_broker.bootstrap, group, [(keep, 0, 2), (gone, 0, 1)])
    col = collector(kafka_broker, group, lag_seconds="none")
    assert {p.topic for p in only_group(col, T0).partitions} == {keep, gone}
    a = admin(kafka_broker.bootstrap)  # keep the client alive while its futures are pending
    for fut in a.delete_topics([gone]).values():
        fut.result(30)
    deadline = time.monotonic() + 30
    while gone in a.list_topics(timeout=5).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    result = col.poll(T0 + timedelta(seconds=30))
    assert result.errors == ()
    job = next(s for s in result.samples if s.scope.is_job())
    assert any(f"topic {gone} was deleted" in n for n in job.extra["notes"])
    assert {(s.scope.source, s.lag_offsets) for s in result.samples if s.scope.partition is not None} <= {
        (keep, 3), (gone, None)
    }


def test_one_failing_group_is_an_error_entry_and_an_unreachable_cluster_one_error(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("err"), unique("g")
    create_topic(kafka_broker.bootstrap, topic)
    produce(kafka_broker.bootstrap, topic, 2)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 1)])
    col = collector(kafka_broker, group, lag_seconds="none")
    real = col.source.committed

    def committed(groups):  # type: ignore[no-untyped-def]
        out = real([g for g in groups if g != "broken"])
        out["broken"] = "offset request failed: Broker: Group authorization failed"
        return out

    col.options = KafkaOptions("test", kafka_broker.bootstrap, groups=(group, "broken"), lag_seconds="none")
    col.source.committed = committed  # type: ignore[method-assign]
    result = col.poll(T0)
    assert [e.message for e in result.errors] == [
        "group broken: offset request failed: Broker: Group authorization failed"
    ]
    assert any(s.lag_offsets == 1 for s in result.samples if s.scope.partition == 0)
    down = KafkaLagCollector(KafkaOptions("down", "127.0.0.1:1", groups=("g",), request_timeout_s=2))
    (err,) = down.poll(T0).errors
    assert err.target == "kafka down (127.0.0.1:1, PLAINTEXT)"
    assert err.message == (
        "kafka down (127.0.0.1:1, PLAINTEXT): cannot reach the cluster within 2s: no broker answered "
        "(is the address right, are the brokers up, and is the security protocol theirs?)"
    )


def test_lag_seconds_interpolated_from_sampled_log_end_offsets(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("interp"), unique("g")
    create_topic(kafka_broker.bootstrap, topic)
    produce(kafka_broker.bootstrap, topic, 10)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 10)])
    col = collector(kafka_broker, group, lag_seconds="interpolated")
    assert only_group(col, T0).partitions[0].lag_seconds == 0.0  # caught up
    produce(kafka_broker.bootstrap, topic, 10)  # the log reaches 20 by T0 + 60 s
    commit(kafka_broker.bootstrap, group, [(topic, 0, 15)])
    row = only_group(col, T0 + timedelta(seconds=60)).partitions[0]
    # record 15 exists once the log-end passes 16: 6/10 of the way from (10, T0) to (20, T0+60) = T0+36 s
    assert row.lag == 5 and row.lag_seconds == pytest.approx(24.0) and row.lag_seconds_method == "interpolated"
    # no commit, no new records: 24 s + 30 s
    assert only_group(col, T0 + timedelta(seconds=90)).partitions[0].lag_seconds == pytest.approx(54.0)


def test_lag_seconds_is_not_extrapolated_past_the_oldest_sample(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("noextra"), unique("g")
    create_topic(kafka_broker.bootstrap, topic)
    produce(kafka_broker.bootstrap, topic, 10)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 2)])
    col = collector(kafka_broker, group, lag_seconds="interpolated")
    first = only_group(col, T0).partitions[0]
    assert first.lag == 8 and first.lag_seconds is None and "no estimate" in (first.lag_seconds_note or "")
    produce(kafka_broker.bootstrap, topic, 10)
    row = only_group(col, T0 + timedelta(hours=75)).partitions[0]
    # records 2..9 were written before the first sample: only a lower bound, never a made-up 75-hour slope
    assert row.lag_seconds is None and row.lag_seconds_min == pytest.approx(75 * 3600)
    assert "older than the oldest sample" in (row.lag_seconds_note or "")


def test_lag_seconds_exact_reads_the_record_at_the_committed_offset(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("exact"), unique("g")
    # records dated by the fixed clock, whatever today's date: no time retention, no future-timestamp limit
    create_topic(kafka_broker.bootstrap, topic, 2, **{"retention.ms": "-1",
                                                      "message.timestamp.after.max.ms": str(2**62)})
    base = datetime_to_ms(T0 - timedelta(minutes=10))
    assert base is not None
    produce(kafka_broker.bootstrap, topic, 10, partition=0, timestamp_ms=base, step_ms=60_000)
    produce(kafka_broker.bootstrap, topic, 10, partition=1, timestamp_ms=base, step_ms=60_000)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 4), (topic, 1, 9)])
    col = collector(kafka_broker, group, lag_seconds="exact", max_record_fetches=1)
    snap = col.snapshot(T0)
    p0, p1 = snap.groups[0].partitions
    # budget 1: the partition furthest behind (p0, lag 6) is read: record 4 written at T0 - 10 min + 4 min
    assert p0.lag_seconds == pytest.approx(360.0) and p0.lag_seconds_method == "exact"
    assert snap.record_fetches == 1
    assert p1.lag_seconds_method == "interpolated" and "budget" in (p1.lag_seconds_note or "")
    both = collector(kafka_broker, group, lag_seconds="exact").snapshot(T0).groups[0].partitions
    assert [r.lag_seconds for r in both] == [pytest.approx(360.0), pytest.approx(60.0)]


def test_sasl_plain_listener_and_a_wrong_password_never_shown(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("sasl"), unique("g")
    create_topic(kafka_broker.bootstrap, topic)
    produce(kafka_broker.bootstrap, topic, 4)
    commit(kafka_broker.bootstrap, group, [(topic, 0, 1)])
    security = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": SASL_USER}

    def over_sasl(password: str) -> KafkaLagCollector:
        return KafkaLagCollector(KafkaOptions("sasl", kafka_broker.sasl_bootstrap, groups=(group,),
                                              lag_seconds="none", request_timeout_s=5, security=security,
                                              secrets={"sasl.password": password}))

    result = over_sasl(SASL_PASSWORD).poll(T0)
    assert result.errors == ()
    assert [s.lag_offsets for s in result.samples if s.scope.partition == 0] == [3]
    (err,) = over_sasl("wrong-password-xyz").poll(T0).errors
    assert "SASL_PLAINTEXT" in err.target
    assert "wrong-password-xyz" not in err.message + err.target


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_rebalance_churn_of_members_coming_and_going(kafka_broker: KafkaBroker, protocol: str) -> None:
    """Members join and leave a group between polls of the collector (classic protocol, and KIP-848's
    consumer protocol, which Kafka 4.x brokers serve): each poll after a change says so; the
    rebalance_churn rule fires once more polls than max_rebalances saw one."""
    from monitor.model import Severity
    from rules.consumer_lag import ChurnParams, evaluate_churn
    from rules.history import job_history
    from tests.kafka_clients import polling_member

    topic, group = unique("churn"), unique("g")
    create_topic(kafka_broker.bootstrap, topic, 4)
    produce(kafka_broker.bootstrap, topic, 8, partition=0)
    conf = {"group.protocol": "consumer"} if protocol == "consumer" else {}
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    c = collector(kafka_broker, group, lag_seconds="none")
    samples = []
    clock = iter(T0 + timedelta(minutes=i) for i in range(20))

    def settled(members: int) -> None:
        """Poll (on the fake clock) once the group is Stable with ``members`` members that own all 4 partitions."""
        deadline = time.monotonic() + 90
        while True:
            desc = c.source.describe([group])[group]
            assert not isinstance(desc, str), desc
            if (desc.state, desc.members, len(desc.assigned)) == ("Stable", members, 4 if members else 0):
                break
            assert time.monotonic() < deadline, f"group not settled with {members} member(s): {desc}"
            time.sleep(0.5)
        now = next(clock)
        g = only_group(c, now)
        samples.extend(group_samples("test", g, now))

    with polling_member(kafka_broker.bootstrap, group, topic, **conf):
        settled(1)  # first poll: nothing to compare
        with polling_member(kafka_broker.bootstrap, group, topic, **conf):
            settled(2)  # a second member joined, partitions moved to it
            with polling_member(kafka_broker.bootstrap, group, topic, **conf):
                settled(3)
            settled(2)  # one left (close: LeaveGroup), its partitions moved
        settled(1)
        settled(1)  # nothing changed
    whole = [s for s in samples if s.scope.is_job()]
    assert whole[0].extra["group_type"] == protocol
    assert "rebalanced" not in whole[0].extra
    flags = [(s.extra["rebalanced"], s.extra["members_joined"], s.extra["members_left"]) for s in whole[1:]]
    assert flags == [(True, 1, 0), (True, 1, 0), (True, 0, 1), (True, 0, 1), (False, 0, 0)]
    assert all(s.extra["partitions_moved"] > 0 for s in whole[1:5]) and whole[5].extra["partitions_moved"] == 0
    h = job_history(samples)
    assert h is not None
    [f] = evaluate_churn(ChurnParams(max_rebalances=3), h, whole[-1].observed_at)
    assert f.severity is Severity.WARNING and (f.details["rebalances"], f.details["members_joined"],
                                               f.details["members_left"]) == (4, 2, 2)
    assert f.details["group_type"] == protocol
    assert evaluate_churn(ChurnParams(max_rebalances=4), h, whole[-1].observed_at) == []
