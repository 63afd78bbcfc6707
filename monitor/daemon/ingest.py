"""The ingest endpoint: Spark streaming-query events pushed by :class:`collectors.spark.listener.TidegaugeListener`.

A Starlette app, mounted under :func:`monitor.daemon.web.create_app` (whose ``/healthz`` checks the store) by
``tidegauge serve`` and the daemon::

    POST /api/v1/spark/events     body: one event object, or an array of them; JSON

An event has the envelope Spark writes to its event log (``{"Event": "org.apache.spark.sql.streaming.
StreamingQueryListener$QueryProgressEvent", "progress": {...}}``, started/idle/terminated with their
fields), so it is parsed by the same :func:`collectors.spark.progress.parse_listener_event` as event logs.
A request is all-or-nothing: either every event parses and the whole batch goes to the sink, or nothing is
stored and the answer names the first bad field.

Answers (always a JSON object; errors as ``{"error": "<one line>"}``):

=====  ===========================================================================================
 202   accepted: ``{"accepted": <events>, "samples": <samples>}``
 400   the body is not valid JSON (or not UTF-8, or a malformed ``Content-Length``)
 408   the body did not arrive within ``body_timeout_s`` (a client dribbling its body)
 401   no ``Authorization: Bearer <token>`` header, or the wrong token (compared in constant time with
       :func:`hmac.compare_digest`; the presented token is never echoed or logged)
 413   the body is larger than ``max_body_bytes`` (checked on ``Content-Length`` and while reading)
 415   a ``Content-Type`` other than ``application/json``
 422   valid JSON of the wrong shape: not an object/array, empty array, unknown ``Event``, or a field
       missing/mistyped; or a value tidegauge cannot hold: an integer outside the signed 64-bit range
       (anywhere in the document, which is stored whole), a string with a lone UTF-16 surrogate, a
       timestamp outside the UTC calendar; the message names it, e.g. ``events[3].progress.timestamp: ...``
 503   the storage failed for a reason of its own, after retrying a busy database (SQLite's
       ``database is locked``, PostgreSQL serialization failures) with backoff for up to
       ``store_retry_s``; the client may retry later. Client input never gets a 5xx.
=====  ===========================================================================================

The optional header ``X-Tidegauge-App-Id`` (the Spark application id) goes into ``JobRef.app_id``.

Every received event document is kept in ``PollResult.raw`` (kind = the sample kind, as the event-log
collector does), so the store can replay it after a parser fix. ``NaN``/``Infinity`` in the JSON (Python's ``json`` writes them) are read as
``null`` (unknown), as Spark itself omits such values.

The body must arrive within ``body_timeout_s`` (408); the header deadline and the access log (which never
prints query strings) belong to the server, :mod:`monitor.daemon.web`.

Nothing here reads the clock or the environment: the token, the sink and the clock are parameters.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from collectors.spark.progress import STREAMING_EVENT_NAMES, parse_listener_event
from monitor.config import DEFAULT_MAX_BODY_BYTES
from monitor.errors import InputError, ProgressFormatError
from monitor.model import JobRef, PollResult, Sample, ensure_utc
from monitor.store.database import is_data_error, is_transient

__all__ = [
    "APP_ID_HEADER",
    "COLLECTOR_NAME",
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_STORE_RETRY_S",
    "EVENTS_PATH",
    "INT64_MAX",
    "INT64_MIN",
    "BodyTooLarge",
    "Sink",
    "check_document",
    "create_ingest_app",
    "parse_event_document",
]

#: Path of the event endpoint.
EVENTS_PATH = "/api/v1/spark/events"
#: Header carrying the Spark application id (optional).
APP_ID_HEADER = "X-Tidegauge-App-Id"
#: ``Sample.collector`` of the samples this endpoint produces.
COLLECTOR_NAME = "spark-listener"

#: How long a client may take to send its body, seconds (408 after).
DEFAULT_BODY_TIMEOUT_S = 30.0
#: How long a busy database is retried before answering 503, seconds.
DEFAULT_STORE_RETRY_S = 30.0
#: The range of a signed 64-bit integer: what SQLite's INTEGER and PostgreSQL's BIGINT hold.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: Deepest nesting of a document walked by :func:`check_document` (Spark's events nest about 5 levels).
_MAX_DEPTH = 64

#: What the endpoint hands a parsed request to (the composition root wires the store's ``save_poll``).
Sink = Callable[[PollResult], None]

_LOG = logging.getLogger("tidegauge.ingest")
_APP_ID_RE = re.compile(r"^[\x21-\x7e]{1,200}$")  # printable ASCII, no spaces


class BodyTooLarge(InputError):
    """The request body is larger than the configured limit."""


def _constant_to_none(name: str) -> None:
    # NaN / Infinity / -Infinity -> null (unknown); returning None makes json use None.
    return None


class _OutOfRange(str):
    """The text of a JSON integer outside the 64-bit range, kept (unconverted) for :func:`check_document`
    to name its field; converting a 4,300+ digit text to ``int`` would itself raise."""


def _parse_int(text: str) -> int | _OutOfRange:
    if len(text.lstrip("-")) > 19:
        return _OutOfRange(text)
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else _OutOfRange(text)


def check_document(document: Any, root: str) -> None:
    """Check that a decoded JSON document holds only values tidegauge can store: integers in the signed
    64-bit range, strings (and keys) that are valid Unicode (no lone UTF-16 surrogates, which JSON's
    ``\\ud800`` escapes can produce and UTF-8 cannot encode), ISO 8601 timestamps whose UTC instant
    exists (years 1-9999), nesting at most 64 levels.

    Args:
        document: as returned by :func:`_decode_json` (out-of-range integers kept as their text).
        root: the name of the document in messages (``event`` / ``events``).

    Raises:
        ProgressFormatError: ``"<path>: <what>"``, e.g. ``events[2].progress.numInputRows: integer
            9223372036854775808 is outside the 64-bit range``.
    """
    # Fast pass without paths; only a document with a problem is walked again to name the field.
    stack: list[tuple[Any, int]] = [(document, 0)] if isinstance(document, dict | list) else []
    while stack:
        container, depth = stack.pop()
        if depth >= _MAX_DEPTH:
            _locate(document, root)
        if isinstance(container, dict):
            items: Any = container.values()
            if not all(k.isascii() for k in container):
                _locate(document, root)
        else:
            items = container
        for value in items:
            if isinstance(value, str):
                if type(value) is not str or not value.isascii() or (len(value) >= 10 and value[4:5] == "-"):
                    try:
                        _check_scalar(value, root)
                    except ProgressFormatError:
                        _locate(document, root)  # raises it again, naming the field
                        raise
            elif isinstance(value, dict | list):
                stack.append((value, depth + 1))
    if isinstance(document, str):
        _check_scalar(document, root)


def _check_scalar(value: str, where: str) -> None:
    """Raise :class:`ProgressFormatError` for an out-of-range integer, invalid text or impossible time
    named ``where``."""
    if isinstance(value, _OutOfRange):
        shown = value if len(value) <= 30 else f"{value[:12]}...({len(value.lstrip('-'))} digits)"
        raise ProgressFormatError(f"{where}: integer {shown} is outside the 64-bit range [-2^63, 2^63-1]")
    _check_text(value, where)
    _check_time(value, where)


def _locate(document: Any, root: str) -> None:
    """Walk ``document`` with paths and raise the first problem :func:`check_document` looks for."""
    stack: list[tuple[str, Any, int]] = [(root, document, 0)]
    while stack:
        where, value, depth = stack.pop()
        if isinstance(value, str):
            _check_scalar(value, where)
            continue
        if depth >= _MAX_DEPTH and isinstance(value, dict | list):
            raise ProgressFormatError(f"{where}: nested deeper than {_MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, f"{where} (a key)")
                stack.append((f"{where}.{key}", item, depth + 1))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item, depth + 1) for i, item in enumerate(value))


def _check_text(text: str, where: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise ProgressFormatError(
            f"{where}: not valid Unicode (lone surrogate U+{ord(bad):04X} at character {exc.start})"
        ) from None


_TIMESTAMP_RE = re.compile(r"^[+-]?\d{4,}-\d\d-\d\d[T ]")


def _check_time(text: str, where: str) -> None:
    """A timestamp string must name an instant within ``datetime``'s UTC range (years 1-9999 after its
    offset is applied): ``9999-12-31T23:59:59-23:59`` and ``0001-01-01T00:00:00+01:00`` are not."""
    if not 10 <= len(text) <= 64 or text[4:5] != "-" or not _TIMESTAMP_RE.match(text):
        return
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return  # not ISO 8601: the parser reports the field it expected a timestamp in
    if parsed.tzinfo is None:
        return
    try:
        parsed.astimezone(UTC)
    except OverflowError:
        raise ProgressFormatError(
            f"{where}: timestamp {text[:40]!r} is outside the UTC calendar (years 1-9999 after its offset)"
        ) from None


_INT_FIELDS = tuple(f.name for f in dataclasses.fields(Sample) if "int" in str(f.type))


def _check_storable(sample: Sample, where: str) -> None:
    """Integers a parser derived (sums, float-to-int conversions) must fit the 64-bit columns too."""
    for name in _INT_FIELDS:
        value = getattr(sample, name)
        if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
            raise ProgressFormatError(f"{where}: {name} {float(value):.3g} is outside the 64-bit range")


def _decode_json(body: bytes) -> Any:
    """Parse a JSON body; ``NaN``/``Infinity`` become ``None``.

    Raises:
        InputError: not UTF-8, not JSON, or nested deeper than the interpreter's recursion limit (the
            message gives the position, never the body).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"body is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_constant_to_none, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise InputError(f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # a number the float parser refuses
        raise InputError(f"body is not valid JSON: {str(exc).splitlines()[0][:120]}") from None
    except RecursionError:
        # CPython's json scanner recurses once per nesting level; Spark's listener events nest a few levels.
        raise InputError("body is not valid JSON for this endpoint: arrays/objects nested too deeply") from None


