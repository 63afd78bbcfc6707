"""The ingest endpoint: Spark streaming-query events pushed by :class:`collectors.spark.listener.TidegaugeListener`.

A Starlette app (served by uvicorn from ``tidegauge serve`` or the daemon)::

    POST /api/v1/spark/events     body: one event object, or an array of them; JSON
    GET  /healthz                 {"status": "ok"} (no token needed)

An event has the envelope Spark writes to its event log (``{"Event": "org.apache.spark.sql.streaming.
StreamingQueryListener$QueryProgressEvent", "progress": {...}}``, started/idle/terminated with their
fields), so it is parsed by the same :func:`collectors.spark.progress.parse_listener_event` as event logs.
A request is all-or-nothing: either every event parses and the whole batch goes to the sink, or nothing is
stored and the answer names the first bad field.

Answers (always a JSON object; errors as ``{"error": "<one line>"}``):

=====  ===========================================================================================
 202   accepted: ``{"accepted": <events>, "samples": <samples>}``
 400   the body is not valid JSON (or not UTF-8, or a malformed ``Content-Length``)
 401   no ``Authorization: Bearer <token>`` header, or the wrong token (compared in constant time with
       :func:`hmac.compare_digest`; the presented token is never echoed or logged)
 413   the body is larger than ``max_body_bytes`` (checked on ``Content-Length`` and while reading)
 415   a ``Content-Type`` other than ``application/json``
 422   valid JSON of the wrong shape: not an object/array, empty array, unknown ``Event``, or a field
       missing/mistyped; the message names it, e.g. ``events[3].progress.timestamp: ...``
 503   the sink (storage) failed; the client may retry later
=====  ===========================================================================================

The optional header ``X-Tidegauge-App-Id`` (the Spark application id) goes into ``JobRef.app_id``.

Every received event document is kept in ``PollResult.raw`` (kind = the sample kind, as the event-log
collector does), so the store can replay it after a parser fix. ``NaN``/``Infinity`` in the JSON (Python's ``json`` writes them) are read as
``null`` (unknown), as Spark itself omits such values.

Nothing here reads the clock or the environment: the token, the sink and the clock are parameters.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from collectors.spark.progress import STREAMING_EVENT_NAMES, parse_listener_event
from monitor.errors import InputError, ProgressFormatError
from monitor.model import JobRef, PollResult, Sample, ensure_utc

__all__ = [
    "APP_ID_HEADER",
    "COLLECTOR_NAME",
    "DEFAULT_MAX_BODY_BYTES",
    "EVENTS_PATH",
    "BodyTooLarge",
    "Sink",
    "create_ingest_app",
    "parse_event_document",
]

#: Path of the event endpoint.
EVENTS_PATH = "/api/v1/spark/events"
#: Header carrying the Spark application id (optional).
APP_ID_HEADER = "X-Tidegauge-App-Id"
#: ``Sample.collector`` of the samples this endpoint produces.
COLLECTOR_NAME = "spark-listener"
#: Default body limit: 4 MiB (a progress object is 1-50 KB; the listener sends at most ~1 MB per POST).
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024

#: What the endpoint hands a parsed request to (the composition root wires the store's ``save_poll``).
Sink = Callable[[PollResult], None]

_LOG = logging.getLogger("tidegauge.ingest")
_APP_ID_RE = re.compile(r"^[\x21-\x7e]{1,200}$")  # printable ASCII, no spaces


class BodyTooLarge(InputError):
    """The request body is larger than the configured limit."""


def _constant_to_none(name: str) -> None:
    # NaN / Infinity / -Infinity -> null (unknown); returning None makes json use None.
    return None


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
        return json.loads(text, parse_constant=_constant_to_none)
    except json.JSONDecodeError as exc:
        raise InputError(f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
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
        ProgressFormatError: wrong shape; the message names the element and field
            (``events[2].progress.timestamp: ...``; a single object is ``event``).
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
        parsed = parse_listener_event(
            event, collector=collector, where=where, app_id=app_id, fallback_time=received
        )
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
) -> Starlette:
    """Build the ingest Starlette app.

    Args:
        token: the bearer token clients must present (non-empty; never logged).
        sink: called (in a worker thread) with each accepted request's :class:`PollResult`; an exception
            from it answers 503 and is logged.
        clock: returns "now" (aware UTC) for the receive time of a request.
        max_body_bytes: body size limit (413 beyond it).
        collector: ``Sample.collector`` of the produced samples.

    Raises:
        ValueError: empty token or non-positive ``max_body_bytes``.
    """
    if not token:
        raise ValueError("the ingest token must not be empty")
    if max_body_bytes <= 0:
        raise ValueError("max_body_bytes must be positive")
    expected = token.encode("utf-8")

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
            body = await _read_body(request, max_body_bytes)
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
            await run_in_threadpool(sink, result)
        except Exception:
            _LOG.exception("ingest: the sink failed to store %d samples", len(result.samples))
            return _error(503, "storage unavailable; retry later")
        return JSONResponse({"accepted": len(result.raw), "samples": len(result.samples)}, status_code=202)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route(EVENTS_PATH, events, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )
