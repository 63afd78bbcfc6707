"""Spark Structured Streaming progress documents -> :class:`monitor.model.Sample`.

Shared by every Spark collector (event logs, listener push, ``scan`` of progress JSON files): it is the only
place that knows the JSON shape of ``org.apache.spark.sql.streaming.StreamingQueryProgress`` (see
``StreamingQueryProgress.jsonValue`` / ``StateOperatorProgress`` / ``SourceProgress`` in Spark's
``sql/core/.../streaming/progress.scala``) and of the listener events
``StreamingQueryListener.Query{Started,Progress,Idle,Terminated}Event``.

Shapes handled, all seen in real outputs (``tests/fixtures/spark``):
- ``numInputRows`` at top level is absent in Spark 4 event logs (it is a derived getter there): it is then
  the sum of ``sources[].numInputRows``.
- ``eventTime`` is ``{}`` (or absent) without a watermark / without rows: unknown, not epoch.
- Older Spark (3.0/3.1) says ``numLateInputs`` where newer says ``numRowsDroppedByWatermark``.
- Offsets are JSON inside strings (event logs) or objects (listener ``json``); rates may be ``NaN`` /
  ``Infinity`` / absent. Numbers may arrive as strings ("2.70941269E8").
- The idle event (Spark 3.5+ ``QueryIdleEvent``) repeats the last batch id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from monitor.errors import ProgressFormatError
from monitor.model import UTC, Engine, JobRef, Sample, SampleKind, Scope

__all__ = [
    "EVENT_IDLE",
    "EVENT_PROGRESS",
    "EVENT_STARTED",
    "EVENT_TERMINATED",
    "STREAMING_EVENT_NAMES",
    "field_at",
    "parse_iso_utc",
    "parse_listener_event",
    "parse_progress",
]

_PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$"
EVENT_STARTED = _PREFIX + "QueryStartedEvent"
EVENT_PROGRESS = _PREFIX + "QueryProgressEvent"
EVENT_IDLE = _PREFIX + "QueryIdleEvent"
EVENT_TERMINATED = _PREFIX + "QueryTerminatedEvent"
STREAMING_EVENT_NAMES = (EVENT_STARTED, EVENT_PROGRESS, EVENT_IDLE, EVENT_TERMINATED)


def field_at(where: str, path: str) -> str:
    """Where a field is, for messages: ``FILE: line 17: field progress.timestamp`` (``where`` = the
    document's location, may be empty; ``path`` = the field's dotted JSON path in the document)."""
    return f"{where}: field {path}" if where else f"field {path}"


def parse_iso_utc(value: Any, where: str) -> datetime:
    """Parse Spark's ISO-8601 UTC timestamp (``2026-11-29T11:32:41.709Z``) to an aware UTC datetime.

    Raises:
        ProgressFormatError: missing (``None``), not a string or not ISO-8601; ``where`` names the field.
    """
    if value is None:
        raise ProgressFormatError(f"{where}: missing (expected an ISO-8601 timestamp string)")
    if not isinstance(value, str):
        raise ProgressFormatError(f"{where}: expected an ISO-8601 timestamp string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ProgressFormatError(f"{where}: not an ISO-8601 timestamp: {value!r}") from None
    if parsed.tzinfo is None:
        raise ProgressFormatError(f"{where}: timestamp has no time zone: {value!r}")
    return parsed.astimezone(UTC)


#: What an event time or watermark beyond year 9999 becomes (Python's ``datetime`` ends there). Spark
#: accepts such a row (epoch milliseconds read as seconds land in year ~56,000) and prints the year with a
#: sign and five or more digits (``+56135-05-22T09:20:00.000Z``); ``event_time_units`` reports it.
BEYOND_YEAR_9999 = datetime.max.replace(tzinfo=UTC)


def _opt_time(mapping: Mapping[str, Any], key: str, where: str, path: str) -> datetime | None:
    value = mapping.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value[:1] == "+" and value[1:6].isdigit() and value[1:].index("-") >= 5:
        return BEYOND_YEAR_9999
    return parse_iso_utc(value, field_at(where, f"{path}.{key}"))


def _number(value: Any, where: str) -> float | None:
    """A JSON number, a numeric string, or NaN/absent (-> None)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            raise ProgressFormatError(f"{where}: expected a number, got {value!r}") from None
    else:
        raise ProgressFormatError(f"{where}: expected a number, got {value!r}")
    if math.isnan(result) or math.isinf(result):
        return None
    return result


def _int(value: Any, where: str) -> int | None:
    number = _number(value, where)
    return None if number is None else int(number)


