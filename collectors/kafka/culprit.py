"""The culprit record of a future-timestamp jump: which Kafka record, inside one batch's offset ranges,
carries the largest event time.

A Spark micro-batch reading Kafka reads, per topic and partition, the offsets ``[startOffset, endOffset)``
of its progress (``sources[].startOffset`` / ``endOffset``; :func:`collectors.kafka.spark.source_offsets`).
When the batch's event-time max jumps years ahead (``rules.future``), one of those records is mis-dated;
:func:`locate_culprit` names it (topic, partition, offset, key, record timestamp, event-time value) so the
user can delete, fix or skip it. Two ways, read-only, with the lag collector's connection and security
settings (:class:`collectors.kafka.options.KafkaOptions`, :func:`collectors.kafka.admin.probe_consumer_config`):

* **ListOffsets ``maxTimestamp``** (KIP-734, Kafka 3.0+; confluent-kafka's ``OffsetSpec.max_timestamp()``):
  the broker's offset of the largest-timestamp record per partition. Used when the event time is the
  record timestamp (no event-time field given): if each partition's largest record lies inside the batch's
  range (or is older than the best one inside another partition's range), that record is the culprit
  without reading the range; the record itself is then fetched (one record) for its key and to confirm its
  timestamp is ``CreateTime`` — with ``LogAppendTime`` the broker stamped it and it says nothing of the
  event time, so the range is read instead.
* **A bounded fetch of the range**: a consumer ``assign()``-ed to the ranges (no group membership, no
  commits; ``read_uncommitted`` as Spark's Kafka source reads by default), reading at most ``max_bytes`` of
  keys and values within ``timeout_s``, keeping the record with the largest event time: the JSON field at
  ``event_time_field`` (``payload.ts`` or ``$.payload.ts``) of the value, or the record timestamp.

Errors come back as data (:attr:`Located.errors`): a broker that does not answer, a topic gone, a range no
longer in the log (retention deleted it) never raise.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from collectors.kafka.admin import KafkaAdminSource, error_text, probe_consumer_config
from collectors.kafka.lag import TopicPartition
from collectors.kafka.options import KafkaOptions

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Located",
    "LocatedRecord",
    "OffsetRange",
    "batch_ranges",
    "event_time_of",
    "locate_culprit",
    "parse_field_path",
    "ranges_of",
]

#: Bytes of keys and values read at most by one locate (8 MiB).
DEFAULT_MAX_BYTES = 8 << 20
#: Characters of a key / event-time value kept in a report.
_SHOWN_CHARS = 200
#: Epoch numbers below this are seconds, from it on milliseconds (1e11 s is the year 5138).
_MS_FROM = 100_000_000_000

Method = Literal["max_timestamp", "fetch"]


def _silent_logger() -> logging.Logger:
    log = logging.getLogger("collectors.kafka.culprit.librdkafka")
    log.propagate = False
    log.setLevel(logging.CRITICAL)
    return log


_SILENT = _silent_logger()


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """The offsets ``[start, end)`` of one partition a batch read (Spark ``startOffset``/``endOffset``)."""

    topic: str
    partition: int
    start: int
    end: int

    def describe(self) -> str:
        """``clicks[0] offsets 25-49`` (inclusive, as a person reads them)."""
        return f"{self.topic}[{self.partition}] offsets {self.start}-{self.end - 1}"


@dataclass(frozen=True, slots=True)
class LocatedRecord:
    """The record with the largest event time of a batch.

    Attributes:
        topic / partition / offset: where it is.
        key: the key as UTF-8 text (undecodable bytes replaced), at most 200 characters; ``None`` if it has none.
        timestamp: the record timestamp (aware UTC), ``None`` if absent.
        timestamp_type: ``"CreateTime"`` (set by the producer) or ``"LogAppendTime"`` (set by the broker).
        event_time: the event time read (the field's value, or the record timestamp), aware UTC.
        event_time_raw: the field's value as written in the record (at most 200 characters), ``None`` when
            the event time is the record timestamp.
    """

    topic: str
    partition: int
    offset: int
    key: str | None
    timestamp: datetime | None
    timestamp_type: str | None
    event_time: datetime
    event_time_raw: str | None = None

    def to_details(self) -> dict[str, Any]:
        """JSON-safe: times as ISO-8601 text."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key": self.key,
            "timestamp": self.timestamp.isoformat() if self.timestamp is not None else None,
            "timestamp_type": self.timestamp_type,
            "event_time": self.event_time.isoformat(),
            "event_time_raw": self.event_time_raw,
        }


