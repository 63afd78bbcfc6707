"""Done when: against a real running Flink 2.3.0 cluster, ``tidegauge check flink`` and ``tidegauge run``
report an idle subtask pinning the watermark, a future-timestamp jump, late-record drops and a restart,
with causes.

The cluster and the test job (tests/flink_job/tidegauge/TestJob.java) come from the session fixtures
``flink_cluster`` / ``flink_test_jobs`` (tests/conftest.py). What each job does, and so what must be
found:

* ``tg-idle``: a filter drops every record of source subtask 1 before the watermark assigner, so that
  subtask never emits a watermark and the window's input watermark stays Long.MIN_VALUE -> an idle source
  subtask pinning the watermark (WARNING), named by job, vertex and subtask;
* ``tg-idle-withidleness``: the same with ``withIdleness(2 s)`` -> subtask 1 is marked idle and the window's
  watermark advances, but the subtask reads records and emits no watermark (WARNING ``no_watermark``: when its
  records reach the assigner again they are dropped as late);
* ``tg-idle-late``: ``tg-idle-withidleness`` with two window vertices that dropped 11 late records each early on
  and none since -> ``no_watermark`` and ``late_rows_dropped`` (cumulative 22, none between the polls);
* ``tg-future``: record 50 is dated 3 h ahead -> the watermark jumps 3 h ahead (CRITICAL) and honest
  records are dropped as late;
* ``tg-late``: every 5th record from the 30th on is 30 s late, beyond the 2 s window's 1 s allowed
  lateness -> numLateRecordsDropped rises (late_drop_surge);
* ``tg-failing``: the map throws ``IllegalStateException: tidegauge test failure at record 30`` in every
  attempt; fixed-delay restarts 2 times, then the job fails -> restarted (with that cause) and failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.store import upgrade
from tests.conftest import REPO_ROOT
from tests.daemon_process import DaemonProcess, free_port, metric_values, wait_for
from tests.flink_cluster import FlinkCluster
from tests.http_receiver import Receiver, running_receiver

pytestmark = [pytest.mark.integration, pytest.mark.flink, pytest.mark.slow]

CAUSE = "java.lang.IllegalStateException: tidegauge test failure at record 30"
NO_WATERMARK = "-9223372036854775808"


def _vertex_metric(cluster: FlinkCluster, jid: str, index: int, metric: str) -> str | None:
    vertex = cluster.get_json(f"/jobs/{jid}")["vertices"][index]["id"]
    got = cluster.get_json(f"/jobs/{jid}/vertices/{vertex}/metrics?get={metric}")
    return str(got[0]["value"]) if got else None


@pytest.fixture(scope="module")
def ready_jobs(flink_cluster: FlinkCluster, flink_test_jobs: dict[str, str]) -> dict[str, str]:
    """Wait until every job shows what it is there for (Flink's REST metrics lag a little)."""
    c, j = flink_cluster, flink_test_jobs

    seen: list[int] = []

    def late_dropped() -> bool:
        # rising now (two reads apart), not only once: the check's two polls must see drops between them
        value = _vertex_metric(c, j["late"], 1, "0.window-2s.numLateRecordsDropped")
        if value is None:
            return False
        seen.append(int(value))
        return len(seen) >= 2 and seen[-1] > seen[-2] > 0

    def failed() -> bool:
        return bool(c.get_json(f"/jobs/{j['failing']}")["state"] == "FAILED")

    def future_dropped() -> bool:
        value = _vertex_metric(c, j["future"], 1, "0.window-2s.numLateRecordsDropped")
        return value is not None and int(value) > 0

    def idle_pinned_long_enough() -> bool:
        # subtask 0 has a watermark, subtask 1 none, and the job has run 12 s past the first one
        out0 = _vertex_metric(c, j["idle"], 0, "0.Timestamps/Watermarks.currentOutputWatermark")
        job = c.get_json(f"/jobs/{j['idle']}")
        return out0 not in (None, NO_WATERMARK) and job["now"] - job["timestamps"]["RUNNING"] > 12_000

    def idle_late_done() -> bool:
        # both keys hash to window subtask 1; records 30..80 (every 5th) are late, none after
        return _vertex_metric(c, j["idle-late"], 1, "1.window-2s.numLateRecordsDropped") == "11"

    for what, probe in [
        ("late drops in tg-late", late_dropped),
        ("tg-idle-late's early late drops", idle_late_done),
        ("tg-failing to fail after its restarts", failed),
        ("the future record's drops in tg-future", future_dropped),
        ("tg-idle to run a while", idle_pinned_long_enough),
    ]:
        c.wait_for(probe, what, timeout_s=120, interval_s=2.0)
    return j


def _check(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "check", "flink", url, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _matching(findings: list[dict[str, Any]], rule: str, job: str, match: dict[str, Any]) -> dict[str, Any] | None:
    """The first finding of ``rule`` for ``job`` whose fields include ``match``, if any."""
    for f in findings:
        if f["rule"] == rule and f["job"] == job and all(f.get(k) == v for k, v in match.items()):
            return f
    return None


def _find(findings: list[dict[str, Any]], rule: str, job: str, **match: Any) -> dict[str, Any]:
    found = _matching(findings, rule, job, match)
    if found is not None:
        return found
    raise AssertionError(f"no {rule} finding for {job} {match}; findings: {json.dumps(findings, indent=1)}")


def test_check_flink_reports_idle_future_late_and_restart(
    flink_cluster: FlinkCluster, ready_jobs: dict[str, str]
) -> None:
    # Late drops and "subtask 0 advances beside idle subtask 1" need two polls that see new values. Flink
    # refreshes its REST metric store asynchronously (every 1 s here, in the background of the request that
    # asks: MetricFetcherImpl), and on a loaded machine a poll can read a vertex from the same fetch as the
    # poll 10 s before (every value of it equal: nothing is known about it in between, rightly, so the
    # findings that need it do not hold): check again then, for at most three minutes.
    needed = [
        ("late_drop_surge", "tg-late", {}),
        ("idle_source", "tg-idle", {"subtask": 1, "severity": "warning"}),
        ("idle_source", "tg-idle-withidleness", {"subtask": 1, "severity": "warning"}),
        ("idle_source", "tg-idle-late", {"subtask": 1, "labels": {"check": "no_watermark"}}),
        ("late_rows_dropped", "tg-idle-late", {"severity": "info"}),
    ]
    deadline = time.monotonic() + 180
    while True:
        proc = _check(flink_cluster.rest_url, "--format", "json", "--interval", "10s", "--idle-for", "10s")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        # a stale read is never taken for "no records": no job that keeps getting records is all idle
        frozen = [f["job"] for f in report["findings"] if f["labels"].get("check") == "all_inputs_idle"]
        assert not set(frozen) & {"tg-idle", "tg-idle-withidleness", "tg-late", "tg-future"}, json.dumps(
            {"frozen": frozen, "jobs": [j for j in report["jobs"] if j["name"] in frozen]}, indent=1
        )
        cumulative_found = _matching(report["findings"], "late_rows_dropped", "tg-idle-late", {})
        # the drops between the polls are known (0) only when both polls read fresh window metrics
        settled = cumulative_found is not None and "none of them" in cumulative_found["message"]
        if (
            settled and all(_matching(report["findings"], *want) is not None for want in needed)
        ) or time.monotonic() > deadline:
            break
    jobs = {j["name"]: j for j in report["jobs"]}
    assert set(jobs) >= {"tg-idle", "tg-idle-withidleness", "tg-idle-late", "tg-late", "tg-future", "tg-failing"}

    idle = jobs["tg-idle"]
    assert idle["jid"] == ready_jobs["idle"] and idle["state"] == "RUNNING"
    source, window = idle["vertices"]
    assert source["name"].startswith("Source: seq") and source["parallelism"] == 2
    sub0, sub1 = source["subtasks"]
    assert isinstance(sub0["output_watermark_ms"], int) and sub1["output_watermark_ms"] is None
    assert [t["input_watermark_ms"] for t in window["subtasks"]] == [None, None]  # Long.MIN_VALUE -> null

    findings = report["findings"]
    pinned = _find(findings, "idle_source", "tg-idle", subtask=1, severity="warning")
    assert pinned["vertex"] == source["name"]
    assert "pins the job's event time" in pinned["message"] and "withIdleness" in pinned["message"]
    marked = _find(findings, "idle_source", "tg-idle-withidleness", subtask=1, severity="warning")
    assert marked["labels"] == {"check": "no_watermark"}
    assert "subtask 1 emits no watermark" in marked["message"]
    assert "only because withIdleness marks the subtask idle" in marked["message"]
    assert "dropped as late" in marked["message"]
    # issue 17 §3: the held-back recording's shape, on the real cluster
    unseen = _find(findings, "idle_source", "tg-idle-late", subtask=1, labels={"check": "no_watermark"})
    assert unseen["severity"] == "warning" and unseen["vertex"].startswith("Source: seq")
    cumulative = _find(findings, "late_rows_dropped", "tg-idle-late", severity="info")
    assert "dropped late records in 2 window vertices since their tasks started (22 drops in all" in cumulative["message"]
    assert "none of them between the last two polls" in cumulative["message"]
    assert "`window-2s -> discard: Writer` 11 (none between the last two polls)" in cumulative["message"]

    future = _find(findings, "future_timestamp", "tg-future", subtask=None)
    assert future["severity"] == "critical" and "ahead of the observation time" in future["message"]
    assert jobs["tg-future"]["watermark_ms"] is not None

    late = _find(findings, "late_drop_surge", "tg-late")
    assert "Dropped by WindowOperator at vertex `window-2s -> discard: Writer` subtask 0" in late["message"]
    assert jobs["tg-late"]["vertices"][1]["late_records_dropped"] > 0

    restarted = _find(findings, "target_health", "tg-failing", labels={"check": "restarted"})
    assert "restarted 2 times" in restarted["message"] and CAUSE in restarted["message"]
    failed = _find(findings, "target_health", "tg-failing", labels={"check": "failed"})
    assert failed["severity"] == "critical" and CAUSE in failed["message"]
    assert jobs["tg-failing"]["state"] == "FAILED" and jobs["tg-failing"]["restarts"] == 2

    # the text report and --fail-on (exit code 1, as for scan); one poll is enough for a critical finding
    text = _check(flink_cluster.rest_url, "--interval", "0s", "--fail-on", "critical")
    assert text.returncode == 1, text.stderr
    assert "job tg-idle (" in text.stdout and "[critical] future_timestamp (tg-future" in text.stdout


def test_check_flink_unreachable_is_exit_code_2() -> None:
    proc = _check(f"http://127.0.0.1:{free_port()}", "--interval", "0s")
    assert proc.returncode == 2
    assert "cannot connect to http://127.0.0.1:" in proc.stderr


@pytest.fixture
def webhook_rx() -> Iterator[Receiver]:
    with running_receiver() as receiver:
        yield receiver


def _firing(rx: Receiver) -> list[dict[str, Any]]:
    with rx.lock:
        return [a for r in rx.processed for a in r.json().get("alerts", []) if a["status"] == "firing"]


def test_daemon_reports_the_same_with_causes(
    tmp_path: Path, flink_cluster: FlinkCluster, ready_jobs: dict[str, str], webhook_rx: Receiver
) -> None:
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    config = {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {
            "flink_rest": [{"name": "local-flink", "url": flink_cluster.rest_url, "poll_interval": "1s"}]
        },
        "rules": {"idle_source": {"for": "10s"}},
        "evaluation_interval": "1s",
        "delivery": {"interval": "500ms", "initial_backoff": "500ms", "max_backoff": "1s"},
        "receivers": [
            {"name": "ops", "type": "webhook", "url": webhook_rx.url, "secret": {"env": "TG_HOOK"}}
        ],
    }
    daemon = DaemonProcess(config, db_url, tmp_path, {"TG_HOOK": "hook-secret-for-tests"})
    wanted = {
        ("idle_source", "tg-idle"): "pins the job's event time",
        ("future_timestamp", "tg-future"): "ahead of the observation time",
        ("late_drop_surge", "tg-late"): "Dropped by WindowOperator",
        ("target_health", "tg-failing"): CAUSE,
    }

    def all_fired() -> dict[tuple[str, str], str] | None:
        got = {(a["rule"], a["labels"].get("job_id", "")): a["message"] for a in _firing(webhook_rx)}
        missing = [k for k, text in wanted.items() if k not in got or text not in got[k]]
        return None if missing else got

    try:
        daemon.start()
        fired = wait_for("the four Flink alerts at the webhook", all_fired, timeout_s=90, interval_s=0.5)
        assert "subtask 1" in fired[("idle_source", "tg-idle")]
        text = daemon.metrics()
        idle_series = [
            labels
            for labels, _ in metric_values(text, "tidegauge_source_idle_seconds")
            if labels["job_id"] == "tg-idle"
        ]
        assert {(x["subtask"], x["operator"] != "") for x in idle_series} >= {("0", True), ("1", True)}
        names = {
            x["vertex"] for x, _ in metric_values(text, "tidegauge_vertex_info") if x["job_id"] == "tg-idle"
        }
        assert any(n.startswith("Source: seq") for n in names)
        assert [
            v for x, v in metric_values(text, "tidegauge_job_restarts_total") if x["job_id"] == "tg-failing"
        ] == [2.0]
    finally:
        daemon.close()
