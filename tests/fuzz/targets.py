"""The parser families under fuzz (issue 11): for each, its seeds (recorded real inputs from
``tests/fixtures``), the code a user's input reaches, and the exceptions that code may raise by contract.

A *target* takes one input (``bytes``) and feeds it through the real entry point the way a user's input
arrives (a file on disk for the file readers, a request body for the ingest parser, the scrape body the
Spark PrometheusServlet collector reads, and for the pull collectors of issue 19 (``flink_rest``,
``flink_reporter``, ``kafka_exporter``, ``kminion``, ``burrow``) a response served through an
``httpx.MockTransport`` to the collector's real ``poll``, every other endpoint answering its recording). It returns normally when the input was
read or refused as bad input by contract (:class:`monitor.errors.InputError` and its subclasses, or an
error entry from a collector that promises never to raise), and raises anything else: that is a crash.
What a target accepted must also be storable (:func:`check_storable`): a value the model or the database
cannot hold is a crash too, found here rather than in a daemon's poll.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import zstandard

from monitor.errors import InputError
from monitor.model import PollResult, Sample, check_text
from monitor.store.keys import canonical_json, sample_key
from tests.live_eventlog import RECORDED_DIR, RECORDED_FILE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPARK = FIXTURES / "spark" / "real-4.3.0"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
STREAMING = b"StreamingQueryListener$Query"

__all__ = ["FAMILIES", "Family", "check_storable", "scratch_dir"]


@cache
def scratch_dir() -> Path:
    """A private directory for the file-based targets (in ``/dev/shm`` where there is one), removed at exit."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="tg-fuzz-", dir=base))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _write(name: str, data: bytes) -> Path:
    path = scratch_dir() / name
    path.write_bytes(data)
    return path


def check_storable(result: PollResult | list[Sample]) -> None:
    """Raise if what a parser accepted could not be stored: samples' texts must encode as UTF-8 and their
    keys compute; raw documents must be canonical JSON (no NaN, no lone surrogates)."""
    samples = result.samples if isinstance(result, PollResult) else tuple(result)
    for sample in samples:
        sample_key(sample)
        for text in (sample.job.job_id, sample.job.run_id, sample.job.name, sample.job.app_id, sample.scope.source):
            if text is not None:
                check_text(text, "sample text")
        canonical_json(sample.extra, "extra")
    if isinstance(result, PollResult):
        for error in result.errors:
            check_text(error.message, "error message")
        for _, _, _, document in result.raw:
            canonical_json(document, "raw document")


# ----------------------------------------------------------------------------------------------- seeds


def _recorded_log() -> bytes:
    with (SPARK / RECORDED_DIR / RECORDED_FILE).open("rb") as f:
        return bytes(zstandard.ZstdDecompressor().stream_reader(f).read())


def _streaming_lines() -> list[bytes]:
    lines = _recorded_log().splitlines() + (SPARK / "eventlog_trimmed.jsonl").read_bytes().splitlines()
    lines += (FIXTURES / "spark" / "public" / "eventlog_local-1596020211915_streaming_excerpt.jsonl").read_bytes().splitlines()
    return [line for line in lines if STREAMING in line[:200]]


@cache
def eventlog_seeds() -> list[bytes]:
    """Whole recorded logs, and short logs of a few recorded lines (so mutations hit the parsed ones)."""
    streaming = _streaming_lines()
    trimmed = (SPARK / "eventlog_trimmed.jsonl").read_bytes()
    seeds = [trimmed, (FIXTURES / "spark" / "public" / "eventlog_local-1596020211915_streaming_excerpt.jsonl").read_bytes()]
    seeds += [b"\n".join(streaming[i : i + 3]) + b"\n" for i in range(0, len(streaming), 3)]
    return seeds


@cache
def progress_seeds() -> list[bytes]:
    """The recorded ``query.lastProgress`` documents (pretty-printed), and JSON lines of them."""
    files = sorted(SPARK.glob("progress_*.json")) + sorted((FIXTURES / "spark" / "public").glob("*.json"))
    docs = [p.read_bytes() for p in files]
    compact = [json.dumps(json.loads(d)).encode() for d in docs]
    return [*docs, b"\n".join(compact) + b"\n", b"[" + b",".join(compact[:3]) + b"]"]