@dataclass(slots=True)
class Located:
    """What :func:`locate_culprit` found.

    Attributes:
        record: the culprit, or ``None`` (nothing readable in the ranges, or errors).
        method: ``"max_timestamp"`` (ListOffsets, KIP-734) or ``"fetch"`` (the range read).
        event_time_field: the JSON path read, ``None`` for the record timestamp.
        ranges: the batch's ranges.
        scanned: records read by the fetch.
        complete: every range was read to its end (or the ListOffsets answer made reading unnecessary);
            ``False`` when the byte or time bound cut the fetch: the culprit is then the largest seen.
        notes: plain-words remarks (a fallback taken, records without the field).
        errors: what failed (a broker, a topic, a range no longer in the log).
    """

    record: LocatedRecord | None
    method: Method
    event_time_field: str | None
    ranges: tuple[OffsetRange, ...]
    scanned: int = 0
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_details(self) -> dict[str, Any]:
        """JSON-safe, for a finding's ``details["culprit"]``."""
        return {
            "record": self.record.to_details() if self.record is not None else None,
            "method": self.method,
            "event_time_field": self.event_time_field,
            "ranges": [
                {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end} for r in self.ranges
            ],
            "scanned": self.scanned,
            "complete": self.complete,
            "notes": list(self.notes),
            "errors": list(self.errors),
        }


def batch_ranges(
    start_offsets: Mapping[TopicPartition, int], end_offsets: Mapping[TopicPartition, int]
) -> tuple[OffsetRange, ...]:
    """The non-empty ranges of a batch, from Spark's ``startOffset``/``endOffset`` per partition.

    A partition absent from ``start_offsets`` (added while the batch was planned: where it started is not
    known) is left out, as are negative Spark markers (``-2`` earliest, ``-1`` latest) and empty ranges.
    Ordered by topic and partition.
    """
    out = [
        OffsetRange(topic, part, start_offsets[(topic, part)], end)
        for (topic, part), end in sorted(end_offsets.items())
        if (topic, part) in start_offsets and 0 <= start_offsets[(topic, part)] < end
    ]
    return tuple(out)


def ranges_of(entries: Any) -> tuple[OffsetRange, ...]:
    """Ranges from their JSON form ``[{"topic", "partition", "start", "end"}]`` (a finding's details: a Flink
    source subtask's offsets read around its watermark's jump, ``rules.future.KAFKA_RANGES``, or
    :meth:`Located.to_details`'s ``ranges``). Entries of another shape and empty ranges are left out."""
    out: list[OffsetRange] = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, Mapping) or not isinstance(e.get("topic"), str):
            continue
        part, start, end = e.get("partition"), e.get("start"), e.get("end")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (part, start, end)):
            continue
        assert isinstance(part, int) and isinstance(start, int) and isinstance(end, int)
        if 0 <= start < end:
            out.append(OffsetRange(e["topic"], part, start, end))
    return tuple(out)


def parse_field_path(path: str) -> tuple[str, ...]:
    """``"payload.ts"`` / ``"$.payload.ts"`` -> ``("payload", "ts")``: object keys of a JSON value.

    Raises:
        ValueError: an empty path or an empty key (``"a..b"``).
    """
    text = path.strip()
    if text.startswith("$"):
        text = text[1:].removeprefix(".")
    keys = tuple(text.split("."))
    if not text or any(not k for k in keys):
        raise ValueError(f"event-time field {path!r}: expected object keys separated by dots, e.g. payload.ts or $.ts")
    return keys


