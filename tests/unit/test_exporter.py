"""Prometheus exporter: what /metrics shows for known samples, parsed back with prometheus-client's parser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.metrics.exporter import AlertCount, CollectorStat, TidegaugeCollector
from monitor.metrics.latest import LatestSamples
from monitor.model import Engine, JobRef, Sample, Scope

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB = JobRef(Engine.SPARK, "q-1", "run-1", "clicks")


def _scrape(latest: LatestSamples, **kw: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reg = CollectorRegistry()
    reg.register(TidegaugeCollector(latest, lambda: NOW, **kw))  # type: ignore[arg-type]
    text = generate_latest(reg).decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _with_kind(labels: tuple[tuple[str, str], ...], kind: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((*labels, ("kind", kind))))


def _labels(**extra: str) -> tuple[tuple[str, str], ...]:
    base = {
        "engine": "spark",
        "job_id": "q-1",
        "job_name": "clicks",
        "source": "",
        "partition": "",
        "subtask": "",
        "operator": "",
    }
    base.update(extra)
    return tuple(sorted(base.items()))


def test_watermark_lag_counters_and_unknowns() -> None:
    latest = LatestSamples()
    wm = NOW - timedelta(minutes=15)
    b1 = Sample(
        JOB,
        NOW - timedelta(minutes=1),
        batch_id=1,
        watermark=wm,
        num_input_rows=10,
        dropped_by_watermark=2,
        state_rows_total=7,
    )
    # the same batch seen again through the other Spark path (listener vs event log): counted once
    b1_again = Sample(
        JOB,
        NOW - timedelta(minutes=1),
        batch_id=1,
        watermark=wm,
        num_input_rows=10,
        dropped_by_watermark=2,
        collector="other",
    )
    b2 = Sample(JOB, NOW, batch_id=2, watermark=wm, num_input_rows=5, dropped_by_watermark=0)  # state unknown
    latest.update([b1, b1_again, b2])
    m = _scrape(latest)
    L = _labels()
    assert m[("tidegauge_watermark_timestamp_seconds", L)] == wm.timestamp()
    assert m[("tidegauge_watermark_lag_seconds", L)] == 15 * 60
    assert m[("tidegauge_input_rows_total", L)] == 15  # 10 + 5, batch 1 once
    assert m[("tidegauge_dropped_by_watermark_rows_total", L)] == 2
    # the newest sample has no state metric: the gauge is absent, not 0
    assert ("tidegauge_state_rows", L) not in m
    assert m[("tidegauge_last_sample_timestamp_seconds", L)] == NOW.timestamp()


def test_scope_labels_alerts_and_targets() -> None:
    latest = LatestSamples()
    latest.update(
        [Sample(JobRef(Engine.FLINK, "j"), NOW, scope=Scope(source="src", subtask=1), idle_ms=30_000)]
    )
    m = _scrape(
        latest,
        alerts=lambda: [AlertCount("watermark_stall", "warning", "firing", 2)],
        collectors=lambda: [CollectorStat("flink-rest", "http://127.0.0.1:8081", False, 0.25, 3, {"unreachable": 2, "line": 1})],
    )
    L = tuple(
        sorted(
            {
                "engine": "flink",
                "job_id": "j",
                "job_name": "",
                "source": "src",
                "partition": "",
                "subtask": "1",
                "operator": "",
            }.items()
        )
    )
    assert m[("tidegauge_source_idle_seconds", L)] == 30.0
    assert (
        m[("tidegauge_alerts", (("rule", "watermark_stall"), ("severity", "warning"), ("state", "firing")))]
        == 2
    )
    T = (("collector", "flink-rest"), ("target", "http://127.0.0.1:8081"))
    assert m[("tidegauge_target_up", T)] == 0.0
    assert m[("tidegauge_collector_errors_total", _with_kind(T, "unreachable"))] == 2
    assert m[("tidegauge_collector_errors_total", _with_kind(T, "line"))] == 1
    assert m[("tidegauge_collector_errors_total", _with_kind(T, "field"))] == 0  # every kind, from 0


def test_flink_jobs_vertices_and_subtasks() -> None:
    job = JobRef(Engine.FLINK, "tg-idle", "ff68", "tg-idle")
    latest = LatestSamples()
    latest.update(
        [
            Sample(job, NOW, collector="flink-rest", restart_count=2),
            Sample(
                job,
                NOW,
                collector="flink-rest",
                scope=Scope(source="Source: seq", subtask=1, operator="cbc3"),
                watermark=None,
                idle_ms=240_000,
                backpressure_ratio=0.25,
                extra={"vertex": "Source: seq"},
            ),
        ]
    )
    got = _scrape(latest)
    base = {"engine": "flink", "job_id": "tg-idle", "job_name": "tg-idle"}
    sub = tuple(
        sorted({**base, "source": "Source: seq", "partition": "", "subtask": "1", "operator": "cbc3"}.items())
    )
    job_labels = tuple(sorted({**base, "source": "", "partition": "", "subtask": "", "operator": ""}.items()))
    assert got[("tidegauge_source_idle_seconds", sub)] == 240.0
    assert got[("tidegauge_backpressure_ratio", sub)] == 0.25
    assert ("tidegauge_watermark_timestamp_seconds", sub) not in got  # no watermark: absent, not 0
    assert got[("tidegauge_job_restarts_total", job_labels)] == 2
    info = tuple(sorted({**base, "operator": "cbc3", "vertex": "Source: seq"}.items()))
    assert got[("tidegauge_vertex_info", info)] == 1
