"""Detailed health reports over a seeded history (the demo fleet through the real daemon pipeline on a fake
clock, tests/dashboard_seed.py): each section's numbers equal what the test reads from the database, and
the three renderings carry them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.model import AlertState, SampleKind
from monitor.reports.detailed import PROGRESS_HISTORY, DetailedReport, JobReport
from monitor.reports.render import to_html, to_json_text, to_markdown
from monitor.reports.source import collect, parse_matchers, settings_from_rules, write_files
from monitor.store import load_samples, open_store
from monitor.store.alert_repo import load_alerts
from tests.dashboard_seed import START, Seeded, seed

T0 = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed(tmp_path_factory.mktemp("report"), 90)


@pytest.fixture(scope="module")
def report(seeded: Seeded) -> DetailedReport:
    store = open_store(seeded.url)
    try:
        with store.sessions() as s:
            return collect(s, "weekly", START - timedelta(hours=1), seeded.end + timedelta(seconds=1),
                           settings=settings_from_rules({"freshness": {"target": "30s"}}))
    finally:
        store.dispose()


def stored(seeded: Seeded):  # type: ignore[no-untyped-def]
    store = open_store(seeded.url)
    try:
        with store.sessions() as s:
            return load_samples(s), list(load_alerts(s).values())
    finally:
        store.dispose()


def job(report: DetailedReport, name: str) -> JobReport:
    return next(j for j in report.jobs if j.name == name)


def test_every_job_and_its_numbers_match_the_database(seeded: Seeded, report: DetailedReport) -> None:
    samples, alerts = stored(seeded)
    assert sorted(j.name for j in report.jobs) == sorted({s.job.name for s in samples if s.job.name})
    for j in report.jobs:
        kinds = (SampleKind.PROGRESS, SampleKind.GAUGE)  # Spark batches, Flink and Kafka polls
        batches = {(s.job.run_id, s.batch_id, s.observed_at): s for s in samples
                   if s.job.job_id == j.job_id and s.scope.is_job() and s.kind in kinds}
        assert j.batches == len(batches)
        if j.engine == "spark":
            assert j.input_rows == sum(s.num_input_rows or 0 for s in batches.values())
            assert j.dropped_rows == sum(s.dropped_by_watermark or 0 for s in batches.values())
        elif j.engine == "flink":  # Flink numbers are read from its polls, never "unknown"
            assert j.watermark_last is not None and j.state_unit == "bytes" and j.state_last is not None
        else:  # a Kafka group: lag per partition with Burrow's status, rows unknown
            assert j.input_rows is None and j.lag and j.lag_status in ("OK", "WARN", "STALL", "STOP", "REWIND")
        firing = sorted(a.rule for a in alerts if a.labels["job_id"] == j.job_id and a.state is AlertState.FIRING)
        assert sorted(a.rule for a in j.alerts if a.state == "firing") == firing
        if j.engine == "spark":
            runs = sorted({(s.observed_at, s.job.run_id) for s in samples if s.job.job_id == j.job_id})
            assert len(j.restarts) == len({r for _, r in runs}) - 1
        expected_health = max((a.severity for a in alerts if a.labels["job_id"] == j.job_id
                               and a.state is AlertState.FIRING), default=None)
        assert j.health == (expected_health.label() if expected_health else "ok")


def test_late_rows_are_attributed_to_the_future_dated_batch(seeded: Seeded, report: DetailedReport) -> None:
    _, alerts = stored(seeded)
    clicks = job(report, "clicks_per_window")
    future = next(a for a in alerts if a.rule == "future_timestamp" and a.labels["job_id"] == clicks.job_id)
    top = clicks.drop_causes[0]
    assert top.mis_dated == "future" and str(top.batch_id) == future.annotations["batch_id"]
    assert sum(c.dropped_rows for c in clicks.drop_causes) == clicks.dropped_rows
    assert "future-dated row" in clicks.recommendations[0].text
    assert all(r.source == PROGRESS_HISTORY for j in report.jobs for r in j.recommendations)


def test_state_growth_and_restart_are_reported(report: DetailedReport) -> None:
    dedup = job(report, "sessions_dedup")
    assert dedup.state_slope_per_h is not None and dedup.state_growing
    assert dedup.state_last > dedup.state_first  # type: ignore[operator]
    assert any("nothing removed" in r.text for r in dedup.recommendations)
    assert len(job(report, "inventory_updates").restarts) == 1
    lag = job(report, "clickstream_enrich")
    assert lag.lag_offsets_max is not None and lag.lag_offsets_max > 0


def test_job_filter_and_matchers(seeded: Seeded) -> None:
    store = open_store(seeded.url)
    try:
        with store.sessions() as s:
            one = collect(s, "r", START - timedelta(hours=1), seeded.end, job="payments_fraud")
            team = collect(s, "r", START - timedelta(hours=1), seeded.end,
                           matchers=parse_matchers(["job_name=~(clicks|clickstream).*"]))
    finally:
        store.dispose()
    assert [j.name for j in one.jobs] == ["payments_fraud"]
    assert sorted(j.name for j in team.jobs) == ["clicks_per_window", "clickstream_enrich"]


def test_renderings_carry_the_numbers(report: DetailedReport, tmp_path: Path) -> None:
    clicks = job(report, "clicks_per_window")
    md = to_markdown(report)
    assert f"## clicks_per_window (spark, health {clicks.health})" in md
    assert f"| rows dropped by the watermark | {clicks.dropped_rows:,} (" in md
    doc = json.loads(to_json_text(report))
    assert [j["name"] for j in doc["jobs"]] == [j.name for j in report.jobs]
    assert doc["jobs"][0]["dropped_rows"] == report.jobs[0].dropped_rows
    page = to_html(report)
    assert page.count("<svg") >= len(report.jobs) and "<script" not in page and "http://" not in page.split("<svg")[0]
    assert "clicks_per_window" in page
    paths = write_files(report, tmp_path, ["html", "md", "json"])
    assert sorted(p.suffix for p in paths) == [".html", ".json", ".md"]
    assert all(p.stat().st_size > 0 for p in paths)


def test_scheduled_report_writes_the_matched_jobs_files(seeded: Seeded, tmp_path: Path) -> None:
    from monitor.config import parse_config
    from monitor.daemon.compose import build, report_jobs

    out = tmp_path / "reports"
    config = parse_config({
        "database": seeded.url,
        "server": {"port": 0},
        "rules": {"freshness": {"target": "30s"}},
        "reports": [{"name": "payments-team", "cron": "0 8 * * *", "directory": str(out), "formats": ["md", "json"],
                     "matchers": ["job_name=~payments_.*"], "since": "2h"}],
    })
    daemon = build(config, db_url=seeded.url, environ={"HOME": str(tmp_path)}, clock=lambda: seeded.end)
    try:
        (job,) = report_jobs(config, daemon.runtime)
        assert job.cron == "0 8 * * *"
        job.tick(seeded.end + timedelta(seconds=1))
    finally:
        daemon.store.dispose()
    files = sorted(p.name for p in out.iterdir())
    assert files == ["payments-team-20261130T080131Z.json", "payments-team-20261130T080131Z.md"]
    doc = json.loads((out / files[0]).read_text())
    assert [j["name"] for j in doc["jobs"]] == ["payments_fraud"]
    assert doc["jobs"][0]["freshness_target_s"] == 30.0


def test_a_report_needs_a_receiver_or_a_directory() -> None:
    from monitor.config import parse_config
    from monitor.errors import ConfigError

    with pytest.raises(ConfigError, match=r"reports\[0\]: give a receiver, a directory, or both"):
        parse_config({"reports": [{"name": "r", "cron": "0 8 * * *"}]}, "t.yaml")
    with pytest.raises(ConfigError, match=r"reports\[0\]\.matchers: matcher 'job_name=~\(': "):
        parse_config({"reports": [{"name": "r", "cron": "0 8 * * *", "directory": "/tmp", "matchers": ["job_name=~("]}]})


def test_webhook_receivers_get_the_detailed_report_as_json_and_html(seeded: Seeded, tmp_path: Path) -> None:
    import jsonschema

    from monitor.config import parse_config
    from monitor.daemon.compose import build, report_jobs
    from monitor.notify.base import ReportBatch
    from monitor.notify.webhook import payload_schema, report_payload
    from monitor.store.alert_repo import open_report_outbox

    config = parse_config({
        "database": seeded.url,
        "server": {"port": 0},
        "receivers": [{"name": "hook", "type": "webhook", "url": "http://127.0.0.1:9/h", "secret": {"env": "S"}}],
        "reports": [{"name": "fraud", "cron": "0 8 * * *", "receiver": "hook", "matchers": ["job_name=payments_fraud"],
                     "since": "2h"}],
    })
    daemon = build(config, db_url=seeded.url, environ={"HOME": str(tmp_path), "S": "x" * 20}, clock=lambda: seeded.end)
    try:
        (job,) = report_jobs(config, daemon.runtime)
        job.tick(seeded.end + timedelta(seconds=1))
        with daemon.store.sessions() as s:
            (item,) = [i for i in open_report_outbox(s) if i.report.name == "fraud"]
    finally:
        daemon.store.dispose()
    report = item.report
    assert [j.name for j in report.jobs] == ["payments_fraud"]
    assert report.detail is not None and [j["name"] for j in report.detail["jobs"]] == ["payments_fraud"]
    assert report.html is not None and report.html.startswith("<!doctype html>") and "payments_fraud" in report.html
    doc = report_payload(ReportBatch("hook", item.idempotency_key, report, seeded.end), None)
    jsonschema.Draft202012Validator(payload_schema()).validate(doc)
    assert doc["report"]["detail"]["jobs"][0]["dropped_rows"] == report.detail["jobs"][0]["dropped_rows"]
