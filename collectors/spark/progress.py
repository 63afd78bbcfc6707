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

Bad input (one contract for every Spark parser: event-log lines, progress files, listener pushes): a value
the model cannot hold (a time outside :data:`monitor.model.MIN_TIME` .. :data:`~monitor.model.MAX_TIME`,
an integer beyond int64, NaN/infinity where a count is expected, a lone surrogate in a string, JSON nested
deeper than :data:`MAX_JSON_DEPTH`, a number too long to read) raises :class:`ProgressFormatError` naming
the document and the field; nothing else is raised. :func:`load_json` is the one JSON decoder for these
documents; the bounds themselves are the model's (``monitor.model.check_*``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeGuard, TypeVar, cast

import orjson

from monitor.errors import ProgressFormatError
from monitor.model import (
    INT64_MAX,
    INT64_MIN,
    MAX_DESCRIPTION_CHARS,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_TIME,
    MIN_TIME,
    STREAM_JOIN_EXTRA,
    TRANSFORM_WITH_STATE_EXTRA,
    TRIGGER_EXTRA,
    Engine,
    JobRef,
    Sample,
    SampleKind,
    Scope,
    TriggerKind,
    check_int64,
    check_name,
    check_text,
    check_time,
)

__all__ = [
    "EVENT_EXECUTION_START",
    "EVENT_IDLE",
    "EVENT_PROGRESS",
    "EVENT_STARTED",
    "EVENT_TERMINATED",
    "MAX_JSON_DEPTH",
    "STREAMING_EVENT_NAMES",
    "STREAM_JOIN_OPERATOR",
    "TRANSFORM_WITH_STATE_OPERATORS",
    "TRIGGER_CLASSES",
    "TRIGGER_FIELD",
    "check_document",
    "field_at",
    "load_json",
    "parse_iso_utc",
    "parse_listener_event",
    "parse_progress",
    "trigger_extras",
]

_PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$"
EVENT_STARTED = _PREFIX + "QueryStartedEvent"
EVENT_PROGRESS = _PREFIX + "QueryProgressEvent"
EVENT_IDLE = _PREFIX + "QueryIdleEvent"
EVENT_TERMINATED = _PREFIX + "QueryTerminatedEvent"
#: Spark 4.2+ (``StreamingQueryListener.onQueryExecutionStart``): a trigger started; ``id``, ``runId``,
#: ``name``, ``timestamp`` (the trigger's start), no batch id.
EVENT_EXECUTION_START = _PREFIX + "QueryExecutionStartEvent"
STREAMING_EVENT_NAMES = (EVENT_STARTED, EVENT_PROGRESS, EVENT_IDLE, EVENT_TERMINATED, EVENT_EXECUTION_START)

#: A field of tidegauge's own in a pushed ``QueryProgressEvent`` envelope (never written by Spark):
#: ``{"triggerClass": "org.apache.spark.sql.execution.streaming.RealTimeTrigger", "batchDurationMs": 15000}``,
#: the JVM class of the query's ``Trigger`` as :class:`collectors.spark.listener.TidegaugeListener` read it.
TRIGGER_FIELD = "tidegauge"
#: Spark's ``Trigger`` implementations (simple class names, ``org.apache.spark.sql.execution.streaming`` in
#: Spark 3.x-4.3) -> how they run batches. ``ContinuousTrigger`` (continuous processing, no batches) and any
#: other class are not listed: a batch then names no trigger.
TRIGGER_CLASSES: dict[str, TriggerKind] = {
    "RealTimeTrigger": TriggerKind.REAL_TIME,  # Spark 4.1+; MicroBatchExecution plans a RealTimeStreamScanExec
    "ProcessingTimeTrigger": TriggerKind.MICRO_BATCH,
    "OneTimeTrigger": TriggerKind.MICRO_BATCH,
    "AvailableNowTrigger": TriggerKind.MICRO_BATCH,
}
_MAX_CLASS_CHARS = 300


