"""Integration test against a real Prometheus Alertmanager (Debian's ``prometheus-alertmanager``).

The test starts Alertmanager on a free loopback port with a temporary storage path and a minimal config
whose only receiver is a webhook pointing at a loopback receiver of ours, so both sides are checked:
what Alertmanager stored (``GET /api/v2/alerts``) and what it notified (its webhook, including the
resolved notification with our ``endsAt``). Alerts go the whole way: lifecycle -> outbox -> dispatcher
-> AlertmanagerNotifier -> Alertmanager. Waiting on the real process uses short polls with a deadline.

Without the binary the test skips under a bare ``pytest`` and fails under ``make test``
(:func:`tests.dependencies.missing`).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from monitor.alerts.routing import Route
from monitor.model import Engine, Finding, JobRef, Severity
from monitor.notify.alertmanager import AlertmanagerNotifier
from monitor.notify.dispatcher import dispatch_due
from tests.alerting import alertmanager_binary, migrated_sessions, sqlite_url, tick
from tests.http_receiver import Receiver, running_receiver

pytestmark = pytest.mark.integration

T = TypeVar("T")
JOB = JobRef(Engine.SPARK, "q-clicks", "run-1", "clicks")
STALL = Finding("watermark_stall", Severity.CRITICAL, JOB, "watermark flat for 14 min", datetime(2026, 1, 1, tzinfo=UTC))
LATE = Finding("late_rows_dropped", Severity.WARNING, JOB, "1200 rows dropped as late", datetime(2026, 1, 1, tzinfo=UTC))
DASHBOARD = "http://tidegauge.invalid/job"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, probe: Callable[[], T | None], timeout_s: float = 20.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


@pytest.fixture
def alertmanager(tmp_path: Path, hook: Receiver) -> Iterator[str]:
    binary = alertmanager_binary()
    port = _free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        f"""
route:
  receiver: hook
  group_by: [alertname, job_id]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: {hook.url}
        send_resolved: true
"""
    )
    storage = tmp_path / "am-data"
    storage.mkdir()
    log = (tmp_path / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={storage}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=info",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool | None:
        if proc.poll() is not None:
            raise AssertionError(f"alertmanager exited with {proc.returncode}: {(tmp_path / 'alertmanager.log').read_text()}")
        try:
            return True if httpx.get(f"{base}/-/ready", timeout=1.0).status_code == 200 else None
        except httpx.TransportError:
            return None

    try:
        _wait("alertmanager to be ready", ready)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _time(text: str) -> datetime:
    """Go RFC 3339 (up to nanoseconds) -> aware datetime (to microseconds)."""
    head, _, frac_z = text.partition(".")
    if not frac_z:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    digits = frac_z.rstrip("Z")
    return datetime.fromisoformat(f"{head}.{digits[:6].ljust(6, '0')}+00:00")


def _am_alerts(base: str) -> dict[str, dict[str, Any]]:
    response = httpx.get(f"{base}/api/v2/alerts", timeout=5.0)
    response.raise_for_status()
    return {a["labels"]["alertname"]: a for a in response.json()}


def test_firing_then_resolved_reach_a_real_alertmanager(alertmanager: str, hook: Receiver, tmp_path: Path) -> None:
    routes = [Route("am")]
    notifier = AlertmanagerNotifier("am", alertmanager, dashboard_url=DASHBOARD)
    # Alertmanager judges endsAt by its own wall clock, so this test's clock is the real one (whole seconds).
    fired = datetime.now(UTC).replace(microsecond=0)
    with migrated_sessions(sqlite_url(tmp_path)) as sessions, httpx.Client() as client:
        tick(sessions, [STALL, LATE], fired, routes)
        report = dispatch_due(sessions, [notifier], client, fired)
        assert (report.batches_sent, report.delivered, report.errors) == (1, 2, [])  # one job: one POST

        stored = _am_alerts(alertmanager)
        assert set(stored) == {"watermark_stall", "late_rows_dropped"}
        stall = stored["watermark_stall"]
        assert stall["labels"] == {
            "alertname": "watermark_stall", "severity": "critical", "engine": "spark", "job_id": "q-clicks",
        }
        assert stall["annotations"]["description"] == "watermark flat for 14 min"
        assert stall["annotations"]["job_name"] == "clicks"
        assert stall["annotations"]["summary"] == "watermark_stall on spark job q-clicks"
        assert stall["annotations"]["tidegauge_fingerprint"] == STALL.fingerprint()
        assert _time(stall["startsAt"]) == fired
        assert stall["status"]["state"] == "active"
        assert stall["generatorURL"] == f"{DASHBOARD}?engine=spark&job_id=q-clicks"
        # No endsAt sent: Alertmanager sets its resolve_timeout (default 5m) after receipt.
        assert _time(stall["endsAt"]) > fired + timedelta(minutes=4)

        # The stall clears: resolved with endsAt = the evaluation time.
        resolved = datetime.now(UTC).replace(microsecond=0)
        tick(sessions, [LATE], resolved, routes)
        report = dispatch_due(sessions, [notifier], client, resolved)
        assert (report.delivered, report.errors) == (1, [])

    # Resolved alerts are no longer listed by GET /api/v2/alerts; the other one still is.
    assert set(_am_alerts(alertmanager)) == {"late_rows_dropped"}

    def resolved_notification() -> dict[str, Any] | None:
        for request in list(hook.processed):
            for alert in request.json()["alerts"]:
                if alert["labels"]["alertname"] == "watermark_stall" and alert["status"] == "resolved":
                    return dict(alert)
        return None

    note = _wait("Alertmanager's resolved notification", resolved_notification)
    assert _time(note["endsAt"]) == resolved
    assert _time(note["startsAt"]) == fired
    assert note["labels"]["job_id"] == "q-clicks"
    firing = [a for r in hook.processed for a in r.json()["alerts"] if a["status"] == "firing"]
    assert {a["labels"]["alertname"] for a in firing} >= {"watermark_stall", "late_rows_dropped"}
