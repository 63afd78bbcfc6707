"""The Kafka consumer-lag collector: one poll of a cluster -> per-partition, per-topic and per-group samples.

A poll (:meth:`KafkaLagCollector.snapshot`), in this order:

0. one metadata request: a cluster that cannot be reached raises
   :class:`~collectors.kafka.admin.KafkaUnreachable` (in plain words) within one request timeout;
1. the groups: the configured ids, or every listed group, filtered by the include/exclude regexes;
2. their description (state, members, assignments) and committed offsets (``concurrency`` at once);
3. the topics' partition counts, then the log-start and log-end offsets of every partition involved —
   read *after* the committed offsets, so lag is never negative except after a truncation (the lag
   arithmetic still clamps and counts it: :mod:`collectors.kafka.lag`);
4. lag in seconds (:mod:`collectors.kafka.interpolation` from the per-partition tables this collector
   keeps across polls, or the exact record timestamps, :meth:`~collectors.kafka.admin.KafkaAdminSource.record_times`);
   for a partition a live member owns but the group never committed (:class:`~collectors.kafka.lag.Uncommitted`),
   the first poll that saw it so (kept across polls, like the tables) and the timestamp of the record at
   its log-start offset (the same probe, unless ``lag_seconds`` is ``none``).

Samples (``Engine.KAFKA``, kind ``GAUGE``, collector ``kafka-lag``, ``job_id`` ``cluster/group``, the
poll's ``now`` as ``observed_at``): one per partition (``scope = Scope(source=topic, partition=p)``:
``committed_offset``, ``log_end_offset``, ``lag_offsets``, ``lag_seconds``; ``extra``: ``log_start_offset``,
``lost``, ``skew``, ``assigned``, ``lag_seconds_min``, ``lag_seconds_method``, ``note``; for a partition
owned and never committed ``uncommitted_if_earliest``, ``uncommitted_if_latest`` (records), ``uncommitted_since_ms``,
``oldest_waiting_ms`` (epoch ms) and ``auto_offset_reset`` when the target gives it), one per topic
(``Scope(source=topic)``: the summed lag, the max lag in seconds) and one for the group (job scope:
``lag_offsets`` the sum of known partition lags, ``lag_seconds`` the max; ``extra``: ``state``,
``members``, ``unknown_partitions``, ``skew_partitions``, ``lost_records``, ``notes``; with partitions owned
and never committed ``uncommitted_partitions``, ``uncommitted_if_earliest``, ``uncommitted_if_latest``;
``group_type`` when the broker says; from the second poll of a group on, its rebalance churn since the previous
poll, :mod:`collectors.kafka.churn`: ``rebalanced``, ``members_joined``, ``members_left``, ``partitions_moved``).

A group that cannot be read is a :class:`~monitor.model.CollectorError` naming it, not a failed poll; an
unreachable cluster is one error for the target. The tables live in this object: after a restart the
interpolated lag needs two polls again (it says so).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from collectors.base import PollsOnce
from collectors.kafka.admin import GroupDescription, KafkaAdminSource, KafkaUnreachable, RecordTime
from collectors.kafka.churn import Membership, churn
from collectors.kafka.interpolation import OffsetTimeTable
from collectors.kafka.lag import GroupLag, PartitionLag, TopicPartition, group_lag
from collectors.kafka.options import KafkaOptions
from monitor.model import (
    INT64_MAX,
    CollectorError,
    Engine,
    ErrorKind,
    JobRef,
    PollResult,
    Sample,
    SampleKind,
    Scope,
    datetime_to_ms,
    ms_to_datetime,
)

__all__ = ["COLLECTOR_NAME", "KafkaLagCollector", "Snapshot", "group_samples", "groups_samples"]

COLLECTOR_NAME = "kafka-lag"


@dataclass(slots=True)
class Snapshot:
    """One poll's result before it becomes samples: per-group lag and the errors met."""

    groups: list[GroupLag] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    record_fetches: int = 0


