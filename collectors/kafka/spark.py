"""Lag of Spark Structured Streaming queries reading Kafka: they keep their offsets in the checkpoint, not in
a consumer group, so the broker has nothing to compare. Their progress says how far they read.

Spark's ``StreamingQueryProgress`` (``query.lastProgress``; ``QueryProgressEvent`` in the event log) has,
per source, ``endOffset``: for the Kafka source (``KafkaSource``/``KafkaMicroBatchStream``) a JSON object
``{"topic": {"0": 1234, "1": 987}}`` — the offsets the batch read *up to* (exclusive), i.e. the next
offset to read, which is what a committed offset is. Spark also reports its own view in the source's
``metrics``: ``avgOffsetsBehindLatest``, ``maxOffsetsBehindLatest``, ``minOffsetsBehindLatest`` (the
distance to the ``latestOffset`` Spark fetched when it planned the batch), and ``latestOffset``.

:func:`source_offsets` reads those; :meth:`collectors.kafka.KafkaLagCollector.checkpoint_lag` compares
``endOffset`` with the broker's log-end offsets *now* (which also counts what arrived after the batch was
planned) and gives a :class:`~collectors.kafka.lag.GroupLag` named after the query, with lag in seconds
as for a group. The progress JSON may hold ``endOffset`` as an object or as its JSON text (older Spark
versions and the event log's ``sources[].endOffset``); both are read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from collectors.jsontext import json_text
from collectors.kafka.lag import TopicPartition
from monitor.errors import InputError

__all__ = ["SparkKafkaSource", "source_offsets"]


@dataclass(frozen=True, slots=True)
class SparkKafkaSource:
    """One Kafka source of a progress document.

    Attributes:
        description: Spark's ``description`` (``KafkaV2[Subscribe[topic]]``).
        end_offsets: ``endOffset`` per partition (the next offset the query reads).
        start_offsets: ``startOffset`` per partition (the first offset the batch read), where reported.
        latest_offsets: ``latestOffset`` per partition, where reported.
        metrics: Spark's ``avgOffsetsBehindLatest``/``maxOffsetsBehindLatest``/``minOffsetsBehindLatest``
            as numbers (absent ones left out).
    """

    description: str
    end_offsets: dict[TopicPartition, int]
    latest_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    start_offsets: dict[TopicPartition, int] = field(default_factory=dict)


def _offsets(value: Any, where: str, name: str = "endOffset") -> dict[TopicPartition, int] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None  # not a Kafka source (a file source's {"logOffset": 3} is JSON too, and handled below)
    if not isinstance(value, Mapping):
        return None
    out: dict[TopicPartition, int] = {}
    for topic, parts in value.items():
        if not isinstance(parts, Mapping):
            return None  # not the Kafka shape
        for p, off in parts.items():
            if not str(p).lstrip("-").isdigit() or isinstance(off, bool) or not isinstance(off, int):
                raise InputError(f"{where}: field {name}.{topic}.{p}: expected an integer offset, got {off!r}")
            out[(str(topic), int(p))] = off
    return out


def source_offsets(progress: Mapping[str, Any], where: str = "progress") -> list[SparkKafkaSource]:
    """The Kafka sources of one progress document (other sources are skipped).

    Raises:
        InputError: a Kafka ``endOffset``/``startOffset``/``latestOffset`` entry that is not an integer
            (``where`` names the document and the field).
    """
    out: list[SparkKafkaSource] = []
    for i, src in enumerate(progress.get("sources") or []):
        if not isinstance(src, Mapping):
            continue
        end = _offsets(src.get("endOffset"), f"{where}: sources[{i}]")
        if not end:
            continue
        latest = _offsets(src.get("latestOffset"), f"{where}: sources[{i}]", "latestOffset") or {}
        metrics = {
            k: float(v) for k, v in (src.get("metrics") or {}).items()
            if k in ("avgOffsetsBehindLatest", "maxOffsetsBehindLatest", "minOffsetsBehindLatest")
            and isinstance(v, int | float | str) and str(v).replace(".", "", 1).lstrip("-").isdigit()
        }
        start = _offsets(src.get("startOffset"), f"{where}: sources[{i}]", "startOffset") or {}
        out.append(SparkKafkaSource(json_text(src.get("description")), end, latest, metrics, start))
    return out
