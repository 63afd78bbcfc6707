"""Push Spark streaming-query events from the PySpark driver to tidegauge's ingest endpoint.

Add it with one line in the driver, before starting the query::

    from collectors.spark.listener import TidegaugeListener
    spark.streams.addListener(TidegaugeListener("http://monitor:8321/api/v1/spark/events", token))

Python listeners must be added with ``spark.streams.addListener``: the Spark setting
``spark.sql.streaming.streamingQueryListeners`` only takes JVM class names (it instantiates them by
reflection in the JVM), so it cannot load this class.

Each ``QueryStartedEvent`` / ``QueryProgressEvent`` / ``QueryIdleEvent`` / ``QueryTerminatedEvent`` (and,
from Spark 4.2, ``QueryExecutionStartEvent``) is
serialized in the same envelope Spark writes to its event log (``{"Event": "org.apache.spark.sql.
streaming.StreamingQueryListener$QueryProgressEvent", "progress": {...}}``; the progress object is
``event.progress.json``, i.e. Spark's own ``StreamingQueryProgress.json``), so the ingest side parses both
paths with the same :func:`collectors.spark.progress.parse_listener_event`. Started/idle/terminated events
carry their fields (``id``, ``runId``, ``name``, ``timestamp``, ``jobTags``, ``exception``,
``errorClassOnException``) under Spark's JSON names.

It must never slow or break the Spark job:

- a callback only serializes the event and offers it to a bounded queue (``queue_size``); when the queue is
  full the event is dropped and counted in :attr:`TidegaugeListener.dropped`;
- one daemon thread sends queued events in batches (a JSON array per POST) with a per-request timeout
  (``timeout_s``); a failed POST (connection refused, timeout, non-2xx answer) counts its events in
  :attr:`TidegaugeListener.failed` and is not retried (the event log stays the durable record); after a
  failure the sender backs off exponentially (up to ``backoff_max_s``) so a dead monitor costs one
  attempt per back-off period, while new events fill the queue and are dropped;
- no callback raises: any error is caught, counted and logged once per outage on the
  ``tidegauge.listener`` logger (messages show the URL without credentials and never the token).

Only the standard library and PySpark are imported (the module can be shipped alone with
``--py-files``/``sc.addPyFile``): ``urllib.request`` is enough for a few small POSTs per trigger, and the
driver's environment (Databricks, EMR, Dataproc images) then needs no HTTP client packages whose pinned
versions could conflict with the user's. Environment proxy variables are ignored unless ``proxies`` is
given: the monitor is expected to be directly reachable, and an ``HTTP_PROXY`` meant for other traffic
must not capture loopback/in-cluster posts.

Redirects are not followed (urllib would re-send the token to the new location); a 3xx counts as failed.

The query's trigger (Spark 4.1+ real-time mode). Spark's progress JSON does not say which trigger runs the
query, and a query in real-time mode (``trigger(realTime="5 minutes")``, Spark's ``RealTimeTrigger``)
reports only once per long batch, at its end. So each progress envelope carries one field of tidegauge's own
(never written by Spark), :data:`TRIGGER_FIELD`::

    {"Event": "...$QueryProgressEvent", "progress": {...},
     "tidegauge": {"triggerClass": "org.apache.spark.sql.execution.streaming.RealTimeTrigger",
                   "batchDurationMs": 15000}}

``triggerClass`` is the JVM class of the running query's ``Trigger`` (``StreamExecution.trigger``, reached
through py4j: the session's ``streams().get(id)`` -> ``StreamingQueryWrapper.streamingQuery()`` ->
``trigger()``), ``batchDurationMs`` is ``RealTimeTrigger.batchDurationMs`` (only for that class). It is
looked up by the sender thread, never in a callback, once per run (``runId``) and then remembered; when the
lookup fails in any way (Spark Connect, where the client has no JVM; the query already stopped; a Spark
without these accessors) the envelope goes out without the field, as before.

Spark Connect: Spark 4 runs Python listeners on the client, like classic PySpark. Spark 3.5 Connect
pickled them to the server; for that the listener pickles its settings only (the queue and thread are
created again where the callbacks run, so the counters there are not the client's).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import queue
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)

__all__ = ["DEFAULT_PATH", "EVENT_PREFIX", "TRIGGER_FIELD", "TidegaugeListener"]

#: The ingest path appended when ``url`` has no path (``tidegauge serve`` serves it).
DEFAULT_PATH = "/api/v1/spark/events"
#: Prefix of Spark's listener event class names (as in event logs); equals the names in
#: :mod:`collectors.spark.progress` (checked by a unit test; not imported, to keep this module stdlib-only).
EVENT_PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$"
_EVENT_STARTED = EVENT_PREFIX + "QueryStartedEvent"
_EVENT_PROGRESS = EVENT_PREFIX + "QueryProgressEvent"
_EVENT_IDLE = EVENT_PREFIX + "QueryIdleEvent"
_EVENT_TERMINATED = EVENT_PREFIX + "QueryTerminatedEvent"
_EVENT_EXECUTION_START = EVENT_PREFIX + "QueryExecutionStartEvent"
#: The progress envelope's field of tidegauge's own: ``{"triggerClass": str, "batchDurationMs": int}`` (see
#: the module docs). Equals :data:`collectors.spark.progress.TRIGGER_FIELD` (checked by a unit test).
TRIGGER_FIELD = "tidegauge"
_REAL_TIME_TRIGGER = "org.apache.spark.sql.execution.streaming.RealTimeTrigger"

_LOG = logging.getLogger("tidegauge.listener")
_STOP = object()  # sentinel put on the queue by close()
_BACKOFF_FIRST_S = 0.5
_USER_AGENT = "tidegauge-listener/0.1"


def _safe_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _endpoint(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"TidegaugeListener url must be an http(s) URL, got {_safe_url(url)!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path=DEFAULT_PATH)
    return urllib.parse.urlunsplit(parts)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would re-send the ``Authorization`` header to the new location (and turn
    the POST into a GET). A redirect answer then fails like any other non-2xx answer."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        return None


class TidegaugeListener(StreamingQueryListener):
    """A PySpark ``StreamingQueryListener`` that POSTs every query event to tidegauge (see module docs).

    Args:
        url: the ingest endpoint, e.g. ``http://monitor:8321/api/v1/spark/events`` (a bare
            ``http://monitor:8321`` gets :data:`DEFAULT_PATH`).
        token: the ingest bearer token (``tidegauge serve`` reads it from ``--token-file`` or
            ``TIDEGAUGE_INGEST_TOKEN``).
        queue_size: events held while the sender is busy or the monitor is down; beyond it events are
            dropped (counted in :attr:`dropped`).
        timeout_s: per-request timeout in seconds (connect and each read).
        batch_max: at most this many events per POST.
        batch_max_bytes: a POST body grows to at most about this many bytes (a single larger event is sent
            alone); keep it below the endpoint's body limit (``tidegauge serve``: 4 MiB).
        backoff_max_s: longest pause, in seconds, after consecutive failed POSTs.
        app_id: the Spark application id (``spark.sparkContext.applicationId``), sent as the
            ``X-Tidegauge-App-Id`` header so samples carry it.
        proxies: ``urllib`` proxy map (``{"http": "http://proxy:3128"}``); default: no proxy.
        ssl_context: TLS context for ``https`` URLs (default: the system's verified context).
        flush_at_exit_s: on interpreter exit, try this long to deliver what is queued (``None``: do not).

    Raises:
        ValueError: ``url`` is not http(s), ``token`` is empty or holds spaces/control characters,
            ``app_id`` is not what the ingest endpoint accepts, or a size/timeout is not positive.

    Counters (read any time, from any thread): :attr:`sent` (events the monitor accepted with 2xx),
    :attr:`failed` (events in POSTs that failed, or that could not be serialized), :attr:`dropped`
    (events discarded unsent: queue full, listener closed, or still queued when :meth:`close` gave up).
    """

    def __init__(
        self,
        url: str,
        token: str,
        queue_size: int = 1000,
        timeout_s: float = 2.0,
        *,
        batch_max: int = 100,
        batch_max_bytes: int = 1_000_000,
        backoff_max_s: float = 30.0,
        app_id: str | None = None,
        proxies: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        flush_at_exit_s: float | None = 2.0,
    ) -> None:
        if not token:
            raise ValueError("TidegaugeListener token must not be empty")
        if any(c.isspace() or not c.isprintable() for c in token):
            raise ValueError("TidegaugeListener token must not contain spaces or control characters")
        if app_id is not None and not (0 < len(app_id) <= 200 and all("!" <= c <= "~" for c in app_id)):
            raise ValueError("TidegaugeListener app_id must be 1-200 printable ASCII characters without spaces")
        if queue_size < 1 or batch_max < 1 or batch_max_bytes < 1:
            raise ValueError("TidegaugeListener queue_size, batch_max and batch_max_bytes must be at least 1")
        if timeout_s <= 0 or backoff_max_s < 0:
            raise ValueError("TidegaugeListener timeout_s must be > 0 and backoff_max_s >= 0")
        self._settings: dict[str, Any] = {
            "url": _endpoint(url),
            "token": token,
            "queue_size": queue_size,
            "timeout_s": timeout_s,
            "batch_max": batch_max,
            "batch_max_bytes": batch_max_bytes,
            "backoff_max_s": backoff_max_s,
            "app_id": app_id,
            "proxies": dict(proxies) if proxies else None,
            "ssl_context": ssl_context,
            "flush_at_exit_s": flush_at_exit_s,
        }
        self._init_runtime()

    # -- pickling (Spark Connect runs listeners where the events are) -------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        settings = dict(self._settings)
        settings["ssl_context"] = None  # SSLContext does not pickle; the receiving side uses the default
        return {"settings": settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._settings = dict(state["settings"])
        self._init_runtime()

    def _init_runtime(self) -> None:
        s = self._settings
        self._url: str = s["url"]
        self._shown_url = _safe_url(self._url)
        self._timeout_s: float = s["timeout_s"]
        self._batch_max: int = s["batch_max"]
        self._batch_max_bytes: int = s["batch_max_bytes"]
        self._held: str | None = None  # an event taken from the queue that did not fit the last batch
        self._triggers: dict[str, str] = {}  # runId -> its TRIGGER_FIELD JSON ("" for none), sender thread only
        self._backoff_max_s: float = s["backoff_max_s"]
        self._headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {s['token']}",
            "User-Agent": _USER_AGENT,
        }
        if s["app_id"]:
            self._headers["X-Tidegauge-App-Id"] = str(s["app_id"])
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.ProxyHandler(s["proxies"] or {}),
            _NoRedirect(),
        ]
        if s["ssl_context"] is not None:
            handlers.append(urllib.request.HTTPSHandler(context=s["ssl_context"]))
        self._opener = urllib.request.build_opener(*handlers)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=s["queue_size"])
        self._lock = threading.Lock()
        self._sent = 0
        self._failed = 0
        self._dropped = 0
        self._closed = False
        self._wake = threading.Event()  # set by close(): interrupts a back-off pause
        self._flush_deadline: float | None = None
        self._failing = False  # in an outage (for logging once per outage)
        self._thread = threading.Thread(target=self._run, name="tidegauge-listener-sender", daemon=True)
        self._thread.start()
        self._atexit: Callable[[], None] | None = None
        if s["flush_at_exit_s"] is not None:
            flush_s = float(s["flush_at_exit_s"])

            def _at_exit() -> None:
                self.close(flush_s)

            self._atexit = _at_exit
            atexit.register(_at_exit)

    # -- counters -----------------------------------------------------------------------------------------

    @property
    def sent(self) -> int:
        """Events the ingest endpoint accepted (2xx)."""
        with self._lock:
            return self._sent

    @property
    def failed(self) -> int:
        """Events whose POST failed (refused, timeout, non-2xx) or that could not be serialized."""
        with self._lock:
            return self._failed

    @property
    def dropped(self) -> int:
        """Events discarded without being sent (queue full, listener closed, unsent at close)."""
        with self._lock:
            return self._dropped

    def stats(self) -> dict[str, int]:
        """``{"sent": .., "failed": .., "dropped": .., "queued": ..}`` in one consistent read."""
        with self._lock:
            return {
                "sent": self._sent,
                "failed": self._failed,
                "dropped": self._dropped,
                "queued": self._queue.qsize(),
            }

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + n)

    # -- StreamingQueryListener callbacks (never raise, never block) --------------------------------------

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        """Queue ``QueryStartedEvent`` (called synchronously by ``start()``: must return at once)."""
        self._offer(lambda: _started_json(event))

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        """Queue ``QueryProgressEvent`` with Spark's own progress JSON (the sender thread adds the query's
        trigger, :data:`TRIGGER_FIELD`)."""
        self._offer(lambda: _Progress(event))

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        """Queue ``QueryIdleEvent`` (Spark 3.5+)."""
        self._offer(lambda: _idle_json(event))

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        """Queue ``QueryTerminatedEvent`` (it has no timestamp; the ingest side uses its receive time)."""
        self._offer(lambda: _terminated_json(event))

    def onQueryExecutionStart(self, event: Any) -> None:
        """Queue Spark 4.2+'s ``QueryExecutionStartEvent`` (a trigger started: ``id``, ``runId``, ``name``,
        ``timestamp``; PySpark before 4.2 never calls it)."""
        self._offer(lambda: _started_json(event, _EVENT_EXECUTION_START))

    def _offer(self, build: Callable[[], object]) -> None:
        try:
            if self._closed:
                self._count("_dropped")
                return
            try:
                item = build()
            except Exception as exc:  # a malformed event must not break the query
                self._count("_failed")
                _LOG.warning("tidegauge listener: cannot serialize a streaming event: %s", type(exc).__name__)
                return
            try:
                self._queue.put_nowait(item)
            except queue.Full:
                self._count("_dropped")
        except Exception:  # pragma: no cover - last resort: never raise into Spark
            _LOG.debug("tidegauge listener: unexpected error in callback", exc_info=True)

    # -- sender thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        consecutive_failures = 0
        while True:
            batch, stop = self._next_batch()
            if batch:
                if self._past_deadline():
                    self._count("_dropped", len(batch))
                elif self._post(batch):
                    consecutive_failures = 0
                else:
                    consecutive_failures += 1
                    pause = min(self._backoff_max_s, _BACKOFF_FIRST_S * 2 ** (consecutive_failures - 1))
                    if not self._closed:
                        self._wake.wait(pause)
            if stop:
                return

    def _next_batch(self) -> tuple[list[str], bool]:
        """Block for the next event, then take more while they fit ``batch_max`` / ``batch_max_bytes``."""
        first: object
        if self._held is not None:
            first, self._held = self._held, None
        else:
            first = self._queue.get()
        if first is _STOP:
            return [], True
        batch = [self._text(first)]
        size = len(batch[0])
        while len(batch) < self._batch_max:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is _STOP:
                return batch, True
            text = self._text(more)
            if size + len(text) + 1 > self._batch_max_bytes:
                self._held = text
                break
            batch.append(text)
            size += len(text) + 1
        return batch, False

    def _text(self, item: object) -> str:
        """A queued event as sent: a progress event with its run's trigger (:data:`TRIGGER_FIELD`) when the
        lookup found it, else unchanged."""
        if not isinstance(item, _Progress):
            return str(item)
        try:
            trigger = self._triggers.get(item.run_id)
            if trigger is None:
                trigger = _trigger_json(item.query_id)
                if trigger is not None:  # not found (yet): try again at the run's next progress
                    self._triggers[item.run_id] = trigger
        except Exception:  # never let the lookup break the sender: send Spark's event as it is
            trigger = None
        if not trigger:
            return item.text
        return item.text[:-1] + ',"' + TRIGGER_FIELD + '":' + trigger + "}"

    def _past_deadline(self) -> bool:
        deadline = self._flush_deadline
        return deadline is not None and time.monotonic() >= deadline

    def _post(self, batch: list[str]) -> bool:
        body = ("[" + ",".join(batch) + "]").encode("utf-8")
        timeout = self._timeout_s
        deadline = self._flush_deadline
        if deadline is not None:
            timeout = max(0.05, min(timeout, deadline - time.monotonic()))
        request = urllib.request.Request(self._url, data=body, headers=self._headers, method="POST")  # noqa: S310
        problem: str | None = None
        try:
            with self._opener.open(request, timeout=timeout) as response:
                status = int(response.status)
                response.read()
            if not 200 <= status < 300:
                problem = f"HTTP {status}"
        except urllib.error.HTTPError as exc:
            problem = f"HTTP {exc.code}: {_error_body(exc)}"
        except urllib.error.URLError as exc:
            problem = f"cannot reach it: {exc.reason}"
        except Exception as exc:  # timeouts, resets, protocol errors: never kill the sender
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            self._count("_sent", len(batch))
            if self._failing:
                self._failing = False
                _LOG.warning("tidegauge listener: %s reachable again", self._shown_url)
            return True
        self._count("_failed", len(batch))
        if not self._failing:
            self._failing = True
            _LOG.warning(
                "tidegauge listener: POST to %s failed (%s); events are counted as failed/dropped "
                "until it answers again",
                self._shown_url,
                problem,
            )
        return False

    # -- shutdown -----------------------------------------------------------------------------------------

    def _drain(self) -> int:
        """Remove everything queued (stop markers included); return how many events were removed."""
        events = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return events
            if item is not _STOP:
                events += 1

    def close(self, flush_timeout_s: float = 5.0) -> None:
        """Stop accepting events, try for ``flush_timeout_s`` seconds to send what is queued, then stop.

        Events still queued after that are counted as dropped. Returns after about ``flush_timeout_s`` at
        most, even if a POST is still hanging (the daemon sender thread then exits when that POST times out
        and counts it). Idempotent; never raises. Call it after the queries stopped (``query.stop()`` /
        ``awaitTermination()``), e.g. before ``spark.stop()``.
        """
        try:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            self._flush_deadline = time.monotonic() + max(0.0, flush_timeout_s)
            self._wake.set()
            if self._atexit is not None:
                atexit.unregister(self._atexit)
                self._atexit = None
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=max(0.0, flush_timeout_s))
            remaining = self._flush_deadline - time.monotonic()
            self._thread.join(timeout=max(0.0, remaining) + 0.1)
            # Give up on what is still queued. If the sender is still inside a POST (a hanging monitor),
            # leave exactly a stop marker behind so it exits when that POST times out.
            leftover = 0
            while True:
                leftover += self._drain()
                if not self._thread.is_alive():
                    break
                try:
                    self._queue.put_nowait(_STOP)
                    break
                except queue.Full:  # a callback raced past the closed check; drain again
                    continue
            if not self._thread.is_alive() and self._held is not None:
                self._held = None
                leftover += 1
            if leftover:
                self._count("_dropped", leftover)
        except Exception:  # pragma: no cover - never raise from close either
            _LOG.debug("tidegauge listener: unexpected error in close", exc_info=True)


def _error_body(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(300).decode("utf-8", "replace")
    except Exception:
        text = ""
    return " ".join(text.split())[:200] or str(exc.reason)


def _uuid_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _started_json(event: Any, name: str = _EVENT_STARTED) -> str:
    document: dict[str, Any] = {
        "Event": name,
        "id": _uuid_text(event.id),
        "runId": _uuid_text(event.runId),
        "name": event.name,
        "timestamp": event.timestamp,
    }
    if name == _EVENT_STARTED:
        document["jobTags"] = sorted(getattr(event, "jobTags", None) or ())
    return json.dumps(document, separators=(",", ":"))


def _idle_json(event: QueryIdleEvent) -> str:
    document = {
        "Event": _EVENT_IDLE,
        "id": _uuid_text(event.id),
        "runId": _uuid_text(event.runId),
        "timestamp": event.timestamp,
    }
    return json.dumps(document, separators=(",", ":"))


def _terminated_json(event: QueryTerminatedEvent) -> str:
    document = {
        "Event": _EVENT_TERMINATED,
        "id": _uuid_text(event.id),
        "runId": _uuid_text(event.runId),
        "exception": event.exception,
        "errorClassOnException": getattr(event, "errorClassOnException", None),
    }
    return json.dumps(document, separators=(",", ":"))


class _Progress:
    """A queued ``QueryProgressEvent``: its envelope as Spark's JSON, and the ids the sender thread needs to
    add the run's trigger (:meth:`TidegaugeListener._text`)."""

    __slots__ = ("query_id", "run_id", "text")

    def __init__(self, event: QueryProgressEvent) -> None:
        progress = event.progress
        self.text = '{"Event":"' + _EVENT_PROGRESS + '","progress":' + progress.json + "}"
        self.query_id = str(progress.id)
        self.run_id = str(progress.runId)

    def __str__(self) -> str:
        return self.text


