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

Bounds, checked before a value is kept: an offset or lag beyond int64 (``1e30``, Kafka's offsets are
int64), or a partition label that is not an int32 (``partition="99999...9"``), leaves that value (or that
series) out as unknown with one problem naming the series and the label or value
(:attr:`ExporterScrape.problems`, which the collector reports as ``field`` errors); the other groups and
partitions are kept.

Burrow's HTTP API (``/v2|v3/kafka/<cluster>/consumer/<group>/status`` and ``.../lag``): ``complete`` is a
bool in v2 and a number (``1``) in v3; a partition's lag is ``current_lag`` (v3) or ``end.lag`` (v2), its
committed offset ``end.offset``; ``owner`` (v3) says a member owns it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from collectors.exposition import parse_exposition
from collectors.jsontext import json_text
from collectors.kafka.lag import GroupLag, PartitionLag, TopicPartition
from monitor.errors import InputError
from monitor.model import INT64_MAX

__all__ = [
    "BURROW_STATUSES",
    "MAX_PARTITION",
    "ExporterGroup",
    "ExporterScrape",
    "parse_burrow_response",
    "parse_exporter_scrape",
    "parse_exporter_text",
]

#: The highest partition number (Kafka's partition ids are int32).
MAX_PARTITION = 2**31 - 1
#: Problems listed one by one per scrape; more are counted in one last line.
_MAX_PROBLEMS = 10

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
    """A finite number (an int of any size is one); ``NaN``/``±inf``/``None``: ``None``."""
    if v is None or isinstance(v, int):
        return v
    if math.isnan(v) or math.isinf(v):
        return None
    return v


def _int(v: float | None) -> int | None:
    """A finite value within int64 as an int (an offset, a count); else ``None``."""
    n = _num(v)
    return None if n is None or abs(n) > INT64_MAX else int(n)


def _partition_number(text: str) -> int | None:
    """A partition label as Kafka's int32 partition id (``-1`` kept: "none"); else ``None``."""
    digits = text[1:] if text.startswith("-") else text
    if not digits.isdigit() or not digits.isascii() or len(digits) > len(str(MAX_PARTITION)):
        return None
    number = int(text)
    return number if -1 <= number <= MAX_PARTITION else None


@dataclass(slots=True)
class ExporterScrape:
    """What one exposition text held: the groups, and the values left out as out of bounds (one line each,
    naming the series and the label or value; at most ``_MAX_PROBLEMS`` lines, then a count)."""

    groups: list[ExporterGroup]
    problems: list[str] = field(default_factory=list)


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


_LOG_END = frozenset({"kafka_topic_partition_current_offset", "kminion_kafka_topic_partition_high_water_mark",
                      "kafka_partition_latest_offset", "burrow_kafka_topic_partition_offset"})
_LOG_START = frozenset({"kafka_topic_partition_oldest_offset", "kminion_kafka_topic_partition_low_water_mark",
                        "kafka_partition_earliest_offset"})
_COMMITTED = frozenset({"kafka_consumergroup_current_offset", "kafka_consumergroup_group_offset",
                        "burrow_kafka_consumer_current_offset"})
_LAG = frozenset({"kafka_consumergroup_lag", "kminion_kafka_consumer_group_topic_partition_lag",
                  "kafka_consumergroup_group_lag", "burrow_kafka_consumer_partition_lag"})
_PER_PARTITION = _LOG_END | _LOG_START | _COMMITTED | _LAG | {"kafka_consumergroup_group_lag_seconds"}


def parse_exporter_text(text: str, where: str = "scrape") -> list[ExporterGroup]:
    """The groups of :func:`parse_exporter_scrape` (its problems dropped).

    Raises:
        InputError: not Prometheus text (``where`` names the input).
    """
    return parse_exporter_scrape(text, where).groups


