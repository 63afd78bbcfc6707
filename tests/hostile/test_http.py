"""Hostile pull endpoints (issue 19): a loopback server answering a 500 MB body, an endless chunked body, a
gzip bomb, a body sent one byte every 2 s, JSON nested 200,000 deep and a redirect to another host.

Each is run through ``tidegauge check flink URL`` (a process of its own, measured by
:func:`tests.hostile.harness.run_measured`): it must end with the named error of the bound it hit (exit 2,
the JobManager could not be read). The daemon (``tidegauge run``) is run with two targets, the hostile
one and a good exporter serving the recorded KMinion page: the good target keeps its data on ``/metrics``
while ``/healthz`` and ``/metrics`` name the hostile target's error kind, and SIGTERM stops it.

Outcomes are asserted; time and peak memory are only recorded (:func:`tests.hostile.harness.record`) for
``tests/benchmarks/bench_hostile.py``. The servers run in this process's threads, so they are not part of
the measured memory.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from monitor.store import upgrade
from tests.daemon_process import free_port, metric_values
from tests.hostile.harness import record, run_measured, tidegauge_argv
from tests.servers import static_pages

MIB = 1024 * 1024
#: ``--deadline`` of ``check flink`` in these cases, seconds.
CHECK_DEADLINE_S = 5.0
#: What a case may take beyond its poll deadline: the interpreter's start-up and imports.
STARTUP_ALLOWANCE_S = 10.0


class _Hostile(BaseHTTPRequestHandler):
    """Answers every GET the way its server's ``mode`` says (see :data:`MODES`)."""

    protocol_version = "HTTP/1.1"
    server: _HostileServer

    def do_GET(self) -> None:
        try:
            MODES[self.server.mode](self)
        except OSError:  # the client gave up, which is the point
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()
        self.server.answering.set()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


class _HostileServer(ThreadingHTTPServer):
    daemon_threads = True
    mode: str
    base: str
    #: set once an answer has started (its headers sent): a request is in flight
    answering: threading.Event


