"""The one redactor (monitor.redaction) and each leak named in issue 11, through the real paths:

* a database password given as a URL query parameter is printed by ``run`` (its "database ..." line);
* a Slack webhook URL's path echoed back in the receiver's error body is stored in the outbox's
  ``last_error`` and logged;
* (``?token=`` in the access log: tests/unit/test_serve_command.py)
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from monitor import redaction
from monitor.alerts.routing import Route
from monitor.config import parse_config, secret_values
from monitor.daemon.compose import build, build_redactor
from monitor.model import Engine, Finding, JobRef, Severity
from monitor.notify.dispatcher import RetryPolicy, dispatch_due
from monitor.notify.slack import SlackNotifier
from monitor.redaction import Redactor
from monitor.store import redact_url, upgrade
from monitor.store.alert_tables import OutboxRow
from tests.alerting import migrated_sessions, sqlite_url, tick
from tests.daemon_process import free_port
from tests.http_receiver import running_receiver

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SLACK_PATH = "/services/T0AB12CD3/B0EF45GH6/zyXWvuTSrqPOnmLKjihGFedc"
DB_PASSWORD = "db-pass-in-the-query-7731"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        # every query parameter value of a URL, the password of its user-info part
        ("postgresql+psycopg://tg@db/tg?password=hunter22&sslmode=require",
         "postgresql+psycopg://tg@db/tg?password=***&sslmode=***"),
        ("connect to https://u:pa55word@am.example:9093/api failed", "connect to https://u:***@am.example:9093/api failed"),
        ('GET /metrics?token=abcdef123 "200"', 'GET /metrics?token=*** "200"'),
        # Slack webhook URLs and their paths on their own
        ("https://hooks.slack.com/services/T000/B000/XXXX", "https://hooks.slack.com/***"),
        (f"no_service: {SLACK_PATH}", "no_service: /services/***"),
        # credentials in headers and key=value pairs
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30", "Authorization: ***"),
        ("sent with Bearer eyJhbGciOiJIUzI1NiJ9.e30 to the driver", "sent with Bearer *** to the driver"),
        ("login failed: password=s3cr3t user=tg", "login failed: password=*** user=tg"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNz'", "curl -H 'Authorization: ***'"),
        # nothing secret: unchanged
        ("the token expired; Basic authentication refused", "the token expired; Basic authentication refused"),
        ("receiver 'ops': HTTP 503: upstream busy", "receiver 'ops': HTTP 503: upstream busy"),
        ("http://127.0.0.1:8321/healthz", "http://127.0.0.1:8321/healthz"),
    ],
)
def test_patterns_hide_secret_parts_without_configuration(text: str, redacted: str) -> None:
    assert Redactor().redact(text) == redacted


def test_configured_secrets_and_their_url_parts() -> None:
    slack = "https://chat.internal.example" + SLACK_PATH  # not hooks.slack.com: only configuration knows it
    r = Redactor(secrets=["tok-1234567890", slack], urls=["http://user:am-pass-99@am:9093/?key=am-query-val"])
    # the whole value, and each secret part on its own, wherever it appears
    assert r.redact(f"posting to {slack} failed") == "posting to *** failed"
    assert "zyXWvuTSrqPOnmLKjihGFedc" not in r.redact("echo: zyXWvuTSrqPOnmLKjihGFedc")
    assert r.redact("am said am-pass-99 and am-query-val") == "am said *** and ***"
    assert r.redact("token tok-1234567890 refused") == "token *** refused"
    # a secret URL printed as a URL keeps only scheme and host
    assert r.url(slack) == "https://chat.internal.example/***"


def test_secret_values_of_a_config() -> None:
    cfg = parse_config(
        {
            "database": {"env": "DB"},
            "server": {"ingest_token": {"env": "TOKEN"}},
            "receivers": [
                {"name": "chat", "type": "slack", "url": {"env": "SLACK"}},
                {"name": "ops", "type": "webhook", "url": "https://hooks.example/tg/abc123456", "secret": {"env": "WH"}},
                {"name": "am", "type": "alertmanager", "url": "http://am:9093"},
            ],
        }
    )
    env = {"DB": "sqlite:///x.db", "TOKEN": "ingest-token", "SLACK": "https://hooks.slack.com/services/a/b/c"}
    secrets, urls = secret_values(cfg, env)  # WH is unset: left to whoever needs it
    assert sorted(secrets) == sorted(
        ["sqlite:///x.db", "ingest-token", "https://hooks.slack.com/services/a/b/c", "https://hooks.example/tg/abc123456"]
    )
    assert urls == ["http://am:9093"]


# SQLite ignores (and SQLAlchemy warns about) the query argument; PostgreSQL's drivers take it as the login.
@pytest.mark.filterwarnings("ignore:Query string argument:sqlalchemy.exc.SAWarning")
def test_run_does_not_print_a_database_password_given_as_a_query_parameter(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Reproducer: `tidegauge run` logged "database sqlite:///...?password=<the password>".
    db = f"{sqlite_url(tmp_path)}?password={DB_PASSWORD}"
    upgrade(sqlite_url(tmp_path))
    cfg = parse_config({"server": {"host": "127.0.0.1", "port": free_port()}})
    caplog.set_level(logging.INFO)
    daemon = build(cfg, db_url=db, environ={})
    daemon.store.dispose()
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("database sqlite:///") and "password=***" in line for line in lines), lines
    assert DB_PASSWORD not in caplog.text
    assert DB_PASSWORD not in redact_url(db)


def test_slack_path_echoed_in_an_error_body_is_neither_stored_nor_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Reproducer: Slack answers an unknown webhook with its path in the body; the outbox's last_error
    # and the warning kept "HTTP 404: no_service: /services/T.../B.../<token>".
    job = JobRef(Engine.SPARK, "q-1", "run-1", "clicks")
    finding = Finding("watermark_stall", Severity.CRITICAL, job, "watermark flat for 14 min", T0)
    with running_receiver() as rx, migrated_sessions(sqlite_url(tmp_path)) as sessions, httpx.Client() as client:
        slack_url = rx.url.removesuffix("/hook") + SLACK_PATH
        rx.fail_status, rx.fail_body = 404, f"no_service: {SLACK_PATH.removeprefix('/services')}"
        tick(sessions, [finding], T0, [Route("chat")])
        caplog.set_level(logging.INFO)
        config = parse_config({"receivers": [{"name": "chat", "type": "slack", "url": {"env": "SLACK"}}]})
        redactor = build_redactor(config, None, {"SLACK": slack_url})
        dispatch_due(sessions, [SlackNotifier("chat", slack_url)], client, T0, policy=RetryPolicy(), redactor=redactor)
        with sessions() as session:
            [stored] = session.scalars(select(OutboxRow.last_error))
    assert stored is not None and stored.startswith("receiver 'chat': HTTP 404: no_service: ")
    # (httpx's own request line is a library's record: `run` keeps httpx at WARNING, and the installed
    # formatter redacts it anyway; see the test below)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("monitor"))
    for part in ("zyXWvuTSrqPOnmLKjihGFedc", "T0AB12CD3", "B0EF45GH6"):
        assert part not in stored
        assert part not in ours
        assert part not in redactor.redact(caplog.text)
    assert "not delivered" in ours and "watermark_stall for clicks (spark q-1)" in ours


def test_installed_redactor_masks_every_log_line_and_traceback(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.redaction.install")
    handler_logger = logging.getLogger("test.redaction.target")
    handler = logging.StreamHandler()
    records: list[str] = []
    handler.emit = lambda record: records.append(handler.format(record))  # type: ignore[method-assign]
    handler_logger.addHandler(handler)
    before = redaction.current()
    try:
        redaction.install(Redactor(secrets=["sup3r-secret-value"]), handler_logger)
        handler_logger.propagate = False
        try:
            raise RuntimeError("connect with sup3r-secret-value failed")
        except RuntimeError:
            handler_logger.exception("x %s", "sup3r-secret-value")
        logger.info("unrelated")
    finally:
        redaction.install(before, handler_logger)
        handler_logger.removeHandler(handler)
    assert records and all("sup3r-secret-value" not in r for r in records)
    assert "RuntimeError: connect with *** failed" in records[0]


def test_collector_errors_and_poll_failures_are_stored_and_shown_redacted(tmp_path: Path) -> None:
    from datetime import timedelta

    from collectors.base import PollsOnce
    from monitor.daemon.runtime import Runtime, Target
    from monitor.metrics.latest import LatestSamples
    from monitor.model import CollectorError, PollResult
    from monitor.store.tables import CollectorErrorRow

    token = "bearer-token-of-the-target-5501"

    class Quoting(PollsOnce):
        """Stands in for a collector quoting what a server answered (a fault injected for the test)."""

        name = "spark-prometheus"

        def __init__(self) -> None:
            self.calls = 0

        def poll(self, now: datetime) -> PollResult:
            self.calls += 1
            if self.calls == 1:
                return PollResult(errors=(CollectorError(self.name, "driver", f"HTTP 401: bad token {token}", now),))
            raise RuntimeError(f"connection reset while sending Authorization: Bearer {token}")

    with migrated_sessions(sqlite_url(tmp_path)) as sessions:
        runtime = Runtime(
            sessions=sessions, targets=[Target("driver", Quoting(), timedelta(seconds=15))],
            latest=LatestSamples(), rules_config=parse_config({}).rules, redactor=Redactor(secrets=[token]),
        )  # fmt: skip
        runtime.poll(runtime.targets[0], T0)
        with sessions() as session:
            [stored] = session.scalars(select(CollectorErrorRow.message))
        runtime.poll(runtime.targets[0], T0)
        _, body = runtime.health()
    assert stored == "HTTP 401: bad token ***"
    assert body["targets"][0]["last_error"] == (
        "poll not stored, read again next time (RuntimeError: connection reset while sending Authorization: ***"
    )
    assert token not in str(body)