def trigger_extras(trigger_class: str) -> dict[str, Any]:
    """What a batch run by Spark's ``Trigger`` class ``trigger_class`` (fully qualified or simple:
    ``org.apache.spark.sql.execution.streaming.RealTimeTrigger`` / ``RealTimeTrigger``) adds to its job-scope
    sample's ``extra``: ``{TRIGGER_EXTRA: "real_time" | "micro_batch"}`` (:data:`monitor.model.TRIGGER_EXTRA`,
    read by :func:`rules.cadence.trigger_kind`), ``{}`` for a class not in :data:`TRIGGER_CLASSES`. The one
    mapping from what a collector learnt of the trigger to the sample: the listener push names the class, the
    event-log collector the class that plans the scan it found (``RealTimeStreamScanExec``)."""
    kind = TRIGGER_CLASSES.get(trigger_class.rsplit(".", 1)[-1])
    return {} if kind is None else {TRIGGER_EXTRA: kind.value}


def _pushed_trigger(event: Mapping[str, Any], where: str) -> dict[str, Any]:
    """:func:`trigger_extras` of a pushed progress envelope's :data:`TRIGGER_FIELD` (``{}`` without one).

    Raises:
        ProgressFormatError: the field is not an object, or its ``triggerClass`` is not a string of at most
            300 characters.
    """
    pushed = event.get(TRIGGER_FIELD)
    if pushed is None:
        return {}
    if not _is_mapping(pushed):
        raise ProgressFormatError(
            f"{field_at(where, TRIGGER_FIELD)}: expected an object {{\"triggerClass\": ...}} "
            f"(the listener's trigger), got {_show(pushed)}"
        )
    name = pushed.get("triggerClass")
    if not isinstance(name, str) or not 0 < len(name) <= _MAX_CLASS_CHARS:
        raise ProgressFormatError(
            f"{field_at(where, TRIGGER_FIELD + '.triggerClass')}: expected the trigger's JVM class name "
            f"(a string of 1-{_MAX_CLASS_CHARS} characters), got {_show(name)}"
        )
    return trigger_extras(name)


#: Deepest nesting of arrays/objects accepted in one document. Spark's deepest (a listener event's
#: ``progress.sources[i].startOffset.<topic>.<partition>``) is 6 levels.
MAX_JSON_DEPTH = 64
_Parser = TypeVar("_Parser", bound=Callable[..., list[Sample]])
_NON_FINITE = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}


def field_at(where: str, path: str) -> str:
    """Where a field is, for messages: ``FILE: line 17: field progress.timestamp`` (``where`` = the
    document's location, may be empty; ``path`` = the field's dotted JSON path in the document)."""
    return f"{where}: field {path}" if where else f"field {path}"


