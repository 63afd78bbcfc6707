"""Scheduled health reports: the pure report builder (one numbered table), config validation of reports,
routes and cron expressions, the webhook/Slack formats, and a report run through the runtime delivered
to a loopback webhook exactly once.

Expected values are worked out by hand from the samples and alerts written in each case.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import jsonschema
import pytest

from monitor.alerts.lifecycle import Alert
from monitor.config import RulesConfig, parse_config
from monitor.daemon.compose import build
from monitor.daemon.runtime import Runtime
from monitor.errors import ConfigError
from monitor.metrics.latest import LatestSamples
from monitor.model import AlertState, Engine, Finding, JobRef, PollResult, Sample, SampleKind, Scope, Severity
from monitor.notify.base import ReportBatch
from monitor.notify.dispatcher import dispatch_due
from monitor.notify.slack import slack_report_message
from monitor.notify.webhook import WebhookNotifier, payload_schema, report_payload
from monitor.reports.scheduled import HealthReport, build_report, report_slot
from monitor.store import save_poll, upgrade
from tests.alerting import migrated_sessions, sqlite_url
from tests.http_receiver import running_receiver

NOW = datetime(2026, 11, 29, 8, 0, 2, tzinfo=UTC)  # a run of "0 8 * * *", two seconds late
CLICKS = JobRef(Engine.SPARK, "q-clicks", "run-1", "clicks")
ORDERS = JobRef(Engine.SPARK, "q-orders", "run-1", "orders")


def _sample(job: JobRef, minutes_ago: float, batch: int | None, **values: object) -> Sample:
    return Sample(job=job, observed_at=NOW - timedelta(minutes=minutes_ago), batch_id=batch, **values)  # type: ignore[arg-type]


def _alert(job: JobRef, rule: str, severity: Severity, state: AlertState, message: str = "why") -> Alert:
    finding = Finding(rule, severity, job, message, NOW - timedelta(minutes=30))
    alert = Alert.from_finding(finding, NOW - timedelta(minutes=30))
    fired = NOW - timedelta(minutes=20) if state is AlertState.FIRING else None
    return replace(alert, state=state, fired_at=fired)


# --- the pure builder ---------------------------------------------------------------------------------


@dataclass
class Case:
    samples: list[Sample] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    # expected per job id: (health, watermark_lag_seconds, input_rows_last_hour, dropped_last_hour, state_rows)
    want: dict[str, tuple[Severity, float | None, int | None, int | None, int | None]] = field(default_factory=dict)


WM = NOW - timedelta(minutes=12)  # watermark 12 min before NOW

CASES = [
    # 0: no alerts -> OK. Newest sample (2 min ago) has watermark NOW-12min -> lag 10 min = 600 s.
    #    Input rows in (NOW-1h, NOW]: 100 + 50 (the batch 70 min ago is outside the hour); dropped 3 + 0;
    #    state rows from the newest sample: 40.
    Case(
        samples=[
            _sample(CLICKS, 70, 1, num_input_rows=1000, dropped_by_watermark=9, state_rows_total=10, watermark=WM),
            _sample(CLICKS, 30, 2, num_input_rows=100, dropped_by_watermark=3, state_rows_total=20, watermark=WM),
            _sample(CLICKS, 2, 3, num_input_rows=50, dropped_by_watermark=0, state_rows_total=40, watermark=WM),
        ],
        want={"q-clicks": (Severity.OK, 600.0, 150, 3, 40)},
    ),
    # 1: worst severity of the firing alerts wins (warning + critical -> critical); the pending critical
    #    of the other job does not count (it has not held for its `for` yet) -> that job is OK.
    Case(
        samples=[_sample(CLICKS, 1, 7, num_input_rows=5), _sample(ORDERS, 1, 4, num_input_rows=6)],
        alerts=[
            _alert(CLICKS, "watermark_stall", Severity.WARNING, AlertState.FIRING),
            _alert(CLICKS, "late_data_dropped", Severity.CRITICAL, AlertState.FIRING),
            _alert(ORDERS, "watermark_stall", Severity.CRITICAL, AlertState.PENDING),
        ],
        want={"q-clicks": (Severity.CRITICAL, None, 5, None, None), "q-orders": (Severity.OK, None, 6, None, None)},
    ),
    # 2: unknown stays unknown, not 0: no watermark, no dropped counts, no state rows reported -> None;
    #    input rows known from one batch only -> that batch's 8.
    Case(
        samples=[_sample(CLICKS, 5, 1, num_input_rows=8), _sample(CLICKS, 4, 2)],
        want={"q-clicks": (Severity.OK, None, 8, None, None)},
    ),
    # 3: a resolved alert is not current -> OK; an idle event (same batch id) is newest but is no batch:
    #    freshness is the newest batch's, on the data's own clock (watermark NOW-12min at 3 min ago ->
    #    540 s), and its repeated batch id is not counted again: input rows 20.
    Case(
        samples=[
            _sample(CLICKS, 3, 5, num_input_rows=20, watermark=WM),
            _sample(CLICKS, 1, 5, kind=SampleKind.IDLE, num_input_rows=20, watermark=WM),
        ],
        alerts=[_alert(CLICKS, "watermark_stall", Severity.CRITICAL, AlertState.RESOLVED)],
        want={"q-clicks": (Severity.OK, 540.0, 20, None, None)},
    ),
    # 4: per-source samples do not add to the whole-job sums: job-level 30 rows, the source-scoped sample's
    #    30 is the same rows seen per source. A sample observed after NOW is ignored (14 rows).
    Case(
        samples=[
            _sample(CLICKS, 2, 9, num_input_rows=30),
            _sample(CLICKS, 2, 9, num_input_rows=30, scope=Scope(source="clicks", partition=0)),
            _sample(CLICKS, -1, 10, num_input_rows=14),
        ],
        want={"q-clicks": (Severity.OK, None, 30, None, None)},
    ),
    # 5: a job with only an alert (no samples in the lookback) is still listed, numbers unknown.
    Case(
        alerts=[_alert(ORDERS, "job_stopped", Severity.WARNING, AlertState.FIRING)],
        want={"q-orders": (Severity.WARNING, None, None, None, None)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_build_report(case: Case) -> None:
    by_job: dict[tuple[Engine, str], list[Sample]] = {}
    for s in case.samples:
        by_job.setdefault((s.job.engine, s.job.job_id), []).append(s)
    report = build_report("daily", NOW, by_job, case.alerts)
    got = {
        j.job_id: (
            j.health,
            j.numbers.watermark_lag_seconds,
            j.numbers.input_rows_last_hour,
            j.numbers.dropped_by_watermark_last_hour,
            j.numbers.state_rows,
        )
        for j in report.jobs
    }
    assert got == case.want
    assert report.scheduled_at == datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    assert report.health == max((w[0] for w in case.want.values()), default=Severity.OK)
    assert HealthReport.from_json(report.to_json()) == report  # the outbox payload round-trips


def test_report_lists_alerts_worst_first_and_jobs_worst_first() -> None:
    alerts = [
        _alert(CLICKS, "watermark_stall", Severity.WARNING, AlertState.FIRING, "flat for 14 min"),
        _alert(CLICKS, "late_data_dropped", Severity.CRITICAL, AlertState.PENDING, "52 rows dropped"),
        _alert(ORDERS, "job_stopped", Severity.CRITICAL, AlertState.FIRING, "stopped"),
    ]
    report = build_report("daily", NOW, {}, alerts)
    # orders is critical (firing critical); clicks is warning (its critical is only pending).
    assert [(j.job_id, j.health) for j in report.jobs] == [("q-orders", Severity.CRITICAL), ("q-clicks", Severity.WARNING)]
    assert [(a.rule, a.state, a.message) for a in report.jobs[1].alerts] == [
        ("late_data_dropped", AlertState.PENDING, "52 rows dropped"),
        ("watermark_stall", AlertState.FIRING, "flat for 14 min"),
    ]


def test_empty_store_is_an_ok_report_with_no_jobs() -> None:
    report = build_report("daily", NOW, {}, [])
    assert (report.health, report.jobs) == (Severity.OK, ())
    assert report_slot(datetime(2026, 11, 29, 8, 0, 59, 999999, tzinfo=UTC)) == datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="now"):
        build_report("daily", datetime(2026, 11, 29, 8, 0), {}, [])


# --- config -------------------------------------------------------------------------------------------

HOOK = {"name": "ops", "type": "webhook", "url": "https://h.invalid/x", "secret": {"env": "S"}}
AM = {"name": "am", "type": "alertmanager", "url": "http://am:9093"}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        # 6 fields (a seconds field) is not crontab syntax
        ({"receivers": [HOOK], "reports": [{"name": "r", "cron": "0 0 8 * * *", "receiver": "ops"}]},
         "<config>: reports[0].cron: not a valid cron expression (Wrong number of fields; got 6, expected 5); "
         "expected 5 fields: minute hour day month day-of-week, e.g. '0 8 * * *'"),
        # hour 24 does not exist
        ({"receivers": [HOOK], "reports": [{"name": "a", "cron": "0 8 * * *", "receiver": "ops"},
                                          {"name": "b", "cron": "0 24 * * *", "receiver": "ops"}]},
         "<config>: reports[1].cron: not a valid cron expression"),
        ({"receivers": [HOOK, AM], "reports": [{"name": "r", "cron": "0 8 * * *", "receiver": "am"}]},
         "<config>: reports[0].receiver: 'am' is an alertmanager receiver; reports go to webhook or slack receivers"),
        ({"receivers": [HOOK], "reports": [{"name": "r", "cron": "0 8 * * *", "receiver": "ops"}] * 2},
         "<config>: reports: names must be unique; repeated: r"),
        ({"receivers": [HOOK], "routes": [{"receiver": "ops", "group_by": ["rule"]}]},
         "<config>: routes[0].group_by: only [engine, job_id] is supported"),
        ({"receivers": [HOOK], "routes": [{"receiver": "ops", "group_wait": "30s"}]},
         "<config>: routes[0].group_wait: only 0s is supported"),
    ],
)  # fmt: skip
def test_config_rejects(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert str(info.value).startswith(message)


def test_config_accepts_cron_and_default_grouping_written_out() -> None:
    cfg = parse_config(
        {
            "receivers": [HOOK],
            "routes": [{"receiver": "ops", "group_by": ["job_id", "engine"], "group_wait": "0s"}],
            "reports": [{"name": "hourly", "cron": "*/15 * * * 1-5", "receiver": "ops"}],
        }
    )
    assert cfg.reports[0].cron == "*/15 * * * 1-5"


# --- formats ------------------------------------------------------------------------------------------


def _report() -> HealthReport:
    samples = {
        (Engine.SPARK, "q-clicks"): [_sample(CLICKS, 2, 3, num_input_rows=50, watermark=WM, state_rows_total=40)],
        (Engine.SPARK, "q-orders"): [_sample(ORDERS, 2, 3)],
    }
    return build_report("daily", NOW, samples, [_alert(CLICKS, "watermark_stall", Severity.CRITICAL, AlertState.FIRING)])


def test_webhook_report_payload_validates_against_the_schema() -> None:
    schema = payload_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = report_payload(ReportBatch("ops", "0" * 32, _report(), NOW), "https://tg.invalid/")
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert (doc["type"], doc["report"]["health"], doc["report"]["scheduled_at"]) == (
        "report", "critical", "2026-11-29T08:00:00.000000Z",
    )
    orders = doc["report"]["jobs"][1]
    assert orders["numbers"]["watermark"] is None and orders["numbers"]["state_rows"] is None  # unknown, not 0
    # The schema can fail: a report without jobs, a zero-for-unknown string, a wrong type.
    bad_jobs = {**doc, "report": {k: v for k, v in doc["report"].items() if k != "jobs"}}
    bad_number = {**doc, "report": {**doc["report"], "jobs": [{**orders, "numbers": {**orders["numbers"], "state_rows": "0"}}]}}
    for bad in (bad_jobs, bad_number, {**doc, "type": "alerts"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate(bad)


def test_slack_report_message() -> None:
    message = slack_report_message(_report(), "https://tg.invalid/")
    header, clicks, orders, button = message["blocks"]
    assert header["text"]["text"] == "[REPORT] daily: CRITICAL, 2 jobs, 1 with firing alerts (2026-11-29T08:00Z)"
    # lag: observed 07:58:02, watermark 07:48:02 -> 600 s
    assert clicks["text"]["text"] == (
        ":red_circle: *clicks (spark q-clicks)*: critical\n"
        "watermark 2026-11-29T07:48:02.000000Z (lag 600s); input rows last hour 50; "
        "dropped by watermark last hour unknown; state rows 40\n"
        "• firing *watermark_stall* (critical): why"
    )
    assert "input rows last hour unknown" in orders["text"]["text"]
    assert button["elements"][0]["url"] == "https://tg.invalid/"


# --- through the runtime ------------------------------------------------------------------------------


def test_report_tick_twice_is_delivered_once_to_a_loopback_webhook(tmp_path: Path) -> None:
    secret = "whsec-report"
    with migrated_sessions(sqlite_url(tmp_path)) as sessions, running_receiver() as rx, httpx.Client() as client:
        with sessions.begin() as session:
            save_poll(session, PollResult(samples=(_sample(CLICKS, 2, 3, num_input_rows=50),)), collector="test")
        runtime = Runtime(
            sessions=sessions,
            targets=[],
            latest=LatestSamples(),
            rules_config=RulesConfig(),
            notifiers=[WebhookNotifier("ops", rx.url, secret)],
            http_client=client,
        )
        # The cron job ran twice in the same scheduled minute (e.g. a restart right after the first run):
        runtime.report("daily", "ops", NOW)
        runtime.report("daily", "ops", NOW + timedelta(seconds=30))
        first = runtime.dispatch(NOW + timedelta(seconds=31))
        again = runtime.dispatch(NOW + timedelta(seconds=40))
        assert (first.delivered, first.batches_sent, again.batches_sent) == (1, 1, 0)
        (request,) = rx.requests
        body = request.json()
        assert (body["type"], body["report"]["name"], body["report"]["jobs"][0]["job_id"]) == ("report", "daily", "q-clicks")
        assert body["report"]["jobs"][0]["numbers"]["input_rows_last_hour"] == 50
        assert body["idempotency_key"] == request.headers["idempotency-key"]
        timestamp = int((NOW + timedelta(seconds=31)).timestamp())
        expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + request.body, hashlib.sha256).hexdigest()
        assert request.headers["x-tidegauge-signature"] == f"t={timestamp},v1={expected}"
        # The next scheduled run (next day's 08:00) is a new report.
        runtime.report("daily", "ops", NOW + timedelta(days=1))
        assert dispatch_due(sessions, [WebhookNotifier("ops", rx.url, secret)], client, NOW + timedelta(days=1)).delivered == 1
        assert len(rx.requests) == 2


def test_report_retries_with_the_same_idempotency_key(tmp_path: Path) -> None:
    with migrated_sessions(sqlite_url(tmp_path)) as sessions, running_receiver() as rx, httpx.Client() as client:
        runtime = Runtime(
            sessions=sessions,
            targets=[],
            latest=LatestSamples(),
            rules_config=RulesConfig(),
            notifiers=[WebhookNotifier("ops", rx.url, "k")],
            http_client=client,
        )
        runtime.report("daily", "ops", NOW)
        rx.fail_status = 503
        assert runtime.dispatch(NOW).retried == 1
        rx.fail_status = None
        assert runtime.dispatch(NOW + timedelta(hours=1)).delivered == 1  # past any backoff (max 5 min)
        keys = {r.headers["idempotency-key"] for r in rx.requests}
        assert len(rx.requests) == 2 and len(keys) == 1


def test_daemon_schedules_each_report_on_its_cron(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    config = parse_config(
        {
            "receivers": [HOOK],
            "reports": [
                {"name": "daily", "cron": "0 8 * * *", "receiver": "ops"},
                {"name": "quarterly-hour", "cron": "*/15 * * * *", "receiver": "ops"},
            ],
        }
    )
    daemon = build(config, db_url=url, environ={"S": "k"}, clock=lambda: NOW)
    try:
        daemon.scheduler.start()
        times = daemon.scheduler.next_run_times()
    finally:
        daemon.stop(5.0)
    # APScheduler computes cron times from the wall clock: check the shape of the schedule, not the date.
    daily, quarter = times["report daily"], times["report quarterly-hour"]
    assert daily is not None and (daily.hour, daily.minute, daily.second) == (8, 0, 0)
    assert daily.utcoffset() == timedelta(0)
    assert quarter is not None and quarter.minute % 15 == 0 and quarter.second == 0
    assert {"evaluate", "dispatch", "retention"} <= set(times)