def _big_body(h: _Hostile) -> None:
    """500 MB announced and sent (as long as the client reads)."""
    total = 500 * 1000 * 1000
    h.head(200, {"Content-Type": "application/json", "Content-Length": str(total)})
    block = b" " * MIB
    for _ in range(total // MIB):
        h.wfile.write(block)


def _endless_chunked(h: _Hostile) -> None:
    """Chunks of 1 MiB, never a last chunk."""
    h.head(200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    block = b"[" + b" " * (MIB - 1)
    while True:
        h.chunk(block)


def _gzip_bomb(h: _Hostile) -> None:
    """One gzip stream of zeros compressed as it is sent (about 1 KiB per MiB): up to 10 GiB decoded."""
    h.head(200, {"Content-Type": "application/json", "Content-Encoding": "gzip", "Transfer-Encoding": "chunked"})
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = b"\0" * MIB
    for _ in range(10 * 1024):
        out = packer.compress(zeros)
        if out:
            h.chunk(out)
    h.chunk(packer.flush())
    h.wfile.write(b"0\r\n\r\n")


def _slowloris(h: _Hostile) -> None:
    """A valid JSON body of 1,000 bytes, one byte every 2 s."""
    body = b'{"jobs": [' + b" " * 988 + b"]}"
    h.head(200, {"Content-Type": "application/json", "Content-Length": str(len(body))})
    for i in range(len(body)):
        h.wfile.write(body[i : i + 1])
        h.wfile.flush()
        time.sleep(2.0)


def _deep_json(h: _Hostile) -> None:
    """JSON arrays nested 200,000 deep (400 kB)."""
    body = b"[" * 200_000 + b"]" * 200_000
    h.head(200, {"Content-Type": "application/json", "Content-Length": str(len(body))})
    h.wfile.write(body)


def _redirect(h: _Hostile) -> None:
    """A redirect to another host."""
    h.head(302, {"Location": "http://collector.attacker.invalid:8081/jobs/overview?token=x", "Content-Length": "0"})


MODES: dict[str, Callable[[_Hostile], None]] = {
    "500 MB body": _big_body,
    "endless chunked body": _endless_chunked,
    "gzip bomb": _gzip_bomb,
    "slowloris body": _slowloris,
    "JSON nested 200k deep": _deep_json,
    "cross-host redirect": _redirect,
}


@contextmanager
def hostile(mode: str) -> Iterator[_HostileServer]:
    """A loopback server answering every GET as ``mode`` says (its URL is ``.base``)."""
    server = _HostileServer(("127.0.0.1", 0), _Hostile)
    server.mode = mode
    server.base = f"http://127.0.0.1:{server.server_address[1]}"
    server.answering = threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


#: mode -> (the start of the error message, the error's kind on /healthz and /metrics)
EXPECTED = {
    "500 MB body": ("body too large: ", "body_too_large"),
    "endless chunked body": ("body too large: ", "body_too_large"),
    "gzip bomb": ("decompressed too large: ", "decompressed_too_large"),
    "slowloris body": ("deadline exceeded: ", "deadline_exceeded"),
    "JSON nested 200k deep": ("too deeply nested: ", "too_deeply_nested"),
    "cross-host redirect": ("redirect to another host: ", "redirect_other_host"),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_check_flink_ends_with_the_named_error(mode: str) -> None:
    start, _kind = EXPECTED[mode]
    with hostile(mode) as server:
        base = server.base
        measured = run_measured(
            tidegauge_argv("check", "flink", base, "--interval", "0s", "--deadline", f"{CHECK_DEADLINE_S:g}s")
        )
    record(f"check flink: {mode}", measured, deadline_s=CHECK_DEADLINE_S + STARTUP_ALLOWANCE_S)
    assert not measured.killed
    assert measured.returncode == 2, measured.stderr
    assert f"tidegauge: error: {start}" in measured.stderr, measured.stderr
    assert f"{base}/jobs/overview" in measured.stderr  # the endpoint is named
    assert "Traceback" not in measured.stderr and "token=x" not in measured.stderr


# -------------------------------------------------------------------------------------------- daemon

#: The daemon's hostile target: deadlines short enough for a test, the rest as configured by default.
DAEMON_DEADLINES = {"request_deadline": "3s", "poll_deadline": "4s"}


@pytest.fixture
def good_exporter(recorded_fixtures: Path) -> Iterator[str]:
    """A kafka exporter serving the recorded KMinion page (lag of bigquery-sink partition 10: 147481)."""
    page = (recorded_fixtures / "kafka/prometheus/kminion_docs_metrics_topic_and_group.prom").read_bytes()
    with static_pages({"/metrics": page}) as base:
        yield f"{base}/metrics"


@pytest.mark.parametrize("mode", ["500 MB body", "endless chunked body", "slowloris body", "gzip bomb"])
def test_daemon_keeps_the_good_target_and_names_the_error(
    mode: str, good_exporter: str, tmp_path: Path
) -> None:
    _start, kind = EXPECTED[mode]
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    port = free_port()
    config = {
        "server": {"host": "127.0.0.1", "port": port},
        "evaluation_interval": "500ms",
        "targets": {
            "kafka_exporters": [{"name": "good", "url": good_exporter, "poll_interval": "500ms"}],
            "flink_rest": [{"name": "hostile", "poll_interval": "1s", **DAEMON_DEADLINES}],
        },
    }
    seen: dict[str, Any] = {}

    def probe() -> bool:
        """True once the hostile target's error is on /healthz and /metrics, and the good target has been
        polled again after it with its lag served (what is asserted below is kept in ``seen``)."""
        try:
            health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2.0).json()
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0).text
        except (httpx.HTTPError, ValueError):
            return False
        targets = {t["name"]: t for t in health.get("targets", [])}
        bad, good = targets.get("hostile"), targets.get("good")
        if not bad or not good or not bad["errors_by_kind"].get(kind):
            return False
        if "polls_when_bad_seen" not in seen:
            seen["polls_when_bad_seen"] = good["polls"]
            return False
        if good["polls"] < seen["polls_when_bad_seen"] + 2:
            return False
        seen.update(health=health, bad=bad, good=good, metrics=text)
        return True

    with hostile(mode) as server:
        config["targets"]["flink_rest"][0]["url"] = server.base  # type: ignore[index]
        config_path = tmp_path / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        measured = run_measured(
            tidegauge_argv("run", "-c", str(config_path), "--db", db_url), terminate_when=probe, kill_after_s=90.0
        )
    record(f"run (hostile + good target): {mode}", measured, deadline_s=10.0)
    assert seen, f"the daemon never showed the error:\n{measured.stderr[-3000:]}"
    assert not measured.killed
    bad, good = seen["bad"], seen["good"]
    assert bad["up"] is False and bad["last_error"].startswith(EXPECTED[mode][0]), bad
    assert set(bad["errors_by_kind"]) == {kind}, bad  # named, never a "store" or "internal" error
    assert good["up"] is True and good["errors_total"] == 0, good
    errors = {
        (lv["target"], lv["kind"]): v for lv, v in metric_values(seen["metrics"], "tidegauge_collector_errors_total")
    }
    assert errors[("hostile", kind)] >= 1 and errors[("hostile", "store")] == 0
    lag = [
        v
        for lv, v in metric_values(seen["metrics"], "tidegauge_consumer_lag_offsets")
        if lv.get("job_id") == "good/bigquery-sink" and lv.get("partition") == "10"
    ]
    assert lag == [147481.0]


def test_daemon_sigterm_abandons_a_slowloris_poll_in_flight(tmp_path: Path) -> None:
    """With the default deadlines (30 s a request), SIGTERM while a slowloris answer is being read: the
    read is abandoned, and the daemon exits cleanly without waiting for the deadline."""
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    with hostile("slowloris body") as server:
        config = {
            "server": {"host": "127.0.0.1", "port": free_port()},
            "targets": {"flink_rest": [{"name": "hostile", "url": server.base, "poll_interval": "1s"}]},
        }
        config_path = tmp_path / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        measured = run_measured(
            tidegauge_argv("run", "-c", str(config_path), "--db", db_url),
            terminate_when=server.answering.is_set,
            kill_after_s=90.0,
        )
    record("run: SIGTERM during a slowloris poll (default deadlines)", measured, deadline_s=10.0)
    assert not measured.killed and measured.returncode == 0, measured.stderr[-3000:]
    assert "abandoned: " in measured.stderr and "deadline exceeded" not in measured.stderr
