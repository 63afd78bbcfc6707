"""The ingest endpoint (monitor.daemon.ingest) served by uvicorn on loopback, fed recorded real event-log envelopes.

(Real HTTP rather than Starlette's httpx.Client, which warns about httpx in this Starlette version.)

Events come from tests/fixtures/spark/real-4.3.0/eventlog_trimmed.jsonl (query ``wm_gt``, id
be3a4786-..., one run per availableNow trigger); expected values are read off that file by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from collectors.spark.progress import EVENT_PROGRESS, EVENT_STARTED, EVENT_TERMINATED
from monitor.daemon.ingest import EVENTS_PATH, create_ingest_app
from monitor.model import PollResult, SampleKind
from tests.servers import serve_in_thread

TOKEN = "test-token-0123456789abcdef"
RECEIVED = datetime(2026, 11, 29, 11, 33, 0, tzinfo=UTC)
QUERY_ID = "be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8"


@pytest.fixture(scope="module")
def events(spark_fixtures: Path) -> list[dict[str, Any]]:
    lines = (spark_fixtures / "eventlog_trimmed.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if "StreamingQueryListener$Query" in line]


def _progress(events: list[dict[str, Any]], batch_id: int) -> dict[str, Any]:
    return next(e for e in events if e["Event"] == EVENT_PROGRESS and e["progress"]["batchId"] == batch_id)


_STORED: list[PollResult] = []


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    app = create_ingest_app(token=TOKEN, sink=_STORED.append, clock=lambda: RECEIVED, max_body_bytes=64 * 1024)
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture
def stored() -> list[PollResult]:
    _STORED.clear()
    return _STORED


@pytest.fixture
def client(base_url: str, stored: list[PollResult]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10) as c:
        yield c


def _post(client: httpx.Client, body: Any, token: str | None = TOKEN, **headers: str) -> Any:
    all_headers = {"Content-Type": "application/json", **headers}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(EVENTS_PATH, content=content, headers=all_headers)


def test_one_progress_event_is_accepted_and_parsed(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]]
) -> None:
    event = _progress(events, 6)  # the batch where the 2099-01-01 row arrived
    response = _post(client, event, **{"X-Tidegauge-App-Id": "local-1795951957158"})
    # one query sample + one per source (one FileStreamSource)
    assert response.status_code == 202 and response.json() == {"accepted": 1, "samples": 2}
    [result] = stored
    query = result.samples[0]
    assert query.job.job_id == QUERY_ID and query.job.name == "wm_gt"
    assert query.job.run_id == "28ab916a-b86b-4bc6-b3db-7357e53a2bfd"
    assert query.job.app_id == "local-1795951957158"
    assert query.collector == "spark-listener" and query.kind is SampleKind.PROGRESS
    assert query.batch_id == 6
    assert query.observed_at == datetime(2026, 11, 29, 11, 32, 48, 289000, tzinfo=UTC)
    assert query.watermark == datetime(2024, 1, 1, 12, 10, tzinfo=UTC)
    assert query.event_time_max == datetime(2099, 1, 1, tzinfo=UTC)
    # The raw envelope is kept whole, keyed like the event-log collector's (kind = sample kind).
    [(job, when, kind, document)] = result.raw
    assert (job, when, kind) == (query.job, query.observed_at, "progress")
    assert document == event


def test_array_of_lifecycle_and_progress_events(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]]
) -> None:
    started = next(e for e in events if e["Event"] == EVENT_STARTED)
    terminated = next(e for e in events if e["Event"] == EVENT_TERMINATED)
    batch = [started, _progress(events, 0), _progress(events, 1), terminated]
    response = _post(client, batch)
    assert response.status_code == 202
    assert response.json()["accepted"] == 4
    kinds = [s.kind for s in stored[0].samples if s.scope.is_job()]
    assert kinds == [SampleKind.STARTED, SampleKind.PROGRESS, SampleKind.PROGRESS, SampleKind.TERMINATED]
    # QueryTerminatedEvent has no timestamp: the receive time is used.
    assert stored[0].samples[-1].observed_at == RECEIVED
    # started at 2026-11-29T11:32:41.590Z (first QueryStartedEvent line)
    assert stored[0].samples[0].observed_at == datetime(2026, 11, 29, 11, 32, 41, 590000, tzinfo=UTC)


def test_idle_event(client: httpx.Client, stored: list[PollResult]) -> None:
    # Values of the idle event in listener_events.json (processingTime_run), with that run's query id
    # from progress_pt_b7_memorysink_listener.json.
    idle = {
        "Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent",
        "id": "92f2e0e5-46e5-49c6-98a8-cbd4e61d1c66",
        "runId": "db5df2d6-3a60-41bd-9613-0c9d792cbdef",
        "timestamp": "2026-11-29T11:36:10.000Z",
    }
    assert _post(client, idle).status_code == 202
    [s] = stored[0].samples
    assert s.kind is SampleKind.IDLE and s.observed_at == datetime(2026, 11, 29, 11, 36, 10, tzinfo=UTC)


def test_nan_is_read_as_unknown(client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]]) -> None:
    event = json.loads(json.dumps(_progress(events, 6)))
    event["progress"]["inputRowsPerSecond"] = float("nan")
    body = json.dumps(event).encode()  # Python writes NaN (invalid strict JSON)
    assert b"NaN" in body
    assert _post(client, body).status_code == 202
    assert stored[0].samples[0].input_rows_per_second is None
    assert stored[0].raw[0][3]["progress"]["inputRowsPerSecond"] is None  # storable as canonical JSON


@pytest.mark.parametrize(
    ("token", "header"),
    [(None, None), ("wrong-token", None), (None, "Basic dGVzdDp0ZXN0"), (None, "Bearer")],
)
def test_unauthorized(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]], token: str | None, header: str | None
) -> None:
    extra = {"Authorization": header} if header else {}
    response = _post(client, _progress(events, 0), token=token, **extra)
    assert response.status_code == 401
    assert response.json() == {"error": "missing or invalid bearer token"}
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "wrong-token" not in response.text and TOKEN not in response.text
    assert stored == []


def test_body_too_large_by_content_length(client: httpx.Client, stored: list[PollResult]) -> None:
    body = b"[" + b" " * (64 * 1024) + b"]"
    response = _post(client, body)
    assert response.status_code == 413
    assert response.json()["error"] == f"request body of {len(body)} bytes exceeds the limit of 65536 bytes"
    assert stored == []


def test_body_too_large_when_streamed_without_length(client: httpx.Client, stored: list[PollResult]) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(20):
            yield b" " * 4096

    response = client.post(
        EVENTS_PATH,
        content=chunks(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"] == "request body exceeds the limit of 65536 bytes"
    assert stored == []


def test_invalid_json(client: httpx.Client) -> None:
    response = _post(client, b'{"Event": ')
    assert response.status_code == 400
    assert response.json()["error"].startswith("body is not valid JSON: Expecting value at line 1 column 11")


def test_deeply_nested_json_is_400_not_500(client: httpx.Client, stored: list[PollResult]) -> None:
    # 30000 levels (60000 bytes, under the 64 KiB limit) exceed CPython's default recursion limit of 1000.
    response = _post(client, b"[" * 30_000 + b"]" * 30_000)
    assert response.status_code == 400
    assert response.json()["error"] == "body is not valid JSON for this endpoint: arrays/objects nested too deeply"
    assert stored == []


def test_wrong_content_type(client: httpx.Client) -> None:
    response = _post(client, b"a=b", **{"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 415
    assert "application/json" in response.json()["error"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda e: [e, {**e, "progress": {**e["progress"], "timestamp": "yesterday"}}],
         "events[1]: field progress.timestamp: not an ISO-8601 timestamp: 'yesterday'"),
        (lambda e: [e, {**e, "progress": {k: v for k, v in e["progress"].items() if k != "id"}}],
         "events[1]: field progress.id: missing (the streaming query id)"),
        (lambda e: {**e, "Event": "SparkListenerJobStart"},
         "event.Event: expected a streaming query listener event"),
        (lambda e: [e, 3], "events[1]: expected a JSON object, got a number"),
        (lambda e: [], "events: empty array, nothing to ingest"),
        (lambda e: "hello", "body: expected a JSON object (one event) or an array of events, got a string"),
    ],
)
def test_bad_shape_names_the_field(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]], mutate: Any, message: str
) -> None:
    response = _post(client, mutate(_progress(events, 2)))
    assert response.status_code == 422
    assert response.json()["error"].startswith(message)
    assert stored == []  # all-or-nothing: the valid first event was not stored either


def test_bad_app_id_header(client: httpx.Client, events: list[dict[str, Any]]) -> None:
    response = _post(client, _progress(events, 0), **{"X-Tidegauge-App-Id": "has space"})
    assert response.status_code == 422 and "X-Tidegauge-App-Id" in response.json()["error"]


def test_sink_failure_is_503(events: list[dict[str, Any]]) -> None:
    def broken(result: PollResult) -> None:
        raise RuntimeError("database is locked")

    app = create_ingest_app(token=TOKEN, sink=broken, clock=lambda: RECEIVED)
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as c:
        response = _post(c, _progress(events, 0))
    assert response.status_code == 503
    assert response.json() == {"error": "storage unavailable; retry later"}


def test_get_on_events_is_405(client: httpx.Client) -> None:
    assert client.get(EVENTS_PATH).status_code == 405


def test_empty_token_refused() -> None:
    with pytest.raises(ValueError, match="token must not be empty"):
        create_ingest_app(token="", sink=lambda r: None, clock=lambda: RECEIVED)


# ---- values tidegauge cannot hold are the client's error (422 naming the field), never a 5xx ----------


def _with(event: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(event))
    out["progress"][key] = value
    return out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # a 5,000-digit integer: beyond Python's int-parsing limit (was 500)
        (lambda e: json.dumps(e).replace('"batchId": 2', '"batchId": ' + "9" * 5000).encode(),
         "event.progress.batchId: integer 999999999999...(5000 digits) is outside the 64-bit range"),
        # 2^63 and 400 digits: beyond SQLite's INTEGER (was 503 "storage unavailable")
        (lambda e: json.dumps(_with(e, "numInputRows", 2**63)).encode(),
         "event.progress.numInputRows: integer 9223372036854775808 is outside the 64-bit range"),
        (lambda e: json.dumps(_with(e, "numInputRows", -(2**63) - 1)).encode(),
         "event.progress.numInputRows: integer -9223372036854775809 is outside the 64-bit range"),
        (lambda e: json.dumps(_with(e, "numInputRows", 10**400)).encode(),
         "event.progress.numInputRows: integer 100000000000...(401 digits) is outside the 64-bit range"),
        # a float count the parser turns into an integer beyond 64 bits
        (lambda e: json.dumps(_with(e, "numInputRows", 1e30)).encode(),
         "event: field progress.numInputRows: integer out of range"),
        # timestamps at the edge of the calendar (was 500: OverflowError in the parser)
        (lambda e: json.dumps(_with(e, "timestamp", "9999-12-31T23:59:59-23:59")).encode(),
         "event.progress.timestamp: timestamp '9999-12-31T23:59:59-23:59' is outside the UTC calendar"),
        (lambda e: json.dumps(_with(e, "timestamp", "0001-01-01T00:00:00+01:00")).encode(),
         "event.progress.timestamp: timestamp '0001-01-01T00:00:00+01:00' is outside the UTC calendar"),
        # a lone surrogate (JSON's \ud800 escape; UTF-8 cannot store it) in a value and in a key (was 503)
        (lambda e: json.dumps(_with(e, "name", "wm\ud800")).encode(),
         "event.progress.name: not valid Unicode (lone surrogate U+D800 at character 2)"),
        (lambda e: json.dumps({**e, "\udfff": 1}).encode(),
         "event (a key): not valid Unicode (lone surrogate U+DFFF at character 0)"),
    ],
    ids=["5000-digits", "2^63", "-2^63-1", "400-digits", "1e30", "year-10000", "year-0", "surrogate", "surrogate-key"],
)
def test_values_out_of_range_are_422_naming_the_field(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]], body: Any, message: str
) -> None:
    response = _post(client, body(_progress(events, 2)))
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith(message)
    assert stored == []


def test_out_of_range_in_a_later_event_names_its_index(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]]
) -> None:
    response = _post(client, [_progress(events, 1), _with(_progress(events, 2), "batchId", 2**64)])
    assert response.status_code == 422
    assert response.json()["error"].startswith("events[1].progress.batchId: integer 18446744073709551616")
    assert stored == []


def test_the_largest_64_bit_values_are_accepted(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]]
) -> None:
    # 2^63-1 in a field no sample reads (kept in the raw document) and 2^62 as a count (counts pass
    # through a float in the parser, which holds 2^62 exactly but rounds 2^63-1 up to 2^63)
    event = _with(_with(_progress(events, 2), "numInputRows", 2**62), "extraCounter", 2**63 - 1)
    response = _post(client, event)
    assert response.status_code == 202
    assert stored[0].samples[0].num_input_rows == 2**62
    assert stored[0].raw[0][3]["progress"]["extraCounter"] == 2**63 - 1


def test_a_value_the_store_refuses_is_422(events: list[dict[str, Any]]) -> None:
    def refusing(result: PollResult) -> None:
        raise ValueError("PollResult.raw[0]: document not storable as JSON")

    app = create_ingest_app(token=TOKEN, sink=refusing, clock=lambda: RECEIVED)
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as c:
        response = _post(c, _progress(events, 0))
    assert response.status_code == 422
    assert response.json()["error"] == "events cannot be stored: PollResult.raw[0]: document not storable as JSON"


class _Busy(Exception):
    pass


def test_a_busy_store_is_retried_inside_the_server(stored: list[PollResult], events: list[dict[str, Any]]) -> None:
    calls: list[int] = []

    def busy_twice(result: PollResult) -> None:
        calls.append(1)
        if len(calls) <= 2:
            raise _Busy("database is locked")
        stored.append(result)

    app = create_ingest_app(
        token=TOKEN, sink=busy_twice, clock=lambda: RECEIVED, transient=lambda e: isinstance(e, _Busy)
    )
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as c:
        response = _post(c, _progress(events, 0))
    assert response.status_code == 202
    assert len(calls) == 3 and len(stored) == 1


def test_a_store_busy_for_longer_than_the_retry_window_is_503(events: list[dict[str, Any]]) -> None:
    calls: list[int] = []

    def always_busy(result: PollResult) -> None:
        calls.append(1)
        raise _Busy("database is locked")

    app = create_ingest_app(
        token=TOKEN, sink=always_busy, clock=lambda: RECEIVED, store_retry_s=0.3,
        transient=lambda e: isinstance(e, _Busy),
    )  # fmt: skip
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as c:
        response = _post(c, _progress(events, 0))
    assert response.status_code == 503
    assert len(calls) >= 2  # retried, then gave up


def test_a_body_dribbled_too_slowly_is_408(events: list[dict[str, Any]]) -> None:
    import socket
    import time

    app = create_ingest_app(token=TOKEN, sink=lambda r: None, clock=lambda: RECEIVED, body_timeout_s=0.5)
    with serve_in_thread(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            head = (
                f"POST {EVENTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            )
            sock.sendall(head.encode() + b"[")
            started = time.monotonic()
            answer = sock.recv(4096)
            waited = time.monotonic() - started
            while b"0.5s" not in answer and (more := sock.recv(4096)):  # the body may come in a second packet
                answer += more
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"request body not received within 0.5s" in answer
    assert waited < 5.0


def test_valid_unicode_is_accepted_and_deep_nesting_named(
    client: httpx.Client, stored: list[PollResult], events: list[dict[str, Any]]
) -> None:
    # non-ASCII names and keys are fine (only lone surrogates are not)
    response = _post(client, {**_with(_progress(events, 2), "name", "flüsse-Ström ✓"), "clé": "é"})
    assert response.status_code == 202, response.text
    assert stored[0].samples[0].job.name == "flüsse-Ström ✓"
    # 70 levels of arrays inside the event: within the JSON parser's limit, beyond the endpoint's
    deep = _with(_progress(events, 2), "extra", json.loads("[" * 70 + "]" * 70))
    response = _post(client, deep)
    assert response.status_code == 422
    # event (level 0), progress (1), extra (2) and 62 more levels: the 64th
    assert response.json()["error"] == "event.progress.extra" + "[0]" * 62 + ": nested deeper than 64 levels"