@cache
def listener_seeds() -> list[bytes]:
    """Request bodies as ``TidegaugeListener`` posts them: one recorded streaming event, or an array."""
    lines = _streaming_lines()
    return [*lines[:12], b"[" + b",".join(lines[:4]) + b"]"]


@cache
def prometheus_seeds() -> list[bytes]:
    files = sorted(SPARK.glob("prometheus_*.txt")) + sorted((FIXTURES / "kafka" / "prometheus").glob("*.prom"))
    return [p.read_bytes() for p in files]


@cache
def config_seeds() -> list[bytes]:
    """The example config, the same without its comment lines, and each of its top-level sections alone
    (short seeds: more mutations per second reach the validation of each section)."""
    example = (Path(__file__).resolve().parents[2] / "examples" / "tidegauge.yaml").read_bytes()
    lines = [line for line in example.splitlines(keepends=True) if not line.lstrip().startswith(b"#")]
    sections: list[bytes] = []
    for line in lines:
        if line[:1] in (b" ", b"\n") and sections:
            sections[-1] += line
        else:
            sections.append(line)
    return [example, b"".join(lines), *(s for s in sections if s.strip())]


@cache
def whatif_seeds() -> list[bytes]:
    """Event rows derived from the recorded log: each recorded batch's event-time min/max (and its
    trigger time as arrival), as CSV and as JSON lines."""
    rows: list[tuple[str, int, str]] = []
    for line in _streaming_lines():
        event = json.loads(line)
        progress = event.get("progress") or {}
        times = progress.get("eventTime") or {}
        for key in ("min", "max"):
            if key in times:
                rows.append((times[key], int(progress.get("batchId", 0)), progress["timestamp"]))
    csv = "event_time,batch,arrival_time,source\n" + "".join(f"{t},{b},{a},s{b % 2}\n" for t, b, a in rows)
    jsonl = "".join(json.dumps({"event_time": t, "batch": b, "arrival_time": a, "key": f"k{b}"}) + "\n" for t, b, a in rows)
    return [b"C" + csv.encode(), b"J" + jsonl.encode()]


# --------------------------------------------------------------------------------------------- targets


def eventlog_target(data: bytes) -> None:
    """An event-log file of these bytes (a leading ``Z`` byte: zstd-compressed first, then written as
    ``.zstd``), read by :class:`~collectors.spark.eventlog.EventLogCollector` (never raises)."""
    from collectors.spark.eventlog import EventLogCollector

    if data[:1] == b"Z":
        path = _write("app-1.zstd", zstandard.ZstdCompressor().compress(data[1:]))
    elif data[:1] == b"R":  # raw bytes under a codec name: corrupt compressed data
        path = _write("app-1.zstd", data[1:])
    else:
        path = _write("app-1.inprogress" if data[:1] == b"I" else "app-1", data)
    result = EventLogCollector([path]).poll(NOW)
    check_storable(result)


def progress_target(data: bytes) -> None:
    """A progress JSON file, read by ``read_progress_file`` (``scan``); InputError by contract."""
    from collectors.spark.progress_files import read_progress_file

    path = _write("progress.json", data)
    try:
        read = read_progress_file(path)
    except InputError:
        return
    check_storable(read.samples)
    check_storable(PollResult(raw=tuple(read.raw)))


def listener_target(data: bytes) -> None:
    """A request body of ``POST /api/v1/spark/events``: the ingest endpoint's decode and parse."""
    from monitor.daemon import ingest

    try:
        document = ingest._decode_json(data)
        result = ingest.parse_event_document(document, received_at=NOW, app_id="app-1")
    except InputError:
        return
    check_storable(result)


@cache
def _prometheus_collector() -> Any:
    from collectors.http import make_client
    from collectors.spark.prometheus import SparkPrometheusCollector

    client = make_client(transport=httpx.MockTransport(lambda request: httpx.Response(500)))
    return SparkPrometheusCollector("http://127.0.0.1:4040/metrics/prometheus", client)


def prometheus_target(data: bytes) -> None:
    """A scrape body as :class:`~collectors.spark.prometheus.SparkPrometheusCollector` reads it after the
    HTTP request (``read_body``, decoded as httpx decodes a text body without charset; never raises)."""
    result = _prometheus_collector().read_body(data.decode("utf-8", errors="replace"), NOW)
    check_storable(result)


