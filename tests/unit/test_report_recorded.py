"""``report`` over a scanned recorded log (tests/fixtures/spark/rule-cases/backfill_future_row: a backfill of
2024-03-01 with one row dated a day later in batch 4, real PySpark 4.3.0): the rows dropped behind the
mis-dated row get no delay advice, the state projection is never negative, freshness is on the data's own
clock, and the scanned findings make the period unhealthy. Expected values are read off the recording."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.reports.detailed import DetailedReport
from monitor.reports.render import to_html, to_markdown
from monitor.reports.source import collect
from monitor.store import open_store
from tests.cli import run_cli as run
from tests.rule_samples import RULE_CASES

# the recording's batches run 2026-12-01T09:43:23.687Z .. 09:43:58.000Z (processing time)
SINCE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def scanned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``tidegauge db upgrade`` then ``tidegauge scan LOGDIR --db URL`` of the recording."""
    tmp = tmp_path
    url = f"sqlite:///{tmp / 'tg.db'}"
    logdir = tmp / "logs"
    shutil.copytree(RULE_CASES / "backfill_future_row", logdir)
    assert run(["db", "upgrade", "--db", url], capsys)[0] == 0
    code, _, err = run(["scan", str(logdir), "--db", url], capsys)
    assert code in (0, 1), err
    return url


def report(url: str, until: datetime) -> DetailedReport:
    store = open_store(url)
    try:
        with store.sessions() as session:
            return collect(session, "recorded", SINCE, until)
    finally:
        store.dispose()


def test_no_delay_advice_for_rows_dropped_behind_a_mis_dated_row(scanned: str) -> None:
    (job,) = report(scanned, datetime(2026, 12, 2, tzinfo=UTC)).jobs
    assert job.name == "backfill_future_row" and job.dropped_rows == 60
    (cause,) = job.drop_causes
    assert (cause.batch_id, cause.mis_dated) == (4, "leap")
    texts = [r.text for r in job.recommendations]
    assert not any("would keep them" in t or "A delay" in t for t in texts), texts
    (row,) = [t for t in texts if "No watermark delay keeps them" in t]
    # the row named: batch 4, its event time, how far beyond the data, and its remedy (Spark's)
    assert "batch 4" in row and "2024-03-02T12:02Z" in row and "1 day beyond" in row and "before withWatermark" in row


def test_state_projection_is_never_negative(scanned: str) -> None:
    (job,) = report(scanned, datetime(2026, 12, 2, tzinfo=UTC)).jobs
    # numRowsTotal 12 (batch 0) -> 1 (batch 10): falling, "no growth"
    assert (job.state_first, job.state_last, job.state_growing, job.state_projected_24h) == (12, 1, False, None)
    md = to_markdown(report(scanned, datetime(2026, 12, 2, tzinfo=UTC)))
    assert "| state trend | no growth |" in md and "projected" not in md


def test_freshness_is_on_the_data_clock(scanned: str) -> None:
    soon = report(scanned, datetime(2026, 12, 1, 10, 0, tzinfo=UTC)).jobs[0]
    years_later = report(scanned, datetime(2029, 1, 1, tzinfo=UTC)).jobs[0]
    # batch 10: processing 2026-12-01T09:43:58Z - watermark 2024-03-02T11:52:00Z, whatever the report's date
    expected = (timedelta(days=1004) - timedelta(hours=2, minutes=8, seconds=2)).total_seconds()
    assert soon.freshness_last_s == pytest.approx(expected) and years_later.freshness_last_s == pytest.approx(expected)


def test_the_scanned_findings_make_the_period_unhealthy(scanned: str, tmp_path: Path) -> None:
    r = report(scanned, datetime(2026, 12, 2, tzinfo=UTC))
    (job,) = r.jobs
    assert job.health == "ok"  # nothing fires now: a scan notifies nobody
    assert job.period_health in ("warning", "critical") and job.episodes
    assert {e.rule for e in job.episodes} >= {"future_timestamp"}
    page = to_html(r)
    assert "Findings in the period" in page and "No watermark delay keeps them" in page


def test_report_command_shows_a_recording_on_its_own_clock(scanned: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``tidegauge report`` (the wall clock, whatever day the test runs) ends the period at the newest stored
    sample: the recording's last batch ran at 2026-12-01T09:43:58.000Z, so the 7-day period ends 1 ms
    after it, and the job is in the report with its scanned findings (not an empty week of today)."""
    code, out, err = run(["report", "--db", scanned, "--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["since"], doc["until"]) == ("2026-11-24T09:43:58.001Z", "2026-12-01T09:43:58.001Z")
    (job,) = doc["jobs"]
    assert doc["health"] == "critical" and job["period_health"] == "critical"
    assert job["health"] == "ok"  # nothing fires: a scan notifies nobody
