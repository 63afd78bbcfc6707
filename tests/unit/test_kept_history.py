"""The daemon keeps each job's rolling history across ticks and gives the same findings as a rebuild.

:class:`monitor.daemon.histories.JobHistories` keeps each job's :class:`rules.replay.ReplayState` (the
rolling history the rules read, fed up to the job's evaluation cursor) from one tick to the next, and a
tick feeds it only the samples that arrived since. Before, each tick rebuilt it from the job's window.

Two daemons over two SQLite stores are fed the same samples in the same ticks (data time, one to several
batches per tick, a 10-minute catch-up): one as it runs now, one with the kept state switched off (its
:meth:`EvaluateStage._kept` answers ``None``: a fresh rolling history rebuilt from the window at every tick,
and the clock rules on a history split from scratch). Both are restarted half-way (a new ``Runtime`` on the
same store). The jobs: a Spark query whose watermark stalls, whose state grows without removals and that
restarts under a new run, with a surge of late drops and a sample that arrives out of order (older than
the query's newest); a Spark query that goes quiet for 50 minutes (``no_progress`` at the clock) and comes
back; a Flink job with an idle subtask; a Kafka group with a stalled partition. One tick fails to commit
(its evaluation cursors cannot be written) and runs again: the states it moved are rebuilt from the window,
since they stand past the stored cursors. Every tick's transitions,
the stored alerts and finding episodes must be the same, under the default rules (30-minute windows:
the front of each kept history is trimmed) and with ``freshness_slo`` on (3 days: its minute ledger is
kept on the history across ticks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.config import parse_config
from monitor.daemon import evaluate as evaluate_stage
from monitor.daemon.runtime import Runtime
from monitor.metrics.latest import LatestSamples
from monitor.model import Engine, JobRef, PollResult, Sample, SampleKind, Scope
from monitor.store import Store, open_store, save_poll, upgrade
from monitor.store.alert_repo import load_alerts
from rules.history import RollingHistory

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
STEADY_1 = JobRef(Engine.SPARK, "q-steady", run_id="r1", name="steady")
STEADY_2 = JobRef(Engine.SPARK, "q-steady", run_id="r2", name="steady")
QUIET = JobRef(Engine.SPARK, "q-quiet", run_id="r1", name="quiet")
FLINK = JobRef(Engine.FLINK, "f-sessions", name="sessions")
KAFKA = JobRef(Engine.KAFKA, "prod/orders", name="orders")
END_S = 100 * 60  # 100 minutes of data
RESTART_S = 55 * 60
FAILED_S = 47 * 60  # the tick that does not commit (then runs again)


def _t(second: float) -> datetime:
    return T0 + timedelta(seconds=second)


def _steady(second: int) -> list[Sample]:
    """The query with trouble: watermark stalled 20-45 min, late drops 12-14 min, state growing 50-90 min
    without removals, a restart (terminated, started under run r2) at 70 min."""
    minute = second / 60
    if second == 70 * 60:
        return [Sample(STEADY_1, _t(second), SampleKind.TERMINATED, "spark-eventlog")]
    if second == 70 * 60 + 30:
        return [Sample(STEADY_2, _t(second), SampleKind.STARTED, "spark-eventlog")]
    job = STEADY_1 if second < 70 * 60 else STEADY_2
    batch = second // 30 if job is STEADY_1 else (second - 70 * 60) // 30
    wm = _t(20 * 60 - 600) if 20 <= minute < 45 else _t(second - 600)
    growing = 50 <= minute < 90
    step = second // 30
    sample = Sample(
        job, _t(second), SampleKind.PROGRESS, "spark-eventlog", batch_id=batch, num_input_rows=100,
        watermark=wm, event_time_max=_t(second), event_time_min=_t(second - 30),
        dropped_by_watermark=50 if 12 <= minute < 14 else 0,
        state_rows_total=10_000 + (400 * step if growing else 100 * (step % 4)),
        state_rows_removed=0 if growing else (300 if step % 4 == 0 else 0), batch_duration_ms=2_000,
    )  # fmt: skip
    src = Sample(job, _t(second), SampleKind.PROGRESS, "spark-eventlog", Scope(source="kafka[clicks]"), batch,
                 num_input_rows=100)  # fmt: skip
    return [sample, src]


def _quiet(second: int) -> list[Sample]:
    """A query that goes quiet from 25 to 75 minutes."""
    if 25 * 60 <= second < 75 * 60:
        return []
    wm = _t(second - 300)
    return [
        Sample(QUIET, _t(second), SampleKind.PROGRESS, "spark-eventlog", batch_id=second // 30, num_input_rows=10,
               watermark=wm, event_time_max=_t(second), state_rows_total=500, state_rows_removed=5)
    ]  # fmt: skip


def _flink(second: int) -> list[Sample]:
    """A Flink job whose subtask 1 is idle (no watermark) from 30 minutes on."""
    idle = second >= 30 * 60
    out = [Sample(FLINK, _t(second), SampleKind.GAUGE, "flink-rest", watermark=_t(second - 60), num_input_rows=80,
                  backpressure_ratio=0.0, restart_count=0)]  # fmt: skip
    for subtask in (0, 1):
        quiet = idle and subtask == 1
        out.append(Sample(
            FLINK, _t(second), SampleKind.GAUGE, "flink-rest", Scope(source="Source: clicks", subtask=subtask),
            watermark=None if quiet else _t(second - 60), num_input_rows=0 if quiet else 40,
            idle_ms=(second - 30 * 60) * 1000 if quiet else 0,
        ))  # fmt: skip
    return out


def _kafka(second: int) -> list[Sample]:
    """A consumer group whose partition 1 stops committing at 40 minutes."""
    out = []
    for partition in (0, 1):
        end = 1_000 * (second // 30) + partition
        committed = end - 3 if partition == 0 or second < 40 * 60 else 1_000 * 80
        out.append(Sample(KAFKA, _t(second), SampleKind.GAUGE, "kafka-lag", Scope(source="orders", partition=partition),
                          committed_offset=committed, log_end_offset=end, lag_offsets=end - committed))  # fmt: skip
    return out


def _samples_until(start_s: int, end_s: int) -> list[Sample]:
    """Every job's samples observed in ``[start_s, end_s)`` (seconds after T0), in time order."""
    out: list[Sample] = []
    for second in range(0, END_S + 1, 30):
        if not start_s <= second < end_s:
            continue
        out += _steady(second) + _quiet(second) + _flink(second) + _kafka(second)
    return out


