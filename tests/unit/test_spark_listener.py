"""TidegaugeListener (collectors.spark.listener) without a running Spark: PySpark's own event classes are
built with their ``fromJson`` constructors from recorded real event-log lines
(tests/fixtures/spark/real-4.3.0/eventlog_trimmed.jsonl), and delivered over real loopback HTTP.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from collectors.spark import progress
from collectors.spark.listener import DEFAULT_PATH, EVENT_PREFIX, TidegaugeListener
from monitor.daemon.ingest import create_ingest_app
from monitor.model import PollResult, SampleKind
from tests.conftest import REPO_ROOT
from tests.servers import black_hole, refused_port, serve_in_thread

TOKEN = "listener-test-token-0123456789"
QUERY_ID = "be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8"
_RECEIVED = datetime(2026, 11, 29, 11, 40, tzinfo=UTC)


@pytest.fixture(scope="module")
def lines(spark_fixtures: Path) -> list[dict[str, Any]]:
    text = (spark_fixtures / "eventlog_trimmed.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if "StreamingQueryListener$Query" in line]


def _progress_events(lines: list[dict[str, Any]]) -> list[QueryProgressEvent]:
    return [QueryProgressEvent.fromJson(e) for e in lines if e["Event"] == progress.EVENT_PROGRESS]


def _listener(url: str, **kwargs: Any) -> TidegaugeListener:
    kwargs.setdefault("flush_at_exit_s", None)
    return TidegaugeListener(url, TOKEN, **kwargs)


def test_event_names_match_the_shared_parser() -> None:
    # The listener does not import collectors.spark.progress (stdlib + pyspark only); the names must agree.
    assert progress.EVENT_STARTED == EVENT_PREFIX + "QueryStartedEvent"
    assert progress.EVENT_PROGRESS == EVENT_PREFIX + "QueryProgressEvent"
    assert progress.EVENT_IDLE == EVENT_PREFIX + "QueryIdleEvent"
    assert progress.EVENT_TERMINATED == EVENT_PREFIX + "QueryTerminatedEvent"
    assert progress.EVENT_EXECUTION_START == EVENT_PREFIX + "QueryExecutionStartEvent"


def test_module_imports_only_stdlib_and_pyspark() -> None:
    code = (
        "import sys; import collectors.spark.listener; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'httpx', 'monitor', 'sqlalchemy', 'starlette', 'prometheus_client', 'typer', 'uvicorn', 'anyio'} "
        "or m in {'collectors.spark.progress', 'collectors.http'}); print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_module_works_as_a_single_shipped_file(tmp_path: Path) -> None:
    # README: ship collectors/spark/listener.py alone (spark-submit --py-files) and import it as `listener`.
    (tmp_path / "listener.py").write_bytes((REPO_ROOT / "collectors" / "spark" / "listener.py").read_bytes())
    code = "from listener import TidegaugeListener as T; t = T('http://127.0.0.1:9', 'tok', flush_at_exit_s=None); t.close(0)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True, timeout=120)


@pytest.fixture
def ingest() -> Iterator[tuple[str, list[PollResult]]]:
    stored: list[PollResult] = []
    app = create_ingest_app(token=TOKEN, sink=stored.append, clock=lambda: _RECEIVED)
    with serve_in_thread(app) as url:
        yield url, stored


def test_delivers_every_kind_of_event_to_the_ingest_endpoint(
    ingest: tuple[str, list[PollResult]], lines: list[dict[str, Any]]
) -> None:
    base_url, stored = ingest
    started = QueryStartedEvent.fromJson(next(e for e in lines if e["Event"] == progress.EVENT_STARTED))
    progresses = _progress_events(lines)[:2]  # batches 0 and 1 of the first run
    terminated = QueryTerminatedEvent.fromJson(next(e for e in lines if e["Event"] == progress.EVENT_TERMINATED))
    # The idle event of listener_events.json's processingTime_run, with its query id (progress_pt_b7).
    idle = QueryIdleEvent.fromJson(
        {
            "id": "92f2e0e5-46e5-49c6-98a8-cbd4e61d1c66",
            "runId": "db5df2d6-3a60-41bd-9613-0c9d792cbdef",
            "timestamp": "2026-11-29T11:36:10.000Z",
        }
    )
    listener = _listener(base_url, app_id="local-1795951957158")  # bare base URL: DEFAULT_PATH is added
    listener.onQueryStarted(started)
    for event in progresses:
        listener.onQueryProgress(event)
    listener.onQueryIdle(idle)
    listener.onQueryTerminated(terminated)
    listener.close(flush_timeout_s=30)
    assert listener.stats() == {"sent": 5, "failed": 0, "dropped": 0, "queued": 0}

    samples = [s for r in stored for s in r.samples if s.scope.is_job()]
    assert [s.kind for s in samples] == [
        SampleKind.STARTED,
        SampleKind.PROGRESS,
        SampleKind.PROGRESS,
        SampleKind.IDLE,
        SampleKind.TERMINATED,
    ]
    assert [s.batch_id for s in samples if s.kind is SampleKind.PROGRESS] == [0, 1]
    first = samples[1]
    assert first.job.job_id == QUERY_ID and first.job.name == "wm_gt"
    assert first.job.app_id == "local-1795951957158"
    # batch 0: eventTime max 2024-01-01T12:07:00.000Z, watermark 1970-01-01 (Spark's first-batch value)
    assert first.event_time_max == datetime(2024, 1, 1, 12, 7, tzinfo=UTC)
    # the envelope reached the store unchanged (progress = Spark's progress JSON)
    raw_progress = stored[0].raw[1][3]
    assert raw_progress == next(e for e in lines if e["Event"] == progress.EVENT_PROGRESS)
    assert samples[-1].observed_at == _RECEIVED  # terminated: no timestamp in Spark's event


def test_delivers_a_batch_start_of_spark_4_2(ingest: tuple[str, list[PollResult]]) -> None:
    # Spark 4.2's QueryExecutionStartEvent (StreamingQueryListener.scala: id, runId, name, timestamp); the
    # installed PySpark 4.3.0 has no class for it, so an object with its four fields stands in.
    base_url, stored = ingest
    event = SimpleNamespace(
        id=QUERY_ID, runId="7e6d1f8c-5c4b-4e57-9a51-0f1e2d3c4b5a", name="wm_gt", timestamp="2026-11-29T11:36:12.000Z"
    )
    listener = _listener(base_url)
    listener.onQueryExecutionStart(event)
    listener.close(flush_timeout_s=30)
    assert listener.stats()["sent"] == 1
    (sample,) = [s for r in stored for s in r.samples]
    assert sample.kind is SampleKind.BATCH_STARTED
    assert sample.observed_at == datetime(2026, 11, 29, 11, 36, 12, tzinfo=UTC)
    assert (sample.job.job_id, sample.job.run_id, sample.job.name) == (QUERY_ID, event.runId, "wm_gt")
    assert sample.batch_id is None  # Spark's event names no batch


def test_monitor_down_connection_refused(lines: list[dict[str, Any]]) -> None:
    url = f"http://127.0.0.1:{refused_port()}{DEFAULT_PATH}"
    listener = _listener(url, queue_size=3, timeout_s=0.5, batch_max=1)
    events = _progress_events(lines) * 3  # 30 progress events
    for event in events:
        listener.onQueryProgress(event)  # must not raise
    listener.close(flush_timeout_s=1.0)
    listener._thread.join(timeout=15)  # close() bounds its own wait; the sender may finish one POST after it
    stats = listener.stats()
    assert stats["sent"] == 0 and stats["queued"] == 0
    assert stats["failed"] >= 1  # at least the first POST was attempted and refused
    # After a refusal the sender pauses (0.5 s, doubling), so the 3-slot queue overflows: some events are
    # dropped (how many depends on how fast the callbacks ran, so only "some" is asserted).
    assert stats["dropped"] >= 1
    assert stats["failed"] + stats["dropped"] == len(events)  # every event is accounted for


def test_callbacks_do_not_wait_for_the_network(lines: list[dict[str, Any]]) -> None:
    # A receiver that accepts the TCP connection but never answers: the first POST hangs for timeout_s
    # (10 s). All callbacks have returned while that POST is still in flight (nothing counted as sent or
    # failed yet), so none of them waited for the network; the overflow is dropped at once.
    events = _progress_events(lines)  # 10 events
    with black_hole() as port:
        listener = _listener(f"http://127.0.0.1:{port}/api/v1/spark/events", queue_size=2, timeout_s=10.0, batch_max=1)
        for event in events:
            listener.onQueryProgress(event)
        during = listener.stats()
        listener.close(flush_timeout_s=0.2)
    # Closing the black hole resets the hung connection; wait for the sender to count that POST.
    listener._thread.join(timeout=15)
    assert not listener._thread.is_alive()
    assert during["sent"] == 0 and during["failed"] == 0
    # queue of 2 + at most one taken by the sender; the rest dropped when offered
    assert during["dropped"] in (len(events) - 3, len(events) - 2)
    after = listener.stats()
    assert after["sent"] == 0
    assert after["failed"] + after["dropped"] == len(events)


def test_wrong_token_counts_failures_and_logs_without_the_token(
    ingest: tuple[str, list[PollResult]], lines: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    base_url, stored = ingest
    listener = TidegaugeListener(base_url, "not-the-right-token-xyz", flush_at_exit_s=None)
    with caplog.at_level(logging.WARNING, logger="tidegauge.listener"):
        listener.onQueryProgress(_progress_events(lines)[0])
        listener.close(flush_timeout_s=30)
    assert listener.stats()["failed"] == 1 and listener.sent == 0
    assert stored == []
    assert "HTTP 401" in caplog.text and "missing or invalid bearer token" in caplog.text
    assert "not-the-right-token-xyz" not in caplog.text


def test_a_broken_event_does_not_raise(ingest: tuple[str, list[PollResult]]) -> None:
    class Broken:
        @property
        def progress(self) -> Any:
            raise RuntimeError("py4j gateway gone")

    base_url, _ = ingest
    listener = _listener(base_url)
    listener.onQueryProgress(Broken())  # type: ignore[arg-type]
    listener.close(flush_timeout_s=1)
    assert listener.stats() == {"sent": 0, "failed": 1, "dropped": 0, "queued": 0}


def test_events_after_close_are_dropped_and_close_is_idempotent(
    ingest: tuple[str, list[PollResult]], lines: list[dict[str, Any]]
) -> None:
    base_url, stored = ingest
    listener = _listener(base_url)
    listener.close(flush_timeout_s=1)
    listener.close(flush_timeout_s=1)
    listener.onQueryProgress(_progress_events(lines)[0])
    assert listener.stats() == {"sent": 0, "failed": 0, "dropped": 1, "queued": 0}
    assert stored == []


def test_batches_respect_the_byte_limit(ingest: tuple[str, list[PollResult]], lines: list[dict[str, Any]]) -> None:
    # Each progress envelope of this file is 1-2 KB; a 2500-byte budget forces about one event per POST,
    # and everything still arrives in order.
    base_url, stored = ingest
    listener = _listener(base_url, batch_max_bytes=2500)
    events = _progress_events(lines)
    for event in events:
        listener.onQueryProgress(event)
    listener.close(flush_timeout_s=30)
    assert listener.sent == len(events)
    assert len(stored) > 1
    batch_ids = [s.batch_id for r in stored for s in r.samples if s.scope.is_job()]
    assert batch_ids == list(range(12))  # batches 0..11 of eventlog_trimmed.jsonl


def test_pickles_settings_only(lines: list[dict[str, Any]]) -> None:
    listener = _listener(f"http://127.0.0.1:{refused_port()}", queue_size=7)
    listener.onQueryProgress(_progress_events(lines)[0])
    clone = pickle.loads(pickle.dumps(listener))
    assert clone.stats() == {"sent": 0, "failed": 0, "dropped": 0, "queued": 0}
    assert clone._queue.maxsize == 7
    clone.close(0.1)
    listener.close(0.1)


@pytest.mark.parametrize(
    ("url", "token", "message"),
    [
        ("ftp://h/x", TOKEN, "must be an http"),
        ("http://h:1/x", "", "token must not be empty"),
        ("http://h:1/x", "abc\r\nX-Injected: 1", "must not contain spaces or control characters"),
        ("http://h:1/x", "has space", "must not contain spaces or control characters"),
    ],
)
def test_bad_settings_raise_at_construction(url: str, token: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TidegaugeListener(url, token, flush_at_exit_s=None)


def test_app_id_the_endpoint_would_refuse_is_refused_early() -> None:
    with pytest.raises(ValueError, match="app_id must be"):
        TidegaugeListener("http://h:1/x", TOKEN, app_id="app id", flush_at_exit_s=None)


def test_url_credentials_are_not_shown() -> None:
    with pytest.raises(ValueError) as info:
        TidegaugeListener("ftp://user:pw@h/x?k=v", TOKEN, flush_at_exit_s=None)
    assert "pw" not in str(info.value) and "k=v" not in str(info.value)


def test_redirects_are_not_followed(lines: list[dict[str, Any]]) -> None:
    # A 303 to another endpoint: urllib by default follows it with a GET that carries the bearer token.
    # Refused here: the POST counts as failed and the redirect target never sees a request.
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.path)
            if self.path == DEFAULT_PATH:
                self.send_response(303)
                self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def do_GET(self) -> None:
            seen.append(f"GET {self.path} {self.headers.get('Authorization')}")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        listener = _listener(f"http://127.0.0.1:{server.server_address[1]}")
        listener.onQueryProgress(_progress_events(lines)[0])
        listener.close(flush_timeout_s=30)
    finally:
        server.shutdown()
        server.server_close()
    assert listener.stats()["failed"] == 1 and listener.sent == 0
    assert seen == [DEFAULT_PATH]


def test_close_returns_and_the_sender_exits_while_a_post_hangs(lines: list[dict[str, Any]]) -> None:
    # The sender is inside a POST to a monitor that never answers and the queue is full when close() is
    # called: close() must still return after its flush timeout, and the sender must exit (not wait on the
    # emptied queue forever) once that POST ends; every event is accounted for.
    events = _progress_events(lines)[:3]
    with black_hole() as port:
        listener = _listener(f"http://127.0.0.1:{port}", queue_size=1, timeout_s=30.0, batch_max=1)
        listener.onQueryProgress(events[0])
        for _ in range(1000):  # wait (bounded) until the sender has taken event 0 into its POST
            if listener.stats()["queued"] == 0:
                break
            time.sleep(0.01)
        listener.onQueryProgress(events[1])  # fills the queue
        listener.onQueryProgress(events[2])  # dropped: queue full
        listener.close(flush_timeout_s=0.2)
        assert listener._thread.is_alive()  # still inside the hanging POST (30 s timeout)
    # The black hole is closed: the hanging connection is reset, the POST fails, the sender exits.
    listener._thread.join(timeout=20)
    assert not listener._thread.is_alive()
    assert listener.stats() == {"sent": 0, "failed": 1, "dropped": 2, "queued": 0}


# -- the query's trigger (Spark 4.1+ real-time mode) -------------------------------------------------------


class _JvmTrigger:
    """Stands in for the py4j proxy of a JVM ``Trigger`` (``getClass().getName()``, ``batchDurationMs()``)."""

    def __init__(self, name: str, batch_ms: int = 0) -> None:
        self.name, self.batch_ms = name, batch_ms

    def getClass(self) -> Any:
        return SimpleNamespace(getName=lambda: self.name)

    def batchDurationMs(self) -> int:
        return self.batch_ms


class _JvmSession:
    """A JVM ``SparkSession`` whose ``streams().get(id)`` knows one query (``StreamingQueryWrapper``)."""

    def __init__(self, query_id: str, trigger: _JvmTrigger) -> None:
        self.query_id, self.trigger, self.lookups = query_id, trigger, 0

    def streams(self) -> Any:
        def get(query_id: str) -> Any:
            self.lookups += 1
            if query_id != self.query_id:
                return None
            return SimpleNamespace(streamingQuery=lambda: SimpleNamespace(trigger=lambda: self.trigger))

        return SimpleNamespace(get=get)


def test_trigger_field_matches_the_shared_parser() -> None:
    from collectors.spark import listener as listener_module

    assert listener_module.TRIGGER_FIELD == progress.TRIGGER_FIELD


def test_the_real_time_trigger_is_read_once_per_run_and_reaches_the_samples(
    ingest: tuple[str, list[PollResult]], lines: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from collectors.spark import listener as listener_module

    session = _JvmSession(QUERY_ID, _JvmTrigger("org.apache.spark.sql.execution.streaming.RealTimeTrigger", 15000))
    monkeypatch.setattr(listener_module, "_jvm_sessions", lambda: [session])
    base_url, stored = ingest
    listener = _listener(base_url)
    for event in _progress_events(lines)[:3]:  # batches 0-1 of the first run, batch 2 of the second (restart)
        listener.onQueryProgress(event)
    listener.close(flush_timeout_s=30)
    assert listener.stats() == {"sent": 3, "failed": 0, "dropped": 0, "queued": 0}
    assert session.lookups == 2  # at each run's first progress (a restart may change the trigger), not per batch
    batches = [s for r in stored for s in r.samples if s.scope.is_job()]
    assert [(s.batch_id, s.extra.get("trigger")) for s in batches] == [(0, "real_time"), (1, "real_time"), (2, "real_time")]
    envelope = stored[0].raw[0][3]
    assert envelope["tidegauge"] == {
        "triggerClass": "org.apache.spark.sql.execution.streaming.RealTimeTrigger",
        "batchDurationMs": 15000,
    }
    assert envelope["progress"] == next(e for e in lines if e["Event"] == progress.EVENT_PROGRESS)["progress"]


def test_a_micro_batch_trigger_is_said_too(
    ingest: tuple[str, list[PollResult]], lines: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from collectors.spark import listener as listener_module

    session = _JvmSession(QUERY_ID, _JvmTrigger("org.apache.spark.sql.execution.streaming.ProcessingTimeTrigger"))
    monkeypatch.setattr(listener_module, "_jvm_sessions", lambda: [session])
    base_url, stored = ingest
    listener = _listener(base_url)
    listener.onQueryProgress(_progress_events(lines)[0])
    listener.close(flush_timeout_s=30)
    (batch,) = [s for r in stored for s in r.samples if s.scope.is_job()]
    assert batch.extra.get("trigger") == "micro_batch"
    assert stored[0].raw[0][3]["tidegauge"] == {"triggerClass": "org.apache.spark.sql.execution.streaming.ProcessingTimeTrigger"}


@pytest.mark.parametrize("failure", ["raises", "unknown query"])
def test_a_failed_trigger_lookup_sends_spark_s_event_as_it_is(
    failure: str, ingest: tuple[str, list[PollResult]], lines: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from collectors.spark import listener as listener_module

    session = _JvmSession("another-query", _JvmTrigger("org.apache.spark.sql.execution.streaming.RealTimeTrigger", 5))

    def sessions() -> list[Any]:
        if failure == "raises":
            raise RuntimeError("py4j: the gateway is gone")
        return [session]

    monkeypatch.setattr(listener_module, "_jvm_sessions", sessions)
    base_url, stored = ingest
    listener = _listener(base_url)
    for event in _progress_events(lines)[:2]:
        listener.onQueryProgress(event)
    listener.close(flush_timeout_s=30)
    assert listener.stats() == {"sent": 2, "failed": 0, "dropped": 0, "queued": 0}
    assert all("tidegauge" not in raw[3] for r in stored for raw in r.raw)
    assert all("trigger" not in s.extra for r in stored for s in r.samples)
    if failure == "unknown query":
        assert session.lookups == 2  # not found is not remembered: the next progress asks again


def test_without_a_jvm_no_trigger_is_looked_up() -> None:
    # unit tests run no Spark: no active context, no session (as on a Spark Connect client)
    from collectors.spark import listener as listener_module

    assert listener_module._trigger_json(QUERY_ID) is None