def config_target(data: bytes) -> None:
    """A config file, read by ``load_config`` (what ``config check`` and ``run`` read); ConfigError by contract."""
    from monitor.config import load_config

    path = _write("tidegauge.yaml", data)
    try:
        load_config(path)
    except InputError:
        return


def whatif_target(data: bytes) -> None:
    """An EVENTS file (a leading ``C``: CSV, ``J``: JSON lines) read by the what-if loader ``load_events``."""
    from monitor.watermark.io import load_events

    kind, body = data[:1], data[1:]
    path = _write("events.csv" if kind == b"C" else "events.jsonl", body)
    try:
        load_events(path)
    except InputError:
        return


# ------------------------------------------------------------------------------------- pull collectors
#
# The pull families feed a mutated body through the collector's real poll: the body is served by an
# ``httpx.MockTransport`` as the response of one endpoint (chosen by the input's mode byte), every other
# endpoint answers its recorded real response. A poll never raises (collectors/base.py): any exception is
# a crash, and what it returned must be storable.

FLINK_REST = FIXTURES / "flink" / "real-2.3.0" / "standalone"
FLINK_REPORTER = FIXTURES / "flink" / "real-2.3.0" / "prometheus_reporter"
KAFKA_PROM = FIXTURES / "kafka" / "prometheus"
BURROW = FIXTURES / "kafka" / "burrow"
_SERVED: dict[str, bytes] = {}  # route key -> body of the input under test


def _client(routes: Callable[[httpx.Request], bytes | None]) -> httpx.Client:
    from collectors.http import make_client

    def handler(request: httpx.Request) -> httpx.Response:
        body = routes(request)
        if body is None:
            return httpx.Response(404, json={"errors": ["Not found: " + request.url.path]})
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    return make_client(transport=httpx.MockTransport(handler))


def _recorded(folder: Path, name: str) -> Any:
    """A recorded response; a vertex's metric list cut to the ids the collector reads and a few others
    (the full lists hold ~300 ids: parsing them every input would cost most of the time)."""
    doc = json.loads((folder / name).read_text())
    doc = doc["response"] if isinstance(doc, dict) and "_path" in doc and "response" in doc else doc
    if name.endswith("_metrics_list.json"):
        from collectors.flink.responses import OPERATOR_METRICS, TASK_METRICS

        wanted = TASK_METRICS | OPERATOR_METRICS
        read = [e for e in doc if e["id"].rsplit(".", 1)[-1] in wanted]
        doc = read + [e for e in doc if e not in read][:8]
    return doc


#: Flink REST mode bytes: which endpoint the input's body answers (the others answer the recording).
FLINK_REST_ENDPOINTS = {
    b"O": "overview",
    b"J": "job",
    b"R": "restarts",
    b"C": "checkpoints",
    b"E": "exceptions",
    b"L": "metric list",
    b"V": "metric values",
}


@cache
def _flink_recorded() -> dict[str, bytes]:
    """``mode byte -> recorded body`` of the standalone job (vertex 0's metric list and values)."""
    files = {b"O": "jobs_overview.json", b"J": "job.json", b"R": "job_metrics_values.json",
             b"C": "checkpoints.json", b"E": "exceptions.json", b"L": "v0_metrics_list.json",
             b"V": "v0_metrics_selected.json"}
    return {mode: json.dumps(_recorded(FLINK_REST, name)).encode() for mode, name in files.items()}


@cache
def _flink_routes() -> dict[str, bytes]:
    """``route key -> recorded body`` of every endpoint a poll of the standalone job reads."""
    job = _recorded(FLINK_REST, "job.json")
    jid = job["jid"]
    routes = {
        "/jobs/overview": "jobs_overview.json",
        f"/jobs/{jid}": "job.json",
        f"/jobs/{jid}/metrics?get": "job_metrics_values.json",
        f"/jobs/{jid}/checkpoints": "checkpoints.json",
        f"/jobs/{jid}/exceptions": "exceptions.json",
    }
    for i, vertex in enumerate(job["vertices"]):
        routes[f"/jobs/{jid}/vertices/{vertex['id']}/metrics"] = f"v{i}_metrics_list.json"
        routes[f"/jobs/{jid}/vertices/{vertex['id']}/metrics?get"] = f"v{i}_metrics_selected.json"
    return {key: json.dumps(_recorded(FLINK_REST, name)).encode() for key, name in routes.items()}


def _flink_route_key(request: httpx.Request) -> str:
    path = request.url.path
    return f"{path}?get" if "get" in request.url.params else path