def _show(value: Any) -> str:
    """``repr(value)``, cut to keep a message on one short line."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def load_json(data: bytes | str, where: str) -> Any:
    """Decode one JSON document (an event-log line, a progress file, a request body) for the parsers here.

    Besides invalid JSON it rejects what would break later: bytes that are not UTF-8, nesting deeper than
    :data:`MAX_JSON_DEPTH` (CPython's decoder raises ``RecursionError`` near 1,000), integers longer than
    CPython's 4,300-digit conversion limit, and strings or keys holding a lone surrogate (``"\\ud800"``, which
    no database can store). ``NaN``/``Infinity`` and numbers too large for a float (``1e400``) become the
    strings ``"NaN"``/``"Infinity"``/``"-Infinity"``, as Jackson writes them in Spark's event logs: the
    document stays storable as JSON, a rate reads them as unknown and a count rejects them.

    Raises:
        ProgressFormatError: the message starts with ``where`` and names the position or the field.
    """
    if isinstance(data, bytes):
        # orjson first (several times faster on Spark's lines; it refuses lone surrogates, invalid UTF-8,
        # NaN/Infinity and numbers beyond a double), the standard library for what it refuses
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if data.count(b"{") + data.count(b"[") > MAX_JSON_DEPTH:  # orjson allows 1,024 levels
                check_document(document, where)
            return document
    try:
        # decoded here, strictly: json.loads would decode bytes with "surrogatepass" (lone surrogates)
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        document = json.loads(text, parse_constant=_NON_FINITE.__getitem__, parse_float=_finite_or_text)
    except RecursionError:
        raise ProgressFormatError(f"{where}: JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)") from None
    except UnicodeDecodeError as exc:
        raise ProgressFormatError(f"{where}: not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise ProgressFormatError(f"{where}: invalid JSON at {at}: {exc.msg}") from None
    except ValueError as exc:  # CPython's int-parsing limit (sys.get_int_max_str_digits)
        raise ProgressFormatError(f"{where}: invalid JSON: a number too long to read ({_first(exc)})") from None
    # Fast path (nearly every real line): no "\u" escape means no lone surrogate (raw surrogate bytes are
    # not UTF-8 and fail above), and fewer brackets than the limit means not too deep.
    if "\\u" in text or text.count("{") + text.count("[") > MAX_JSON_DEPTH:
        check_document(document, where)
    return document


def _finite_or_text(text: str) -> float | str:
    """``parse_float`` of :func:`load_json`: a number too large for a float (``1e400``) becomes
    ``"Infinity"``/``"-Infinity"``, like the ``Infinity`` literal."""
    value = float(text)
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def check_document(document: Any, where: str) -> None:
    """The checks :func:`load_json` makes after decoding, for a document decoded elsewhere (the parsers
    call it unless told the document came from :func:`load_json`): nesting at most :data:`MAX_JSON_DEPTH`,
    no lone surrogate in a key or string, non-finite floats replaced by their Jackson strings in place.

    Raises:
        ProgressFormatError: naming ``where`` and the field (``field`` set when a value is to blame).
    """
    problem = _check_tree(document, 0)
    if problem is not None:
        path, message, is_field = problem
        path = path.lstrip(".")
        if is_field:
            raise ProgressFormatError(f"{field_at(where, path)}: {message}", field=path)
        raise ProgressFormatError(f"{where}: {message}" + (f" (at {path})" if path else ""))


def _first(exc: BaseException) -> str:
    return str(exc).split(";")[0][:120]


def _check_tree(node: Any, depth: int) -> tuple[str, str, bool] | None:
    """``(path, problem, a field's value is to blame)`` of the first thing :func:`load_json` rejects below
    ``node``, else ``None``; replaces non-finite floats by their Jackson strings in place. The path is
    built only for a problem, while the recursion unwinds."""
    if depth >= MAX_JSON_DEPTH:
        return "", f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)", False
    items: Any = node.items() if type(node) is dict else enumerate(node)
    for key, value in items:
        if type(key) is str and not key.isascii():
            try:
                check_text(key, "key")
            except ValueError as exc:
                return f".{key!a}", str(exc), False
        kind = type(value)
        problem: tuple[str, str, bool] | None = None
        if kind is str:
            if not value.isascii():
                try:
                    check_text(value, "value")
                except ValueError as exc:
                    problem = "", str(exc).removeprefix("value: "), True
        elif kind is float:
            if not math.isfinite(value):
                node[key] = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        elif kind is dict or kind is list:
            problem = _check_tree(value, depth + 1)
        if problem is not None:
            step = f"[{key}]" if type(key) is int else f".{key}"
            return step + problem[0], problem[1], problem[2]
    return None


def parse_iso_utc(value: Any, where: str) -> datetime:
    """Parse Spark's ISO-8601 UTC timestamp (``2026-11-29T11:32:41.709Z``) to an aware UTC datetime.

    Raises:
        ProgressFormatError: missing (``None``), not a string, not ISO-8601, or outside the model's range
            (:func:`monitor.model.check_time`); ``where`` names the field.
    """
    fast = _fast_utc(value)
    if fast is not None:
        return fast
    if value is None:
        raise ProgressFormatError(f"{where}: missing (expected an ISO-8601 timestamp string)")
    if not isinstance(value, str):
        raise ProgressFormatError(f"{where}: expected an ISO-8601 timestamp string, got {_show(value)}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ProgressFormatError(f"{where}: not an ISO-8601 timestamp: {_show(value)}") from None
    if parsed.tzinfo is None:
        raise ProgressFormatError(f"{where}: timestamp has no time zone: {_show(value)}")
    try:
        return check_time(parsed, where)
    except ValueError as exc:
        raise ProgressFormatError(str(exc)) from None


def _fast_utc(value: Any) -> datetime | None:
    """Spark's own shape, ``YYYY-MM-DDTHH:MM:SS.fffZ`` (24 characters: ``Z`` only at the end), parsed and
    within the model's range, else ``None`` (then :func:`parse_iso_utc`'s full path decides, with its
    message). For that shape ``fromisoformat`` of the text and of the text with ``Z`` -> ``+00:00`` (the full
    path) give the same time, in :data:`datetime.UTC`; nearly every time Spark writes takes this path."""
    if type(value) is not str or len(value) != 24 or value[23] != "Z" or value[10] != "T" or value[19] != ".":
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is UTC and MIN_TIME <= parsed <= MAX_TIME:
        return parsed
    return None


def _time_at(mapping: Mapping[str, Any], key: str, where: str, path: str) -> datetime:
    """:func:`parse_iso_utc` of ``mapping[key]`` with the field named ``<where>: field <path><key>`` (the
    name built only when the fast path does not take the value)."""
    value = mapping.get(key)
    fast = _fast_utc(value)
    return fast if fast is not None else parse_iso_utc(value, field_at(where, path + key))


#: What an event time or watermark beyond year 9999 becomes: the model's latest time
#: (:data:`monitor.model.MAX_TIME`, year 8999; Python's ``datetime`` ends at 9999). Spark
#: accepts such a row (epoch milliseconds read as seconds land in year ~56,000) and prints the year with a
#: sign and five or more digits (``+56135-05-22T09:20:00.000Z``); ``event_time_units`` reports it.
BEYOND_YEAR_9999 = MAX_TIME


def _opt_time(mapping: Mapping[str, Any], key: str, where: str, path: str) -> datetime | None:
    value = mapping.get(key)
    if value is None:
        return None
    fast = _fast_utc(value)
    if fast is not None:
        return fast
    if isinstance(value, str) and value[:1] == "+" and value[1:6].isdigit() and value[1:].index("-") >= 5:
        return BEYOND_YEAR_9999
    return parse_iso_utc(value, field_at(where, f"{path}.{key}"))


def _number(value: Any, where: str) -> float | None:
    """A rate: a JSON number, a numeric string, or NaN/infinite/absent (-> None, unknown).

    Raises:
        ProgressFormatError: not a number (or an integer too large for a float).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float):
        result = value
    elif isinstance(value, int):
        try:
            result = float(value)
        except OverflowError:
            raise ProgressFormatError(f"{where}: number out of range ({len(str(value))} digits)") from None
    elif isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            raise ProgressFormatError(f"{where}: expected a number, got {_show(value)}") from None
    else:
        raise ProgressFormatError(f"{where}: expected a number, got {_show(value)}")
    if math.isnan(result) or math.isinf(result):
        return None
    return result