def _instant(value: Any) -> datetime | None:
    """An event-time value as aware UTC: ISO-8601 text (no zone = UTC, as Spark with session time zone
    UTC parses it) or an epoch number (seconds below 1e11, milliseconds from it on)."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            seconds = value / 1000 if abs(value) >= _MS_FROM else value
            return datetime.fromtimestamp(seconds, UTC)
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value.strip())
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def event_time_of(value: bytes | None, keys: tuple[str, ...]) -> tuple[datetime | None, str | None]:
    """The event time at ``keys`` of a JSON record value, and the value as written (at most 200 chars).

    ``(None, None)`` when the value is not JSON or the field is absent; ``(None, raw)`` when the field is
    there but is not a time (ISO-8601 text or an epoch number).
    """
    if value is None:
        return None, None
    try:
        doc: Any = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None, None
    for key in keys:
        if not isinstance(doc, dict) or key not in doc:
            return None, None
        doc = doc[key]
    raw = doc if isinstance(doc, str) else json.dumps(doc)
    return _instant(doc), raw[:_SHOWN_CHARS]


def _key_text(key: bytes | str | None) -> str | None:
    if key is None:
        return None
    text = key if isinstance(key, str) else key.decode("utf-8", errors="replace")
    return text[:_SHOWN_CHARS]


def _ts(msg: Any) -> tuple[datetime | None, str | None]:
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

    kind, ms = msg.timestamp()
    names = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}
    if kind not in names or ms < 0:
        return None, None
    return datetime.fromtimestamp(ms / 1000, UTC), names[kind]


@dataclass
class _Scan:
    best: LocatedRecord | None = None
    scanned: int = 0
    without_field: int = 0
    not_a_time: int = 0
    complete: bool = True
    errors: list[str] = field(default_factory=list)


def _record(msg: Any, keys: tuple[str, ...] | None, scan: _Scan) -> LocatedRecord | None:
    ts, kind = _ts(msg)
    event: datetime | None = ts
    raw: str | None = None
    if keys is not None:
        event, raw = event_time_of(msg.value(), keys)
        if event is None:
            if raw is None:
                scan.without_field += 1
            else:
                scan.not_a_time += 1
    if event is None:
        return None
    return LocatedRecord(
        str(msg.topic()), int(msg.partition() or 0), int(msg.offset()), _key_text(msg.key()), ts, kind, event, raw
    )


def _fetch(
    options: KafkaOptions, ranges: Iterable[OffsetRange], keys: tuple[str, ...] | None, max_bytes: int, timeout_s: float
) -> _Scan:
    """Read the ranges (bounded by ``max_bytes`` of keys and values and by ``timeout_s``) and keep the
    record with the largest event time (the first one at a tie)."""
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka import TopicPartition as TP

    scan = _Scan()
    todo = {(r.topic, r.partition): r for r in ranges}
    if not todo:
        return scan
    per_partition = max(1024, min(1 << 20, max_bytes))
    conf = probe_consumer_config(options, "read_uncommitted", per_partition, max(per_partition, 1 << 20))
    conf["logger"] = _SILENT  # connection failures become one plain-words error, not a log line per retry
    consumer = Consumer(conf)
    read_bytes = 0
    try:
        consumer.assign([TP(r.topic, r.partition, r.start) for r in todo.values()])
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline and read_bytes < max_bytes:
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                key = (str(msg.topic()), int(msg.partition() or 0))
                r = todo.get(key)
                if r is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        del todo[key]  # the log ends before the batch's end: compacted or a marker left
                        consumer.pause([TP(*key)])
                    else:
                        scan.errors.append(f"{r.describe()}: {error_text(Exception(err))}")
                        del todo[key]
                        consumer.pause([TP(*key)])
                    continue
                offset = int(msg.offset() or 0)
                if offset >= r.end:
                    del todo[key]
                    consumer.pause([TP(*key)])
                    continue
                if offset < r.start:  # offset out of range reset the position to the log's start
                    continue
                scan.scanned += 1
                read_bytes += len(msg.value() or b"") + len(msg.key() or b"")
                rec = _record(msg, keys, scan)
                if rec is not None and (scan.best is None or rec.event_time > scan.best.event_time):
                    scan.best = rec
                if offset >= r.end - 1:
                    del todo[key]
                    consumer.pause([TP(*key)])
                if read_bytes >= max_bytes:
                    break
    finally:
        consumer.close()
    if todo:
        scan.complete = False
        left = ", ".join(r.describe() for r in todo.values())
        if scan.scanned == 0:
            scan.errors.append(
                f"{options.describe()}: no record of {left} read within {timeout_s:g}s: no broker answered (is "
                "the address right, are the brokers up, is the security protocol theirs?), or retention deleted "
                "the offsets"
            )
        else:
            why = f"the {max_bytes} bytes bound" if read_bytes >= max_bytes else f"the {timeout_s:g}s bound"
            scan.errors.append(
                f"{left}: not read to the end within {why}; the culprit named is the latest-dated record of "
                "what was read"
            )
    return scan


def _max_timestamps(
    options: KafkaOptions, ranges: tuple[OffsetRange, ...]
) -> tuple[dict[TopicPartition, tuple[int, int]], list[str]]:
    """ListOffsets ``maxTimestamp`` (KIP-734): ``(offset, timestamp ms)`` per partition, and errors."""
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    source = KafkaAdminSource(options)
    out: dict[TopicPartition, tuple[int, int]] = {}
    errors: list[str] = []
    try:
        futs = source.admin().list_offsets(
            {TP(r.topic, r.partition): OffsetSpec.max_timestamp() for r in ranges},  # type: ignore[no-untyped-call]
            request_timeout=options.request_timeout_s,
        )
        for tp, fut in futs.items():
            try:
                res = fut.result()
            except Exception as exc:
                errors.append(f"{tp.topic}[{tp.partition}]: ListOffsets maxTimestamp failed: {error_text(exc)}")
                continue
            if res.offset >= 0:
                out[(tp.topic, tp.partition)] = (int(res.offset), int(res.timestamp))
    except Exception as exc:
        errors.append(f"ListOffsets maxTimestamp failed: {error_text(exc)}")
    finally:
        source.close()
    return out, errors


def _append_time_topics(options: KafkaOptions, topics: Iterable[str]) -> tuple[list[str], list[str]]:
    """The topics whose ``message.timestamp.type`` is ``LogAppendTime`` (DescribeConfigs), and errors."""
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    source = KafkaAdminSource(options)
    out: list[str] = []
    errors: list[str] = []
    try:
        futs = source.admin().describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))],
            request_timeout=options.request_timeout_s,
        )
        for res, fut in futs.items():
            try:
                entry = fut.result().get("message.timestamp.type")
            except Exception as exc:
                errors.append(f"{res.name}: DescribeConfigs failed: {error_text(exc)}")
                continue
            if entry is not None and entry.value == "LogAppendTime":
                out.append(str(res.name))
    except Exception as exc:
        errors.append(f"DescribeConfigs failed: {error_text(exc)}")
    finally:
        source.close()
    return sorted(out), errors


def _by_max_timestamp(
    options: KafkaOptions, ranges: tuple[OffsetRange, ...], max_bytes: int, timeout_s: float
) -> tuple[LocatedRecord | None, str]:
    """The culprit from ListOffsets ``maxTimestamp`` and a one-record fetch, or ``None`` and why not."""
    appended, config_errors = _append_time_topics(options, (r.topic for r in ranges))
    if config_errors:
        return None, f"the topic's timestamp type could not be read ({config_errors[0]})"
    if appended:
        return None, (
            f"{', '.join(appended)} stamps records at append (message.timestamp.type LogAppendTime): the record "
            "timestamp is the broker's, not the event time"
        )
    found, errors = _max_timestamps(options, ranges)
    if errors:
        return None, f"ListOffsets maxTimestamp (KIP-734, brokers 3.0+) gave no answer ({errors[0]})"
    inside = {
        (r.topic, r.partition): found[(r.topic, r.partition)]
        for r in ranges
        if (r.topic, r.partition) in found and r.start <= found[(r.topic, r.partition)][0] < r.end
    }
    if not inside:
        return None, "every partition's latest-dated record lies outside the batch's offsets"
    best_ms = max(ts for _off, ts in inside.values())
    # a partition whose latest-dated record lies outside its range may still hold a later one inside it
    if any(key not in inside and key in found and found[key][1] > best_ms for key in ((r.topic, r.partition) for r in ranges)):
        return None, "a partition's latest-dated record lies outside the batch's offsets"
    if any((r.topic, r.partition) not in found for r in ranges):
        return None, "a partition gave no maxTimestamp answer"
    (topic, part), (offset, _ts_ms) = max(inside.items(), key=lambda kv: (kv[1][1], -kv[1][0]))
    one = _fetch(options, [OffsetRange(topic, part, offset, offset + 1)], None, max_bytes, timeout_s)
    rec = one.best
    if rec is None or rec.offset != offset:
        return None, f"the record at {topic}[{part}] offset {offset} could not be read"
    if rec.timestamp_type != "CreateTime":
        return None, f"{topic} stamps records at append ({rec.timestamp_type}): the record timestamp is the broker's, not the event time"
    return rec, ""


def locate_culprit(
    options: KafkaOptions,
    ranges: tuple[OffsetRange, ...],
    *,
    event_time_field: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout_s: float | None = None,
) -> Located:
    """The record with the largest event time inside a batch's offset ranges (see the module docstring).

    Args:
        options: the cluster (bootstrap servers, security; ``request_timeout_s`` bounds each admin request).
        ranges: the batch's ``[start, end)`` per partition (:func:`batch_ranges`).
        event_time_field: the JSON path of the event time in the record value (``payload.ts``); ``None``:
            the record timestamp is the event time (Spark's Kafka source ``timestamp`` column).
        max_bytes: keys and values read at most by the fetch (bytes).
        timeout_s: how long the fetch may take (seconds; default ``options.request_timeout_s``).

    Returns:
        :class:`Located`; errors are in it, never raised.

    Raises:
        ValueError: ``event_time_field`` is not a path (:func:`parse_field_path`).
    """
    keys = parse_field_path(event_time_field) if event_time_field is not None else None
    limit = options.request_timeout_s if timeout_s is None else timeout_s
    if not ranges:
        return Located(None, "fetch", event_time_field, ranges, errors=["the batch read no offsets (empty ranges)"])
    notes: list[str] = []
    if keys is None:
        rec, why = _by_max_timestamp(options, ranges, max_bytes, limit)
        if rec is not None:
            return Located(rec, "max_timestamp", None, ranges)
        notes.append(f"read the batch's records instead of ListOffsets maxTimestamp: {why}")
    scan = _fetch(options, ranges, keys, max_bytes, limit)
    if scan.without_field:
        notes.append(f"{scan.without_field} of {scan.scanned} records have no JSON field {event_time_field}")
    if scan.not_a_time:
        notes.append(f"{scan.not_a_time} of {scan.scanned} records have a {event_time_field} that is not a time")
    errors = list(scan.errors)
    if scan.best is None and not errors:
        errors.append(
            f"no record with an event time in {', '.join(r.describe() for r in ranges)} "
            f"({scan.scanned} read; gone by retention or compaction if 0)"
        )
    return Located(scan.best, "fetch", event_time_field, ranges, scan.scanned, scan.complete, notes, errors)
