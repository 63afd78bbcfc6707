"""Hostile values that size an allocation (issue 19), served by loopback HTTP servers: a Flink vertex of
parallelism 10^12, a Flink reporter's ``subtask_index`` 99999999999991, 20,000 jobs in ``/jobs/overview``
and a kafka_exporter offset beyond 64 bits.

Each case runs the real command in a subprocess (:func:`tests.hostile.harness.run_measured`: ``tidegauge
check flink``, or ``tidegauge run`` with a good target beside the hostile one) and asserts the outcome: an
error naming the endpoint or series and the field or label, and the good job or target keeping its data.
Time and peak memory are recorded for ``tests/benchmarks/bench_hostile.py``, never asserted here.

The good data is recorded real output: the Flink 2.3.0 standalone job (``tests/flink_replay.py``), the
Flink reporter scrapes (``tests/fixtures/flink/real-2.3.0/prometheus_reporter``) and KMinion's documented
scrape (``tests/fixtures/kafka/prometheus/kminion_docs_metrics_topic_and_group.prom``: ``bigquery-sink`` on
``shop-activity`` partition 10 has lag 147481).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml

from monitor.store import upgrade
from tests.conftest import RECORDED_FIXTURES
from tests.daemon_process import free_port, metric_values
from tests.flink_replay import load, standalone_routes
from tests.hostile.harness import Measured, record, run_measured, tidegauge_argv
from tests.servers import serve_handler

Answer = tuple[int, bytes]
REPORTER = RECORDED_FIXTURES / "flink" / "real-2.3.0" / "prometheus_reporter"
KMINION = RECORDED_FIXTURES / "kafka" / "prometheus" / "kminion_docs_metrics_topic_and_group.prom"
GOOD_JOB = "exp-event-time-job"
#: A job id of the hostile job (32 hex digits, as Flink's).
EVIL_JID = "e" * 32


@contextmanager
def serve(answer: Callable[[str, Mapping[str, list[str]]], Answer | None]) -> Iterator[str]:
    """A threaded loopback HTTP server answering ``answer(path, query)`` (``None``: 404); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            got = answer(parts.path, parse_qs(parts.query))
            status, body = got if got is not None else (404, b'{"errors": ["Not found"]}')
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serve_handler(Handler) as base:
        yield base


def _json(doc: Any) -> Answer:
    return 200, json.dumps(doc).encode()


def _recorded_job(path: str, query: Mapping[str, list[str]]) -> Answer | None:
    """The recorded standalone job's answer to a request, if it is one of its endpoints."""
    routes = standalone_routes()
    key = f"{path}?get" if "get" in query else path
    return _json(routes[key]) if key in routes else None


def _check_flink(url: str) -> tuple[Measured, dict[str, Any]]:
    measured = run_measured(tidegauge_argv("check", "flink", url, "--interval", "0s", "--format", "json"))
    assert measured.returncode == 0, measured.stderr[-2000:]
    return measured, json.loads(measured.stdout)


def test_a_vertex_of_parallelism_10_to_the_12_is_an_error_and_the_other_job_is_read() -> None:
    evil = {
        "jid": EVIL_JID,
        "name": "evil",
        "state": "RUNNING",
        "vertices": [{"id": "f" * 32, "name": "Source: evil", "parallelism": 10**12, "status": "RUNNING"}],
    }
    overview = load("jobs_overview.json")
    overview = {"jobs": [*overview["jobs"], {**overview["jobs"][0], "jid": EVIL_JID, "name": "evil"}]}

    def answer(path: str, query: Mapping[str, list[str]]) -> Answer | None:
        if path == "/jobs/overview":
            return _json(overview)
        if path == f"/jobs/{EVIL_JID}":
            return _json(evil)
        if path.startswith(f"/jobs/{EVIL_JID}/"):
            return _json([])
        return _recorded_job(path, query)

    with serve(answer) as url:
        measured, report = _check_flink(url)
    record("flink rest: vertex parallelism 10^12 (check flink)", measured, deadline_s=30.0)
    (error,) = [e for e in report["errors"] if "evil" in e or EVIL_JID in e]
    assert f"/jobs/{EVIL_JID}: vertices[0]: parallelism 1000000000000 is not a Flink parallelism" in error
    (job,) = report["jobs"]
    assert job["name"] == GOOD_JOB and [len(v["subtasks"]) for v in job["vertices"]] == [2, 2, 2]


