"""Consumer lag from exporters users already run: kafka_exporter, KMinion, kafka-lag-exporter and Burrow
(its Prometheus endpoint and its HTTP API), read into the same :class:`~collectors.kafka.lag.GroupLag`
the broker collector builds, so the same rules judge them.

Prometheus text is parsed by ``prometheus_client``'s parser (which accepts the Java client's trailing
comma in label sets, ``{a="b",}``, as kafka-lag-exporter writes them). Metric families, by exporter:

=====================  ========================================================================================
exporter               metrics read (labels)
=====================  ========================================================================================
kafka_exporter         ``kafka_consumergroup_current_offset`` / ``_lag`` (consumergroup, topic, partition),
                       ``kafka_topic_partition_current_offset`` / ``_oldest_offset`` (topic, partition),
                       ``kafka_consumergroup_members`` (consumergroup)
KMinion                ``kminion_kafka_consumer_group_topic_partition_lag`` (group_id, topic_name, partition_id),
                       ``kminion_kafka_topic_partition_high_water_mark`` / ``_low_water_mark``,
                       ``kminion_kafka_consumer_group_info`` (state), ``_members``
kafka-lag-exporter     ``kafka_consumergroup_group_lag`` / ``_group_offset`` / ``_group_lag_seconds``
                       (group, topic, partition), ``kafka_partition_latest_offset`` / ``_earliest_offset``,
                       ``kafka_consumergroup_group_max_lag`` / ``_max_lag_seconds`` (group)
Burrow                 ``burrow_kafka_consumer_partition_lag`` / ``_current_offset`` (consumer_group, topic,
                       partition), ``burrow_kafka_topic_partition_offset``, ``burrow_kafka_consumer_status``
                       (index into NOTFOUND, OK, WARN, ERR), ``burrow_kafka_consumer_lag_total``
=====================  ========================================================================================

Their numbers are kept as they report them (Burrow's test data has a committed offset above the topic
offset with a positive lag: it is not "fixed" here), with three corrections, the same as for the broker:

- a committed offset of ``-1`` (kafka_exporter's "no commit") makes the partition's lag *unknown*, whatever
  lag the exporter printed next to it (its README shows ``current_offset -1`` with ``lag 1``);
- a negative lag is clamped to 0 and counted as skew;
- ``NaN`` (kafka-lag-exporter's "no estimate") is unknown.

Burrow's HTTP API (``/v2|v3/kafka/<cluster>/consumer/<group>/status`` and ``.../lag``): ``complete`` is a
bool in v2 and a number (``1``) in v3; a partition's lag is ``current_lag`` (v3) or ``end.lag`` (v2), its
committed offset ``end.offset``; ``owner`` (v3) says a member owns it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from collectors.kafka.lag import GroupLag, PartitionLag, TopicPartition
from monitor.errors import InputError

__all__ = ["BURROW_STATUSES", "ExporterGroup", "parse_burrow_response", "parse_exporter_text"]

#: ``burrow_kafka_consumer_status`` values (Burrow ``httpserver/prometheus.go``).
BURROW_STATUSES = ("NOTFOUND", "OK", "WARN", "ERR")


@dataclass(slots=True)
class ExporterGroup:
    """One group as an exporter reports it.

    Attributes:
        lag: the partitions (as the broker collector's), state and members where reported.
        exporter: ``kafka_exporter``, ``kminion``, ``kafka-lag-exporter``, ``burrow`` or ``burrow-http``.
        status: the exporter's own verdict where it gives one (Burrow: OK, WARN, ERR, STOP, STALL, REWIND).
        complete: Burrow's "the window is full" flag.
        reported_lag: the group total the exporter printed (Burrow ``totallag``/``lag_total``), as is.
        max_lag / max_lag_seconds: kafka-lag-exporter's group maxima.
        partition_status: Burrow's per-partition status.
    """

    lag: GroupLag
    exporter: str
    status: str | None = None
    complete: bool | None = None
    reported_lag: float | None = None
    max_lag: float | None = None
    max_lag_seconds: float | None = None
    partition_status: dict[TopicPartition, str] = field(default_factory=dict)


def _num(v: float | None) -> float | None:
    if v is None or math.isnan(v) or math.isinf(v):
        return None
    return v


def _int(v: float | None) -> int | None:
    n = _num(v)
    return None if n is None else int(n)


@dataclass
class _Builder:
    committed: dict[TopicPartition, int | None] = field(default_factory=dict)
    lag: dict[TopicPartition, float | None] = field(default_factory=dict)
    lag_seconds: dict[TopicPartition, float | None] = field(default_factory=dict)
    state: str = "Unknown"
    members: int = 0
    status: str | None = None
    reported_lag: float | None = None
    max_lag: float | None = None
    max_lag_seconds: float | None = None


def _partition(
    key: TopicPartition,
    b: _Builder,
    log_end: Mapping[TopicPartition, int | None],
    log_start: Mapping[TopicPartition, int | None],
) -> PartitionLag:
    topic, partition = key
    has_committed = key in b.committed
    committed = b.committed.get(key)
    row = PartitionLag(topic, partition, committed, log_start.get(key), log_end.get(key))
    reported = _num(b.lag.get(key))
    if has_committed and (committed is None or committed < 0):
        row.committed = None
        row.note = "no committed offset"
    elif reported is not None:
        if reported < 0:
            row.skew = True
        row.lag = max(0, int(reported))
    elif committed is not None and row.log_end is not None:
        raw = row.log_end - committed
        row.skew = raw < 0
        row.lag = max(0, raw)
    else:
        row.note = "lag not reported"
    secs = _num(b.lag_seconds.get(key))
    if secs is not None and row.lag is not None:
        row.lag_seconds, row.lag_seconds_method = max(0.0, secs), "exporter"
    return row


_GROUP_LABEL = {"kafka_exporter": "consumergroup", "kminion": "group_id", "kafka-lag-exporter": "group",
                "burrow": "consumer_group"}


def _kind(names: set[str]) -> str:
    if any(n.startswith("kminion_") for n in names):
        return "kminion"
    if any(n.startswith("burrow_kafka_") for n in names):
        return "burrow"
    if {"kafka_consumergroup_group_lag", "kafka_consumergroup_group_max_lag",
            "kafka_consumergroup_group_offset", "kafka_consumergroup_group_lag_seconds"} & names:
        return "kafka-lag-exporter"
    return "kafka_exporter"


def parse_exporter_text(text: str, where: str = "scrape") -> list[ExporterGroup]:
    """Consumer groups in one exposition text of kafka_exporter, KMinion, kafka-lag-exporter or Burrow
    (told apart by their metric names; see the module docstring).

    Returns:
        One :class:`ExporterGroup` per group, sorted by group id (``[]`` when the text holds none).

    Raises:
        InputError: not Prometheus text (``where`` names the input).
    """
    try:
        samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise InputError(f"{where}: not Prometheus text exposition format: {first}") from None
    kind = _kind({s.name for s in samples})
    gl = _GROUP_LABEL[kind]
    groups: dict[str, _Builder] = defaultdict(_Builder)
    log_end: dict[TopicPartition, int | None] = {}
    log_start: dict[TopicPartition, int | None] = {}

    def tp(labels: Mapping[str, str]) -> TopicPartition | None:
        topic = labels.get("topic", labels.get("topic_name"))
        part = labels.get("partition", labels.get("partition_id"))
        if topic is None or part is None or not part.lstrip("-").isdigit():
            return None
        return topic, int(part)

    for s in samples:
        name, labels, value = s.name, s.labels, float(s.value)
        key = tp(labels)
        group = labels.get(gl)
        if name in ("kafka_topic_partition_current_offset", "kminion_kafka_topic_partition_high_water_mark",
                    "kafka_partition_latest_offset", "burrow_kafka_topic_partition_offset") and key:
            log_end[key] = _int(value)
        elif name in ("kafka_topic_partition_oldest_offset", "kminion_kafka_topic_partition_low_water_mark",
                      "kafka_partition_earliest_offset") and key:
            log_start[key] = _int(value)
        if group is None:
            continue
        b = groups[group]
        if name in ("kafka_consumergroup_current_offset", "kafka_consumergroup_group_offset",
                    "burrow_kafka_consumer_current_offset") and key:
            b.committed[key] = _int(value)
        elif name in ("kafka_consumergroup_lag", "kminion_kafka_consumer_group_topic_partition_lag",
                      "kafka_consumergroup_group_lag", "burrow_kafka_consumer_partition_lag") and key:
            b.lag[key] = value
        elif name == "kafka_consumergroup_group_lag_seconds" and key:
            b.lag_seconds[key] = value
        elif name in ("kafka_consumergroup_members", "kminion_kafka_consumer_group_members"):
            b.members = int(value)
        elif name == "kminion_kafka_consumer_group_info":
            b.state = labels.get("state", b.state)
        elif name == "kafka_consumergroup_group_max_lag":
            b.max_lag = _num(value)
        elif name == "kafka_consumergroup_group_max_lag_seconds":
            b.max_lag_seconds = _num(value)
        elif name == "burrow_kafka_consumer_lag_total":
            b.reported_lag = _num(value)
        elif name == "burrow_kafka_consumer_status":
            i = int(value)
            b.status = BURROW_STATUSES[i] if 0 <= i < len(BURROW_STATUSES) else str(i)
    out: list[ExporterGroup] = []
    for gid in sorted(groups):
        b = groups[gid]
        keys = sorted(set(b.committed) | set(b.lag) | set(b.lag_seconds))
        lag = GroupLag(gid, state=b.state, members=b.members,
                       partitions=[_partition(k, b, log_end, log_start) for k in keys])
        unknown = sum(1 for p in lag.partitions if p.lag is None)
        if unknown:
            lag.notes.append(f"{unknown} partition(s) with unknown lag (no committed offset): left out of the total")
        out.append(ExporterGroup(lag, kind, status=b.status, reported_lag=b.reported_lag, max_lag=b.max_lag,
                                 max_lag_seconds=b.max_lag_seconds))
    return out


def _complete(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return v >= 1
    return None


def parse_burrow_response(doc: Mapping[str, Any], where: str = "burrow") -> ExporterGroup:
    """A Burrow ``consumer/<group>/status`` (v2) or ``/lag`` (v3) response as an :class:`ExporterGroup`.

    Raises:
        InputError: Burrow answered ``"error": true``, or the document is not such a response (the
            message names ``where`` and the field).
    """
    if doc.get("error") is True:
        raise InputError(f"{where}: Burrow answered an error: {doc.get('message', '')}")
    status = doc.get("status")
    if not isinstance(status, Mapping) or not isinstance(status.get("partitions"), list):
        raise InputError(f"{where}: field status.partitions: missing (not a Burrow consumer status/lag response)")
    group = str(status.get("group", ""))
    lag = GroupLag(group)
    per_status: dict[TopicPartition, str] = {}
    for i, p in enumerate(status["partitions"]):
        try:
            topic, partition = str(p["topic"]), int(p["partition"])
            end = p.get("end") or {}
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{where}: field status.partitions[{i}]: needs topic and partition") from None
        current = p.get("current_lag", end.get("lag"))
        committed = end.get("offset")
        row = PartitionLag(topic, partition, committed if isinstance(committed, int) and committed >= 0 else None,
                           None, None, assigned=bool(p.get("owner")))
        if isinstance(current, int | float):
            row.skew = current < 0
            row.lag = max(0, int(current))
        else:
            row.note = "lag not reported"
        lag.partitions.append(row)
        if isinstance(p.get("status"), str):
            per_status[(topic, partition)] = p["status"]
    total = status.get("totallag")
    return ExporterGroup(
        lag, "burrow-http", status=status.get("status") if isinstance(status.get("status"), str) else None,
        complete=_complete(status.get("complete")),
        reported_lag=float(total) if isinstance(total, int | float) else None,
        partition_status=per_status,
    )