LATE = Sample(STEADY_1, _t(38 * 60 + 10), SampleKind.PROGRESS, "spark-eventlog", batch_id=10_000,
              num_input_rows=100, dropped_by_watermark=5_000)  # fmt: skip
"""A batch 38 minutes in that dropped many late rows, stored at the 40-minute tick: it arrives out of order,
and the windows of the instants after it (``late_drop_surge``'s) must hold it."""


def _ticks() -> Iterator[int]:
    """The ticks (seconds after T0): every 60 s, every 30 s for a while, and a 10-minute gap (catch-up)."""
    second = 60
    while second <= END_S:
        yield second
        if 60 * 60 <= second < 62 * 60:
            second += 30
        elif second == 80 * 60:
            second += 600
        else:
            second += 60


def _runtime(store: Store, rules: dict[str, Any], kept: bool) -> Runtime:
    runtime = Runtime(sessions=store.sessions, targets=[], latest=LatestSamples(),
                      rules_config=parse_config({"rules": rules}).rules)  # fmt: skip
    if not kept:
        runtime._evaluation._kept = lambda key, samples: None  # type: ignore[method-assign]
    return runtime


def _run(
    tmp_path: Path, rules: dict[str, Any], kept: bool, built: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Feed one daemon (kept state on or off) the samples tick by tick; what it told and stored."""
    url = f"sqlite:///{tmp_path / ('kept.db' if kept else 'rebuilt.db')}"
    upgrade(url)
    store = open_store(url)
    runtime = _runtime(store, rules, kept)
    events: list[tuple[object, ...]] = []
    stored_up_to = 0
    rollings: list[object] = []  # the Kafka group's rolling history after each tick
    restarted = False
    try:
        for tick in _ticks():
            if tick > RESTART_S and not restarted:
                runtime = _runtime(store, rules, kept)  # the daemon restarts: the same store, nothing in memory
                restarted = True
            with store.sessions.begin() as session:
                save_poll(session, PollResult(tuple(_samples_until(stored_up_to, tick + 1))))
                if tick == 40 * 60:
                    save_poll(session, PollResult((LATE,)))
            stored_up_to = tick + 1
            if tick == FAILED_S:
                with monkeypatch.context() as patch:
                    patch.setattr(evaluate_stage, "set_cursors", _broken)
                    with pytest.raises(RuntimeError, match="cursor write failed"):
                        runtime.evaluate(_t(tick + 5))
            for event in runtime.evaluate(_t(tick + 5)):
                events.append((tick, event.fingerprint, event.kind.value, event.at, event.message))
            state = runtime._evaluation._histories._replays.get((Engine.KAFKA, KAFKA.job_id))
            rollings.append(None if state is None else state.rolling)
        with store.sessions() as session:
            alerts = sorted(
                (a.fingerprint, a.rule, a.state.value, a.message, a.annotations.get("batch_id"))
                for a in load_alerts(session).values()
            )
        episodes = sorted(
            (e.id, e.rule, e.job.job_id, e.first_at, e.last_at, e.ended_by, e.severity, e.message)
            for e in store.episodes()
        )
    finally:
        store.dispose()
    built()
    runs = [1 for i, r in enumerate(rollings) if i == 0 or r is not rollings[i - 1]]
    return {"events": events, "alerts": alerts, "episodes": episodes, "kafka_rollings": len(runs)}


def _broken(*_: object) -> None:
    raise RuntimeError("cursor write failed")


DEFAULT_RULES = {"freshness": {"target": "15m"}, "falling_behind": {"trigger_interval": "30s"}}
WITH_SLO = {**DEFAULT_RULES, "freshness_slo": {"freshness": "5m", "objective": "99%"}}


@pytest.mark.parametrize("rules", [DEFAULT_RULES, WITH_SLO], ids=["default-windows", "freshness-slo-3d"])
def test_kept_history_gives_the_findings_of_a_rebuild_at_every_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rules: dict[str, Any]
) -> None:
    built = {"n": 0}
    original = RollingHistory.__init__

    def counting(self: RollingHistory, *args: Any) -> None:
        built["n"] += 1
        original(self, *args)

    monkeypatch.setattr(RollingHistory, "__init__", counting)
    counts: list[int] = []

    def done() -> None:
        counts.append(built["n"])
        built["n"] = 0

    kept = _run(tmp_path, rules, True, done, monkeypatch)
    rebuilt = _run(tmp_path, rules, False, done, monkeypatch)
    assert kept["events"] == rebuilt["events"]
    assert kept["alerts"] == rebuilt["alerts"]
    assert kept["episodes"] == rebuilt["episodes"]
    # what the sequence exercises (read off the generators above), so that an equality of two empty
    # answers cannot pass
    fired = {(e[1], e[2]) for e in kept["episodes"]}
    assert {
        ("watermark_stall", "q-steady"), ("late_drop_surge", "q-steady"), ("state_growth", "q-steady"),
        ("no_progress", "q-quiet"), ("idle_source", "f-sessions"), ("consumer_lag", "prod/orders"),
    } <= fired  # fmt: skip
    begun = {(e[1], e[2], e[3]) for e in kept["episodes"]}
    # the out-of-order batch (38:10, stored with the 40-minute tick) in the window of the first instant
    # replayed after it; the quiet query silent for 5 minutes (10 of its 30 s intervals) after 24:30
    assert ("late_drop_surge", "q-steady", _t(39 * 60 + 30)) in begun
    assert ("no_progress", "q-quiet", _t(30 * 60 + 5)) in begun
    # the kept daemon built each job's rolling history once per process, once more for the query that
    # received a sample out of order and for each job the failed tick had moved; the other one at every tick
    # a job had new samples
    ticks = len(list(_ticks()))
    assert counts[0] <= 4 * 2 + 1 + 4
    assert counts[1] > 3 * ticks
    # the Kafka group's rolling history was one object from the first tick to the failed one, another from
    # its second run to the restart, a third after it
    assert kept["kafka_rollings"] == 3
