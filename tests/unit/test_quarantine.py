"""Quarantine, never stop (issue 11): in the daemon's poll path a line, document or file that cannot be
parsed is one collector error naming the file, line and field; the cursor moves past it with the samples;
the rest of the file and the target's other files keep being read; the target stays up; the problem is
logged once, not on every poll.

The poison lines are the recorded real Spark 4.3.0 progress event (tests/live_eventlog.py) with one value
changed to one the model cannot hold (the reproducers of issue 11). A real SQLite store, a real collector,
a stepped clock; nothing sleeps.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from collectors.spark.eventlog import COLLECTOR_NAME, EventLogCollector
from monitor.config import parse_config
from monitor.daemon.runtime import Runtime, StoreCursors, Target
from monitor.metrics.latest import LatestSamples
from monitor.store import Store
from monitor.store.tables import CollectorErrorRow, JobRow, SampleRow
from tests.live_eventlog import LiveEventLog
from tests.rule_samples import only_rules

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DEEP = 5000


def _runtime(store: Store, root: Path) -> tuple[Runtime, Target]:
    cursors = StoreCursors(store.sessions, COLLECTOR_NAME)
    target = Target("logs", EventLogCollector([root], cursors), timedelta(seconds=1), cursors)
    runtime = Runtime(
        sessions=store.sessions,
        targets=[target],
        latest=LatestSamples(),
        rules_config=parse_config({"rules": only_rules(target_health={})}).rules,
    )
    return runtime, target


def _stored_batches(store: Store) -> dict[str, list[int]]:
    """Batch ids of the stored query-scope progress samples, by job id."""
    with store.sessions() as session:
        rows = session.execute(
            select(JobRow.job_id, SampleRow.batch_id)
            .join(JobRow, JobRow.id == SampleRow.job_pk)
            .where(SampleRow.kind == "progress", SampleRow.scope_source.is_(None))
        ).all()
    out: dict[str, list[int]] = {}
    for job_id, batch_id in rows:
        out.setdefault(job_id, []).append(batch_id)
    return {k: sorted(v) for k, v in out.items()}


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], str]:
    """A poison: the event with ``progress.<path>`` set to ``value``, written as Spark writes JSON."""

    def poison(event: dict[str, Any]) -> str:
        node = event["progress"]
        *parents, last = path.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return json.dumps(event, separators=(",", ":"))

    return poison


def _raw(path: str, text: str) -> Callable[[dict[str, Any]], str]:
    """A poison written as text: ``progress.<path>`` (top level) set to the literal JSON ``text``."""

    def poison(event: dict[str, Any]) -> str:
        event["progress"][path] = "@@POISON@@"
        return json.dumps(event, separators=(",", ":")).replace('"@@POISON@@"', text)

    return poison


POISONS = {
    # issue 11: "a progress event whose timestamp is 9999-12-31T23:59:59-23:59 ... makes the poll raise"
    "timestamp_past_year_9999_in_utc": (_set("timestamp", "9999-12-31T23:59:59-23:59"), "field", "progress.timestamp"),
    "timestamp_before_year_1_in_utc": (_set("timestamp", "0001-01-01T00:00:00+01:00"), "field", "progress.timestamp"),
    "watermark_past_year_9999": (
        _set("eventTime.watermark", "9999-12-31T23:59:59-23:59"), "field", "progress.eventTime.watermark"
    ),
    "num_input_rows_1e30": (_raw("numInputRows", "1e30"), "field", "progress.numInputRows"),
    "num_input_rows_400_digits": (_raw("numInputRows", "9" * 400), "field", "progress.numInputRows"),
    "num_input_rows_5000_digits": (_raw("numInputRows", "9" * 5000), "line", "too long"),
    "num_input_rows_2_pow_63": (_raw("numInputRows", str(2**63)), "field", "progress.numInputRows"),
    "num_input_rows_nan": (_raw("numInputRows", "NaN"), "field", "progress.numInputRows"),
    "source_rows_1e30": (_set("sources.0.numInputRows", 1e30), "field", "progress.sources[0].numInputRows"),
    "batch_id_infinity": (_raw("batchId", "Infinity"), "field", "progress.batchId"),
    "nested_5000_deep": (_raw("stateOperators", "[" * DEEP + "]" * DEEP), "line", "nested too deeply"),
    "nested_200_deep": (_raw("stateOperators", "[" * 200 + "]" * 200), "line", "nested too deeply"),
    "lone_surrogate_in_name": (_set("name", "q\ud800"), "field", "progress.name"),
    "lone_surrogate_in_another_field": (_set("sink.description", "\udfff"), "field", "progress.sink.description"),
}


@pytest.mark.parametrize("case", sorted(POISONS))
def test_a_poison_line_is_quarantined_and_everything_around_it_stored(
    case: str, tmp_path: Path, spark_fixtures: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    poison, kind, named = POISONS[case]
    root = tmp_path / "spark-events"
    bad = LiveEventLog(root / "local-1.inprogress", spark_fixtures, T0)
    good = LiveEventLog(root / "local-2.inprogress", spark_fixtures, T0)
    bad.batches(4, 4)
    bad.append_line(poison(bad.next_progress(4)))  # batch 2
    bad.batches(4, 5)  # batches 3, 4: the rest of the file
    good.batches(4, 4, 5)
    poison_line = 1 + 2 + 1  # started, batches 0 and 1, then the poison

    runtime, target = _runtime(store, root)
    with caplog.at_level(logging.WARNING, logger="monitor.daemon.poll"):
        first = runtime.poll(target, T0)
        second = runtime.poll(target, T0 + timedelta(seconds=1))
        third = runtime.poll(target, T0 + timedelta(seconds=2))

    assert _stored_batches(store) == {bad.query_id: [0, 1, 3, 4], good.query_id: [0, 1, 2]}
    [error] = first.errors
    assert error.kind.value == kind
    assert error.message.startswith(f"{root / 'local-1.inprogress'}: line {poison_line}: ")
    assert named in error.message and "\n" not in error.message and len(error.message) < 400
    # the cursor moved past it in the same transaction: the next polls neither re-read nor re-report it
    assert second.errors == () and third.errors == () and second.samples == ()
    [stat] = runtime.collector_stats()
    assert stat.up is True
    assert stat.errors_by_kind == {kind: 1}
    assert len([r for r in caplog.records if "line" in r.getMessage() and r.levelno >= logging.WARNING]) == 1
    assert not any(r.exc_info for r in caplog.records)
    with store.sessions() as session:
        assert [r.message for r in session.scalars(select(CollectorErrorRow))] == [error.message]
    healthz = runtime.health()[1]["targets"][0]
    assert healthz["up"] is True and healthz["errors_by_kind"] == {kind: 1}
    assert healthz["recent_errors"][-1]["message"] == error.message
    # not an unreachable target: target_health raises nothing for it
    assert [e for e in runtime.evaluate(T0 + timedelta(seconds=3)) if "target_health" in e.fingerprint] == []

    # the file keeps being tailed after the poison
    bad.batches(4)
    assert [s.batch_id for s in runtime.poll(target, T0 + timedelta(seconds=4)).samples if s.scope.source is None] == [5]


def test_a_random_bytes_zstd_file_beside_good_logs_is_one_file_error(
    tmp_path: Path, spark_fixtures: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # issue 11: "A random-bytes .zstd file beside good logs likewise marks the whole target down and fires
    # a critical target_health alert saying its jobs are not monitored."
    root = tmp_path / "spark-events"
    good = LiveEventLog(root / "local-2.inprogress", spark_fixtures, T0)
    good.batches(4, 4, 5)
    junk = root / "local-1.zstd"
    junk.write_bytes(os.urandom(4096))
    runtime, target = _runtime(store, root)
    with caplog.at_level(logging.WARNING, logger="monitor.daemon.poll"):
        results = [runtime.poll(target, T0 + timedelta(seconds=i)) for i in range(4)]
    assert _stored_batches(store) == {good.query_id: [0, 1, 2]}
    [error] = results[0].errors
    assert error.kind.value == "file" and error.message.startswith(f"{junk}: ")
    assert all(r.errors == () for r in results[1:])  # quarantined until the file changes
    [stat] = runtime.collector_stats()
    assert (stat.up, stat.errors_by_kind) == (True, {"file": 1})
    assert len([r for r in caplog.records if str(junk) in r.getMessage()]) == 1
    events = runtime.evaluate(T0 + timedelta(seconds=5))
    with store.sessions() as session:
        assert [r.message for r in session.scalars(select(CollectorErrorRow))] == [error.message]
    assert not [e for e in events if e.kind.value == "firing"]
    # the good log keeps being tailed
    good.batches(4)
    assert [s.batch_id for s in runtime.poll(target, T0 + timedelta(seconds=6)).samples if s.scope.source is None] == [3]


def test_a_missing_directory_is_a_down_target_logged_once(
    tmp_path: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    runtime, target = _runtime(store, tmp_path / "nowhere")
    with caplog.at_level(logging.WARNING, logger="monitor.daemon.poll"):
        for i in range(3):
            runtime.poll(target, T0 + timedelta(seconds=i))
    [stat] = runtime.collector_stats()
    assert (stat.up, stat.errors_by_kind) == (False, {"unreachable": 3})
    assert len([r for r in caplog.records if "nowhere" in r.getMessage()]) == 1  # once while it lasts