def _sum_known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _job(doc: Mapping[str, Any], where: str, prefix: str, app_id: str | None) -> JobRef:
    query_id = doc.get("id")
    if query_id is None:
        raise ProgressFormatError(f"{field_at(where, prefix + 'id')}: missing (the streaming query id)")
    if not isinstance(query_id, str) or not query_id:
        raise ProgressFormatError(
            f"{field_at(where, prefix + 'id')}: expected the streaming query id (a non-empty string), got {query_id!r}"
        )
    run_id = doc.get("runId")
    name = doc.get("name")
    return JobRef(
        engine=Engine.SPARK,
        job_id=query_id,
        run_id=run_id if isinstance(run_id, str) else None,
        name=name if isinstance(name, str) else None,
        app_id=app_id,
    )


def parse_progress(
    progress: Mapping[str, Any],
    *,
    collector: str,
    where: str = "",
    app_id: str | None = None,
    kind: SampleKind = SampleKind.PROGRESS,
    field_prefix: str = "",
) -> list[Sample]:
    """Turn one ``StreamingQueryProgress`` JSON object into samples.

    Returns one query-scope sample (the batch totals) followed by one sample per source
    (``scope.source`` = the source ``description``) carrying that source's input rows and rates, and,
    for Kafka sources, ``lag_offsets`` from ``metrics.maxOffsetsBehindLatest``.

    Args:
        progress: the decoded progress object (``QueryProgressEvent.progress`` / ``query.lastProgress``).
        collector: copied into ``Sample.collector``.
        where: the document's location for error messages (e.g. ``"events_1_app.zstd: line 17"``); a
            message reads ``<where>: field <field_prefix><name>: <problem>`` (see :func:`field_at`).
        app_id: Spark application id, if known.
        kind: ``PROGRESS`` (default) or ``IDLE`` for the idle event's progress.
        field_prefix: the path of ``progress`` inside its document (``"progress."`` in a listener event).

    Raises:
        ProgressFormatError: ``id``, ``timestamp`` missing or malformed, or a field has the wrong type.
    """

    def at(path: str) -> str:
        return field_at(where, field_prefix + path)

    if not isinstance(progress, Mapping):
        what = field_at(where, field_prefix.rstrip(".")) if field_prefix else (where or "progress")
        raise ProgressFormatError(f"{what}: expected a JSON object, got {type(progress).__name__}")
    job = _job(progress, where, field_prefix, app_id)
    observed_at = parse_iso_utc(progress.get("timestamp"), at("timestamp"))
    batch_id = _int(progress.get("batchId"), at("batchId"))

    event_time = progress.get("eventTime") or {}
    if not isinstance(event_time, Mapping):
        raise ProgressFormatError(f"{at('eventTime')}: expected an object, got {event_time!r}")

    ops = progress.get("stateOperators") or []
    if not isinstance(ops, list):
        raise ProgressFormatError(f"{at('stateOperators')}: expected a list")
    rows_total: list[int | None] = []
    rows_updated: list[int | None] = []
    rows_removed: list[int | None] = []
    mem_bytes: list[int | None] = []
    dropped: list[int | None] = []
    for i, op in enumerate(ops):
        w = f"stateOperators[{i}]"
        if not isinstance(op, Mapping):
            raise ProgressFormatError(f"{at(w)}: expected an object")
        rows_total.append(_int(op.get("numRowsTotal"), at(f"{w}.numRowsTotal")))
        rows_updated.append(_int(op.get("numRowsUpdated"), at(f"{w}.numRowsUpdated")))
        rows_removed.append(_int(op.get("numRowsRemoved"), at(f"{w}.numRowsRemoved")))
        mem_bytes.append(_int(op.get("memoryUsedBytes"), at(f"{w}.memoryUsedBytes")))
        late_key = "numRowsDroppedByWatermark" if "numRowsDroppedByWatermark" in op else "numLateInputs"
        dropped.append(_int(op.get(late_key), at(f"{w}.{late_key}")))

    sources = progress.get("sources") or []
    if not isinstance(sources, list):
        raise ProgressFormatError(f"{at('sources')}: expected a list")
    source_samples: list[Sample] = []
    source_rows: list[int | None] = []
    source_lags: list[int | None] = []
    for i, src in enumerate(sources):
        w = f"sources[{i}]"
        if not isinstance(src, Mapping):
            raise ProgressFormatError(f"{at(w)}: expected an object")
        description = src.get("description")
        rows = _int(src.get("numInputRows"), at(f"{w}.numInputRows"))
        metrics = src.get("metrics") or {}
        lag = (
            _int(metrics.get("maxOffsetsBehindLatest"), at(f"{w}.metrics.maxOffsetsBehindLatest"))
            if isinstance(metrics, Mapping)
            else None
        )
        source_rows.append(rows)
        source_lags.append(lag)
        source_samples.append(
            Sample(
                job=job,
                observed_at=observed_at,
                kind=kind,
                collector=collector,
                scope=Scope(source=str(description) if description is not None else f"source[{i}]"),
                batch_id=batch_id,
                num_input_rows=rows,
                input_rows_per_second=_number(src.get("inputRowsPerSecond"), at(f"{w}.inputRowsPerSecond")),
                processed_rows_per_second=_number(
                    src.get("processedRowsPerSecond"), at(f"{w}.processedRowsPerSecond")
                ),
                lag_offsets=lag,
            )
        )

    if "numInputRows" in progress:
        num_input_rows = _int(progress.get("numInputRows"), at("numInputRows"))
    else:
        num_input_rows = _sum_known(source_rows)

    query_sample = Sample(
        job=job,
        observed_at=observed_at,
        kind=kind,
        collector=collector,
        batch_id=batch_id,
        watermark=_opt_time(event_time, "watermark", where, field_prefix + "eventTime"),
        event_time_min=_opt_time(event_time, "min", where, field_prefix + "eventTime"),
        event_time_max=_opt_time(event_time, "max", where, field_prefix + "eventTime"),
        event_time_avg=_opt_time(event_time, "avg", where, field_prefix + "eventTime"),
        num_input_rows=num_input_rows,
        input_rows_per_second=_number(progress.get("inputRowsPerSecond"), at("inputRowsPerSecond")),
        processed_rows_per_second=_number(
            progress.get("processedRowsPerSecond"), at("processedRowsPerSecond")
        ),
        batch_duration_ms=_int(progress.get("batchDuration"), at("batchDuration")),
        dropped_by_watermark=_sum_known(dropped),
        state_rows_total=_sum_known(rows_total),
        state_rows_updated=_sum_known(rows_updated),
        state_rows_removed=_sum_known(rows_removed),
        state_memory_bytes=_sum_known(mem_bytes),
        lag_offsets=max((v for v in source_lags if v is not None), default=None),
        extra={"num_state_operators": len(ops), "num_sources": len(sources)},
    )
    return [query_sample, *source_samples]