def _jvm_sessions() -> list[Any]:
    """The JVM ``SparkSession`` objects a query may run in: the Python-side active and first-built sessions,
    then the JVM's default one (classic PySpark only; empty under Spark Connect)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    found: list[Any] = []
    for session in (getattr(SparkSession, "_activeSession", None), getattr(SparkSession, "_instantiatedSession", None)):
        jsession = getattr(session, "_jsparkSession", None)
        if jsession is not None and all(jsession is not s for s in found):
            found.append(jsession)
    context = SparkContext._active_spark_context
    jvm = getattr(context, "_jvm", None)
    if jvm is not None:
        default = jvm.org.apache.spark.sql.SparkSession.getDefaultSession()
        if default.isDefined():
            found.append(default.get())
    return found


def _trigger_json(query_id: str) -> str | None:
    """The running query ``query_id``'s trigger as the :data:`TRIGGER_FIELD` JSON object, read from the JVM
    (``StreamingQueryManager.get(id)`` -> ``StreamingQueryWrapper.streamingQuery()`` ->
    ``StreamExecution.trigger()``, Spark 3.x-4.3); ``None`` when no session in reach knows the query (it
    stopped, or this is a Spark Connect client). Raises whatever py4j raises (the caller catches it)."""
    for jsession in _jvm_sessions():
        jquery = jsession.streams().get(query_id)
        if jquery is None:
            continue
        trigger = jquery.streamingQuery().trigger()
        name = str(trigger.getClass().getName())
        document: dict[str, Any] = {"triggerClass": name}
        if name == _REAL_TIME_TRIGGER:
            document["batchDurationMs"] = int(trigger.batchDurationMs())
        return json.dumps(document, separators=(",", ":"))
    return None
