"""A scanned history is not healthy: ``scan --db`` of two recorded real Spark 4.3 runs, then the detailed
report (``tidegauge report``'s :func:`monitor.reports.source.collect`) and the dashboard's Fleet and Job
pages over that database show the stored finding episodes: a job with a critical episode in the period is
not "ok" even with no alert firing now (scan raises no alert). Expected values are read off the logs (see
tests/fixtures/spark/rule-cases/PROVENANCE.md and test_scan_daemon_agree)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dashboard import data
from monitor.reports.render import to_markdown
from monitor.reports.source import collect
from monitor.store import open_store, upgrade
from tests.cli import run_cli
from tests.rule_samples import RULE_CASES

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
JUMP = "ea529203-af7a-4953-a78b-a4f86ad897ca"  # backfill_future_row
UNION = "76d430a1-40ea-483c-b982-542bc05abbbe"  # union_never_seen
#: the day of the recordings
SINCE, UNTIL = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('scanned') / 'tg.db'}"
    upgrade(url)
    return url


def _scan(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        ["scan", "--db", url, str(RULE_CASES / "backfill_future_row"), str(RULE_CASES / "never_seen_input")], capsys
    )
    assert code == 0, err


def test_report_shows_the_worst_episode_beside_the_health_now(
    scanned: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _scan(scanned, capsys)
    store = open_store(scanned)
    try:
        with store.sessions() as session:
            report = collect(session, "t", SINCE, UNTIL)
    finally:
        store.dispose()
    jobs = {j.job_id: j for j in report.jobs}
    jump = jobs[JUMP]
    assert (jump.health, jump.period_health, report.health) == ("ok", "critical", "critical")
    assert jump.worst_episode is not None
    w = jump.worst_episode
    assert (w.rule, w.first_batch_id, w.last_batch_id, w.ended_by) == ("future_timestamp", 6, 10, "terminated")
    assert [(e.rule, e.severity) for e in jump.episodes] == [
        ("future_timestamp", "critical"), ("late_drop_surge", "warning"),
    ]  # fmt: skip
    # the drops name the jump that caused them (rules.jumps), and the stored episodes are linked
    assert jump.episodes[1].caused_by == (jump.episodes[0].id,)
    assert (jobs[UNION].health, jobs[UNION].period_health) == ("ok", "warning")
    assert report.jobs[0].job_id == JUMP  # worst first
    md = to_markdown(report)
    assert "## backfill_future_row (spark, health ok now, critical in the period)" in md
    assert "| worst finding in the period | critical: future_timestamp (batches 6-10, 2026-12-01T09:43:42Z" in md
    # nothing outside the period
    store = open_store(scanned)
    try:
        with store.sessions() as session:
            before = collect(session, "t", datetime(2026, 11, 1, tzinfo=UTC), SINCE)
    finally:
        store.dispose()
    assert before.jobs == ()


@pytest.fixture
def app_env(scanned: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[str]:
    _scan(scanned, capsys)  # a second scan stores nothing new
    monkeypatch.setenv(data.DB_ENV, scanned)
    monkeypatch.delenv(data.TOKEN_ENV, raising=False)
    monkeypatch.setattr(data, "now", lambda: UNTIL)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield scanned
    st.cache_resource.clear()


def _run(**query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at


def test_fleet_and_job_pages_show_the_scanned_findings(app_env: str) -> None:
    at = _run()
    assert not at.exception, [e.value for e in at.exception]
    assert next(m.value for m in at.metric if m.label == "unhealthy jobs") == "2"
    assert next(m.value for m in at.metric if m.label == "firing alerts") == "0"
    table = at.dataframe[0].value
    worst = dict(zip(table["job"], table["worst in period"], strict=True))
    assert worst == {
        "backfill_future_row": "critical: future_timestamp batches 6-10",
        # four warnings (stalls at batches 3-7, 8 and 9, restarts at 7-9): the first is the worst named
        "union_never_seen": "warning: watermark_stall batches 3-7",
    }
    # the last batches as recorded (a terminal QueryTerminatedEvent is no batch): backfill_future_row's
    # batch 10 read 12 rows, union_never_seen's batch 9 read 20
    rows = dict(zip(table["job"], table["rows (last batch)"], strict=True))
    assert rows == {"backfill_future_row": "12", "union_never_seen": "20"}
    text = " ".join(m.value for m in at.markdown)
    assert "**backfill_future_row** · **future_timestamp batches 6-10** (critical, in the period): batch 4 at" in text
    at.switch_page("views/job.py")
    at.query_params["engine"], at.query_params["job_id"] = "spark", JUMP
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [s.value for s in at.subheader if s.value.startswith("Findings")] == ["Findings in the last 7 days"]
    assert not any("no findings" in s.value for s in at.success)
    episodes = next(d.value for d in at.dataframe if "rule" in d.value.columns)
    assert list(zip(episodes["rule"], episodes["batches"], episodes["severity"], strict=True)) == [
        ("future_timestamp", "batches 6-10", "critical"), ("late_drop_surge", "batches 6-10", "warning"),
    ]  # fmt: skip
