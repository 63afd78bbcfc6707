"""``tidegauge check flink`` over the recorded Flink 2.3.0 responses (tests/flink_replay.py): the JSON
shape of issue 7, unknowns as null, and the exit codes. Values read off the recorded files by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from monitor.commands._check_flink import run_check_flink
from monitor.errors import InputError
from monitor.model import Severity
from tests.flink_replay import mock_transport, standalone_routes

SOURCE = "34b448c3c08bfc000e8407a4adc6ed98"
# one minute after the recorded poll (/jobs/<jid> "now": 1795952373226 = 2026-11-29T11:39:33.226Z)
NOW = datetime(2026, 11, 29, 11, 40, 33, tzinfo=UTC)


def test_json_report_of_the_recorded_job(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_check_flink(
        "http://jm:8081",
        fmt="json",
        interval=timedelta(0),
        clock=lambda: NOW,
        transport=mock_transport(standalone_routes()),
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"jobs", "findings", "errors"}
    (job,) = report["jobs"]
    assert (job["jid"], job["name"], job["state"], job["restarts"]) == (
        "5b6ac111339d82670de10f8487b2078c",
        "exp-event-time-job",
        "RUNNING",
        0,
    )
    assert [v["name"] for v in job["vertices"]] == [
        "Source: gen-source -> py-drop-on-subtask1 -> Timestamps/Watermarks -> _stream_key_by_map_operator",
        "py-window-10s -> Sink: py-print",
        "java-window-10s -> Sink: java-print",
    ]
    source, py_window, java_window = job["vertices"]
    assert source["id"] == SOURCE and source["parallelism"] == 2
    assert source["late_records_dropped"] is None  # the source has no window operator: unknown, not 0
    assert [t["output_watermark_ms"] for t in source["subtasks"]] == [1795952369440, None]
    assert [t["input_watermark_ms"] for t in source["subtasks"]] == [None, None]
    assert [t["source_idle_ms"] for t in source["subtasks"]] == [28, 38]
    assert py_window["late_records_dropped"] == 6 + 2 and java_window["late_records_dropped"] == 14 + 6
    assert [t["input_watermark_ms"] for t in java_window["subtasks"]] == [1795952365175, 1795952365175]
    for f in report["findings"]:
        assert {"rule", "severity", "job", "vertex", "subtask", "message"} <= set(f)


def test_fail_on_and_unreachable() -> None:
    transport = mock_transport(standalone_routes())
    # a minute after the recording nothing is critical (the watermarks are seconds behind, no restart)
    assert (
        run_check_flink(
            "http://jm:8081",
            interval=timedelta(0),
            clock=lambda: NOW,
            transport=transport,
            fail_on=Severity.CRITICAL,
        )
        == 0
    )

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(InputError, match=r"^cannot connect to http://jm:8081/jobs/overview: "):
        run_check_flink(
            "http://jm:8081", interval=timedelta(0), clock=lambda: NOW, transport=httpx.MockTransport(refuse)
        )


def test_a_critical_finding_gives_exit_code_1(capsys: pytest.CaptureFixture[str]) -> None:
    # seen from two hours before the recording, the watermarks are 2 h in the future: future_timestamp
    two_hours_before = NOW - timedelta(hours=2)
    code = run_check_flink(
        "http://jm:8081",
        interval=timedelta(0),
        clock=lambda: two_hours_before,
        transport=mock_transport(standalone_routes()),
        fail_on=Severity.CRITICAL,
    )
    assert code == 1
    out = capsys.readouterr().out
    assert "[critical] future_timestamp (exp-event-time-job" in out


def test_the_read_bounds_and_the_timeout_are_options(capsys: pytest.CaptureFixture[str]) -> None:
    """The errors name their knob; check flink has each as an option."""
    from tests.cli import run_cli
    from tests.servers import black_hole, static_pages

    overview = json.dumps(standalone_routes()["/jobs/overview"]).encode()
    with static_pages({"/jobs/overview": overview}, content_type="application/json") as url:
        args = ["check", "flink", url, "--interval", "0s", "--format", "json", "--max-body-bytes", "100"]
        code, out, _err = run_cli(args, capsys)
    assert code == 2
    assert json.loads(out)["error"] == (
        f"body too large: {url}/jobs/overview announces {len(overview)} bytes, more than the 100 allowed "
        "(max_body_bytes)"
    )
    with black_hole() as port:
        args = ["check", "flink", f"http://127.0.0.1:{port}", "--interval", "0s", "--timeout", "0.3s"]
        code, _out, err = run_cli(args, capsys)
    assert code == 2
    assert "no answer within 0.3s (the target's `timeout`)" in err