def parse_event_document(
    document: Any,
    *,
    received_at: datetime,
    app_id: str | None = None,
    collector: str = COLLECTOR_NAME,
) -> PollResult:
    """Turn a decoded request body (one event object or a list of them) into one :class:`PollResult`.

    Args:
        document: the decoded JSON body.
        received_at: when the request arrived (aware UTC): the time of ``QueryTerminatedEvent``, which has
            no timestamp of its own.
        app_id: Spark application id for ``JobRef.app_id``.
        collector: ``Sample.collector``.

    Returns:
        All samples of all events, and one raw document per event (the whole envelope; kind = the sample
        kind, ``"progress"``/``"idle"``/``"started"``/``"terminated"``, as the event-log collector stores it;
        observed_at = the event's first sample time).

    Raises:
        ProgressFormatError: wrong shape, or a value tidegauge cannot hold (:func:`check_document`; an
            integer out of the 64-bit range, a timestamp outside the UTC calendar); the message names
            the element and field (``events[2].progress.timestamp: ...``; a single object is ``event``).
    """
    received = ensure_utc(received_at, "received_at")
    assert received is not None
    if isinstance(document, Mapping):
        items: list[tuple[str, Any]] = [("event", document)]
    elif isinstance(document, list):
        if not document:
            raise ProgressFormatError("events: empty array, nothing to ingest")
        items = [(f"events[{i}]", item) for i, item in enumerate(document)]
    else:
        raise ProgressFormatError(
            f"body: expected a JSON object (one event) or an array of events, got {_json_type(document)}"
        )
    samples: list[Sample] = []
    raw: list[tuple[JobRef, datetime, str, dict[str, Any]]] = []
    for where, event in items:
        if not isinstance(event, Mapping):
            raise ProgressFormatError(f"{where}: expected a JSON object, got {_json_type(event)}")
        name = event.get("Event")
        if name not in STREAMING_EVENT_NAMES:
            allowed = ", ".join(n.rsplit("$", 1)[-1] for n in STREAMING_EVENT_NAMES)
            raise ProgressFormatError(
                f"{where}.Event: expected a streaming query listener event "
                f"(org.apache.spark.sql.streaming.StreamingQueryListener$<{allowed}>), got {name!r}"
            )
        check_document(event, where)
        try:
            parsed = parse_listener_event(
                event, collector=collector, where=where, app_id=app_id, fallback_time=received
            )
        except ProgressFormatError:
            raise
        except (ValueError, OverflowError, ArithmeticError) as exc:
            # A value the parser could not convert (a timestamp whose offset moves it past year 9999 or
            # before year 1 in UTC): the client's input, not our failure. ProgressFormatError (an
            # InputError, not a ValueError) passes through with its own field path.
            log_detail = f"{type(exc).__name__}: {str(exc)[:120]}"
            _LOG.warning("ingest: %s: the parser raised %s (reported to the client as 422)", where, log_detail)
            raise ProgressFormatError(
                f"{where}: a value cannot be represented ({str(exc)[:120] or type(exc).__name__}); "
                "timestamps must fall within years 1-9999 in UTC and counts within 64 bits"
            ) from None
        for sample in parsed:
            _check_storable(sample, where)
        samples.extend(parsed)
        if parsed:
            raw.append((parsed[0].job, parsed[0].observed_at, parsed[0].kind.value, dict(event)))
    return PollResult(samples=tuple(samples), raw=tuple(raw))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=dict(headers) if headers else None)


