"""The parser families under fuzz (issue 11): for each, its seeds (recorded real inputs from
``tests/fixtures``), the code a user's input reaches, and the exceptions that code may raise by contract.

A *target* takes one input (``bytes``) and feeds it through the real entry point the way a user's input
arrives (a file on disk for the file readers, a request body for the ingest parser, a scrape body served
through an ``httpx.MockTransport`` for the Prometheus collector). It returns normally when the input was
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
    )
}