def _int(value: Any, where: str) -> int | None:
    """A count or id: a JSON integer (or an integral number / numeric string) within int64; absent -> None.

    Raises:
        ProgressFormatError: not a number, NaN/infinite, or beyond int64 (:func:`monitor.model.check_int64`).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float | str):
        exact: int | None = None
        if isinstance(value, str):
            try:
                exact = int(value.strip())
            except ValueError:
                exact = None
        if exact is None:
            try:
                as_float = float(value)
            except ValueError:
                raise ProgressFormatError(f"{where}: expected a number, got {_show(value)}") from None
            if not math.isfinite(as_float):
                raise ProgressFormatError(f"{where}: expected a count, got {_show(value)}")
            exact = int(as_float)
        number = exact
    else:
        raise ProgressFormatError(f"{where}: expected a number, got {_show(value)}")
    try:
        return check_int64(number, where)
    except ValueError as exc:
        raise ProgressFormatError(str(exc)) from None


def _text(value: Any, where: str) -> str | None:
    """A string field as stored (``None`` when not a string). Raises ProgressFormatError on a lone surrogate."""
    if not isinstance(value, str):
        return None
    try:
        return check_text(value, where)
    except ValueError as exc:
        raise ProgressFormatError(str(exc)) from None


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, answered without the ABC machinery for a ``dict`` (what JSON gives)."""
    return type(value) is dict or isinstance(value, Mapping)


def _text_at(mapping: Mapping[str, Any], key: str, where: str, path: str) -> str | None:
    """:func:`_text` of ``mapping[key]`` with the field named ``<where>: field <path><key>``; an ASCII string
    (no surrogate possible) is taken without building that name."""
    value = mapping.get(key)
    if type(value) is str and value.isascii():
        return value
    return _text(value, field_at(where, path + key))


def _name_at(mapping: Mapping[str, Any], key: str, where: str, path: str, max_chars: int) -> str | None:
    """An identifier, name or description ``mapping[key]`` as the model holds it (:func:`monitor.model.check_name`:
    at most ``max_chars`` characters, no NUL, valid Unicode); ``None`` when not a string.

    Raises:
        ProgressFormatError: it cannot be held, naming ``<where>: field <path><key>`` (``field`` set).
    """
    value = mapping.get(key)
    if type(value) is not str:
        return None
    return _checked_name(value, where, path + key, max_chars)


