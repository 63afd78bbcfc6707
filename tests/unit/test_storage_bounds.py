"""The bounds of store reads (issue 19): request and poll deadlines on every remote store request, and the
byte limit of one S3 answer (collectors/storage.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import aiohttp
import pytest
from fsspec.asyn import AsyncFileSystem

import collectors.storage as storage
from collectors.hdfs import open_webhdfs
from collectors.http import ReadLimits
from collectors.storage import (
    FsspecStorage,
    ResponseTooLarge,
    StorageError,
    StorageReason,
    open_storage,
    storage_error,
)
from monitor.config import SparkEventLogTarget
from monitor.model import ErrorKind


class _Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


class _Chunks:
    """An aiohttp ``StreamReader`` stand-in: ``read(n)`` returns up to ``n`` bytes of ``total``."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.other = "delegated"

    async def read(self, n: int = -1) -> bytes:
        size = self.left if n < 0 else min(n, self.left)
        self.left -= size
        return b"x" * size


def test_bounded_stream_reads_all_within_the_cap_and_refuses_past_it() -> None:
    within = storage._BoundedStream(_Chunks(200_000), cap=200_000)
    assert asyncio.run(within.read()) == b"x" * 200_000
    assert within.other == "delegated"  # everything else is the wrapped stream's
    past = storage._BoundedStream(_Chunks(10_000_000), cap=200_000)
    with pytest.raises(ResponseTooLarge) as info:
        asyncio.run(past.read())
    assert info.value.cap == 200_000 and info.value.announced is None
    counted = storage._BoundedStream(_Chunks(300), cap=250)
    assert asyncio.run(counted.read(200)) == b"x" * 200
    with pytest.raises(ResponseTooLarge):
        asyncio.run(counted.read(100))


def test_response_too_large_anywhere_in_the_causes_is_body_too_large() -> None:
    class HTTPClientError(Exception):
        pass

    try:
        try:
            raise ResponseTooLarge(33_554_432)
        except ResponseTooLarge as inner:
            raise HTTPClientError("wrapped by the library") from inner
    except HTTPClientError as outer:
        error = storage_error(outer, "s3://spark/spark-events")
    assert error.reason is StorageReason.BODY_TOO_LARGE and not error.retryable
    assert error.error_kind(root=True) is ErrorKind.BODY_TOO_LARGE
    assert str(error) == (
        "body too large: the store's answer for s3://spark/spark-events sent more than the 33,554,432 bytes "
        "allowed (max_response_bytes)"
    )
    announced = storage_error(ResponseTooLarge(1_000, announced=5_000), "s3://b/k")
    assert str(announced) == (
        "body too large: the store's answer for s3://b/k announces 5,000 bytes, more than the 1,000 allowed "
        "(max_response_bytes)"
    )


class _HangingFs(AsyncFileSystem):  # type: ignore[misc]
    """An fsspec async file system whose ``info`` takes 20 s (a test without the deadline fails, not hangs)."""

    protocol = "hangtest"
    cachable = False

    def __init__(self) -> None:
        super().__init__(asynchronous=False)
        self.cancelled = threading.Event()

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            await asyncio.sleep(20)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return {"name": path, "type": "file", "size": 0}


def test_a_request_past_its_deadline_is_cancelled_and_named() -> None:
    fs = _HangingFs()
    store = FsspecStorage(fs, "s3://", object_store=True, limits=ReadLimits(request_deadline_s=0.3))
    with pytest.raises(StorageError) as info:
        store.info("bucket/key")
    assert info.value.reason is StorageReason.DEADLINE_EXCEEDED and info.value.retryable
    assert info.value.error_kind(root=True) is ErrorKind.DEADLINE_EXCEEDED
    assert str(info.value) == (
        "deadline exceeded: no complete answer from s3://bucket/key within the request deadline of 0.3 s"
    )
    assert fs.cancelled.wait(10)  # the coroutine stopped on fsspec's loop, it is not left reading


class _Recording:
    """A synchronous stand-in for an async file system's mirrored method: records ``timeout=``."""

    async_impl = True

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def invalidate_cache(self, path: str) -> None:
        pass

    def info(self, path: str, timeout: float | None = None) -> dict[str, Any]:
        assert timeout is not None
        self.timeouts.append(timeout)
        return {"name": path, "type": "file", "size": 3, "ETag": '"e"'}


def test_requests_share_the_poll_deadline_and_none_starts_after_it() -> None:
    clock = _Clock()
    fs = _Recording()
    limits = ReadLimits(request_deadline_s=30.0, poll_deadline_s=60.0, clock=clock)
    store = FsspecStorage(fs, "s3://", object_store=True, limits=limits)
    store.begin_poll()
    store.info("b/k")
    clock.now_s += 50.0
    store.info("b/k")
    assert fs.timeouts == [30.0, 10.0]  # the request's own, then what is left of the poll's
    clock.now_s += 10.0
    with pytest.raises(StorageError) as info:
        store.info("b/k")
    assert fs.timeouts == [30.0, 10.0]  # not sent
    assert str(info.value) == (
        "deadline exceeded: no complete answer from s3://b/k within the poll's deadline of 60 s "
        "(shared by all requests of one poll)"
    )
    store.begin_poll()  # the next poll has its own
    store.info("b/k")
    assert fs.timeouts == [30.0, 10.0, 30.0]


