"""collectors.http: client construction and the failure -> CollectorError mapping (table in its docstring)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from collectors.http import HttpFailure, check_url, get_text, make_client, safe_url
from tests.servers import black_hole, refused_port

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _client_raising(exc: Exception) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return make_client(transport=httpx.MockTransport(handler))


def _client_answering(status: int, text: str = "", headers: dict[str, str] | None = None) -> httpx.Client:
    return make_client(transport=httpx.MockTransport(lambda r: httpx.Response(status, text=text, headers=headers)))


def test_success_returns_text() -> None:
    assert get_text(_client_answering(200, "a 1\n"), "http://h/m") == "a 1\n"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(404, False), (401, False), (400, False), (408, True), (429, True), (500, True), (503, True)],
)
def test_status_mapping(status: int, retryable: bool) -> None:
    failure = get_text(_client_answering(status), "http://h/m")
    assert isinstance(failure, HttpFailure)
    assert failure.status_code == status and failure.retryable is retryable
    assert failure.message.startswith(f"HTTP {status} ")


def test_redirect_is_not_followed() -> None:
    client = _client_answering(302, headers={"Location": "http://elsewhere/"})
    failure = get_text(client, "http://h/m")
    assert isinstance(failure, HttpFailure) and failure.status_code == 302 and not failure.retryable


@pytest.mark.parametrize(
    ("exc", "prefix"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "cannot connect to http://h/m: [Errno 111]"),
        (httpx.ReadTimeout("timed out"), "timed out requesting http://h/m"),
        (httpx.RemoteProtocolError("Server disconnected"), "request failed for http://h/m: RemoteProtocolError"),
    ],
)
def test_transport_errors_are_retryable(exc: Exception, prefix: str) -> None:
    failure = get_text(_client_raising(exc), "http://h/m")
    assert isinstance(failure, HttpFailure) and failure.retryable and failure.status_code is None
    assert failure.message.startswith(prefix)


def test_real_refused_and_real_timeout() -> None:
    with make_client(connect_timeout_s=1.0, read_timeout_s=0.2) as client:
        refused = get_text(client, f"http://127.0.0.1:{refused_port()}/m")
        assert isinstance(refused, HttpFailure) and refused.message.startswith("cannot connect")
        with black_hole() as port:
            hung = get_text(client, f"http://127.0.0.1:{port}/m")
        assert isinstance(hung, HttpFailure)
        assert hung.message == f"timed out requesting http://127.0.0.1:{port}/m: no answer within 0.2s (the target's `timeout`)"


def test_to_error_and_safe_url() -> None:
    failure = HttpFailure("HTTP 404 Not Found from http://h/m", retryable=False, status_code=404)
    err = failure.to_error("spark-prometheus", "http://h/m", NOW)
    assert (err.collector, err.target, err.observed_at, err.retryable) == ("spark-prometheus", "http://h/m", NOW, False)
    assert safe_url("https://u:p@h:8443/a/b?x=1#f") == "https://h:8443/a/b"


def test_make_client_settings() -> None:
    with make_client(connect_timeout_s=1.5, read_timeout_s=4.0, headers={"Authorization": "Bearer t"}) as c:
        assert c.timeout.connect == 1.5 and c.timeout.read == 4.0
        assert c.headers["Authorization"] == "Bearer t"
        assert c.headers["User-Agent"].startswith("tidegauge/")
        assert c.follow_redirects is False


@pytest.mark.parametrize("url", ["driver:4040/metrics", "ftp://h/m", "/metrics/prometheus", "http://"])
def test_check_url_rejects(url: str) -> None:
    with pytest.raises(ValueError, match="scrape"):
        check_url(url, "scrape")


def test_check_url_hides_credentials() -> None:
    with pytest.raises(ValueError) as info:
        check_url("ftp://u:secret@h/m?t=1", "scrape")
    assert "secret" not in str(info.value)
    assert check_url("https://h:8443/m") == "https://h:8443/m"