def _flink_mode_key(request: httpx.Request) -> bytes | None:
    """The mode byte whose body answers this request (vertex endpoints: any vertex)."""
    path = request.url.path
    if path == "/jobs/overview":
        return b"O"
    if "/vertices/" in path:
        return b"V" if "get" in request.url.params else b"L"
    if path.endswith("/checkpoints"):
        return b"C"
    if path.endswith("/exceptions"):
        return b"E"
    if path.endswith("/metrics"):
        return b"R"
    return b"J"


@cache
def _flink_rest_client() -> httpx.Client:
    def routes(request: httpx.Request) -> bytes | None:
        mode = _flink_mode_key(request)
        if mode is not None and mode in _SERVED:
            return _SERVED[mode]
        return _flink_routes().get(_flink_route_key(request))

    return _client(routes)


def flink_rest_seeds() -> list[bytes]:
    """Each recorded response of the standalone job under its endpoint's mode byte."""
    return [mode + body for mode, body in _flink_recorded().items()]


def flink_rest_target(data: bytes) -> None:
    """A response body of one JobManager endpoint (mode byte: :data:`FLINK_REST_ENDPOINTS`; for a vertex
    endpoint, every vertex's), the others recorded, polled by :class:`~collectors.flink.FlinkRestCollector`
    (metric values: twice, so the second poll computes the counters' deltas)."""
    from collectors.flink import FlinkRestCollector

    mode, body = data[:1], data[1:]
    _SERVED.clear()
    if mode in FLINK_REST_ENDPOINTS:
        _SERVED[mode] = body
    if mode == b"E":  # exceptions are read once the job has restarted
        _SERVED[b"R"] = b'[{"id":"numRestarts","value":"1"}]'
    collector = FlinkRestCollector("http://127.0.0.1:8081", _flink_rest_client(), concurrency=1)
    for _ in range(2 if mode == b"V" else 1):
        check_storable(collector.poll(NOW))


def _reporter_lines(name: str) -> list[bytes]:
    return [
        line for line in (FLINK_REPORTER / name).read_bytes().splitlines(keepends=True) if not line.startswith(b"#")
    ]


@cache
def _reporter_jobmanager() -> bytes:
    """The job manager's scrape, the job-scope lines the collector reads."""
    read = ("numRestarts", "numberOfFailedCheckpoints", "lastCheckpointFullSize", "runningTime")
    names = {f"flink_jobmanager_job_{m}".encode() for m in read}
    return b"".join(line for line in _reporter_lines("jobmanager_metrics.txt") if line.split(b"{", 1)[0] in names)


@cache
def _reporter_taskmanager() -> list[bytes]:
    """The task manager's scrape, the lines the collector reads, one piece per (task, subtask)."""
    from collectors.flink.responses import OPERATOR_METRICS, TASK_METRICS

    names = {f"flink_taskmanager_job_task_{m}".encode() for m in TASK_METRICS}
    names |= {f"flink_taskmanager_job_task_operator_{m}".encode() for m in OPERATOR_METRICS}
    pieces: dict[tuple[bytes, bytes], list[bytes]] = {}
    for line in _reporter_lines("taskmanager_metrics.txt"):
        if line.split(b"{", 1)[0] in names:
            task = line.split(b'task_id="', 1)[1].split(b'"', 1)[0] if b'task_id="' in line else b""
            index = line.split(b'subtask_index="', 1)[1].split(b'"', 1)[0] if b'subtask_index="' in line else b""
            pieces.setdefault((task, index), []).append(line)
    return [b"".join(lines) for _, lines in sorted(pieces.items())]


@cache
def _flink_reporter_client() -> httpx.Client:
    def routes(request: httpx.Request) -> bytes | None:
        mode = b"J" if request.url.path == "/jm/metrics" else b"T"
        if mode in _SERVED:
            return _SERVED[mode]
        return _reporter_jobmanager() if mode == b"J" else _reporter_taskmanager()[0]

    return _client(routes)


def flink_reporter_seeds() -> list[bytes]:
    """The job manager's job-scope lines (mode ``J``) and the task manager's per subtask (mode ``T``)."""
    return [b"J" + _reporter_jobmanager(), *(b"T" + piece for piece in _reporter_taskmanager())]


