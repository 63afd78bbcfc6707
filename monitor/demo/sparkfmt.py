"""Spark event-log lines and listener events, shaped like the recorded real ones.

The shapes follow the Spark 4.3.0 event log recorded in ``tests/fixtures/spark/real-4.3.0/``
(``eventlog_trimmed.jsonl``): ``EventLoggingListener`` writes one compact JSON object per line whose first
field is ``"Event"``; the streaming events are Jackson serialisations of ``StreamingQueryListener``'s
``QueryStartedEvent`` / ``QueryProgressEvent`` / ``QueryTerminatedEvent`` with the fields in the order Spark
writes them (``StreamingQueryProgress.jsonValue``: ``id, runId, name, timestamp, batchId, batchDuration,
durationMs, eventTime, stateOperators, sources, sink, observedMetrics``). Times are ISO-8601 UTC with
milliseconds (``2024-01-01T12:07:00.000Z``); a source's ``startOffset``/``endOffset``/``latestOffset`` are
JSON *strings* in the event log, and a Kafka source's ``metrics`` values are strings
(``KafkaMicroBatchStream.metrics``: ``minOffsetsBehindLatest`` ...).

A listener push (:mod:`monitor.daemon.ingest`) carries the same envelope, so the same builders serve both.
Everything here is pure: times are passed in as epoch milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.timefmt import format_epoch_ms

__all__ = [
    "EVENT_PREFIX",
    "SourceProgress",
    "StateOperatorProgress",
    "application_start",
    "iso_ms",
    "line",
    "log_start",
    "progress_event",
    "query_started",
    "query_terminated",
]

#: Prefix of the streaming listener event class names, as Spark writes them in the ``Event`` field.
EVENT_PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$"
SPARK_VERSION = "4.3.0"


def iso_ms(epoch_ms: int) -> str:
    """``2024-01-01T12:07:00.000Z`` for an epoch-millisecond time (Spark's ``DateTimeUtils`` format)."""
    return format_epoch_ms(epoch_ms)


def line(event: Mapping[str, Any]) -> str:
    """One event-log line: compact JSON (no spaces, as Jackson's compact generator) and ``\\n``."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n"


def log_start() -> dict[str, Any]:
    """``SparkListenerLogStart``, the first line of every event log."""
    return {"Event": "SparkListenerLogStart", "Spark Version": SPARK_VERSION}


def application_start(app_name: str, app_id: str, start_ms: int, user: str = "demo") -> dict[str, Any]:
    """``SparkListenerApplicationStart`` (its ``App ID`` becomes the samples' ``app_id``)."""
    return {
        "Event": "SparkListenerApplicationStart",
        "App Name": app_name,
        "App ID": app_id,
        "Timestamp": start_ms,
        "User": user,
    }


def query_started(query_id: str, run_id: str, name: str, at_ms: int) -> dict[str, Any]:
    """``QueryStartedEvent`` (a new ``runId`` for a known ``id`` is a restart)."""
    return {
        "Event": EVENT_PREFIX + "QueryStartedEvent",
        "id": query_id,
        "runId": run_id,
        "name": name,
        "timestamp": iso_ms(at_ms),
        "jobTags": [],
    }


def query_terminated(query_id: str, run_id: str, exception: str | None = None) -> dict[str, Any]:
    """``QueryTerminatedEvent`` (Spark writes no timestamp and no name in it)."""
    return {
        "Event": EVENT_PREFIX + "QueryTerminatedEvent",
        "id": query_id,
        "runId": run_id,
        "exception": exception,
        "errorClassOnException": None,
    }


@dataclass(frozen=True, slots=True)
class StateOperatorProgress:
    """One ``stateOperators[]`` entry (``StateOperatorProgress``)."""

    operator_name: str
    rows_total: int
    rows_updated: int
    rows_removed: int
    memory_used_bytes: int
    dropped_by_watermark: int
    shuffle_partitions: int = 2

    def to_json(self) -> dict[str, Any]:
        """The entry as Spark writes it."""
        return {
            "operatorName": self.operator_name,
            "numRowsTotal": self.rows_total,
            "numRowsUpdated": self.rows_updated,
            "allUpdatesTimeMs": 3,
            "numRowsRemoved": self.rows_removed,
            "allRemovalsTimeMs": 2,
            "commitTimeMs": 104,
            "memoryUsedBytes": self.memory_used_bytes,
            "numRowsDroppedByWatermark": self.dropped_by_watermark,
            "numShufflePartitions": self.shuffle_partitions,
            "numStateStoreInstances": self.shuffle_partitions,
            "customMetrics": {
                "stateOnCurrentVersionSizeBytes": max(0, self.memory_used_bytes // 2),
                "loadedMapCacheHitCount": 4,
                "loadedMapCacheMissCount": 0,
            },
        }


@dataclass(frozen=True, slots=True)
class SourceProgress:
    """One ``sources[]`` entry (``SourceProgress``).

    ``topic`` set: a Kafka source (``KafkaV2[Subscribe[topic]]``) whose offsets are per-partition maps and
    whose ``metrics`` carry ``{min,avg,max}OffsetsBehindLatest`` from ``offsets_behind``; otherwise a file
    source with ``logOffset`` offsets.
    """

    description: str
    input_rows: int
    start_offset: int
    end_offset: int
    latest_offset: int | None = None
    topic: str | None = None
    offsets_behind: int | None = None

    def to_json(self, duration_ms: int, trigger_ms: int) -> dict[str, Any]:
        """The entry as Spark writes it in the event log (offsets as JSON strings)."""

        def offset(value: int | None) -> str | None:
            if value is None:
                return None
            if self.topic is not None:
                return json.dumps({self.topic: {"0": value}}, separators=(",", ":"))
            return json.dumps({"logOffset": value}, separators=(",", ":"))

        metrics: dict[str, str] = {}
        if self.topic is not None and self.offsets_behind is not None:
            behind = str(self.offsets_behind)
            metrics = {
                "avgOffsetsBehindLatest": f"{self.offsets_behind:.1f}",
                "maxOffsetsBehindLatest": behind,
                "minOffsetsBehindLatest": behind,
            }
        return {
            "description": self.description,
            "startOffset": offset(self.start_offset),
            "endOffset": offset(self.end_offset),
            "latestOffset": offset(self.latest_offset),
            "numInputRows": self.input_rows,
            "inputRowsPerSecond": round(self.input_rows * 1000.0 / trigger_ms, 6),
            "processedRowsPerSecond": round(self.input_rows * 1000.0 / max(duration_ms, 1), 6),
            "metrics": metrics,
        }


def progress_event(
    *,
    query_id: str,
    run_id: str,
    name: str,
    timestamp_ms: int,
    batch_id: int,
    duration_ms: int,
    trigger_ms: int,
    watermark_ms: int | None,
    event_time: tuple[int, int, int] | None,
    state_operators: Sequence[StateOperatorProgress],
    sources: Sequence[SourceProgress],
    sink: str = "ForeachBatchSink",
) -> dict[str, Any]:
    """A ``QueryProgressEvent`` line.

    Args:
        timestamp_ms: the batch's trigger time (``progress.timestamp``).
        duration_ms: ``batchDuration`` / ``durationMs.triggerExecution``.
        trigger_ms: the processing-time trigger interval (for the per-second rates).
        watermark_ms: the watermark the batch ran with (``None``: a query without ``withWatermark``, no
            ``eventTime.watermark``). Spark's first batch reports the epoch.
        event_time: ``(min, avg, max)`` epoch ms of the batch's rows, ``None`` for a batch without rows
            (then ``eventTime`` holds only the watermark, as in the recorded no-data batches).
    """
    et: dict[str, str] = {}
    if event_time is not None:
        et["min"] = iso_ms(event_time[0])
        et["avg"] = iso_ms(event_time[1])
    if watermark_ms is not None:
        et["watermark"] = iso_ms(watermark_ms)
    if event_time is not None:
        et["max"] = iso_ms(event_time[2])
    add_batch = max(1, duration_ms * 2 // 3)
    progress: dict[str, Any] = {
        "id": query_id,
        "runId": run_id,
        "name": name,
        "timestamp": iso_ms(timestamp_ms),
        "batchId": batch_id,
        "batchDuration": duration_ms,
        "durationMs": {
            "triggerExecution": duration_ms,
            "queryPlanning": max(1, duration_ms // 20),
            "getBatch": 1,
            "commitOffsets": max(1, duration_ms // 10),
            "latestOffset": 0,
            "addBatch": add_batch,
            "walCommit": max(1, duration_ms // 10),
        },
        "eventTime": et,
        "stateOperators": [op.to_json() for op in state_operators],
        "sources": [s.to_json(duration_ms, trigger_ms) for s in sources],
        "sink": {"description": sink, "numOutputRows": -1, "metrics": {}},
        "observedMetrics": {},
    }
    return {"Event": EVENT_PREFIX + "QueryProgressEvent", "progress": progress}
