"""The demo's simulated Flink job: its REST responses have the shapes of the recorded Flink 2.3.0 ones
(tests/fixtures/flink/real-2.3.0/standalone), and tidegauge's real Flink collector, polling the demo's
JobManager on loopback, reads the samples Flink would give: each source subtask's bounded-out-of-orderness
watermark, the job's watermark pinned by the subtask without records (the ``idle_subtask`` fault), and the
``idle_source`` rule names the job, the vertex and the subtask.

Times come from a fixed fake clock (the demo's servers take a clock); nothing depends on today's date.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from collectors.flink import FlinkRestCollector
from collectors.flink.responses import parse_metric_ids, parse_metric_values
from monitor.daemon.web import HttpService
from monitor.demo import flinkfmt
from monitor.demo.flinkrest import create_flink_app
from monitor.demo.flinksim import FlinkSimJob
from monitor.model import Sample
from rules.idle import IdleParams, evaluate_idle
from tests.flink_replay import load
from tests.rule_samples import history

START = datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
FAULT_MS = START_MS + 70_000  # subtask 1 gets no records from here on
LONG_MIN = -(2**63)


def _keys(doc: Any) -> set[str]:
    assert isinstance(doc, dict)
    return set(doc)


@pytest.fixture(scope="module")
def job() -> FlinkSimJob:
    sim = FlinkSimJob("device-telemetry-windows", fault_at_ms=FAULT_MS)
    sim.prepare(START_MS, 10 * 60_000, np.random.default_rng(3))
    return sim


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def server(job: FlinkSimJob) -> Iterator[tuple[str, _Clock]]:
    clock = _Clock()
    service = HttpService(create_flink_app([job], clock), "127.0.0.1", 0)
    service.start()
    try:
        yield f"http://127.0.0.1:{service.port}", clock
    finally:
        service.stop(5.0)


# ------------------------------------------------------------------------------------ shapes vs recordings


def test_overview_and_job_detail_have_the_recorded_keys(job: FlinkSimJob) -> None:
    now = START_MS + 30_000
    recorded = load("jobs_overview.json")["jobs"][0]
    ours = flinkfmt.jobs_overview([job.view(now)], now)["jobs"][0]
    assert _keys(ours) == _keys(recorded)
    assert _keys(ours["tasks"]) == _keys(recorded["tasks"])

    rec = load("job.json")
    mine = flinkfmt.job_detail(job.view(now), now)
    assert list(mine) == list(rec)  # same keys, same order
    assert _keys(mine["timestamps"]) == _keys(rec["timestamps"])
    assert _keys(mine["status-counts"]) == _keys(rec["status-counts"])
    for v in mine["vertices"]:
        assert _keys(v) == _keys(rec["vertices"][0])
        assert _keys(v["tasks"]) == _keys(rec["vertices"][0]["tasks"])
        assert _keys(v["metrics"]) == _keys(rec["vertices"][0]["metrics"])
    assert _keys(mine["plan"]) == _keys(rec["plan"])
    with_inputs = [n for n in rec["plan"]["nodes"] if "inputs" in n]
    without = [n for n in rec["plan"]["nodes"] if "inputs" not in n]
    for node in mine["plan"]["nodes"]:
        assert _keys(node) == _keys(with_inputs[0] if "inputs" in node else without[0])
        for entry in node.get("inputs", []):
            assert _keys(entry) == _keys(with_inputs[0]["inputs"][0])
    # sources first in "vertices", as Flink lists them (the collector takes the last one's watermark)
    assert mine["vertices"][0]["name"] == "Source: telemetry"


def test_checkpoints_and_exceptions_have_the_recorded_keys(job: FlinkSimJob) -> None:
    rec = load("checkpoints.json")
    mine = flinkfmt.checkpoints(job.completed_checkpoints(START_MS + 200_000), failed=1)
    assert _keys(mine) == _keys(rec)
    assert _keys(mine["counts"]) == _keys(rec["counts"])
    assert _keys(mine["summary"]) == _keys(rec["summary"])
    for name, stats in mine["summary"].items():
        assert _keys(stats) == _keys(rec["summary"][name])
    assert _keys(mine["latest"]) == _keys(rec["latest"])
    assert _keys(mine["latest"]["completed"]) == _keys(rec["latest"]["completed"])
    assert all(_keys(h) == _keys(rec["history"][0]) for h in mine["history"])
    assert len(mine["history"]) == 10 and mine["history"][0]["id"] > mine["history"][1]["id"]  # newest first
    assert [h["discarded"] for h in mine["history"][:2]] == [False, True]  # as recorded: only the newest is kept
    assert flinkfmt.exceptions() == load("exceptions.json")


def _split(metric_id: str) -> tuple[str | None, str]:
    head, _, rest = metric_id.partition(".")
    assert head.isdigit(), metric_id
    operator, dot, name = rest.rpartition(".")
    return (operator if dot else None), name


def _names(ids: list[str]) -> dict[str | None, set[str]]:
    out: dict[str | None, set[str]] = {}
    for i in ids:
        op, name = _split(i)
        out.setdefault(op, set()).add(name)
    return out


def test_metric_ids_use_the_recorded_names_and_scopes(job: FlinkSimJob) -> None:
    # the recorded job: `Source: gen-source -> ...` (v0) and `py-window-10s -> Sink: py-print` (v1)
    rec_source = _names(parse_metric_ids(load("v0_metrics_list.json"), "v0"))
    rec_window = _names(parse_metric_ids(load("v1_metrics_list.json"), "v1"))
    # the operator names as the metric ids spell them
    assert flinkfmt.operator_metric_name("Source: gen-source") in rec_source
    assert flinkfmt.operator_metric_name("Sink: py-print") in rec_window
    assert flinkfmt.operator_metric_name("Timestamps/Watermarks") in rec_source
    source = _names(job.metric_ids(job.source_vertex))
    window = _names(job.metric_ids(job.window_vertex))
    assert set(source) == {None, "Source__telemetry"}
    assert set(window) == {None, "telemetry-window-10s", "Sink__device-alerts"}
    assert source[None] <= rec_source[None]
    assert source["Source__telemetry"] <= rec_source["Source__gen-source"]
    assert window[None] <= rec_window[None]
    assert window["telemetry-window-10s"] <= rec_window["py-window-10s"]
    assert window["Sink__device-alerts"] <= rec_window["Sink__py-print"]
    # what the brief's story needs is there: per-subtask idle time, input watermark, late drops
    ids = set(job.metric_ids(job.source_vertex)) | set(job.metric_ids(job.window_vertex))
    assert {"1.Source__telemetry.sourceIdleTime", "0.currentInputWatermark",
            "0.telemetry-window-10s.numLateRecordsDropped"} <= ids
    # a source task has no task-scope input watermark (none recorded either)
    assert "currentInputWatermark" not in source[None] and "currentInputWatermark" not in rec_source[None]


def test_no_watermark_is_long_min_as_recorded(job: FlinkSimJob) -> None:
    recorded = parse_metric_values(load("v0_metrics_selected.json"), "v0")
    assert recorded["1._stream_key_by_map_operator.currentOutputWatermark"] == str(LONG_MIN)
    before_first = job.metric_values(job.window_vertex, job.running_ms + 100)
    assert before_first["0.currentInputWatermark"] == str(LONG_MIN)
    assert all(isinstance(v, str) for v in before_first.values())


def test_an_unknown_id_empties_the_answer_as_flink_does(job: FlinkSimJob) -> None:
    values = job.metric_values(job.source_vertex, START_MS + 30_000)
    assert flinkfmt.metric_values(values, ["0.numRecordsOut"]) == [{"id": "0.numRecordsOut",
                                                                   "value": values["0.numRecordsOut"]}]
    assert flinkfmt.metric_values(values, ["0.numRecordsOut", "0.noSuchMetric"]) == []


def test_unknown_paths_get_flinks_404(server: tuple[str, _Clock], job: FlinkSimJob) -> None:
    base, _ = server
    for path in ("/jobs/ffffffffffffffffffffffffffffffff", f"/jobs/{job.jid}/vertices/abc/metrics", "/nope"):
        response = httpx.get(base + path, timeout=5)
        assert response.status_code == 404
        assert response.json() == {"errors": [f"Not found: {path}"]}


# ------------------------------------------------------------------------- the real collector over the demo


def _expected_watermark(job: FlinkSimJob, subtask: int, at_ms: int) -> int:
    """BoundedOutOfOrdernessWatermarks emitted every 200 ms from RUNNING: the largest event time read by
    the last tick at or before ``at_ms`` (a record arriving at a tick's time is read first), minus the
    5 s bound, minus 1; Long.MIN_VALUE before the first record."""
    arrival, ts = job.source_records(subtask)
    tick = job.running_ms + (at_ms - job.running_ms) // 200 * 200
    read = ts[arrival <= tick]
    return int(read.max()) - 5_000 - 1 if len(read) else LONG_MIN


def _poll(base: str, clock: _Clock, collector: FlinkRestCollector, at: datetime) -> list[Sample]:
    clock.now = at
    result = collector.poll(at)
    assert result.errors == ()
    return list(result.samples)


def test_the_collector_reads_what_flink_would_report(server: tuple[str, _Clock], job: FlinkSimJob) -> None:
    base, clock = server
    with httpx.Client(timeout=5) as client:
        collector = FlinkRestCollector(base, client, cluster="demo-flink")
        rounds = [_poll(base, clock, collector, START + timedelta(seconds=s)) for s in range(40, 131, 2)]
    by_time = {r[0].observed_at: r for r in rounds}
    for at, samples in by_time.items():
        at_ms = int(at.timestamp() * 1000)
        sources = {s.scope.subtask: s for s in samples if s.scope.source == "Source: telemetry"}
        assert set(sources) == {0, 1}
        for sub, sample in sources.items():
            assert sample.scope.operator == job.source_vertex
            assert int(sample.watermark.timestamp() * 1000) == _expected_watermark(job, sub, at_ms)  # type: ignore[union-attr]
        job_sample = next(s for s in samples if s.scope.source is None and s.scope.subtask is None)
        assert job_sample.job.job_id == "device-telemetry-windows" and job_sample.job.app_id == "demo-flink"
        # the valve's minimum over the two channels (no withIdleness: neither is ever left out)
        assert job_sample.watermark == min(s.watermark for s in sources.values())  # type: ignore[type-var]
        assert job_sample.restart_count == 0 and job_sample.checkpoints_failed == 1
    late = [r for r in rounds if r[0].observed_at >= START + timedelta(seconds=90)]
    idle = [next(s for s in r if s.scope.source and s.scope.subtask == 1) for r in late]
    busy = [next(s for s in r if s.scope.source and s.scope.subtask == 0) for r in late]
    assert all(s.num_input_rows == 0 for s in idle[1:]) and sum(s.num_input_rows or 0 for s in busy[1:]) > 100
    assert all((s.idle_ms or 0) >= (s.observed_at.timestamp() * 1000 - FAULT_MS) for s in idle)
    pinned = {next(s for s in r if s.scope.source is None and s.scope.subtask is None).watermark for r in late}
    assert pinned == {idle[0].watermark}  # the job's event time stays at the idle subtask's watermark
    state = [next(s for s in r if s.scope.source is None and s.scope.subtask is None).state_memory_bytes for r in late]
    assert state[-1] > state[0]  # windows no longer fire: their state piles up

    flat = [s for r in rounds for s in r]
    findings = evaluate_idle(IdleParams.model_validate({"for": "16s"}), history(flat), rounds[-1][0].observed_at)
    assert len(findings) == 1
    finding = findings[0]
    assert finding.severity.label() == "warning" and finding.scope.subtask == 1
    assert "job `device-telemetry-windows`" in finding.message
    assert "vertex `Source: telemetry` subtask 1" in finding.message
    assert finding.details["vertex"] == "Source: telemetry" and finding.details["holding_watermark"] is True