def parse_listener_event(
    event: Mapping[str, Any],
    *,
    collector: str,
    where: str = "",
    app_id: str | None = None,
    fallback_time: datetime | None = None,
) -> list[Sample]:
    """Turn one streaming listener event (as written in an event log) into samples.

    ``event["Event"]`` must be one of :data:`STREAMING_EVENT_NAMES`. Progress and idle events carry a
    ``progress`` object (idle events in Spark 3.5+/4 carry ``id``, ``runId``, ``timestamp`` only: then a
    single ``IDLE`` sample without quantities is returned). Started/terminated events give one lifecycle
    sample each (``observed_at`` = the event's ``timestamp``). Spark's ``QueryTerminatedEvent`` has no
    timestamp: ``fallback_time`` (e.g. the last progress time of that run, or the time the event was
    received) is used then.

    Raises:
        ProgressFormatError: unknown event name or malformed fields.
    """
    name = event.get("Event")
    if name == EVENT_PROGRESS:
        progress = event.get("progress")
        if not isinstance(progress, Mapping):
            raise ProgressFormatError(f"{field_at(where, 'progress')}: missing or not an object")
        return parse_progress(progress, collector=collector, where=where, app_id=app_id, field_prefix="progress.")
    if name == EVENT_IDLE:
        progress = event.get("progress")
        if isinstance(progress, Mapping):
            return parse_progress(
                progress,
                collector=collector,
                where=where,
                app_id=app_id,
                kind=SampleKind.IDLE,
                field_prefix="progress.",
            )
        job = _job(event, where, "", app_id)
        return [
            Sample(
                job=job,
                observed_at=parse_iso_utc(event.get("timestamp"), field_at(where, "timestamp")),
                kind=SampleKind.IDLE,
                collector=collector,
            )
        ]
    if name in (EVENT_STARTED, EVENT_TERMINATED):
        job = _job(event, where, "", app_id)
        kind = SampleKind.STARTED if name == EVENT_STARTED else SampleKind.TERMINATED
        extra: dict[str, Any] = {}
        if name == EVENT_TERMINATED and event.get("exception"):
            extra["exception"] = str(event.get("exception"))[:2000]
        if event.get("timestamp") is None and fallback_time is not None:
            observed_at = fallback_time
        else:
            observed_at = parse_iso_utc(event.get("timestamp"), field_at(where, "timestamp"))
        return [
            Sample(
                job=job,
                observed_at=observed_at,
                kind=kind,
                collector=collector,
                extra=extra,
            )
        ]
    raise ProgressFormatError(f"{field_at(where, 'Event')}: not a streaming query listener event: {name!r}")
