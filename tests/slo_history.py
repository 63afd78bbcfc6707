"""The freshness history of the SLO tests as a Spark event log: one micro-batch a minute for 761 minutes from
:data:`START`, the watermark 1 min behind each batch's trigger time except batches 360..389 (10 min behind).

With ``rules.freshness_slo: {freshness: 5m, objective: 99%}`` the workbook's table gives: ticket at minute
363, page at 368 until 418 (then the ticket again), nothing from 746 (worked out in
tests/unit/test_rule_slo.py, which replays the same history as samples).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from monitor.demo.sparkfmt import application_start, line, log_start, progress_event, query_started

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MINUTES = 761
BAD = range(360, 390)
QUERY_ID = "5f0c2a3e-0000-4000-8000-000000000018"
RUN_ID = "5f0c2a3e-0000-4000-8000-0000000000r1"
SLO_CONFIG = "rules:\n  freshness_slo: {freshness: 5m, objective: 99%, window: 28d}\n"


def write_slo_eventlog(path: Path) -> Path:
    """Write the event log to ``path`` (a file) and return it."""
    start_ms = int(START.timestamp() * 1000)
    lines = [line(log_start()), line(application_start("slo", "app-slo-0001", start_ms)),
             line(query_started(QUERY_ID, RUN_ID, "orders_fresh", start_ms))]
    for k in range(MINUTES):
        at = start_ms + k * 60_000
        behind = 10 if k in BAD else 1
        lines.append(line(progress_event(
            query_id=QUERY_ID, run_id=RUN_ID, name="orders_fresh", timestamp_ms=at, batch_id=k,
            duration_ms=800, trigger_ms=60_000, watermark_ms=at - behind * 60_000,
            event_time=(at - 120_000, at - 90_000, at - 60_000), state_operators=(), sources=(),
        )))
    path.write_text("".join(x if x.endswith("\n") else x + "\n" for x in lines), encoding="utf-8")
    return path