def test_20000_jobs_are_polled_in_part_and_the_limit_is_named() -> None:
    count = 20_000
    jobs = [
        {"jid": f"{i:032x}", "name": f"job-{i:05d}", "state": "RUNNING", "start-time": 1795952316890 + i,
         "end-time": -1}
        for i in range(count)
    ]

    def answer(path: str, query: Mapping[str, list[str]]) -> Answer | None:
        parts = path.split("/")
        if path == "/jobs/overview":
            return _json({"jobs": jobs})
        jid = parts[2] if len(parts) > 2 else ""
        if len(parts) == 3:
            vertex = {"id": "a" + jid[1:], "name": "Source: s", "parallelism": 1, "status": "RUNNING"}
            return _json({"jid": jid, "name": f"job-{int(jid, 16):05d}", "state": "RUNNING", "vertices": [vertex]})
        if path.endswith("/metrics") and "vertices" not in parts:
            return _json([{"id": "numRestarts", "value": "0"}])
        if path.endswith("/metrics") and "get" in query:
            return _json([{"id": "0.numRecordsOut", "value": "5"}])
        if path.endswith("/metrics"):
            return _json([{"id": "0.numRecordsOut"}])
        return None

    with serve(answer) as url:
        measured, report = _check_flink(url)
    record("flink rest: 20,000 jobs in /jobs/overview (check flink)", measured, deadline_s=60.0)
    (error,) = [e for e in report["errors"] if "max_jobs" in e]
    assert "/jobs/overview: field 'jobs': 20000 jobs, over the limit of 1000 (the target's max_jobs)" in error
    assert "19000 not polled" in error
    names = [j["name"] for j in report["jobs"]]
    # the newest 1000 (the highest start times) are polled
    assert len(names) == 1000 and min(names) == "job-19000" and max(names) == "job-19999"


def _reporter_pages(extra_tm_line: str = "", suffix: str = "") -> dict[str, bytes]:
    """The recorded reporter scrapes (job names ending in ``suffix``), the task manager's with one more line."""
    jm, tm = ((REPORTER / name).read_text() for name in ("jobmanager_metrics.txt", "taskmanager_metrics.txt"))
    for job in ("tg_idle", "tg_late"):
        jm, tm = (text.replace(f'job_name="{job}"', f'job_name="{job}{suffix}"') for text in (jm, tm))
    return {"/jm": jm.encode(), "/tm": (tm + extra_tm_line).encode()}


def _pages(pages: Mapping[str, bytes]) -> Callable[[str, Mapping[str, list[str]]], Answer | None]:
    return lambda path, query: (200, pages[path]) if path in pages else None


def _run_daemon(config: dict[str, Any], tmp_path: Path, ready: Callable[[dict[str, Any], str], bool]) -> tuple[
    Measured, dict[str, Any], str
]:
    """``tidegauge run`` until ``ready(healthz, metrics)``, then SIGTERM; returns the run, the last
    ``/healthz`` body and ``/metrics`` text seen."""
    db = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db)
    port = free_port()
    config = {**config, "server": {"host": "127.0.0.1", "port": port}, "evaluation_interval": "1s"}
    path = tmp_path / "tidegauge.yaml"
    path.write_text(yaml.safe_dump(config))
    seen: dict[str, Any] = {"healthz": {}, "metrics": ""}

    def probe() -> bool:
        try:
            seen["healthz"] = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
            seen["metrics"] = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        except (httpx.HTTPError, ValueError):
            return False
        return ready(seen["healthz"], seen["metrics"])

    measured = run_measured(tidegauge_argv("run", "-c", str(path), "--db", db), terminate_when=probe)
    return measured, seen["healthz"], seen["metrics"]


def _target(healthz: Mapping[str, Any], name: str) -> dict[str, Any]:
    return next((t for t in healthz.get("targets", []) if t["name"] == name), {"polls": 0})


