"""Consumer lag in offsets, per partition and per group, from committed, log-start and log-end offsets.

Pure functions over what the AdminClient returned (:mod:`collectors.kafka.admin`); no I/O. The cases the
usual exporters get wrong are decided here, once:

- **no committed offset** (the group commits on other partitions of the topic, or a member owns the
  partition, but never committed this one; ``OffsetFetch`` answers ``-1`` for a partition asked by name,
  which confluent-kafka's ``list_consumer_group_offsets`` hands back as ``-1001``, librdkafka's
  ``OFFSET_INVALID``, and leaves the partition out when all the group's partitions are asked for, as
  tidegauge does; recorded in tests/fixtures/kafka/never-committed): the lag is *unknown* (``None``), not
  ``log_end + 1`` (kafka_exporter's ``-1`` arithmetic), not ``-1`` and not ``0``. Group totals skip such
  partitions and count them (``unknown_partitions``);
- **never committed while a live member owns it** (:class:`Uncommitted`): where the consumer starts is
  its ``auto.offset.reset`` (``ConsumerConfig.AUTO_OFFSET_RESET_CONFIG``), which the group does not
  publish, so both readings are given: ``earliest`` — every record from the log-start offset waits
  (``log_end - log_start``, ``ListOffsets`` earliest/latest); ``latest`` — the consumer started at the log
  end of its first fetch, so the records produced since wait (``log_end`` now minus the log end at the
  first poll that saw the partition owned and uncommitted, a lower bound: records produced between its
  first fetch and that poll are not counted). A target may say which applies (``auto_offset_reset``).
  "Wait" is the group's view: a consumer that reads but never commits starts again from there after a
  restart or a rebalance;
- **negative lag** (the committed offset was read after the log-end offset and the consumer committed in
  between, or the two reads hit different replicas): clamped to ``0`` and counted as ``skew``, never a
  number below zero;
- **committed below the log-start offset** (retention or ``delete_records`` removed records the group
  had not read): ``lost`` = ``log_start - committed`` records are gone for this consumer (on its next
  fetch ``auto.offset.reset`` applies) and the lag is what it can still read, ``log_end - log_start`` —
  not a huge ``log_end - committed``;
- **deleted topic**: a committed offset on a topic that is no longer in the cluster's metadata has no lag
  (``None``, note ``topic deleted``).

Kafka's semantics (``KafkaConsumer#committed``, ``ListOffsets``): a committed offset is the offset of the
*next* record the group will read; the log-end offset (high watermark) is one past the last record;
so ``lag = log_end - committed`` records. A transactional producer's commit marker occupies one offset,
so a consumer that read everything may stay ``1`` behind: that residual is kept as ``lag = 1`` here (it is
an offset difference) and judged by the rule (:mod:`rules.consumer_lag`, which does not count it as growth)
and by the exact lag-in-seconds probe, which finds no record at the committed offset (``lag_seconds = 0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from monitor.model import INT64_MAX

if TYPE_CHECKING:
    from collectors.kafka.churn import Churn

__all__ = ["GroupLag", "PartitionLag", "TopicPartition", "Uncommitted", "group_lag", "partition_lag"]

TopicPartition = tuple[str, int]
"""``(topic, partition)``."""

#: ``auto.offset.reset`` values whose start position tidegauge can read off the log offsets.
AUTO_OFFSET_RESETS = ("earliest", "latest")


@dataclass(slots=True)
class Uncommitted:
    """Records waiting on a partition a live member owns but the group never committed (the module
    docstring: both ``auto.offset.reset`` readings).

    Attributes:
        if_earliest: ``log_end - log_start`` records (``auto.offset.reset=earliest``).
        if_latest: records produced since ``since_ms`` (``auto.offset.reset=latest``): ``log_end`` now minus
            ``log_end_then``; a lower bound (see the module docstring).
        since_ms: the first poll that saw the partition owned and uncommitted (epoch ms).
        log_end_then: the log-end offset at that poll.
        oldest_record_ms: the timestamp of the record at the log-start offset (epoch ms, the record-timestamp
            probe), ``None`` when not read: how long records wait if ``earliest``.
        auto_offset_reset: ``earliest``/``latest`` when the target says which applies, else ``None``
            (unknown: both readings apply).
    """

    if_earliest: int
    if_latest: int
    since_ms: int
    log_end_then: int
    oldest_record_ms: int | None = None
    auto_offset_reset: str | None = None

    @property
    def waiting(self) -> int:
        """The records waiting under the reading that applies; with the setting unknown, the smaller (the
        ``latest`` reading, which holds under both)."""
        if self.auto_offset_reset == "earliest":
            return self.if_earliest
        return self.if_latest

    def describe(self) -> str:
        """One line for a partition's note: ``never committed: 1,200 records wait if auto.offset.reset=earliest,
        300 if latest (the group's setting is not visible to tidegauge)``."""
        if self.auto_offset_reset == "earliest":
            return f"never committed: {self.if_earliest:,} record(s) wait (auto.offset.reset=earliest)"
        if self.auto_offset_reset == "latest":
            return f"never committed: {self.if_latest:,} record(s) produced since it was assigned wait (auto.offset.reset=latest)"
        return (
            f"never committed: {self.if_earliest:,} record(s) wait if auto.offset.reset=earliest, "
            f"{self.if_latest:,} if latest (the group's setting is not visible to tidegauge)"
        )


@dataclass(slots=True)
class PartitionLag:
    """Lag of one group on one partition.

    Attributes:
        topic / partition: which partition.
        committed: the group's committed offset; ``None`` when it has none.
        log_start / log_end: the partition's earliest and latest (high-watermark) offsets; ``None`` when
            unknown (deleted topic, failed request).
        lag: ``log_end - max(committed, log_start)`` records, ``>= 0``; ``None`` when unknown.
        lost: records removed by retention before the group read them (``log_start - committed``), else 0.
        skew: the committed offset was above the log-end offset (sampling skew); ``lag`` was clamped to 0.
        assigned: a live member of the group owns the partition now.
        lag_seconds: the lag as a time (see :mod:`collectors.kafka.interpolation` and
            :mod:`collectors.kafka.records`), ``None`` when unknown; ``lag_seconds_min`` a lower bound
            when only that is known; ``lag_seconds_method`` ``"interpolated"``/``"exact"``.
        note: why a value is unknown, in a few words (``no committed offset``, ``topic deleted``, ...).
        uncommitted: the records waiting when a live member owns the partition and the group never
            committed it (:class:`Uncommitted`), else ``None``.
    """

    topic: str
    partition: int
    committed: int | None
    log_start: int | None
    log_end: int | None
    lag: int | None = None
    lost: int = 0
    skew: bool = False
    assigned: bool = False
    lag_seconds: float | None = None
    lag_seconds_min: float | None = None
    lag_seconds_method: str | None = None
    note: str | None = None
    lag_seconds_note: str | None = None
    uncommitted: Uncommitted | None = None


def partition_lag(
    topic: str,
    partition: int,
    committed: int | None,
    log_start: int | None,
    log_end: int | None,
    *,
    topic_exists: bool = True,
    assigned: bool = False,
    first_seen: tuple[int, int] | None = None,
    auto_offset_reset: str | None = None,
) -> PartitionLag:
    """One partition's lag in records (the rules in the module docstring).

    ``committed``/``log_start``/``log_end`` below 0 (Kafka's ``-1`` "none") are unknown. ``first_seen``:
    ``(since_ms, log_end_then)`` of the first poll that saw the partition owned and uncommitted (the
    caller keeps it across polls); with it, an ``assigned`` partition without a committed offset whose
    log offsets are known gets :attr:`PartitionLag.uncommitted`. ``auto_offset_reset``: the group's setting
    when the user gave it (``earliest``/``latest``), else ``None``.
    """
    c = committed if committed is not None and committed >= 0 else None
    start = log_start if log_start is not None and log_start >= 0 else None
    end = log_end if log_end is not None and log_end >= 0 else None
    row = PartitionLag(topic, partition, c, start, end, assigned=assigned)
    if not topic_exists:
        row.note = "topic deleted"
        return row
    if c is None:
        row.note = "no committed offset"
        if assigned and first_seen is not None and start is not None and end is not None:
            since_ms, end_then = first_seen
            row.uncommitted = Uncommitted(
                if_earliest=max(0, end - start), if_latest=max(0, end - end_then), since_ms=since_ms,
                log_end_then=end_then, auto_offset_reset=auto_offset_reset,
            )
            if row.uncommitted.if_earliest:
                row.note = row.uncommitted.describe()
        return row
    if end is None:
        row.note = "log-end offset unknown"
        return row
    readable_from = c
    if start is not None and c < start:
        row.lost = start - c
        readable_from = start
        row.note = f"committed offset {c} is below the log-start offset {start}: {row.lost} records lost"
    raw = end - readable_from
    if raw < 0:
        row.skew = True
        raw = 0
    row.lag = raw
    return row


@dataclass(slots=True)
class GroupLag:
    """One consumer group's lag.

    Attributes:
        group: the group id.
        state: the group state as the broker names it (``Stable``, ``Empty``, ``PreparingRebalance``,
            ``CompletingRebalance``, ``Dead``, ``Unknown``; confluent-kafka ``ConsumerGroupState``).
        members: how many members the group has.
        partitions: per-partition lag, sorted by topic and partition.
        error: why the group could not be read (one line), else ``None``; then ``partitions`` is empty.
        notes: what a reader should know (partitions skipped by the totals, deleted topics, ...).
        group_type: ``classic`` or ``consumer`` (KIP-848), ``None`` when the broker does not say.
        churn: what changed since the collector's previous poll of the group
            (:class:`collectors.kafka.churn.Churn`), ``None`` on its first poll.
    """

    group: str
    state: str = "Unknown"
    members: int = 0
    partitions: list[PartitionLag] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    group_type: str | None = None
    churn: Churn | None = None

    @property
    def lag(self) -> int | None:
        """Sum of the known partition lags (at most int64's maximum, what a sample holds); ``None`` when no
        partition's lag is known."""
        known = [p.lag for p in self.partitions if p.lag is not None]
        return min(sum(known), INT64_MAX) if known else None

    @property
    def lag_seconds(self) -> float | None:
        """The largest known partition lag in seconds (the group is as late as its latest partition)."""
        known = [p.lag_seconds for p in self.partitions if p.lag_seconds is not None]
        return max(known) if known else None

    @property
    def unknown_partitions(self) -> int:
        """Partitions whose lag is unknown (skipped by :attr:`lag`)."""
        return sum(1 for p in self.partitions if p.lag is None)

    @property
    def skew_partitions(self) -> int:
        """Partitions whose negative lag was clamped to 0."""
        return sum(1 for p in self.partitions if p.skew)

    @property
    def lost_records(self) -> int:
        """Records lost to retention before the group read them, over all partitions (at most int64's maximum)."""
        return min(sum(p.lost for p in self.partitions), INT64_MAX)

    @property
    def uncommitted(self) -> list[Uncommitted]:
        """The partitions owned by a live member, never committed, with records in them."""
        return [p.uncommitted for p in self.partitions if p.uncommitted is not None and p.uncommitted.if_earliest]

    def uncommitted_note(self) -> str:
        """The group's note on them: how many partitions, the records waiting under each reading."""
        rows = self.uncommitted
        earliest = min(sum(u.if_earliest for u in rows), INT64_MAX)
        latest = min(sum(u.if_latest for u in rows), INT64_MAX)
        reset = rows[0].auto_offset_reset if rows else None
        head = f"{len(rows)} partition(s) owned by a live member were never committed by the group"
        if reset == "earliest":
            return f"{head}: {earliest:,} record(s) wait (auto.offset.reset=earliest), not in the lag total"
        if reset == "latest":
            return f"{head}: {latest:,} record(s) produced since they were assigned wait (auto.offset.reset=latest), not in the lag total"
        return (
            f"{head}: {earliest:,} record(s) wait if its auto.offset.reset is earliest, {latest:,} if latest "
            "(tidegauge cannot see the group's setting: set auto_offset_reset on the target); not in the lag total"
        )

    def topic_lag(self) -> dict[str, int | None]:
        """Per topic: the sum of its known partition lags (``None`` when none is known)."""
        out: dict[str, int | None] = {}
        for p in self.partitions:
            if p.lag is not None:
                out[p.topic] = min((out.get(p.topic) or 0) + p.lag, INT64_MAX)
            else:
                out.setdefault(p.topic, None)
        return out


def group_lag(
    group: str,
    *,
    state: str,
    members: int,
    committed: Mapping[TopicPartition, int | None],
    assigned: Iterable[TopicPartition],
    partitions_of: Mapping[str, int],
    log_offsets: Mapping[TopicPartition, tuple[int | None, int | None]],
    first_seen: Mapping[TopicPartition, tuple[int, int]] | None = None,
    auto_offset_reset: str | None = None,
) -> GroupLag:
    """Build a group's :class:`GroupLag`.

    Args:
        committed: the group's committed offsets (``OffsetFetch``), ``None``/``-1`` for none.
        assigned: partitions its members own now (``DescribeGroups``).
        partitions_of: topic -> partition count from the cluster metadata (a topic absent is deleted).
        log_offsets: ``(log_start, log_end)`` per partition.
        first_seen: per partition owned and uncommitted, ``(since_ms, log_end_then)`` of the first poll
            that saw it so (:func:`partition_lag`); ``auto_offset_reset``: the group's, when known.

    The partitions judged are every partition of every topic the group has committed on or is assigned
    (so a partition of such a topic without a commit shows as unknown lag), plus committed partitions of
    deleted topics.
    """
    owned = set(assigned)
    topics = {t for t, _ in committed} | {t for t, _ in owned}
    keys: set[TopicPartition] = set(committed) | owned
    for topic in topics:
        keys.update((topic, p) for p in range(partitions_of.get(topic, 0)))
    out = GroupLag(group, state=state, members=members)
    deleted: set[str] = set()
    for topic, partition in sorted(keys):
        exists = topic in partitions_of
        if not exists:
            deleted.add(topic)
        start, end = log_offsets.get((topic, partition), (None, None))
        out.partitions.append(
            partition_lag(
                topic,
                partition,
                committed.get((topic, partition)),
                start,
                end,
                topic_exists=exists,
                assigned=(topic, partition) in owned,
                first_seen=(first_seen or {}).get((topic, partition)),
                auto_offset_reset=auto_offset_reset,
            )
        )
    if out.uncommitted:
        out.notes.append(out.uncommitted_note())
    unknown = [p for p in out.partitions if p.note == "no committed offset"]
    if unknown:
        out.notes.append(
            f"{len(unknown)} partition(s) without a committed offset (no live member owns them, or they hold "
            "no record yet): lag unknown, left out of the total"
        )
    for topic in sorted(deleted):
        out.notes.append(f"topic {topic} was deleted: its committed offsets have no lag")
    if out.skew_partitions:
        out.notes.append(
            f"{out.skew_partitions} partition(s) committed past the log-end offset read before them "
            "(sampling skew): lag clamped to 0"
        )
    if out.lost_records:
        out.notes.append(f"{out.lost_records} record(s) were removed by retention before the group read them")
    if state == "Dead" or (not out.partitions and members == 0):
        out.notes.append("the group has no members and no committed offsets (Dead or unknown to the cluster)")
    return out
