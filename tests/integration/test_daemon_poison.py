"""Chaos, the poison-line part (issue 11): poison lines appended to live event logs while the real daemon
(``tidegauge run`` in a subprocess) tails them. The good samples around them are all stored, every poison
is counted on ``/metrics`` by kind and visible on ``/healthz``, the target stays up, each problem is
logged once and without a traceback, and after a ``kill -9`` and restart nothing is read or reported twice.

Lines are the recorded real Spark 4.3.0 events (tests/live_eventlog.py) with one value changed to one the
model cannot hold; a file of random bytes named like a zstd event log sits beside the live logs.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.store import upgrade
from tests.daemon_process import DaemonProcess, free_port, metric_values, wait_for
from tests.live_eventlog import LiveEventLog

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _poison(key: str, literal: str) -> Callable[[dict[str, Any]], str]:
    def make(event: dict[str, Any]) -> str:
        event["progress"][key] = "@@POISON@@"
        return json.dumps(event, separators=(",", ":")).replace('"@@POISON@@"', literal)

    return make


# (poison, kind it is counted as)
POISONS = [
    (_poison("timestamp", '"9999-12-31T23:59:59-23:59"'), "field"),
    (_poison("numInputRows", "1e30"), "field"),
    (_poison("numInputRows", "9" * 400), "field"),
    (_poison("stateOperators", "[" * 5000 + "]" * 5000), "line"),
    (_poison("name", '"\\ud800"'), "field"),
    (_poison("numInputRows", "9" * 5000), "line"),
]


@pytest.fixture
def setup(tmp_path: Path, spark_fixtures: Path) -> Iterator[tuple[DaemonProcess, Path, str]]:
    root = tmp_path / "spark-events"
    root.mkdir()
    db_path = tmp_path / "tg.db"
    db_url = f"sqlite:///{db_path}"
    upgrade(db_url)
    config = {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {"spark_event_logs": [{"name": "live", "path": str(root), "poll_interval": "200ms"}]},
        "evaluation_interval": "500ms",
    }
    process = DaemonProcess(config, db_url, tmp_path)
    try:
        yield process, root, str(db_path)
    finally:
        process.close()


def _stored(db_path: str) -> dict[str, list[int]]:
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT jobs.job_id, samples.batch_id FROM samples JOIN jobs ON jobs.id = samples.job_pk "
            "WHERE samples.kind = 'progress' AND samples.scope_source IS NULL"
        ).fetchall()
    out: dict[str, list[int]] = {}
    for job_id, batch_id in rows:
        out.setdefault(job_id, []).append(batch_id)
    return {k: sorted(v) for k, v in out.items()}


def _errors(daemon: DaemonProcess) -> dict[str, float]:
    return {
        labels["kind"]: value
        for labels, value in metric_values(daemon.metrics(), "tidegauge_collector_errors_total")
        if labels["target"] == "live"
    }


def test_poison_lines_in_live_logs_never_stop_the_daemon(
    setup: tuple[DaemonProcess, Path, str], spark_fixtures: Path
) -> None:
    daemon, root, db_path = setup
    a = LiveEventLog(root / "local-1.inprogress", spark_fixtures, T0)
    b = LiveEventLog(root / "local-2.inprogress", spark_fixtures, T0)
    (root / "local-3.zstd").write_bytes(os.urandom(8192))  # random bytes beside the good logs
    expected: dict[str, list[int]] = {a.query_id: [], b.query_id: []}
    a.start_run()
    b.start_run()
    daemon.start()

    def wait_stored(what: str) -> None:
        wait_for(what, lambda: _stored(db_path) == expected or None, timeout_s=60)

    counted = {"field": 0, "line": 0}
    for round_no, (poison, kind) in enumerate(POISONS):
        expected[a.query_id] += a.batches(4, 5)
        a.append_line(poison(a.next_progress(4)))  # the poison, between good batches of the same query
        expected[a.query_id] += a.batches(4)
        expected[b.query_id] += b.batches(4)  # the other application's log, meanwhile
        counted[kind] += 1
        wait_stored(f"the good batches around poison {round_no}")
        if round_no == 2:  # a kill -9 in the middle: the cursor was stored with the samples
            daemon.kill9()
            daemon.start()

    wait_for("the errors on /metrics", lambda: _errors(daemon).get("line") == counted["line"] or None, timeout_s=30)
    # counted since the restart (in-memory counters): the poisons after it, once each, never again
    errors = _errors(daemon)
    assert errors["field"] == sum(1 for _, k in POISONS[3:] if k == "field")
    assert errors["line"] == sum(1 for _, k in POISONS[3:] if k == "line")
    assert errors["unreachable"] == 0 and errors["store"] == 0
    assert errors["file"] == 0  # the random .zstd was quarantined before the restart, not read again
    up = [v for labels, v in metric_values(daemon.metrics(), "tidegauge_target_up") if labels["target"] == "live"]
    assert up == [1.0]

    health = httpx.get(f"{daemon.base}/healthz", timeout=5.0).json()
    [target] = health["targets"]
    assert target["up"] is True
    assert [e["kind"] for e in target["recent_errors"]] == [k for _, k in POISONS[3:]]
    assert all(str(root / "local-1.inprogress") in e["message"] for e in target["recent_errors"])

    # the daemon keeps tailing after the last poison
    expected[a.query_id] += a.batches(4)
    expected[b.query_id] += b.batches(4)
    wait_stored("batches after the last poison")
    daemon.terminate()
    log = daemon.log()
    assert "Traceback" not in log
    for poison_line in {line for line in log.splitlines() if "local-1.inprogress: line" in line}:
        assert log.count(poison_line) == 1, poison_line  # each problem logged once
    assert log.count("local-3.zstd") == 1  # the random-bytes file: one line, before the restart
    with sqlite3.connect(db_path) as conn:
        stored_errors = conn.execute("SELECT message FROM collector_errors").fetchall()
    assert len(stored_errors) == len(POISONS) + 1  # each poison and the random file, once
