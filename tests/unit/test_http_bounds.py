"""collectors.http read bounds (issue 19): body size, decompressed size, request and poll deadlines,
cross-host redirects and JSON depth, each a failure of its own kind.

Bodies are streamed from generators through :class:`httpx.MockTransport` (a generator body is not read in
advance), and the deadlines run on a fake clock the generator advances, so no test waits or measures time.
One test runs a real loopback server whose headers trickle in, to show the deadline reaches the socket.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from collectors.flink import FlinkRestCollector
from collectors.http import (
    MAX_JSON_DEPTH,
    Deadline,
    HttpFailure,
    ReadLimits,
    get_json,
    get_text,
    make_client,
)
from monitor.model import ErrorKind

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KIB = 1024


class FakeClock:
    """A monotonic clock the tests move by hand."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


class Pulled:
    """A body generator that counts what was taken from it."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.chunks = 0
        self.bytes = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.chunks += 1
            self.bytes += len(chunk)
            yield chunk


def _client(
    body: Pulled | bytes, headers: dict[str, str] | None = None, status: int = 200
) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        content: Any = iter(body) if isinstance(body, Pulled) else body
        return httpx.Response(status, content=content, headers=headers)

    return make_client(transport=httpx.MockTransport(handler))


def _endless(chunk: bytes) -> Iterator[bytes]:
    while True:
        yield chunk


def _failure(result: object, kind: ErrorKind) -> HttpFailure:
    assert isinstance(result, HttpFailure), result
    assert result.kind is kind, result
    return result


# ------------------------------------------------------------------------------------------ body size


def test_endless_body_is_cut_at_the_limit() -> None:
    body = Pulled(_endless(b"a" * (64 * KIB)))
    limits = ReadLimits(max_body_bytes=1024 * KIB)
    failure = _failure(get_text(_client(body), "http://u:p@h/m?t=s", limits), ErrorKind.BODY_TOO_LARGE)
    assert failure.message == (
        "body too large: http://h/m sent more than the 1,048,576 bytes allowed (max_body_bytes)"
    )
    assert not failure.retryable
    assert body.chunks == 17  # 16 chunks of 64 KiB are exactly 1 MiB; the 17th is one too many


def test_announced_length_is_refused_before_reading() -> None:
    body = Pulled(iter([b"a" * 10]))
    limits = ReadLimits(max_body_bytes=100)
    failure = _failure(
        get_text(_client(body, {"Content-Length": "500000000"}), "http://h/m", limits), ErrorKind.BODY_TOO_LARGE
    )
    assert "announces 500,000,000 bytes, more than the 100 allowed" in failure.message
    assert body.chunks == 0


def test_body_at_the_limit_is_read() -> None:
    body = Pulled(iter([b"a" * 60, b"b" * 40]))
    assert get_text(_client(body), "http://h/m", ReadLimits(max_body_bytes=100)) == "a" * 60 + "b" * 40


# ------------------------------------------------------------------------------------- decompression


def _compressed_chunks(data_chunks: Iterator[bytes], wbits: int) -> Iterator[bytes]:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    for data in data_chunks:
        out = packer.compress(data)
        if out:
            yield out
    yield packer.flush()


def test_gzip_bomb_is_cut_at_the_decompressed_limit() -> None:
    # 1 GiB of zeros, compressed as it is pulled: far more than the limit if it were inflated whole
    zeros = (b"\0" * (1024 * KIB) for _ in range(1024))
    body = Pulled(_compressed_chunks(zeros, zlib.MAX_WBITS | 16))
    limits = ReadLimits(max_decompressed_bytes=4 * 1024 * KIB)
    failure = _failure(
        get_text(_client(body, {"Content-Encoding": "gzip"}), "http://h/m", limits),
        ErrorKind.DECOMPRESSED_TOO_LARGE,
    )
    assert failure.message == (
        "decompressed too large: the gzip body of http://h/m decodes to more than 4,194,304 bytes "
        "(max_decompressed_bytes)"
    )
    assert body.bytes < 64 * KIB  # ~4 KiB of the compressed stream was enough to pass the limit


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),  # a zlib stream, as RFC 9110 says
        ("deflate", lambda d: zlib.compress(d)[2:-4]),  # a raw deflate stream, as some servers send
        ("gzip, identity", gzip.compress),
    ],
)
def test_compressed_bodies_decode(encoding: str, pack: Callable[[bytes], bytes]) -> None:
    text = "flink_taskmanager_job_task_numRecordsIn 17\n" * 5000
    packed = pack(text.encode())
    body = Pulled(iter([packed[:100], packed[100:]]))
    assert get_text(_client(body, {"Content-Encoding": encoding}), "http://h/m") == text


def test_stacked_encodings_decode_in_reverse_order() -> None:
    inner = gzip.compress(b"a 1\n" * 100)
    body = Pulled(iter([zlib.compress(inner)]))
    assert get_text(_client(body, {"Content-Encoding": "gzip, deflate"}), "http://h/m") == "a 1\n" * 100


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress"])
def test_other_encodings_are_refused_unread(encoding: str) -> None:
    body = Pulled(iter([b"\x28\xb5\x2f\xfd" + b"\0" * 100]))
    failure = _failure(get_text(_client(body, {"Content-Encoding": encoding}), "http://h/m"), ErrorKind.UNREACHABLE)
    assert failure.message.startswith(f"request failed for http://h/m: DecodingError: Content-Encoding '{encoding}'")
    assert body.chunks == 0


def test_corrupt_gzip_is_a_request_failure() -> None:
    body = Pulled(iter([b"\x1f\x8b\x08\x00" + b"\xff" * 50]))
    failure = _failure(get_text(_client(body, {"Content-Encoding": "gzip"}), "http://h/m"), ErrorKind.UNREACHABLE)
    assert failure.message.startswith("request failed for http://h/m: DecodingError: corrupt gzip body")


def test_client_asks_for_gzip_and_deflate_only() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Accept-Encoding"])
        return httpx.Response(200, text="ok")

    assert get_text(make_client(transport=httpx.MockTransport(handler)), "http://h/m") == "ok"
    assert seen == ["gzip, deflate"]


# ------------------------------------------------------------------------------------------ deadlines


def _slowloris(clock: FakeClock, seconds_per_byte: float) -> Iterator[bytes]:
    while True:
        clock.now_s += seconds_per_byte
        yield b"a"


def test_slow_body_ends_at_the_request_deadline() -> None:
    clock = FakeClock()
    body = Pulled(_slowloris(clock, 2.0))
    limits = ReadLimits(request_deadline_s=10.0, clock=clock)
    failure = _failure(get_text(_client(body), "http://h/m", limits), ErrorKind.DEADLINE_EXCEEDED)
    assert failure.message == (
        "deadline exceeded: no complete answer from http://h/m within the request deadline of 10 s"
    )
    assert failure.retryable
    assert body.bytes == 5  # at 2 s a byte, the fifth byte arrives at the deadline


def test_requests_of_one_poll_share_its_deadline() -> None:
    clock = FakeClock()
    limits = ReadLimits(request_deadline_s=10.0, poll_deadline_s=15.0, clock=clock)
    poll = limits.poll_deadline()
    first = Pulled(_slowloris(clock, 1.0))
    assert isinstance(get_text(_client(first), "http://h/a", limits, poll), HttpFailure)
    assert clock.now_s == 1010.0  # the first request used its own 10 s
    second = Pulled(_slowloris(clock, 1.0))
    failure = _failure(get_text(_client(second), "http://h/b", limits, poll), ErrorKind.DEADLINE_EXCEEDED)
    assert failure.message == (
        "deadline exceeded: no complete answer from http://h/b within the poll's deadline of 15 s "
        "(shared by all requests of one poll)"
    )
    assert second.bytes == 5  # the 5 s left of the poll
    third = Pulled(_slowloris(clock, 1.0))
    _failure(get_text(_client(third), "http://h/c", limits, poll), ErrorKind.DEADLINE_EXCEEDED)
    assert third.chunks == 0  # the poll's deadline has passed: not even sent


def test_deadline_is_the_earlier_of_request_and_poll() -> None:
    clock = FakeClock()
    limits = ReadLimits(request_deadline_s=10.0, poll_deadline_s=60.0, clock=clock)
    poll = Deadline.start(4.0, "poll", clock)
    assert limits.request_deadline(poll) is poll
    own = limits.request_deadline(Deadline.start(30.0, "poll", clock))
    assert (own.what, own.at_s) == ("request", 1010.0)


@pytest.mark.parametrize("field", ["max_body_bytes", "max_decompressed_bytes", "request_deadline_s", "poll_deadline_s"])
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field} must be positive"):
        ReadLimits(**{field: 0})


class _TricklingServer:
    """A loopback server that answers one request by sending its status line and headers one byte at a
    time, ``pause_s`` apart, then a 2-byte body; ``sent`` counts the bytes it got out. Without a total
    deadline on the socket the client would read the whole answer (every read is well within its read
    timeout)."""

    HEAD = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"p" * 30 + b"\r\nContent-Length: 2\r\n\r\nok"

    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s
        self.sent = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._answer, daemon=True)
        self.thread.start()

    def _answer(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            try:
                conn.recv(65536)
                for byte in self.HEAD:
                    conn.sendall(bytes([byte]))
                    self.sent += 1
                    time.sleep(self.pause_s)
            except OSError:  # the client closed the connection at its deadline
                return


def test_trickling_headers_end_at_the_deadline_on_a_real_socket() -> None:
    server = _TricklingServer(pause_s=0.2)  # the whole answer would take ~14 s
    try:
        with make_client(read_timeout_s=5.0) as client:
            result = get_text(client, f"http://127.0.0.1:{server.port}/m", ReadLimits(request_deadline_s=1.0))
        server.thread.join()  # ends at its next send once the client has closed the connection
    finally:
        server.sock.close()
    failure = _failure(result, ErrorKind.DEADLINE_EXCEEDED)
    assert failure.message.endswith("within the request deadline of 1 s")
    assert server.sent < len(_TricklingServer.HEAD) // 2  # the client gave up mid-headers


# ------------------------------------------------------------------------------------------ redirects


@pytest.mark.parametrize(
    ("location", "kind", "start"),
    [
        ("http://evil.example/x?token=1", ErrorKind.REDIRECT_OTHER_HOST,
         "redirect to another host: http://h:8081/m answers HTTP 302 to http://evil.example (redirects are not followed)"),
        ("http://h:9999/m", ErrorKind.REDIRECT_OTHER_HOST, "redirect to another host: http://h:8081/m answers HTTP 302 to http://h:9999"),
        ("https://h:8081/m", ErrorKind.REDIRECT_OTHER_HOST, "redirect to another host: http://h:8081/m answers HTTP 302 to https://h:8081"),
        ("/other", ErrorKind.UNREACHABLE, "HTTP 302 Found from http://h:8081/m"),
        ("http://h:8081/other", ErrorKind.UNREACHABLE, "HTTP 302 Found from http://h:8081/m"),
    ],
)
def test_redirects(location: str, kind: ErrorKind, start: str) -> None:
    failure = _failure(get_text(_client(b"", {"Location": location}, status=302), "http://h:8081/m"), kind)
    assert failure.message.startswith(start) and not failure.retryable and failure.status_code == 302
    assert "token" not in failure.message


# ---------------------------------------------------------------------------------------------- JSON


def test_json_nested_200k_deep_is_a_named_error() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    failure = _failure(get_json(_client(deep), "http://h/jobs/overview"), ErrorKind.TOO_DEEPLY_NESTED)
    assert failure.message == "too deeply nested: the JSON from http://h/jobs/overview nests more than 1024 levels"
    assert not failure.retryable


def test_json_depth_limit_is_orjsons() -> None:
    assert MAX_JSON_DEPTH == 1024
    assert get_json(_client(b"[" * 1024 + b"]" * 1024), "http://h/j") is not None
    _failure(get_json(_client(b"[" * 1025 + b"]" * 1025), "http://h/j"), ErrorKind.TOO_DEEPLY_NESTED)


def test_json_the_standard_library_reads_what_orjson_refuses() -> None:
    assert get_json(_client(b'{"a": NaN, "b": 1e400}'), "http://h/j") == {"a": pytest.approx(float("nan"), nan_ok=True), "b": float("inf")}
    # orjson stops at the NaN; the fallback meets the nesting and stops as well
    deep = b"[NaN, " + b"[" * 200_000 + b"]" * 200_000 + b"]"
    _failure(get_json(_client(deep), "http://h/j"), ErrorKind.TOO_DEEPLY_NESTED)


def test_invalid_json_is_named() -> None:
    failure = _failure(get_json(_client(b'{"jobs": ['), "http://h/j"), ErrorKind.UNREACHABLE)
    assert failure.message.startswith("invalid JSON from http://h/j: ") and not failure.retryable


def test_failure_kind_reaches_the_collector_error() -> None:
    failure = HttpFailure("body too large: x", retryable=False, kind=ErrorKind.BODY_TOO_LARGE)
    error = failure.to_error("flink-rest", "http://h/m", NOW)
    assert error.kind is ErrorKind.BODY_TOO_LARGE and error.kind.target_down


# ------------------------------------------------------------------------------ Flink poll deadline


def test_flink_poll_deadline_skips_the_jobs_not_reached() -> None:
    clock = FakeClock()
    overview = (
        b'{"jobs": ['
        b'{"jid": "a1", "name": "a", "state": "RUNNING", "start-time": 1, "end-time": -1},'
        b'{"jid": "b2", "name": "b", "state": "RUNNING", "start-time": 1, "end-time": -1}]}'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        clock.now_s += 7.0  # every answer takes 7 s of the poll's 10 s
        if request.url.path == "/jobs/overview":
            return httpx.Response(200, content=overview)
        return httpx.Response(404)

    limits = ReadLimits(poll_deadline_s=10.0, clock=clock)
    collector = FlinkRestCollector(
        "http://jm:8081", make_client(transport=httpx.MockTransport(handler)), concurrency=1, limits=limits
    )
    result = collector.poll(NOW)
    by_kind = [(e.kind, e.message) for e in result.errors]
    # job a: its first request (/jobs/a1) answers 404 at 14 s; job b is not started: the deadline passed
    assert by_kind == [
        (ErrorKind.UNREACHABLE, "HTTP 404 Not Found from http://jm:8081/jobs/a1"),
        (
            ErrorKind.DEADLINE_EXCEEDED,
            "deadline exceeded: the poll's 10 s ran out before 1 of 2 jobs were polled (they are polled next time)",
        ),
    ]


# ------------------------------------------------------------------- every pull collector is bounded


def _scrapers(client: httpx.Client, limits: ReadLimits) -> dict[str, Any]:
    from collectors.flink.prometheus import FlinkPrometheusCollector
    from collectors.kafka.exporter_scrape import ExporterScrapeCollector
    from collectors.spark.prometheus import SparkPrometheusCollector

    return {
        "spark-prometheus": SparkPrometheusCollector("http://h/m", client, limits=limits),
        "flink-prometheus": FlinkPrometheusCollector(["http://h/m"], client, limits=limits),
        "kafka-exporter": ExporterScrapeCollector("http://h/m", client, "c", limits),
        "flink-rest": FlinkRestCollector("http://h", client, limits=limits),
    }


@pytest.mark.parametrize("collector", ["spark-prometheus", "flink-prometheus", "kafka-exporter", "flink-rest"])
def test_every_pull_collector_reads_within_its_limits(collector: str) -> None:
    body = Pulled(_endless(b"# HELP x\n" * 1000))
    scraper = _scrapers(_client(body), ReadLimits(max_body_bytes=100 * KIB))[collector]
    result = scraper.poll(NOW)
    assert [e.kind for e in result.errors] == [ErrorKind.BODY_TOO_LARGE] and result.samples == ()
    assert body.bytes <= 100 * KIB + 9000


# -------------------------------------------------------------------------------------------- abandon


class _StallingServer:
    """A loopback server that answers one request with the start of a status line, then sends nothing
    more and waits until the client closes or shuts down the connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.stalled = threading.Event()
        self.thread = threading.Thread(target=self._answer, daemon=True)
        self.thread.start()

    def _answer(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 2")
            self.stalled.set()
            try:
                while conn.recv(65536):  # b"" once the client has shut the connection down
                    pass
            except OSError:  # or reset
                return


def test_abandon_wakes_a_read_in_flight_and_refuses_later_requests() -> None:
    from collectors.http import abandon

    server = _StallingServer()
    results: list[object] = []
    url = f"http://127.0.0.1:{server.port}/m"
    # an hour of read timeout and deadline: only abandon() can end this request
    limits = ReadLimits(request_deadline_s=3600.0, poll_deadline_s=3600.0)
    try:
        with make_client(read_timeout_s=3600.0) as client:
            reader = threading.Thread(target=lambda: results.append(get_text(client, url, limits)), daemon=True)
            reader.start()
            server.stalled.wait()
            time.sleep(0.5)  # for the reader to be blocked in its read (what abandon must wake), not before it
            abandon(client)
            reader.join()
            later = get_text(client, url, limits)
        server.thread.join()
    finally:
        server.sock.close()
    for failure in (*results, later):
        assert isinstance(failure, HttpFailure)
        assert failure.message == f"abandoned: {url} was not read (tidegauge is stopping)"


def test_abandon_refuses_requests_of_a_client_with_its_own_transport() -> None:
    from collectors.http import abandon

    calls: list[httpx.Request] = []
    client = make_client(transport=httpx.MockTransport(lambda r: calls.append(r) or httpx.Response(200)))
    abandon(client)
    assert isinstance(get_text(client, "http://h/m"), HttpFailure) and calls == []