def _checked_name(value: str, where: str, path: str, max_chars: int) -> str:
    if len(value) <= max_chars and value.isascii() and "\x00" not in value:
        return value  # nearly every value: no field name built
    try:
        return check_name(value, field_at(where, path), max_chars)
    except ValueError as exc:
        raise ProgressFormatError(str(exc), field=path) from None


def _sum_known(values: list[int | None]) -> int | None:
    """The sum of the known values, ``None`` when none is known (one value: itself)."""
    if len(values) == 1:
        return values[0]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _count_at(mapping: Mapping[str, Any], key: str, where: str, path: str) -> int | None:
    """``_int(mapping[key])`` with the field named ``<where>: field <path><key>``; a plain JSON integer
    within int64 (:data:`monitor.model.INT64_MIN` .. ``INT64_MAX``: nearly every value) is taken without
    building that name, as is an absent or null one (unknown); anything else gets :func:`_int`'s checks."""
    value = mapping.get(key)
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    if value is None:
        return None
    return _int(value, field_at(where, path + key))


def _rate_at(mapping: Mapping[str, Any], key: str, where: str, path: str) -> float | None:
    """``_number(mapping[key])`` with the field named as in :func:`_count_at`; a finite JSON float is taken
    without building that name, as is an absent or null one (unknown)."""
    value = mapping.get(key)
    if type(value) is float and not math.isnan(value) and not math.isinf(value):
        return value
    if value is None:
        return None
    return _number(value, field_at(where, path + key))


def _job(
    doc: Mapping[str, Any], where: str, prefix: str, app_id: str | None, fallback_name: str | None = None
) -> JobRef:
    """The query run ``doc`` names (``id``, ``runId``, ``name``); ``fallback_name`` when it names none."""
    query_id = doc.get("id")
    if query_id is None:
        raise ProgressFormatError(f"{field_at(where, prefix + 'id')}: missing (the streaming query id)")
    if not isinstance(query_id, str) or not query_id:
        raise ProgressFormatError(
            f"{field_at(where, prefix + 'id')}: expected the streaming query id (a non-empty string), got {_show(query_id)}"
        )
    job_id = _name_at(doc, "id", where, prefix, MAX_ID_CHARS) or query_id
    run_id = _name_at(doc, "runId", where, prefix, MAX_ID_CHARS)
    name = _name_at(doc, "name", where, prefix, MAX_NAME_CHARS)
    return _job_ref(job_id, run_id, fallback_name if name is None else name, app_id)


@functools.lru_cache(maxsize=1024)
def _job_ref(job_id: str, run_id: str | None, name: str | None, app_id: str | None) -> JobRef:
    """One shared (immutable) :class:`JobRef` per Spark query run, name and application: a run's batches
    all name the same one."""
    return JobRef(engine=Engine.SPARK, job_id=job_id, run_id=run_id, name=name, app_id=app_id)


@functools.lru_cache(maxsize=1024)
def _source_scope(source: str) -> Scope:
    """One shared (immutable) :class:`Scope` per source description."""
    return Scope(source=source)


def _values_checked(parse: _Parser) -> _Parser:
    """The parsers' shared entry: check the whole document (:func:`check_document`) unless the caller says
    it came from :func:`load_json` (``checked=True``), and turn a ``ValueError`` of the model's own checks
    (``Sample.__post_init__``: a bound the parser did not check with its field name) into
    :class:`ProgressFormatError` at ``where``."""

    @functools.wraps(parse)
    def checked(document: Mapping[str, Any], **kwargs: Any) -> list[Sample]:
        if not kwargs.get("checked", False):
            check_document(document, kwargs.get("where") or "document")
        try:
            return parse(document, **kwargs)
        except ValueError as exc:
            where = kwargs.get("where") or "document"
            message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            raise ProgressFormatError(f"{where}: {message}") from None

    return cast(_Parser, checked)