def _authorized(request: Request, expected: bytes) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        # Still run one comparison so "no header" and "wrong token" take the same time.
        hmac.compare_digest(expected, expected)
        return False
    return hmac.compare_digest(presented.strip().encode("utf-8"), expected)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            declared_len = int(declared)
        except ValueError:
            raise InputError("Content-Length is not a number") from None
        if declared_len > limit:
            raise BodyTooLarge(f"request body of {declared_len} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def create_ingest_app(
    *,
    token: str,
    sink: Sink,
    clock: Callable[[], datetime],
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    collector: str = COLLECTOR_NAME,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    store_retry_s: float = DEFAULT_STORE_RETRY_S,
    transient: Callable[[BaseException], bool] = is_transient,
) -> Starlette:
    """Build the ingest Starlette app.

    Args:
        token: the bearer token clients must present (non-empty; never logged).
        sink: called (in a worker thread) with each accepted request's :class:`PollResult`. An exception
            ``transient`` accepts (a busy database) is retried with full-jitter exponential backoff
            (50 ms doubling to at most 1 s, tenacity) for up to ``store_retry_s``, and at least once however
            long the first attempt took (a loaded machine); then, or for any other
            storage failure, the answer is 503. An :class:`InputError`, ``ValueError`` or
            ``OverflowError`` from it, or a value the database refuses
            (:func:`monitor.store.database.is_data_error`), answers 422.
        clock: returns "now" (aware UTC) for the receive time of a request.
        max_body_bytes: body size limit (413 beyond it).
        collector: ``Sample.collector`` of the produced samples.
        body_timeout_s: the whole body must arrive within this many seconds (408 after).
        store_retry_s: how long a busy database is retried.
        transient: which sink exceptions are retried (default :func:`monitor.store.database.is_transient`).

    Raises:
        ValueError: empty token or non-positive ``max_body_bytes``/``body_timeout_s``.
    """
    if not token:
        raise ValueError("the ingest token must not be empty")
    if max_body_bytes <= 0:
        raise ValueError("max_body_bytes must be positive")
    if body_timeout_s <= 0:
        raise ValueError("body_timeout_s must be positive")
    expected = token.encode("utf-8")

    async def store(result: PollResult) -> None:
        retrying = AsyncRetrying(
            retry=retry_if_exception(transient),
            wait=wait_random_exponential(multiplier=0.05, max=1.0),
            stop=stop_after_delay(store_retry_s) & stop_after_attempt(2),
            reraise=True,
        )
        attempts = 0
        async for attempt in retrying:
            with attempt:
                attempts += 1
                await run_in_threadpool(sink, result)
        if attempts > 1:
            _LOG.info("ingest: stored after %d attempts (the database was busy)", attempts)

    async def events(request: Request) -> JSONResponse:
        if not _authorized(request, expected):
            return _error(401, "missing or invalid bearer token", {"WWW-Authenticate": 'Bearer realm="tidegauge"'})
        content_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _error(415, f"Content-Type must be application/json, got {content_type[:60]!r}")
        app_id = request.headers.get(APP_ID_HEADER.lower())
        if app_id is not None and not _APP_ID_RE.match(app_id):
            return _error(422, f"{APP_ID_HEADER}: expected 1-200 printable ASCII characters without spaces")
        received_at = clock()
        try:
            with anyio.fail_after(body_timeout_s):
                body = await _read_body(request, max_body_bytes)
        except TimeoutError:
            return _error(408, f"request body not received within {body_timeout_s:g}s")
        except BodyTooLarge as exc:
            return _error(413, str(exc))
        except InputError as exc:
            return _error(400, str(exc))
        try:
            document = _decode_json(body)
        except InputError as exc:
            return _error(400, str(exc))
        try:
            result = parse_event_document(document, received_at=received_at, app_id=app_id, collector=collector)
        except ProgressFormatError as exc:
            _LOG.info("ingest: rejected a request: %s", exc)
            return _error(422, str(exc))
        try:
            await store(result)
        except Exception as exc:
            if isinstance(exc, InputError) or is_data_error(exc):
                # The store refused a value (it names the field): the client's input, not a storage failure.
                reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                _LOG.info("ingest: rejected a request the store refused: %s", reason)
                return _error(422, f"events cannot be stored: {reason}")
            _LOG.error(
                "ingest: the store failed to save %d samples%s: %s",
                len(result.samples),
                f" after retrying for {store_retry_s:g}s" if transient(exc) else "",
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
            )
            return _error(503, "storage unavailable; retry later")
        return JSONResponse({"accepted": len(result.raw), "samples": len(result.samples)}, status_code=202)

    return Starlette(routes=[Route(EVENTS_PATH, events, methods=["POST"])])