class KafkaLagCollector(PollsOnce):
    """Polls one Kafka cluster's consumer groups (see the module docstring).

    Args:
        options: the target.
        source: the broker access (default: a :class:`KafkaAdminSource` for ``options``).
    """

    name = COLLECTOR_NAME

    def __init__(self, options: KafkaOptions, source: KafkaAdminSource | None = None) -> None:
        self.options = options
        self.source = source or KafkaAdminSource(options)
        self.tables: dict[TopicPartition, OffsetTimeTable] = {}
        self._topics_seen: dict[str, set[str]] = {}
        #: (group, topic, partition) -> (since_ms, log_end_then): the first poll that saw it owned and uncommitted
        self._uncommitted_first: dict[tuple[str, str, int], tuple[int, int]] = {}
        #: group -> its members and partition owners at the previous poll (rebalance churn)
        self._membership: dict[str, Membership] = {}

    def close(self) -> None:
        """Release the client."""
        self.source.close()

    def _groups(self) -> tuple[list[str], list[str]]:
        if self.options.groups and not self.options.include:
            return [g for g in self.options.groups if self.options.wanted(g)], []
        listed, errors = self.source.list_groups()
        wanted = {g for g in listed if self.options.wanted(g)}
        wanted.update(g for g in self.options.groups if self.options.wanted(g))
        return sorted(wanted), errors

    def snapshot(self, now: datetime) -> Snapshot:
        """Read the cluster once and compute lag (offsets and seconds) per group.

        Raises:
            KafkaUnreachable: the cluster did not answer at all.
        """
        snap = Snapshot()
        # one metadata request first: an unreachable cluster fails here, within one request timeout, rather
        # than after a timeout for each of the steps below (the counts are read again after the offsets)
        self.source.topics()
        groups, list_errors = self._groups()
        snap.errors.extend(f"list groups: {e}" for e in list_errors)
        descriptions = self.source.describe(groups)
        committed = self.source.committed(groups)
        partitions_of = self.source.topics()
        involved: set[TopicPartition] = set()
        for gid in groups:
            offsets = committed.get(gid)
            desc = descriptions.get(gid)
            topics: set[str] = set()
            if isinstance(offsets, dict):
                topics.update(t for t, _ in offsets)
            if isinstance(desc, GroupDescription):
                topics.update(t for t, _ in desc.assigned)
            for t in topics:
                involved.update((t, p) for p in range(partitions_of.get(t, 0)))
        log_offsets, topic_errors = self.source.log_offsets(involved)
        snap.errors.extend(f"topic {t}: {e}" for t, e in sorted(topic_errors.items()))
        for gid in groups:
            desc = descriptions.get(gid)
            offsets = committed.get(gid)
            if isinstance(desc, str) or isinstance(offsets, str) or desc is None or offsets is None:
                reason = (
                    desc if isinstance(desc, str) else offsets if isinstance(offsets, str) else "no answer"
                )
                snap.groups.append(GroupLag(gid, error=reason))
                snap.errors.append(f"group {gid}: {reason}")
                continue
            lag = group_lag(
                gid,
                state=desc.state,
                members=desc.members,
                committed=offsets,
                assigned=desc.assigned,
                partitions_of=partitions_of,
                log_offsets=log_offsets,
                first_seen=self._first_seen(gid, desc.assigned, offsets, log_offsets, now),
                auto_offset_reset=self.options.auto_offset_reset,
            )
            gone = sorted(self._topics_seen.get(gid, set()) - set(partitions_of))
            for topic in gone:
                if not any(p.topic == topic for p in lag.partitions):
                    lag.notes.append(f"topic {topic} was deleted since the last poll")
            self._topics_seen[gid] = {p.topic for p in lag.partitions if p.note != "topic deleted"}
            membership = Membership(frozenset(desc.member_ids), dict(desc.owners), desc.state)
            lag.group_type, lag.churn = desc.group_type, churn(self._membership.get(gid), membership)
            self._membership[gid] = membership
            snap.groups.append(lag)
        self._lag_seconds(snap, log_offsets, now)
        return snap

    def _first_seen(
        self,
        group: str,
        assigned: Iterable[TopicPartition],
        committed: Mapping[TopicPartition, int | None],
        log_offsets: Mapping[TopicPartition, tuple[int | None, int | None]],
        now: datetime,
    ) -> dict[TopicPartition, tuple[int, int]]:
        """``(since_ms, log_end_then)`` per partition of ``group`` owned and without a committed offset: kept
        from the first poll that saw it so; forgotten once it is committed or no longer owned (a later
        sighting starts again)."""
        now_ms = datetime_to_ms(now)
        assert now_ms is not None
        out: dict[TopicPartition, tuple[int, int]] = {}
        for topic, partition in assigned:
            end = log_offsets.get((topic, partition), (None, None))[1]
            if committed.get((topic, partition)) is not None or end is None or end < 0:
                continue
            out[(topic, partition)] = self._uncommitted_first.setdefault((group, topic, partition), (now_ms, end))
        for key in [k for k in self._uncommitted_first if k[0] == group and (k[1], k[2]) not in out]:
            del self._uncommitted_first[key]
        return out

    def _lag_seconds(
        self, snap: Snapshot, log_offsets: dict[TopicPartition, tuple[int | None, int | None]], now: datetime
    ) -> None:
        now_ms = datetime_to_ms(now)
        assert now_ms is not None
        method = self.options.lag_seconds
        if method == "none":
            return
        for key, (_start, end) in log_offsets.items():
            if end is not None and end >= 0:
                self.tables.setdefault(key, OffsetTimeTable(self.options.table_points)).add(end, now_ms)
        rows = [p for g in snap.groups for p in g.partitions if p.lag is not None]
        probe: list[PartitionLag] = []
        if method == "exact":
            probe = sorted((p for p in rows if p.lag), key=lambda p: -(p.lag or 0))
        else:
            probe = [p for p in rows if p.lag == 1]
        waiting = [p for g in snap.groups for p in g.partitions if p.uncommitted is not None and p.uncommitted.if_earliest]
        probe = (waiting + probe)[: self.options.max_record_fetches]
        wanted = {(p.topic, p.partition): max(p.committed or 0, p.log_start or 0) for p in probe}
        times: dict[TopicPartition, RecordTime] = {}
        if wanted:
            times = self.source.record_times(wanted, self.options.request_timeout_s)
            snap.record_fetches = len(wanted)
        probed = set(wanted)
        for p in waiting:
            rec = times.get((p.topic, p.partition))
            if p.uncommitted is not None and rec is not None and rec.timestamp_ms is not None:
                try:  # a producer may set any timestamp: one outside the model's range is not kept
                    ms_to_datetime(rec.timestamp_ms)
                except ValueError:
                    continue
                p.uncommitted.oldest_record_ms = rec.timestamp_ms
        for p in rows:
            key = (p.topic, p.partition)
            rec = times.get(key)
            if p.lag == 0:
                p.lag_seconds, p.lag_seconds_method = 0.0, method
            elif rec is not None and rec.end_reached:
                p.lag_seconds, p.lag_seconds_method = 0.0, "exact"
                p.lag_seconds_note = "no record after the committed offset (a transaction marker): caught up"
            elif rec is not None and rec.timestamp_ms is not None:
                p.lag_seconds, p.lag_seconds_method = max(0.0, (now_ms - rec.timestamp_ms) / 1000.0), "exact"
            else:
                if method == "exact":
                    p.lag_seconds_note = (
                        "record fetch timed out"
                        if key in probed
                        else "record fetch budget for this poll used up"
                    )
                table = self.tables.get(key)
                if table is None or p.committed is None or p.log_end is None:
                    continue
                est = table.estimate(max(p.committed, p.log_start or 0), p.log_end, now_ms)
                p.lag_seconds, p.lag_seconds_min = est.seconds, est.at_least
                p.lag_seconds_method = "interpolated"
                if est.note:
                    p.lag_seconds_note = f"{p.lag_seconds_note}; {est.note}" if p.lag_seconds_note else est.note

    def checkpoint_lag(self, query: str, end_offsets: Mapping[TopicPartition, int], now: datetime) -> GroupLag:
        """Lag of a reader that keeps its offsets itself (a Spark query's checkpoint,
        :mod:`collectors.kafka.spark`): ``end_offsets`` taken as its committed offsets, against the
        broker's log offsets now; lag in seconds as for a group (same tables, same method).

        Raises:
            KafkaUnreachable: the cluster did not answer.
        """
        partitions_of = self.source.topics()
        log_offsets, topic_errors = self.source.log_offsets(
            k for k in end_offsets if k[0] in partitions_of
        )
        lag = group_lag(
            query, state="Spark checkpoint", members=0, committed=dict(end_offsets), assigned=tuple(end_offsets),
            partitions_of=partitions_of, log_offsets=log_offsets,
        )
        snap = Snapshot([lag], [f"topic {t}: {e}" for t, e in sorted(topic_errors.items())])
        self._lag_seconds(snap, log_offsets, now)
        return lag

    def poll(self, now: datetime) -> PollResult:
        """One poll as samples and errors (never raises for the cluster's failures)."""
        try:
            snap = self.snapshot(now)
        except KafkaUnreachable as exc:
            return PollResult(errors=(CollectorError(self.name, self.options.describe(), str(exc), now),))
        samples, refused = groups_samples(
            self.options.cluster, [g for g in snap.groups if g.error is None], now, self.name, self.options.describe()
        )
        errors = tuple(CollectorError(self.name, self.options.describe(), e, now) for e in snap.errors)
        return PollResult(samples=tuple(samples), errors=errors + tuple(refused))