def test_s3_config_keeps_the_user_s_settings_and_adds_the_bounds() -> None:
    limits = ReadLimits(max_body_bytes=1_000, request_deadline_s=7.0)
    config = storage._s3_config({"read_timeout": 2, "retries": {"max_attempts": 1}}, limits)
    assert config["read_timeout"] == 2 and config["retries"] == {"max_attempts": 1}
    assert config["connect_timeout"] == storage.S3_CONNECT_TIMEOUT_S
    assert config["http_session_cls"] is storage.bounded_s3_session_cls(1_000)
    assert storage._s3_config(None, limits)["read_timeout"] == 7.0
    with pytest.raises(StorageError, match="config_kwargs: expected a mapping"):
        storage._s3_config("read_timeout=2", limits)


def test_event_log_targets_configure_the_store_bounds_as_http_targets_do() -> None:
    target = SparkEventLogTarget.model_validate(
        {"name": "s3", "path": "/var/log/spark", "request_deadline": "3s", "poll_deadline": "4s",
         "max_response_bytes": 1_048_576}
    )
    limits = target.store_limits()
    assert (limits.request_deadline_s, limits.poll_deadline_s, limits.max_body_bytes) == (3.0, 4.0, 1_048_576)
    default = SparkEventLogTarget.model_validate({"name": "s3", "path": "/var/log/spark"}).store_limits()
    assert (default.request_deadline_s, default.poll_deadline_s, default.max_body_bytes) == (30.0, 60.0, 33_554_432)


class _Answers(BaseHTTPRequestHandler):
    """A path holding ``small``: 1,000 bytes; ``big``: announces 10 MB; ``hang``: no answer (until the
    server's ``release`` is set); else a chunked body that never ends."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def do_GET(self) -> None:
        try:
            if "hang" in self.path:
                self.release.wait(30)
            elif "small" in self.path:
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b"s" * 1000)
            elif "big" in self.path:
                self.send_response(200)
                self.send_header("Content-Length", str(10_000_000))
                self.end_headers()
            else:
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                block = b" " * 65536
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
        except OSError:
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def answers() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Answers.release.set()
    server.shutdown()
    server.server_close()


def test_bounded_response_class_cuts_an_endless_body_and_refuses_a_large_announced_one(answers: str) -> None:
    async def get(path: str) -> bytes:
        bounded = storage.bounded_response_cls(200_000)
        async with aiohttp.ClientSession(response_class=bounded) as session, session.get(answers + path) as response:
            return await response.read()

    assert asyncio.run(get("/small")) == b"s" * 1000
    with pytest.raises(ResponseTooLarge) as endless:
        asyncio.run(get("/endless"))
    assert endless.value.announced is None and endless.value.cap == 200_000
    with pytest.raises(ResponseTooLarge) as big:
        asyncio.run(get("/big"))
    assert big.value.announced == 10_000_000


def test_gcs_session_keeps_the_user_s_settings_and_adds_the_bound() -> None:
    limits = ReadLimits(max_body_bytes=1_000)
    session = storage._gcs_session({"trust_env": True}, limits)
    assert session == {"trust_env": True, "response_class": storage.bounded_response_cls(1_000)}


def test_webhdfs_answers_are_cut_at_the_limit(answers: str) -> None:
    netloc = answers.removeprefix("http://")
    store = open_webhdfs("webhdfs", netloc, {}, environ={}, limits=ReadLimits(max_body_bytes=200_000))
    with pytest.raises(StorageError) as endless:
        store.info("/endless")  # GETFILESTATUS answered by an endless body
    assert endless.value.reason is StorageReason.BODY_TOO_LARGE
    assert str(endless.value) == (
        f"body too large: the store's answer for webhdfs://{netloc}/endless sent more than the 200,000 bytes "
        "allowed (max_response_bytes)"
    )
    with pytest.raises(StorageError) as big:
        store.read_range("/big", 0, 100)
    assert big.value.reason is StorageReason.BODY_TOO_LARGE and "announces 10,000,000 bytes" in str(big.value)


S3_KEYS = {"key": "unit-test-key", "secret": "unit-test-secret"}


def test_s3_listing_with_an_endless_body_is_cut_at_the_limit(answers: str) -> None:
    store, path = open_storage(
        "s3://endless/spark-events",
        {"endpoint_url": answers, **S3_KEYS},
        ReadLimits(max_body_bytes=200_000, request_deadline_s=20.0),  # should the bound break: fails, not swells (20 s: a loaded CI machine)
    )
    with pytest.raises(StorageError) as info:
        store.ls(path)
    assert info.value.reason is StorageReason.BODY_TOO_LARGE
    assert str(info.value) == (
        "body too large: the store's answer for s3://endless/spark-events sent more than the 200,000 bytes "
        "allowed (max_response_bytes)"
    )


def test_s3_endpoint_that_never_answers_ends_at_the_request_deadline(answers: str) -> None:
    _Answers.release.clear()
    store, path = open_storage(
        "s3://hang/spark-events", {"endpoint_url": answers, **S3_KEYS}, ReadLimits(request_deadline_s=0.5)
    )
    with pytest.raises(StorageError) as info:
        store.ls(path)
    assert info.value.reason is StorageReason.DEADLINE_EXCEEDED
    assert str(info.value) == (
        "deadline exceeded: no complete answer from s3://hang/spark-events within the request deadline of 0.5 s"
    )