def test_a_reporter_subtask_index_of_99999999999991_is_an_error_and_the_good_target_keeps_its_data(
    tmp_path: Path,
) -> None:
    line = (
        'flink_taskmanager_job_task_numRecordsIn{job_id="6da2cf668e5773fae9aa106232b7676f",'
        'task_id="0123456789abcdef0123456789abcdef",task_name="evil",job_name="tg_idle_b",'
        'subtask_index="99999999999991",} 5.0\n'
    )
    with serve(_pages(_reporter_pages(line, "_b"))) as evil, serve(_pages(_reporter_pages())) as good:
        config = {"targets": {"flink_prometheus": [
            {"name": "evil-reporter", "urls": [f"{evil}/jm", f"{evil}/tm"], "poll_interval": "1s"},
            {"name": "good-reporter", "urls": [f"{good}/jm", f"{good}/tm"], "poll_interval": "1s"},
        ]}}

        def ready(healthz: dict[str, Any], metrics: str) -> bool:
            return _target(healthz, "evil-reporter")["polls"] >= 1 and _target(healthz, "good-reporter")["polls"] >= 1

        measured, healthz, metrics = _run_daemon(config, tmp_path, ready)
    record("flink reporter: subtask_index 99999999999991 (run)", measured, deadline_s=10.0)
    assert not measured.killed and measured.returncode == 0, measured.stderr[-2000:]
    evil_target, good_target = _target(healthz, "evil-reporter"), _target(healthz, "good-reporter")
    assert "label subtask_index" in evil_target["last_error"]
    assert "'99999999999991' is not a Flink subtask index (0 to 32767)" in evil_target["last_error"]
    assert "flink_taskmanager_job_task_numRecordsIn{job_id='6da2cf668e5773fae9aa106232b7676f', " in evil_target["last_error"]
    assert "task_id='0123456789abcdef0123456789abcdef'}" in evil_target["last_error"]
    assert evil_target["up"] and good_target["up"] and good_target["errors_total"] == 0
    # both targets' recorded jobs are read (the evil target's renamed *_b), the evil task left out
    assert not [lv for lv, _ in metric_values(metrics, "tidegauge_vertex_info") if lv.get("vertex") == "evil"]
    idle = {lv["job_id"] for lv, _ in metric_values(metrics, "tidegauge_source_idle_seconds")}
    assert idle >= {"tg_idle", "tg_late", "tg_idle_b", "tg_late_b"}


def test_an_exporter_offset_beyond_64_bits_is_an_error_and_the_rest_is_kept(tmp_path: Path) -> None:
    hostile = (
        b'kafka_consumergroup_current_offset{consumergroup="orders",partition="0",topic="t"} 18446744073709551616\n'
        b'kafka_consumergroup_lag{consumergroup="orders",partition="0",topic="t"} 36893488147419103232\n'
        b'kafka_consumergroup_current_offset{consumergroup="orders",partition="1",topic="t"} 100\n'
        b'kafka_consumergroup_lag{consumergroup="orders",partition="1",topic="t"} 7\n'
    )
    with serve(_pages({"/metrics": hostile})) as evil, serve(_pages({"/metrics": KMINION.read_bytes()})) as good:
        config = {"targets": {"kafka_exporters": [
            {"name": "evil-exporter", "url": f"{evil}/metrics", "poll_interval": "1s"},
            {"name": "kminion", "url": f"{good}/metrics", "poll_interval": "1s"},
        ]}}

        def ready(healthz: dict[str, Any], metrics: str) -> bool:
            return _target(healthz, "evil-exporter")["polls"] >= 1 and _target(healthz, "kminion")["polls"] >= 1

        measured, healthz, metrics = _run_daemon(config, tmp_path, ready)
    record("kafka_exporter: offset beyond 64 bits (run)", measured, deadline_s=10.0)
    assert not measured.killed and measured.returncode == 0, measured.stderr[-2000:]
    evil_target = _target(healthz, "evil-exporter")
    assert evil_target["up"] and evil_target["errors_by_kind"].get("field", 0) >= 1
    messages = " ".join(e["message"] for e in evil_target["recent_errors"])
    assert 'kafka_consumergroup_current_offset{consumergroup="orders",partition="0",topic="t"}' in messages
    assert "value 1.8446744073709552e+19 is beyond a 64-bit offset" in messages
    lag = {
        (lv["job_id"], lv.get("partition")): v for lv, v in metric_values(metrics, "tidegauge_consumer_lag_offsets")
    }
    assert lag[("evil-exporter/orders", "1")] == 7.0  # the partition in bounds is kept
    assert ("evil-exporter/orders", "0") not in lag  # the one beyond int64 is unknown
    assert lag[("kminion/bigquery-sink", "10")] == 147481.0  # the good target keeps its data


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests of the probes and the daemon never go through a proxy of the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
