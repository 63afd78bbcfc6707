"""The Flink Prometheus-reporter path over recorded real output
(tests/fixtures/flink/real-2.3.0/prometheus_reporter, see its PROVENANCE.md): the same samples as the REST
path. Expected values read off the recorded files by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from collectors.flink.prometheus import FlinkPrometheusCollector
from collectors.http import make_client
from monitor.model import Sample, SampleKind, ms_to_datetime
from tests.conftest import RECORDED_FIXTURES

REC = RECORDED_FIXTURES / "flink" / "real-2.3.0" / "prometheus_reporter"
NOW = datetime(2026, 12, 1, 10, 42, tzinfo=UTC)
SOURCE, WINDOW_IDLE, WINDOW_LATE = (
    "cbc357ccb763df2852fee8c4fc7d55f2",
    "f6dc7f4d2283f4605b127b9364e21148",
    "c27dcf7b54ef6bfd6cff02ca8870b681",
)


def _bodies() -> dict[str, str]:
    return {
        "/jm/metrics": (REC / "jobmanager_metrics.txt").read_text(),
        "/tm/metrics": (REC / "taskmanager_metrics.txt").read_text(),
    }


def _collector(bodies: dict[str, str] | None = None) -> FlinkPrometheusCollector:
    bodies = bodies if bodies is not None else _bodies()

    def handler(request: httpx.Request) -> httpx.Response:
        body = bodies.get(request.url.path)
        return httpx.Response(200, text=body) if body is not None else httpx.Response(404)

    client = make_client(transport=httpx.MockTransport(handler))
    return FlinkPrometheusCollector(
        ["http://127.0.0.1:9249/jm/metrics", "http://127.0.0.1:9250/tm/metrics"], client
    )


def _by(samples: tuple[Sample, ...]) -> dict[tuple[str, str | None, int | None], Sample]:
    return {
        (s.job.job_id, s.scope.operator, s.scope.subtask): s for s in samples if s.kind is SampleKind.GAUGE
    }


def test_reporter_samples_match_the_rest_semantics() -> None:
    result = _collector().poll(NOW)
    assert result.errors == ()
    got = _by(result.samples)
    # job names are the reporter's sanitized ones; job ids exact
    assert {k[0] for k in got} == {"tg_idle", "tg_late"}
    idle0, idle1 = got[("tg_idle", SOURCE, 0)], got[("tg_idle", SOURCE, 1)]
    assert idle0.job.run_id == "6da2cf668e5773fae9aa106232b7676f"
    # source subtask 0: Timestamps_Watermarks.currentOutputWatermark 1.79612171348E12; subtask 1: -9.22E18
    assert idle0.watermark == ms_to_datetime(1796121713480)
    assert idle1.watermark is None and idle1.watermark_end_of_input is None
    assert idle0.scope.source == "Source:_seq -> stamp -> drop_on_subtask1 -> Timestamps_Watermarks"
    # the windows' input watermark is Long.MIN_VALUE on both subtasks: unknown, so is the job's
    assert got[("tg_idle", WINDOW_IDLE, 0)].watermark is None
    assert got[("tg_idle", None, None)].watermark is None
    late_window = got[("tg_late", WINDOW_LATE, 0)]
    assert late_window.watermark == ms_to_datetime(1796121713466)
    assert late_window.extra["late_records_dropped"] == 134
    job = got[("tg_late", None, None)]
    assert job.watermark == ms_to_datetime(1796121713466)
    assert (job.restart_count, job.checkpoints_failed, job.state_memory_bytes) == (0, 1, 4684)
    # runningTime 73628 ms before NOW
    assert job.extra["running_since_ms"] == int(NOW.timestamp() * 1000) - 73628


def test_split_level_watermark_series_are_read_as_the_rest_path_reads_them() -> None:
    # taskmanager_metrics.txt: ..._split_watermark_{currentWatermark,activeTimeMsPerSecond,pausedTimeMsPerSecond,
    # idleTimeMsPerSecond}{split="2", job_name="tg_idle", subtask_index="0"} -9.223372036854776E18, 1000.0, 0.0, 0.0
    # (the datagen source's split; its watermark is assigned after it, so the split's own is Long.MIN_VALUE)
    got = _by(_collector().poll(NOW).samples)
    (split,) = got[("tg_idle", SOURCE, 0)].extra["splits"]
    assert split == {
        "split": "2", "topic": None, "partition": None, "watermark_ms": None,
        "active_ms_per_s": 1000.0, "paused_ms_per_s": 0.0, "idle_ms_per_s": 0.0,
    }
    assert [s["split"] for s in got[("tg_idle", SOURCE, 1)].extra["splits"]] == ["1"]
    assert "splits" not in got[("tg_idle", WINDOW_IDLE, 0)].extra  # a window vertex has none


def test_second_scrape_gives_late_deltas_and_a_failing_url_is_an_error() -> None:
    bodies = _bodies()
    collector = _collector(bodies)
    collector.poll(NOW)
    tail = 'job_name="tg_late",tm_id="127_0_0_1:60887_fd1b1a",subtask_index="0",} '
    late_line = next(
        line
        for line in bodies["/tm/metrics"].splitlines()
        if "numLateRecordsDropped{" in line and "tg_late" in line
    )
    assert late_line.endswith(tail + "134.0")
    bodies["/tm/metrics"] = bodies["/tm/metrics"].replace(late_line, late_line[: -len("134.0")] + "140.0")
    got = _by(collector.poll(NOW + timedelta(seconds=15)).samples)
    assert got[("tg_late", WINDOW_LATE, 0)].dropped_by_watermark == 6
    assert got[("tg_late", None, None)].dropped_by_watermark == 6

    def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/tm/metrics":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return httpx.Response(200, text=(REC / "jobmanager_metrics.txt").read_text())

    broken = FlinkPrometheusCollector(
        ["http://127.0.0.1:9249/jm/metrics", "http://127.0.0.1:9250/tm/metrics"],
        make_client(transport=httpx.MockTransport(refuse)),
    )
    result = broken.poll(NOW)
    assert [e.target for e in result.errors] == ["http://127.0.0.1:9250/tm/metrics"]
    assert result.samples == ()  # job-manager figures alone: no task manager runs the jobs here