def flink_reporter_target(data: bytes) -> None:
    """A scrape of the job manager (mode ``J``) or the task manager (``T``), the other recorded (one
    subtask's lines), polled by :class:`~collectors.flink.prometheus.FlinkPrometheusCollector`."""
    from collectors.flink.prometheus import FlinkPrometheusCollector

    _SERVED.clear()
    _SERVED[data[:1] if data[:1] in (b"J", b"T") else b"T"] = data[1:]
    urls = ["http://127.0.0.1:9249/jm/metrics", "http://127.0.0.1:9250/tm/metrics"]
    check_storable(FlinkPrometheusCollector(urls, _flink_reporter_client()).poll(NOW))


@cache
def _exporter_client() -> httpx.Client:
    return _client(lambda request: _SERVED.get(b"body"))


def _scrape(data: bytes) -> None:
    """A scrape body polled by :class:`~collectors.kafka.exporter_scrape.ExporterScrapeCollector`."""
    from collectors.kafka.exporter_scrape import ExporterScrapeCollector

    _SERVED.clear()
    _SERVED[b"body"] = data
    check_storable(ExporterScrapeCollector("http://127.0.0.1:9308/metrics", _exporter_client(), "kafka").poll(NOW))


def _with_blocks(texts: list[bytes]) -> list[bytes]:
    """Each scrape, and each of its metric families alone (its ``# HELP``/``# TYPE`` lines and samples):
    short seeds, so more mutations per second reach the reading of each family."""
    seeds = list(texts)
    for text in texts:
        blocks = [b for b in text.split(b"\n\n") if b.strip()]
        if len(blocks) > 1:
            seeds += [block + b"\n" for block in blocks]
    return seeds


def kafka_exporter_seeds() -> list[bytes]:
    """kafka_exporter's README scrapes (and kafka-lag-exporter's, read by the same collector)."""
    return _with_blocks([(KAFKA_PROM / name).read_bytes() for name in (
        "kafka_exporter_readme_consumergroup.prom", "kafka_exporter_readme_brokers_topics.prom",
        "kafka_lag_exporter_readme_max_lag.prom")])


def kminion_seeds() -> list[bytes]:
    """KMinion's documented scrape."""
    return _with_blocks([(KAFKA_PROM / "kminion_docs_metrics_topic_and_group.prom").read_bytes()])


def burrow_seeds() -> list[bytes]:
    """Burrow's ``/metrics`` (mode ``P``) and its HTTP API's consumer status/lag responses (mode ``H``)."""
    seeds = [b"P" + text for text in _with_blocks([(KAFKA_PROM / "burrow_prometheus_test_expected.prom").read_bytes()])]
    seeds += [b"H" + p.read_bytes() for p in sorted(BURROW.glob("telegraf_*consumer_group*.json"))]
    return seeds


def burrow_target(data: bytes) -> None:
    """Mode ``P``: Burrow's ``/metrics`` scrape (as :func:`kafka_exporter_target`); mode ``H``: a response
    body of Burrow's HTTP API, decoded (``load_json``) and read by ``parse_burrow_response``; InputError by
    contract."""
    from collectors.kafka.exporters import parse_burrow_response
    from collectors.spark.progress import load_json

    if data[:1] != b"H":
        _scrape(data[1:])
        return
    try:
        parse_burrow_response(load_json(data[1:], "burrow"), "burrow")
    except InputError:
        return


@dataclass(frozen=True)
class Family:
    """One parser family: name, seeds, target and the file extension of its corpus entries."""

    name: str
    seeds: Callable[[], list[bytes]]
    target: Callable[[bytes], None]
    json_like: bool


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("eventlog", eventlog_seeds, eventlog_target, json_like=True),
        Family("progress", progress_seeds, progress_target, json_like=True),
        Family("listener", listener_seeds, listener_target, json_like=True),
        Family("prometheus", prometheus_seeds, prometheus_target, json_like=False),
        Family("config", config_seeds, config_target, json_like=False),
        Family("whatif", whatif_seeds, whatif_target, json_like=False),
        Family("flink_rest", flink_rest_seeds, flink_rest_target, json_like=True),
        Family("flink_reporter", flink_reporter_seeds, flink_reporter_target, json_like=False),
        Family("kafka_exporter", kafka_exporter_seeds, _scrape, json_like=False),
        Family("kminion", kminion_seeds, _scrape, json_like=False),
        Family("burrow", burrow_seeds, burrow_target, json_like=True),
    )
}