def _parse_progress(
    progress: Mapping[str, Any],
    *,
    collector: str,
    where: str = "",
    app_id: str | None = None,
    kind: SampleKind = SampleKind.PROGRESS,
    field_prefix: str = "",
    checked: bool = False,
    fallback_name: str | None = None,
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
        checked: the document came from :func:`load_json` (already checked); otherwise it is checked
            first with :func:`check_document`.
        fallback_name: the query name of the samples when ``progress`` has none (absent, null or not a
            string), e.g. the name its run's other events carried.

    Raises:
        ProgressFormatError: ``id``, ``timestamp`` missing or malformed, or a field has the wrong type.
    """

    def at(path: str) -> str:
        return field_at(where, field_prefix + path)

    if not _is_mapping(progress):
        what = field_at(where, field_prefix.rstrip(".")) if field_prefix else (where or "progress")
        raise ProgressFormatError(f"{what}: expected a JSON object, got {type(progress).__name__}")
    job = _job(progress, where, field_prefix, app_id, fallback_name)
    observed_at = _time_at(progress, "timestamp", where, field_prefix)
    batch_id = _count_at(progress, "batchId", where, field_prefix)

    event_time = progress.get("eventTime") or {}
    if not _is_mapping(event_time):
        raise ProgressFormatError(f"{at('eventTime')}: expected an object, got {event_time!r}")

    ops = progress.get("stateOperators") or []
    if not isinstance(ops, list):
        raise ProgressFormatError(f"{at('stateOperators')}: expected a list")
    tws: dict[str, int] = {}
    join: dict[str, int | None] = {}
    rows_total: list[int | None] = []
    rows_updated: list[int | None] = []
    rows_removed: list[int | None] = []
    mem_bytes: list[int | None] = []
    dropped: list[int | None] = []
    for i, op in enumerate(ops):
        w = f"stateOperators[{i}]"
        if not _is_mapping(op):
            raise ProgressFormatError(f"{at(w)}: expected an object")
        p = f"{field_prefix}{w}."
        rows_total.append(_count_at(op, "numRowsTotal", where, p))
        rows_updated.append(_count_at(op, "numRowsUpdated", where, p))
        rows_removed.append(_count_at(op, "numRowsRemoved", where, p))
        mem_bytes.append(_count_at(op, "memoryUsedBytes", where, p))
        late_key = "numRowsDroppedByWatermark" if "numRowsDroppedByWatermark" in op else "numLateInputs"
        dropped.append(_count_at(op, late_key, where, p))
        if op.get("operatorName") in TRANSFORM_WITH_STATE_OPERATORS:
            tws["operators"] = tws.get("operators", 0) + 1
            _add_transform_with_state(tws, op.get("customMetrics"), where, f"{p}customMetrics.")
        elif op.get("operatorName") == STREAM_JOIN_OPERATOR:
            join["operators"] = (join.get("operators") or 0) + 1
            for key, value in (("rows_total", rows_total[-1]), ("rows_removed", rows_removed[-1])):
                known = join.get(key, 0)
                join[key] = None if known is None or value is None else known + value

    sources = progress.get("sources") or []
    if not isinstance(sources, list):
        raise ProgressFormatError(f"{at('sources')}: expected a list")
    source_samples: list[Sample] = []
    source_rows: list[int | None] = []
    source_lags: list[int | None] = []
    for i, src in enumerate(sources):
        w = f"sources[{i}]"
        if not _is_mapping(src):
            raise ProgressFormatError(f"{at(w)}: expected an object")
        description = src.get("description")
        p = f"{field_prefix}{w}."
        rows = _count_at(src, "numInputRows", where, p)
        metrics = src.get("metrics") or {}
        lag = (
            _count_at(metrics, "maxOffsetsBehindLatest", where, f"{p}metrics.")
            if _is_mapping(metrics)
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
                scope=_source_scope(
                    _name_at(src, "description", where, p, MAX_DESCRIPTION_CHARS) if type(description) is str
                    else _checked_name(str(description), where, f"{p}description", MAX_DESCRIPTION_CHARS)
                    if description is not None
                    else f"source[{i}]"
                ),
                batch_id=batch_id,
                num_input_rows=rows,
                input_rows_per_second=_rate_at(src, "inputRowsPerSecond", where, p),
                processed_rows_per_second=_rate_at(src, "processedRowsPerSecond", where, p),
                lag_offsets=lag,
            )
        )

    if "numInputRows" in progress:
        num_input_rows = _count_at(progress, "numInputRows", where, field_prefix)
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
        input_rows_per_second=_rate_at(progress, "inputRowsPerSecond", where, field_prefix),
        processed_rows_per_second=_rate_at(progress, "processedRowsPerSecond", where, field_prefix),
        batch_duration_ms=_count_at(progress, "batchDuration", where, field_prefix),
        dropped_by_watermark=_sum_known(dropped),
        state_rows_total=_sum_known(rows_total),
        state_rows_updated=_sum_known(rows_updated),
        state_rows_removed=_sum_known(rows_removed),
        state_memory_bytes=_sum_known(mem_bytes),
        lag_offsets=source_lags[0] if len(source_lags) == 1 else max((v for v in source_lags if v is not None), default=None),
        extra=_extra(progress, len(ops), len(sources), where, field_prefix, tws, join),
    )
    return [query_sample, *source_samples]


#: ``StateOperatorProgress.operatorName`` of a stream-stream join (``StreamingSymmetricHashJoinExec``; both
#: sides' state stores are reported together in one entry).
STREAM_JOIN_OPERATOR = "symmetricHashJoin"
#: ``StateOperatorProgress.operatorName`` of the ``transformWithState`` operators (Spark's
#: ``StatefulOperatorsUtils.TRANSFORM_WITH_STATE_OP_NAMES``: Scala/Java, ``transformWithStateInPandas``,
#: the row-based Python ``transformWithState``).
TRANSFORM_WITH_STATE_OPERATORS = frozenset(
    {"transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec"}
)
#: ``customMetrics`` of a ``transformWithState`` operator (``TransformWithStateExec.customStatefulOperatorMetrics``,
#: the same names in the Python ``TransformWithStateInPySparkExec``, recorded from Spark 4.3.0 in
#: ``tests/fixtures/spark/transform-with-state-4.3.0``) -> the keys it is summed into in
#: ``extra["transform_with_state"]``. Spark counts a variable with a TTL only under ``num...WithTTLVars``: it is
#: summed into ``state_variables`` (all of them) and ``state_variables_with_ttl``. The Python operator reports a
#: processing-time timer that fired as deleted (``numDeletedTimers``; ``numExpiredTimers`` stayed 0 in the
#: recording), so ``timers_deleted`` counts fired timers there.
_TWS_METRICS: dict[str, tuple[str, ...]] = {
    "numRegisteredTimers": ("timers_registered",),
    "numDeletedTimers": ("timers_deleted",),
    "numExpiredTimers": ("timers_expired",),
    "numValueStateVars": ("state_variables",),
    "numListStateVars": ("state_variables",),
    "numMapStateVars": ("state_variables",),
    "numValueStateWithTTLVars": ("state_variables", "state_variables_with_ttl"),
    "numListStateWithTTLVars": ("state_variables", "state_variables_with_ttl"),
    "numMapStateWithTTLVars": ("state_variables", "state_variables_with_ttl"),
    "numDeletedStateVars": ("state_variables_deleted",),
    "numValuesRemovedDueToTTLExpiry": ("rows_removed_by_ttl",),
}


def _add_transform_with_state(into: dict[str, int], metrics: Any, where: str, path: str) -> None:
    """Add one ``transformWithState`` operator's ``customMetrics`` (Spark's ``TransformWithStateExec``:
    timers registered/deleted/expired in the batch, state variables defined (summed over the operator's
    partitions, as Spark sums every custom metric), state variables deleted, values removed by TTL expiry
    in the batch) into ``into`` (the keys of :data:`_TWS_METRICS`); a metric the operator does not report is
    left out (unknown, not 0).

    Raises:
        ProgressFormatError: a metric present but not an integer (named by ``where`` + ``path``).
    """
    if not _is_mapping(metrics):
        return
    for name, keys in _TWS_METRICS.items():
        value = _count_at(metrics, name, where, path) if name in metrics else None
        if value is not None:
            for key in keys:
                into[key] = into.get(key, 0) + value


def _extra(
    progress: Mapping[str, Any], ops: int, sources: int, where: str, field_prefix: str,
    tws: Mapping[str, int] | None = None, join: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """The query sample's extras: the number of state operators and sources, the ``sink``'s
    ``description`` when it has one (what the query writes: ``FileSink[/data/out]``; the pipeline graph,
    :func:`rules.pipeline.job_endpoints`, reads it; one too long to hold is left out, never an error), and
    the summed custom metrics of its ``transformWithState`` operators (:data:`TRANSFORM_WITH_STATE_EXTRA`, see
    :func:`_add_transform_with_state`, with ``operators``: how many) and the state of its stream-stream joins (:data:`STREAM_JOIN_EXTRA`:
    ``operators``, summed ``rows_total``/``rows_removed``, ``None`` when an operator left one out), when it
    has any."""
    extra: dict[str, Any] = {"num_state_operators": ops, "num_sources": sources}
    if tws:
        extra[TRANSFORM_WITH_STATE_EXTRA] = dict(tws)
    if join:
        extra[STREAM_JOIN_EXTRA] = dict(join)
    sink = progress.get("sink")
    if _is_mapping(sink) and type(sink.get("description")) is str:
        # a description the model cannot hold names no dataset: the batch is kept without it
        with contextlib.suppress(ProgressFormatError):
            extra["sink"] = _name_at(sink, "description", where, f"{field_prefix}sink.", MAX_DESCRIPTION_CHARS)
    return extra


_LIFECYCLE_KINDS = {
    EVENT_STARTED: SampleKind.STARTED,
    EVENT_TERMINATED: SampleKind.TERMINATED,
    EVENT_EXECUTION_START: SampleKind.BATCH_STARTED,
}

#: The public entry (checks the document unless ``checked``); :func:`parse_listener_event`, already inside
#: the same checks, calls :func:`_parse_progress` itself.
parse_progress = _values_checked(_parse_progress)


@_values_checked
def parse_listener_event(
    event: Mapping[str, Any],
    *,
    collector: str,
    where: str = "",
    app_id: str | None = None,
    fallback_time: datetime | None = None,
    checked: bool = False,
    fallback_name: str | None = None,
) -> list[Sample]:
    """Turn one streaming listener event (as written in an event log) into samples.

    ``event["Event"]`` must be one of :data:`STREAMING_EVENT_NAMES`. Progress and idle events carry a
    ``progress`` object; a progress event pushed by the listener may carry :data:`TRIGGER_FIELD`, whose
    trigger class the job-scope sample's ``extra`` then names (:func:`trigger_extras`) (idle events in Spark 3.5+/4 carry ``id``, ``runId``, ``timestamp`` only: then a
    single ``IDLE`` sample without quantities is returned). Started/terminated events give one lifecycle
    sample each (``observed_at`` = the event's ``timestamp``), as does Spark 4.2+'s
    ``QueryExecutionStartEvent`` (a ``BATCH_STARTED`` sample at the trigger's start; Spark gives it the
    ``id``, ``runId``, ``name`` and ``timestamp`` of ``QueryStartedEvent``). Spark's ``QueryTerminatedEvent`` has no
    timestamp: ``fallback_time`` (e.g. the last progress time of that run, or the time the event was
    received) is used then; likewise it has no name: ``fallback_name`` (the name the run's other events
    carried) names the samples of an event without one (absent, null or not a string). Unless ``checked`` (the event came from :func:`load_json`), the whole event is
    checked first (:func:`check_document`): this is what makes any caller's decoded JSON safe to store.

    Raises:
        ProgressFormatError: unknown event name, malformed or out-of-range fields, a document nested too
            deeply or holding a lone surrogate.
    """
    name = event.get("Event")
    if name == EVENT_PROGRESS:
        progress = event.get("progress")
        if not _is_mapping(progress):
            raise ProgressFormatError(f"{field_at(where, 'progress')}: missing or not an object")
        added = _pushed_trigger(event, where)
        samples = _parse_progress(
            progress,
            collector=collector,
            where=where,
            app_id=app_id,
            field_prefix="progress.",
            checked=True,
            fallback_name=fallback_name,
        )
        if not added:
            return samples
        return [replace(s, extra={**s.extra, **added}) if s.scope.is_job() else s for s in samples]
    if name == EVENT_IDLE:
        progress = event.get("progress")
        if _is_mapping(progress):
            return _parse_progress(
                progress,
                checked=True,
                collector=collector,
                where=where,
                app_id=app_id,
                kind=SampleKind.IDLE,
                field_prefix="progress.",
                fallback_name=fallback_name,
            )
        job = _job(event, where, "", app_id, fallback_name)
        return [
            Sample(
                job=job,
                observed_at=parse_iso_utc(event.get("timestamp"), field_at(where, "timestamp")),
                kind=SampleKind.IDLE,
                collector=collector,
            )
        ]
    if name in (EVENT_STARTED, EVENT_TERMINATED, EVENT_EXECUTION_START):
        job = _job(event, where, "", app_id, fallback_name)
        kind = _LIFECYCLE_KINDS[name]
        extra: dict[str, Any] = {}
        if name == EVENT_TERMINATED and event.get("exception"):
            extra["exception"] = _text(str(event.get("exception"))[:2000], field_at(where, "exception"))
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
