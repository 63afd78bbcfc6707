"""Issue 17 §3: the Flink cases a two-poll ``check flink`` missed, on real Flink 2.3.0 recordings
(tests/fixtures/flink/real-2.3.0/idle_late{,_cold}, see their PROVENANCE.md) replayed request by request, and
on hand-made samples for the branches the recordings do not reach. Expected values are read off the
recorded answers by hand (watermark 1796172473746 ms = 2026-12-02T00:47:53.746Z, numLateRecordsDropped 11 per
window vertex at both polls)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.commands._check_flink import run_check_flink
from monitor.model import Engine, JobRef, Sample, SampleKind, Scope, Severity
from rules.common import holding_input
from rules.history import job_history
from rules.idle import IdleParams, evaluate_idle
from rules.late import LateTotalParams, evaluate_late_total
from tests.flink_record import load_exchanges, replay_clock, replay_transport

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "real-2.3.0"
SOURCE = "Source: seq -> stamp -> drop-on-subtask1 -> Timestamps/Watermarks"


def _run(folder: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``check flink --format fmt`` over the recording, replayed request by request: its output."""
    polls, exchanges = load_exchanges(REAL / folder)
    code = run_check_flink(
        "http://jm:8081",
        fmt=fmt,
        interval=timedelta(seconds=11),
        clock=replay_clock(polls),
        transport=replay_transport(exchanges),
        sleep=lambda _s: None,
    )
    assert code == 0
    return capsys.readouterr().out


def _check(folder: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_run(folder, "json", capsys))
    return report


def test_recorded_job_names_the_subtask_without_watermark_and_the_late_drops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = _check("idle_late", capsys)
    assert report["errors"] == []
    by_rule = {f["rule"]: f for f in report["findings"]}
    assert sorted(by_rule) == ["idle_source", "late_rows_dropped"]  # before the fix: none

    idle = by_rule["idle_source"]
    assert (idle["severity"], idle["vertex"], idle["subtask"], idle["labels"]) == (
        "warning",
        SOURCE,
        1,
        {"check": "no_watermark"},
    )
    msg = idle["message"]
    assert msg.startswith(
        f"job `tg-idle-late` vertex `{SOURCE}` subtask 1 emits no watermark (Long.MIN_VALUE at the last 2 polls, "
        "since 2026-12-02T00:47:43.648Z at least) while subtask 0 has 2026-12-02T00:47:53.746Z, though the "
        "source reads records (sourceIdleTime 0 ms): no record reaches its watermark assigner"
    )
    assert "The windows still advance (job watermark 2026-12-02T00:47:53.746Z) only because withIdleness" in msg
    assert "judged against that advanced watermark" in msg and "dropped as late" in msg

    late = by_rule["late_rows_dropped"]
    assert (late["severity"], late["vertex"], late["subtask"]) == ("info", None, None)
    assert late["message"].startswith(
        "the windows of job `tg-idle-late` have dropped late records in 2 window vertices since their tasks "
        "started (22 drops in all, counted per vertex: a record late for two windows is one drop in each) "
        "(WindowOperator's numLateRecordsDropped), none of them between the last two polls"
    )
    assert (
        "By window vertex: `window-2s -> discard: Writer` 11 (none between the last two polls); "
        "`window-4s -> discard-4s: Writer` 11 (none between the last two polls)."
    ) in late["message"]


def test_cold_metric_store_gives_one_poll_of_values(capsys: pytest.CaptureFixture[str]) -> None:
    report = _check("idle_late_cold", capsys)
    by_rule = {f["rule"]: f for f in report["findings"]}
    assert sorted(by_rule) == ["idle_source", "late_rows_dropped"]
    assert "subtask 1 emits no watermark (Long.MIN_VALUE at the newest poll) while subtask 0 has" in (
        by_rule["idle_source"]["message"]
    )
    assert "(job watermark 2026-12-02T00:45:16.849Z)" in by_rule["idle_source"]["message"]
    late = by_rule["late_rows_dropped"]["message"]
    assert "dropped late records in 2 window vertices since their tasks started (22 drops in all" in late
    assert "how many of them between the last two polls is unknown" in late
    assert "`window-2s -> discard: Writer` 11 (recent unknown)" in late


# ------------------------------------------------------------------------------------ hand-made samples

JOB = JobRef(Engine.FLINK, "j1", "jobname")
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
WM = datetime(2026, 1, 1, 11, 59, 50, tzinfo=UTC)


def _src(t: datetime, subtask: int, wm: datetime | None, source_idle_ms: int | None = 5) -> Sample:
    return Sample(
        JOB,
        t,
        SampleKind.GAUGE,
        "flink_rest",
        scope=Scope(source="Source: s", subtask=subtask, operator="v0"),
        watermark=wm,
        num_input_rows=0 if wm is None else 10,
        idle_ms=source_idle_ms,
        extra={"vertex": "Source: s", "source_idle_ms": source_idle_ms},
    )


def _win(t: datetime, subtask: int, total: int | None, recent: int | None) -> Sample:
    return Sample(
        JOB,
        t,
        SampleKind.GAUGE,
        "flink_rest",
        scope=Scope(subtask=subtask, operator="v1"),
        watermark=WM,
        dropped_by_watermark=recent,
        extra={"vertex": "w", "late_records_dropped": total},
    )