def groups_samples(
    cluster: str, lags: Iterable[GroupLag], now: datetime, collector: str, target: str
) -> tuple[list[Sample], list[CollectorError]]:
    """:func:`group_samples` of each group, and one ``field`` error per group the model cannot hold (a group
    or topic name longer than :data:`monitor.model.MAX_ID_CHARS` / ``MAX_DESCRIPTION_CHARS`` or holding a
    NUL: :func:`monitor.model.check_name`); the other groups' samples are kept."""
    samples: list[Sample] = []
    refused: list[CollectorError] = []
    for lag in lags:
        try:
            group = list(group_samples(cluster, lag, now, collector))  # all of the group or none of it
        except ValueError as exc:
            message = f"consumer group {lag.group[:80]!r}: {exc}; group skipped"
            refused.append(CollectorError(collector, target, message, now, retryable=False, kind=ErrorKind.FIELD))
        else:
            samples.extend(group)
    return samples, refused


def _job(cluster: str, group: str) -> JobRef:
    return JobRef(Engine.KAFKA, f"{cluster}/{group}", name=group, app_id=cluster)


def group_samples(cluster: str, lag: GroupLag, now: datetime, collector: str = COLLECTOR_NAME) -> Iterable[Sample]:
    """The samples of one group's lag (shapes: the module docstring); ``collector`` names their source."""
    job = _job(cluster, lag.group)
    for p in lag.partitions:
        extra: dict[str, object] = {"assigned": p.assigned}
        if p.log_start is not None:
            extra["log_start_offset"] = p.log_start
        if p.lost:
            extra["lost"] = p.lost
        if p.skew:
            extra["skew"] = True
        if p.lag_seconds_min is not None:
            extra["lag_seconds_min"] = p.lag_seconds_min
        if p.lag_seconds_method is not None:
            extra["lag_seconds_method"] = p.lag_seconds_method
        if p.note is not None:
            extra["note"] = p.note
        if p.lag_seconds_note is not None:
            extra["lag_seconds_note"] = p.lag_seconds_note
        if p.uncommitted is not None:
            u = p.uncommitted
            extra.update(uncommitted_if_earliest=u.if_earliest, uncommitted_if_latest=u.if_latest,
                         uncommitted_since_ms=u.since_ms)
            if u.oldest_record_ms is not None:
                extra["oldest_waiting_ms"] = u.oldest_record_ms
            if u.auto_offset_reset is not None:
                extra["auto_offset_reset"] = u.auto_offset_reset
        yield Sample(
            job=job, observed_at=now, kind=SampleKind.GAUGE, collector=collector,
            scope=Scope(source=p.topic, partition=p.partition), committed_offset=p.committed,
            log_end_offset=p.log_end, lag_offsets=p.lag, lag_seconds=p.lag_seconds, extra=extra,
        )
    by_topic: dict[str, list[PartitionLag]] = {}
    for p in lag.partitions:
        by_topic.setdefault(p.topic, []).append(p)
    for topic, rows in by_topic.items():
        known = [r.lag for r in rows if r.lag is not None]
        secs = [r.lag_seconds for r in rows if r.lag_seconds is not None]
        yield Sample(
            job=job,
            observed_at=now,
            kind=SampleKind.GAUGE,
            collector=COLLECTOR_NAME,
            scope=Scope(source=topic),
            lag_offsets=min(sum(known), INT64_MAX) if known else None,
            lag_seconds=max(secs) if secs else None,
            extra={"unknown_partitions": sum(1 for r in rows if r.lag is None)},
        )
    whole: dict[str, object] = {
        "state": lag.state,
        "members": lag.members,
        "unknown_partitions": lag.unknown_partitions,
        "skew_partitions": lag.skew_partitions,
        "lost_records": lag.lost_records,
        "notes": list(lag.notes),
    }
    if lag.group_type is not None:
        whole["group_type"] = lag.group_type
    if lag.churn is not None:
        whole.update(rebalanced=lag.churn.rebalanced, members_joined=lag.churn.joined, members_left=lag.churn.left,
                     partitions_moved=lag.churn.moved)
    if lag.uncommitted:
        whole.update(
            uncommitted_partitions=len(lag.uncommitted),
            uncommitted_if_earliest=min(sum(u.if_earliest for u in lag.uncommitted), INT64_MAX),
            uncommitted_if_latest=min(sum(u.if_latest for u in lag.uncommitted), INT64_MAX),
        )
    yield Sample(
        job=job,
        observed_at=now,
        kind=SampleKind.GAUGE,
        collector=COLLECTOR_NAME,
        lag_offsets=lag.lag,
        lag_seconds=lag.lag_seconds,
        extra=whole,
    )
