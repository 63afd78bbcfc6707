"""The broker side: consumer groups, committed offsets, log offsets and record timestamps, read through
confluent-kafka's ``AdminClient`` and a ``Consumer`` (the ``kafka`` extra).

Each method is one step of a poll and returns plain data (``dict``/``tuple``), so the lag arithmetic
(:mod:`collectors.kafka.lag`) never sees client objects, and so a test can run the steps in any order
against a real broker (the sampling-skew case reads log-end offsets *before* the committed offsets).
Failures come back as per-item error strings (one failing group or topic never fails the others); only a
cluster that cannot be reached at all raises :class:`KafkaUnreachable`.

Kafka APIs used (KIP-88 ``OffsetFetch``, KIP-396 ``ListOffsets`` through the admin client):
``list_consumer_groups``, ``describe_consumer_groups`` (state, members, assignments),
``list_consumer_group_offsets`` (one group per request, as the client requires; ``concurrency`` requests
in flight), ``list_offsets`` with ``OffsetSpec.earliest()``/``latest()`` (log-start and log-end: the high
watermark, i.e. ``read_uncommitted``), ``list_topics`` (partition counts; a topic absent is deleted).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from collectors.kafka.lag import TopicPartition
from collectors.kafka.options import KafkaOptions
from monitor.errors import InputError

__all__ = [
    "INSTALL_KAFKA",
    "GroupDescription",
    "KafkaAdminSource",
    "KafkaUnreachable",
    "RecordTime",
    "error_text",
    "probe_consumer_config",
    "require_client",
]

#: How to install the Kafka client (pyproject's ``kafka`` extra: confluent-kafka).
INSTALL_KAFKA = "pip install 'tidegauge[kafka]'"

_STATES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "UNKNOWN": "Unknown",
    "UNKOWN": "Unknown",
}


class KafkaUnreachable(RuntimeError):
    """The cluster did not answer (bootstrap servers down, wrong address, authentication failed)."""


def require_client(what: str) -> None:
    """Check that confluent-kafka (the ``kafka`` extra) can be imported, before anything needs it.

    Raises:
        InputError: it cannot: ``WHAT needs the Kafka client: pip install 'tidegauge[kafka]' (...)``.
    """
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as exc:
        raise InputError(f"{what} needs the Kafka client: {INSTALL_KAFKA} ({exc})") from None


_NO_ANSWER = "no broker answered (is the address right, are the brokers up, and is the security protocol theirs?)"
#: librdkafka's error names (``KafkaError.name()``) of a cluster that cannot be reached, in plain words.
_UNREACHABLE_WORDS = {
    "_TRANSPORT": _NO_ANSWER,
    "_ALL_BROKERS_DOWN": _NO_ANSWER,
    "_TIMED_OUT": _NO_ANSWER,
    "_RESOLVE": "the broker host name does not resolve",
    "_AUTHENTICATION": "authentication failed",
    "SASL_AUTHENTICATION_FAILED": "authentication failed",
    "_SSL": "the TLS handshake failed",
}
#: Errors whose librdkafka text says more than the plain words (which credential, which certificate).
_WITH_DETAIL = {"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "_SSL"}


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """What ``DescribeGroups`` (classic) / ``ConsumerGroupDescribe`` (KIP-848) says of one group: state,
    member count and the partitions members own; ``member_ids`` and ``owners`` (partition -> member id) for
    rebalance churn (:mod:`collectors.kafka.churn`); ``group_type`` ``classic``/``consumer`` (the
    protocol), ``None`` when the broker does not say."""

    group: str
    state: str
    members: int
    assigned: tuple[TopicPartition, ...] = ()
    member_ids: tuple[str, ...] = ()
    owners: tuple[tuple[TopicPartition, str], ...] = ()
    group_type: str | None = None


@dataclass(frozen=True, slots=True)
class RecordTime:
    """The first record at or after an offset: its offset and timestamp (epoch ms), or none at all.

    ``offset``/``timestamp_ms`` are ``None`` when the partition holds no record from there to its end
    (``end_reached``: e.g. only a transaction's commit marker is left) or the fetch timed out.
    """

    offset: int | None
    timestamp_ms: int | None
    end_reached: bool


def _quiet_logger() -> logging.Logger:
    log = logging.getLogger("collectors.kafka.librdkafka")
    log.setLevel(logging.ERROR)
    return log


def error_text(exc: BaseException) -> str:
    """One line (at most 300 characters) of a confluent-kafka exception: its ``KafkaError.str()``."""
    args = getattr(exc, "args", ())
    err = args[0] if args else exc
    text = err.str() if hasattr(err, "str") else str(err)
    return " ".join(str(text).split())[:300]


def probe_consumer_config(
    options: KafkaOptions, isolation: str, partition_fetch_bytes: int, fetch_bytes: int = 1 << 20
) -> dict[str, Any]:
    """The librdkafka configuration of a read-only probe consumer of ``options``'s cluster (its
    connection and security settings, :meth:`KafkaOptions.client_config`): used with ``assign()`` only,
    never ``subscribe()`` (no group membership), with no commits (``enable.auto.commit`` and
    ``enable.auto.offset.store`` off) and partition-EOF events on.

    Args:
        options: the cluster.
        isolation: ``"read_committed"`` or ``"read_uncommitted"`` (librdkafka ``isolation.level``).
        partition_fetch_bytes: ``max.partition.fetch.bytes`` (bytes per partition per fetch).
        fetch_bytes: ``fetch.max.bytes`` (bytes per fetch request).
    """
    conf: dict[str, Any] = dict(options.client_config())
    conf.update(
        {
            "group.id": f"tidegauge-probe-{options.cluster}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "fetch.max.bytes": fetch_bytes,
            "max.partition.fetch.bytes": partition_fetch_bytes,
            "logger": _quiet_logger(),
        }
    )
    return conf


@dataclass
class KafkaAdminSource:
    """One cluster's admin connection (created lazily, reused across polls; :meth:`close` to release)."""

    options: KafkaOptions
    _admin: Any = field(default=None, repr=False)

    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            conf: dict[str, Any] = dict(self.options.client_config())
            conf["logger"] = _quiet_logger()
            self._admin = AdminClient(conf)
        return self._admin

    def close(self) -> None:
        """Drop the client (librdkafka closes its connections when it is collected)."""
        self._admin = None

    @property
    def _timeout(self) -> float:
        return self.options.request_timeout_s

    def _unreachable(self, exc: BaseException) -> KafkaUnreachable:
        """``kafka NAME (BOOTSTRAP, PROTOCOL): cannot reach the cluster within 3s: <plain words>``."""
        args = getattr(exc, "args", ())
        err: Any = args[0] if args else None
        name = str(err.name()) if hasattr(err, "name") else ""
        words = _UNREACHABLE_WORDS.get(name)
        if words is None:
            words = error_text(exc)
        elif name in _WITH_DETAIL:
            words = f"{words}: {error_text(exc)}"
        return KafkaUnreachable(
            f"{self.options.describe()}: cannot reach the cluster within {self._timeout:g}s: {words}"
        )

    def topics(self) -> dict[str, int]:
        """Topic -> partition count (internal topics included).

        Raises:
            KafkaUnreachable: no broker answered within the timeout.
        """
        try:
            md = self.admin().list_topics(timeout=self._timeout)
        except Exception as exc:
            raise self._unreachable(exc) from None
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def list_groups(self) -> tuple[list[str], list[str]]:
        """All consumer group ids the cluster lists, and the errors of brokers that did not answer."""
        try:
            result = self.admin().list_consumer_groups(request_timeout=self._timeout).result()
        except Exception as exc:
            raise self._unreachable(exc) from None
        return sorted(g.group_id for g in result.valid), [error_text(e) for e in result.errors]

    def describe(self, groups: Iterable[str]) -> dict[str, GroupDescription | str]:
        """Group -> description, or an error string for a group that could not be described."""
        ids = list(groups)
        if not ids:
            return {}
        out: dict[str, GroupDescription | str] = {}
        futures = self.admin().describe_consumer_groups(ids, request_timeout=self._timeout)
        for gid, fut in futures.items():
            try:
                d = fut.result()
            except Exception as exc:
                out[gid] = f"describe failed: {error_text(exc)}"
                continue
            owners: dict[TopicPartition, str] = {}
            for m in d.members:
                if m.assignment is not None:
                    owners.update(((tp.topic, tp.partition), str(m.member_id)) for tp in m.assignment.topic_partitions)
            state = _STATES.get(getattr(d.state, "name", str(d.state)), str(d.state))
            kind = getattr(getattr(d, "type", None), "name", None)
            out[gid] = GroupDescription(
                gid, state, len(d.members), tuple(sorted(owners)),
                member_ids=tuple(sorted(str(m.member_id) for m in d.members)), owners=tuple(sorted(owners.items())),
                group_type=kind.lower() if kind in ("CLASSIC", "CONSUMER") else None,
            )  # fmt: skip
        return out

    def committed(self, groups: Iterable[str]) -> dict[str, dict[TopicPartition, int | None] | str]:
        """Group -> committed offset per partition (``None`` for ``-1``), or an error string."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        ids = list(groups)
        out: dict[str, dict[TopicPartition, int | None] | str] = {}
        step = max(1, self.options.concurrency)
        for i in range(0, len(ids), step):
            pending: dict[str, Future[Any]] = {}
            for gid in ids[i : i + step]:
                try:
                    futs = self.admin().list_consumer_group_offsets(
                        [ConsumerGroupTopicPartitions(gid)], request_timeout=self._timeout
                    )
                    pending[gid] = futs[gid]
                except Exception as exc:
                    out[gid] = f"offset request failed: {error_text(exc)}"
            for gid, fut in pending.items():
                try:
                    res = fut.result()
                except Exception as exc:
                    out[gid] = f"offset request failed: {error_text(exc)}"
                    continue
                offsets: dict[TopicPartition, int | None] = {}
                for tp in res.topic_partitions or []:
                    if tp.error is not None:
                        continue
                    offsets[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
                out[gid] = offsets
        return out

    def log_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, tuple[int | None, int | None]], dict[str, str]]:
        """``(log_start, log_end)`` per partition, and topic -> error for topics that failed."""
        from confluent_kafka import TopicPartition as TP
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        parts = sorted(set(partitions))
        out: dict[TopicPartition, tuple[int | None, int | None]] = {}
        errors: dict[str, str] = {}
        if not parts:
            return out, errors
        values: dict[str, dict[TopicPartition, int | None]] = {}
        for which, spec in (("start", OffsetSpec.earliest()), ("end", OffsetSpec.latest())):  # type: ignore[no-untyped-call]
            futs = self.admin().list_offsets(
                {TP(t, p): spec for t, p in parts}, request_timeout=self._timeout
            )
            got: dict[TopicPartition, int | None] = {}
            for tp, fut in futs.items():
                try:
                    got[(tp.topic, tp.partition)] = fut.result().offset
                except Exception as exc:
                    got[(tp.topic, tp.partition)] = None
                    errors.setdefault(tp.topic, f"log offsets failed: {error_text(exc)}")
            values[which] = got
        for key in parts:
            out[key] = (values["start"].get(key), values["end"].get(key))
        return out, errors

    def record_times(
        self, wanted: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, RecordTime]:
        """The first record at or after each given offset (``read_committed``, as exactly-once consumers
        read): one consumer assigned to every partition at once, no group membership, no commits.

        A partition that reaches its end without a record (only control records left: a transaction's
        commit marker) has ``end_reached``; one that gave nothing before ``timeout_s`` is absent.
        """
        from confluent_kafka import Consumer, KafkaError
        from confluent_kafka import TopicPartition as TP

        if not wanted:
            return {}
        consumer = Consumer(probe_consumer_config(self.options, "read_committed", 1 << 16))
        out: dict[TopicPartition, RecordTime] = {}
        try:
            consumer.assign([TP(t, p, o) for (t, p), o in wanted.items()])
            deadline = time.monotonic() + timeout_s
            while len(out) < len(wanted) and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=500, timeout=0.2):
                    key = (str(msg.topic()), int(msg.partition() or 0))
                    if key in out or key not in wanted:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            out[key] = RecordTime(None, None, True)
                        continue
                    _kind, ts = msg.timestamp()
                    out[key] = RecordTime(msg.offset(), ts if ts >= 0 else None, False)
                    consumer.pause([TP(key[0], key[1])])
        finally:
            consumer.close()
        return out