def _job(t: datetime, wm: datetime | None, recent: int | None = 0) -> Sample:
    return Sample(JOB, t, SampleKind.GAUGE, "flink_rest", watermark=wm, dropped_by_watermark=recent)


def _idle_findings(samples: list[Sample]) -> list[Any]:
    return evaluate_idle(IdleParams(), job_history(samples), samples[-1].observed_at)


def test_no_watermark_without_idleness_needs_two_polls_and_pins_the_windows() -> None:
    t1 = T0 + timedelta(seconds=11)
    first = [_src(T0, 0, WM), _src(T0, 1, None), _job(T0, None)]
    assert _idle_findings(first) == []  # one poll without a job watermark: maybe its first one is still to come
    (f,) = _idle_findings([*first, _src(t1, 0, WM), _src(t1, 1, None), _job(t1, None)])
    assert (f.severity, f.scope.subtask, f.labels, f.details["holding_watermark"]) == (
        Severity.WARNING,
        1,
        {"check": "no_watermark"},
        True,
    )
    assert "at the last 2 polls, since 2026-01-01T12:00Z at least" in f.message
    assert "event-time windows never fire" in f.message and "withIdleness(" in f.message


def test_a_subtask_whose_source_is_idle_is_left_to_the_idle_checks() -> None:
    # sourceIdleTime 10 min (>= for 5m): the source itself has no records, not a filter: no no_watermark finding
    samples = [_src(T0, 0, WM), _src(T0, 1, None, 600_000), _job(T0, WM)]
    assert all(f.labels.get("check") != "no_watermark" for f in _idle_findings(samples))
    # a sibling that has no watermark either: nothing to compare with
    assert _idle_findings([_src(T0, 0, None), _src(T0, 1, None), _job(T0, WM)]) == []


def test_late_total_recent_drops_warn_and_other_engines_are_left_out() -> None:
    samples = [_win(T0, 0, 8, 3), _win(T0, 1, 21, 0), _job(T0, WM, 3)]
    (f,) = evaluate_late_total(LateTotalParams(), job_history(samples), T0)
    assert f.severity is Severity.WARNING
    assert f.details == {
        "dropped_total": 29,
        "dropped_recent": 3,
        "vertices": [{"vertex": "w", "dropped_total": 29, "dropped_recent": 3}],
    }
    assert "dropped 29 late records since their tasks started (WindowOperator's numLateRecordsDropped), 3 of them " in (
        f.message
    )
    assert evaluate_late_total(LateTotalParams(min_dropped=30), job_history(samples), T0) == []
    zero = [_win(T0, 0, 0, 0), _job(T0, WM)]
    assert evaluate_late_total(LateTotalParams(), job_history(zero), T0) == []
    spark = [Sample(JobRef(Engine.SPARK, "q", "q"), T0, SampleKind.PROGRESS, "p", dropped_by_watermark=5)]
    assert evaluate_late_total(LateTotalParams(), job_history(spark), T0) == []


def test_who_holds_the_minimum_leaves_out_an_idle_excluded_subtask(capsys: pytest.CaptureFixture[str]) -> None:
    # subtask 1 without a watermark pins the minimum only while no downstream vertex advances past it
    t1 = T0 + timedelta(seconds=11)
    window = Sample(JOB, T0, SampleKind.GAUGE, "flink_rest", scope=Scope(subtask=0, operator="v1"), watermark=None)
    pinned = job_history([_src(T0, 0, WM), _src(T0, 1, None), window])
    held = holding_input(pinned.series, T0, Engine.FLINK)
    assert held is not None and held.subtask == 1
    advanced = job_history([_src(T0, 0, WM), _src(T0, 1, None), _win(T0, 0, 0, 0)])
    assert holding_input(advanced.series, T0, Engine.FLINK) is None
    # between source subtasks the lower one holds it; a window vertex trailing by the sampling does not
    lower = WM - timedelta(seconds=30)
    skew = job_history([_src(t1, 0, WM), _src(t1, 1, lower), _win(t1, 0, 0, 0)])
    held = holding_input(skew.series, t1, Engine.FLINK)
    assert held is not None and held.subtask == 1 and held.source == "Source: s"
    # the recorded withIdleness job: the text report no longer says subtask 1 holds the minimum
    text = _run("idle_late", "text", capsys)
    assert "holds the minimum watermark" not in text and "subtask 1 emits no watermark" in text


def test_text_table_agrees_with_the_idle_source_finding(capsys: pytest.CaptureFixture[str]) -> None:
    # the trial's miss: the table's one "idle ms" column said 63,981 for source subtask 1 where the finding
    # says sourceIdleTime 0 ms; both figures now show, each under its own name, and the findings are counted
    text = _run("idle_late", "text", capsys)
    lines = text.splitlines()
    source = next(i for i, line in enumerate(lines) if line.startswith(f"  vertex {SOURCE} "))
    assert lines[source + 1].split() == [
        "subtask", "input", "watermark", "output", "watermark", "sourceIdleTime", "ms", "quiet", "ms", "task",
        "records", "in/out",
    ]
    subtask_1 = lines[source + 3].split()
    assert subtask_1[0] == "1" and subtask_1[-3] == "0"  # sourceIdleTime 0 ms, as the finding says
    assert "findings (1 warning, 1 info):" in lines
