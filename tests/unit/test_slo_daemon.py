"""The daemon gives the freshness SLO's alerts a scan of the same history gives (the data's clock): the
event log of tests/slo_history.py read by the built daemon at one tick after its last batch. Expected: the
one episode worked out by hand in tests/unit/test_rule_slo.py (batches 363..745, critical at its worst), which
needs the 3-day history the rule reads: the daemon keeps it although it caps other rules at 1 hour."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import yaml

from monitor.config import parse_config
from monitor.daemon.compose import build
from monitor.store import load_episodes, open_store, upgrade
from tests.slo_history import MINUTES, SLO_CONFIG, START, write_slo_eventlog


def test_daemon_alerts_on_the_slo_as_scan_does(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write_slo_eventlog(logs / "app-slo-0001")
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    config = parse_config({
        **yaml.safe_load(SLO_CONFIG),
        "targets": {"spark_event_logs": [{"name": "slo", "path": str(logs)}]},
    })
    now = START + timedelta(minutes=MINUTES + 1)
    daemon = build(config, db_url=url, environ={}, clock=lambda: now)
    try:
        runtime = daemon.runtime
        for target in runtime.targets:
            runtime.poll(target, now)
        runtime.evaluate(now)
    finally:
        daemon.stop()
    store = open_store(url)
    try:
        with store.sessions() as session:
            found = [(e.rule, e.first_batch_id, e.last_batch_id, e.severity.label()) for e in load_episodes(session)]
    finally:
        store.dispose()
    assert found == [("freshness_slo", 363, 745, "critical")]