def parse_exporter_scrape(text: str, where: str = "scrape") -> ExporterScrape:
    """Consumer groups in one exposition text of kafka_exporter, KMinion, kafka-lag-exporter or Burrow
    (told apart by their metric names; see the module docstring), and the values out of bounds.

    Returns:
        One :class:`ExporterGroup` per group, sorted by group id (``[]`` when the text holds none), and the
        problems (see the module docstring's bounds).

    Raises:
        InputError: not Prometheus text (``where`` names the input).
    """
    samples = parse_exposition(text, where)
    kind = _kind({s.name for s in samples})
    gl = _GROUP_LABEL[kind]
    groups: dict[str, _Builder] = defaultdict(_Builder)
    log_end: dict[TopicPartition, int | None] = {}
    log_start: dict[TopicPartition, int | None] = {}
    problems: list[str] = []
    refused = 0

    def refuse(series: str, labels: Mapping[str, str], what: str) -> None:
        nonlocal refused
        refused += 1
        if len(problems) < _MAX_PROBLEMS:
            shown = ",".join(f'{k}="{v[:60]}"' for k, v in sorted(labels.items()))
            problems.append(f"{where}: {series}{{{shown[:300]}}}: {what}: left out")

    def tp(name: str, labels: Mapping[str, str]) -> TopicPartition | None:
        topic = labels.get("topic", labels.get("topic_name"))
        label = "partition" if "partition" in labels else "partition_id"
        part = labels.get(label)
        if topic is None or part is None:
            return None
        number = _partition_number(part)
        if number is None:
            if part.lstrip("-").isdigit():  # a number, but not a Kafka partition
                refuse(name, labels, f"label {label} is not a partition number (-1 to {MAX_PARTITION})")
            return None
        return topic, number

    def offset(name: str, labels: Mapping[str, str], value: float) -> int | None:
        n = _int(value)
        if n is None and _num(value) is not None:
            refuse(name, labels, f"value {value!r} is beyond a 64-bit offset")
        return n

    for s in samples:
        name, labels, value = s.name, s.labels, s.value
        key = tp(name, labels) if name in _PER_PARTITION else None
        group = labels.get(gl)
        if name in _LOG_END and key:
            log_end[key] = offset(name, labels, value)
        elif name in _LOG_START and key:
            log_start[key] = offset(name, labels, value)
        if group is None:
            continue
        b = groups[group]
        if name in _COMMITTED and key:
            b.committed[key] = offset(name, labels, value)
        elif name in _LAG and key:
            b.lag[key] = value if offset(name, labels, value) is not None else None
        elif name == "kafka_consumergroup_group_lag_seconds" and key:
            b.lag_seconds[key] = value
        elif name in ("kafka_consumergroup_members", "kminion_kafka_consumer_group_members"):
            members = _int(value)
            if members is not None and members >= 0:
                b.members = members
        elif name == "kminion_kafka_consumer_group_info":
            b.state = labels.get("state", b.state)
        elif name == "kafka_consumergroup_group_max_lag":
            b.max_lag = _num(value)
        elif name == "kafka_consumergroup_group_max_lag_seconds":
            b.max_lag_seconds = _num(value)
        elif name == "burrow_kafka_consumer_lag_total":
            b.reported_lag = _num(value)
        elif name == "burrow_kafka_consumer_status":
            i = _int(value)
            if i is not None:
                b.status = BURROW_STATUSES[i] if 0 <= i < len(BURROW_STATUSES) else str(i)
    if refused > len(problems):
        problems.append(f"{where}: {refused - len(problems)} more value(s) out of bounds left out")
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
    return ExporterScrape(out, problems)


def _is_number(v: Any) -> TypeGuard[float]:
    """A JSON number (an int of any size or a float; not a bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def _as_float(v: float) -> float:
    """A JSON number as a float; an integer beyond a double is ``±inf``."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


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
    if not isinstance(doc, Mapping):
        raise InputError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("error") is True:
        raise InputError(f"{where}: Burrow answered an error: {doc.get('message', '')}")
    status = doc.get("status")
    if not isinstance(status, Mapping) or not isinstance(status.get("partitions"), list):
        raise InputError(f"{where}: field status.partitions: missing (not a Burrow consumer status/lag response)")
    group = json_text(status.get("group"))
    lag = GroupLag(group)
    per_status: dict[TopicPartition, str] = {}
    for i, p in enumerate(status["partitions"]):
        field_of = f"{where}: field status.partitions[{i}]"
        if not isinstance(p, Mapping) or "topic" not in p or "partition" not in p:
            raise InputError(f"{field_of}: needs topic and partition")
        number = p["partition"]
        partition = (
            number if _is_number(number) and isinstance(number, int)
            else _partition_number(number) if isinstance(number, str) else None
        )
        if partition is None or not 0 <= partition <= MAX_PARTITION:
            raise InputError(f"{field_of}.partition: not a partition number (0 to {MAX_PARTITION})")
        topic = str(p["topic"])
        end_doc = p.get("end")
        end: Mapping[str, Any] = end_doc if isinstance(end_doc, Mapping) else {}
        current = p.get("current_lag", end.get("lag"))
        committed = end.get("offset")
        row = PartitionLag(topic, partition, _int(committed) if _is_number(committed) else None,
                           None, None, assigned=bool(p.get("owner")))
        if row.committed is not None and row.committed < 0:
            row.committed = None
        lag_value = _int(current) if _is_number(current) else None
        if lag_value is not None:
            row.skew = lag_value < 0
            row.lag = max(0, lag_value)
        elif _is_number(current):
            row.note = f"lag {current!r} beyond a 64-bit offset"
        else:
            row.note = "lag not reported"
        lag.partitions.append(row)
        if isinstance(p.get("status"), str):
            per_status[(topic, partition)] = p["status"]
    total = status.get("totallag")
    return ExporterGroup(
        lag, "burrow-http", status=status.get("status") if isinstance(status.get("status"), str) else None,
        complete=_complete(status.get("complete")),
        reported_lag=_num(_as_float(total)) if _is_number(total) else None,
        partition_status=per_status,
    )
