"""``scan`` and the daemon give the same findings on the same recorded logs (one rule path).

Each recorded real Spark event log of the suite is read two ways:

* ``scan``'s way: the whole file at once, replayed batch by batch (:func:`monitor.commands._scan_render.build_report`);
* the daemon's way: a :class:`monitor.daemon.runtime.Runtime` over a real SQLite store and a real event-log
  collector tailing a copy of the log that the test writes line by line, polling and evaluating with a
  fake clock stepped to each event's own time (``tidegauge run`` on the directory, without sleeping);
  and once more catching up on the whole log in a single tick (a daemon started after the fact).

Every other recorded log of the suite (the trimmed copy, the public Spark 3.0 excerpt, one app per
compression codec, a rolled ``eventlog_v2_*`` directory) is read by ``scan`` and by a daemon started after
it was written, as the files lie.

Both must name the same (rule, query, batch) triples: the batch is the one a finding named when it
first held (the daemon: the alert's ``batch_id`` annotation when it went pending); and the daemon's store
must hold the same finding episodes (id, first and last batch and time, how each ended, severity and
message) as ``scan`` makes, and as ``scan --db`` stores, once however often it is run.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.spark.eventlog import COLLECTOR_NAME, EventLogCollector
from monitor.alerts.lifecycle import EventKind
from monitor.commands._scan_render import build_report
from monitor.config import parse_config
from monitor.daemon.runtime import Runtime, StoreCursors, Target
from monitor.metrics.latest import LatestSamples
from monitor.model import FindingEpisode
from monitor.store import Store, open_store, upgrade
from monitor.store.alert_repo import load_alerts
from rules.config import RulesConfig
from rules.registry import Evaluator
from tests.cli import run_cli
from tests.live_eventlog import recorded_events
from tests.rule_samples import RULE_CASES

Triple = tuple[str, str, int | None]
#: a day after every recording: the scan's poll time (scan judges batches by their own times)
SCAN_NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _lines_with_times(events: list[dict[str, object]]) -> list[tuple[str, datetime]]:
    """Each streaming event as a log line with its own time (a termination has none: the time before)."""
    out: list[tuple[str, datetime]] = []
    last = datetime(1970, 1, 1, tzinfo=UTC)
    for event in events:
        raw = event.get("progress", event)
        stamp = raw.get("timestamp") if isinstance(raw, dict) else None
        if isinstance(stamp, str):
            last = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        out.append((json.dumps(event, separators=(",", ":")), last))
    return out


def _scan(log_dir: Path, rules: RulesConfig) -> tuple[set[Triple], set[tuple[object, ...]]]:
    """``scan``'s (rule, query, batch) triples and episodes of the logs in ``log_dir``."""
    poll = EventLogCollector([log_dir]).poll(SCAN_NOW)
    assert poll.errors == ()
    report = build_report(Evaluator(rules), list(poll.samples))
    return {(f.rule, f.job.job_id, f.batch_id) for f in report.findings}, _episode_set(report.episodes)


def _scan_triples(log_dir: Path, rules: RulesConfig) -> set[Triple]:
    return _scan(log_dir, rules)[0]


def _episode_set(episodes: list[FindingEpisode] | tuple[FindingEpisode, ...]) -> set[tuple[object, ...]]:
    """What the daemon and scan must agree on about each episode (not ``notified``/``history``: scan
    notifies nobody, and a recording is older than the daemon's horizon only on the wall clock)."""
    return {
        (e.id, e.rule, e.job.job_id, e.scope, e.first_batch_id, e.last_batch_id, e.first_at, e.last_at,
         e.ended_by, e.severity, e.message, e.caused_by, e.causes)
        for e in episodes
    }  # fmt: skip


def _daemon(store: Store, log_dir: Path, rules: RulesConfig) -> tuple[Runtime, Target]:
    cursors = StoreCursors(store.sessions, COLLECTOR_NAME)
    target = Target("logs", EventLogCollector([log_dir], cursors), timedelta(seconds=1), cursors)
    runtime = Runtime(sessions=store.sessions, targets=[target], latest=LatestSamples(), rules_config=rules)
    return runtime, target


def _pending(runtime: Runtime, store: Store, now: datetime) -> set[Triple]:
    events = runtime.evaluate(now)
    with store.sessions() as session:
        alerts = load_alerts(session)
    out: set[Triple] = set()
    for event in events:
        if event.kind is EventKind.PENDING:
            alert = alerts[event.fingerprint]
            batch = alert.annotations.get("batch_id")
            out.add((alert.rule, alert.labels["job_id"], int(batch) if batch is not None else None))
    return out


def _live_triples(store: Store, tmp_path: Path, lines: list[tuple[str, datetime]], rules: RulesConfig) -> set[Triple]:
    log_dir = tmp_path / "live"
    log_dir.mkdir()
    path = log_dir / "local-1.inprogress"
    runtime, target = _daemon(store, log_dir, rules)
    found: set[Triple] = set()
    with path.open("a", encoding="utf-8") as handle:
        for line, at in lines:
            handle.write(line + "\n")
            handle.flush()
            runtime.poll(target, at)
            found |= _pending(runtime, store, at)
    return found


def _recorded(spark_fixtures: Path) -> list[tuple[str, datetime]]:
    return _lines_with_times(recorded_events(spark_fixtures))


RULES = parse_config({}).rules


def test_recorded_log_live_and_scanned_agree(spark_fixtures: Path, store: Store, tmp_path: Path) -> None:
    lines = _recorded(spark_fixtures)
    scan_dir = tmp_path / "scan"
    scan_dir.mkdir()
    (scan_dir / "local-1").write_text("".join(line + "\n" for line, _ in lines))
    scanned, scanned_episodes = _scan(scan_dir, RULES)
    live = _live_triples(store, tmp_path, lines, RULES)
    assert _episode_set(store.episodes()) == scanned_episodes
    assert len(scanned_episodes) == 9  # as the catch-up test below counts them
    # read off the recorded log (see test_scan_command): the 2099 row of batch 6, reported in the three
    # runs that follow it; drops in every run from batch 2 on; restarts from batch 2 (a new run id)
    assert ("future_timestamp", "be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8", 6) in scanned
    assert {r for r, _, _ in scanned} == {"future_timestamp", "late_drop_surge", "target_health"}
    assert live == scanned


#: the section-3 recordings and the rules each must raise (read off the logs, see their PROVENANCE.md)
CASES = {
    "never_seen_input": {"watermark_stall", "target_health"},
    "backfill_future_row": {"future_timestamp", "late_drop_surge"},
    "backfill_fast": set(),
    "epoch_units": {"event_time_units", "late_drop_surge"},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded_rule_cases_live_and_scanned_agree(case: str, store: Store, tmp_path: Path) -> None:
    (log,) = (RULE_CASES / case).iterdir()
    lines = _lines_with_times([json.loads(line) for line in log.read_text().splitlines()])
    scanned, scanned_episodes = _scan(RULE_CASES / case, RULES)
    assert {r for r, _, _ in scanned} == CASES[case]
    assert _live_triples(store, tmp_path, lines, RULES) == scanned
    assert _episode_set(store.episodes()) == scanned_episodes


STREAM_JOINS = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "stream-join-4.3.0"
#: the stream-stream join recordings (their PROVENANCE.md) and the rules each must raise
JOIN_CASES = {"range": set(), "unbounded": {"join_state_unbounded"}}


@pytest.mark.parametrize("case", sorted(JOIN_CASES))
def test_recorded_stream_joins_live_and_scanned_agree(case: str, store: Store, tmp_path: Path) -> None:
    # the logs carry the join's plan (a SparkListenerSQLExecutionStart line before batch 0): the daemon
    # tailing the log line by line stores the same join_state_unbounded episode as scan makes
    (log_dir,) = (STREAM_JOINS / case).glob("eventlog_v2_*")
    (log,) = log_dir.glob("events_*")
    lines = _lines_with_times([json.loads(line) for line in log.read_text().splitlines()])
    scanned, scanned_episodes = _scan(log_dir, RULES)
    assert {r for r, _, _ in scanned} == JOIN_CASES[case]
    assert _live_triples(store, tmp_path, lines, RULES) == scanned
    assert _episode_set(store.episodes()) == scanned_episodes


def test_scan_db_stores_the_daemons_episodes_once(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # backfill_future_row: the daemon catching up after the log was written, and `scan --db` of the same
    # log into another database, twice
    source = RULE_CASES / "backfill_future_row"
    runtime, target = _daemon(store, source, RULES)
    poll = EventLogCollector([source]).poll(SCAN_NOW)
    tick = max(s.observed_at for s in poll.samples) + timedelta(minutes=1)
    runtime.poll(target, tick)
    runtime.evaluate(tick)
    daemon = store.episodes()
    url = f"sqlite:///{tmp_path / 'scan.db'}"
    upgrade(url)
    outcomes = [run_cli(["scan", "--db", url, str(source)], capsys) for _ in range(2)]
    assert [code for code, _, _ in outcomes] == [0, 0]
    # read off the log (see test_recorded_rule_cases_live_and_scanned_agree): the jump and the drops
    assert {e.rule for e in daemon} == {"future_timestamp", "late_drop_surge"}
    assert f"and {len(daemon)} new finding episodes in" in outcomes[0][2]
    assert "and 0 new finding episodes in" in outcomes[1][2]
    scanned = open_store(url)
    try:
        assert _episode_set(scanned.episodes()) == _episode_set(daemon)
    finally:
        scanned.dispose()
    # the daemon's alerts name their episodes
    with store.sessions() as session:
        named = {a.rule: a.episode_id for a in load_alerts(session).values()}
    ids = {e.rule: e.id for e in daemon}
    assert named == ids


def test_daemon_started_after_the_log_was_written_catches_up(
    spark_fixtures: Path, store: Store, tmp_path: Path
) -> None:
    # the whole log written while the daemon was stopped, then one poll and one tick a minute after its
    # last event: every batch is evaluated at its own time, so the same findings come out (and, within
    # the horizon, notify); none is lost because it began and ended before the tick
    lines = _recorded(spark_fixtures)
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "local-1").write_text("".join(line + "\n" for line, _ in lines))
    runtime, target = _daemon(store, log_dir, RULES)
    tick = lines[-1][1] + timedelta(minutes=1)
    runtime.poll(target, tick)
    events = runtime.evaluate(tick)
    with store.sessions() as session:
        rule_of = {fp: (a.rule, a.labels["job_id"]) for fp, a in load_alerts(session).items()}
    # one tick, many episodes of one alert: compared by the instant each episode began
    began = sorted((*rule_of[e.fingerprint], e.at) for e in events if e.kind is EventKind.PENDING)
    poll = EventLogCollector([log_dir]).poll(SCAN_NOW)
    report = build_report(Evaluator(RULES), list(poll.samples))
    assert began == sorted((f.rule, f.job.job_id, f.observed_at) for f in report.findings)
    assert _episode_set(store.episodes()) == _episode_set(report.episodes)
    assert len(began) == 9  # 5 late_drop_surge and 3 future_timestamp episodes (split by terminations), 1 restart


#: the other recorded real logs of the suite, as they lie in tests/fixtures (plain, compressed by each of
#: Spark's codecs, and a rolled ``eventlog_v2_*`` directory), with the rules read off each (see their
#: PROVENANCE.md / tests/fixtures/RECORDED.md): the trimmed copy of the recorded log raises what the
#: recorded log raises; the codec apps' two healthy batches and the public Spark 3.0 excerpt raise nothing
OTHER_LOGS = {
    "spark/real-4.3.0/eventlog_trimmed.jsonl": {"future_timestamp", "late_drop_surge", "target_health"},
    "spark/real-4.3.0/eventlog_v2_fixture/eventlog_v2_local-1795951957158": {
        "future_timestamp",
        "late_drop_surge",
        "target_health",
    },
    "spark/public/eventlog_local-1596020211915_streaming_excerpt.jsonl": set(),
    "spark-codecs/local-1795956025902": set(),
    "spark-codecs/local-1795956037602.zstd": set(),
    "spark-codecs/local-1795956042426.lz4": set(),
    "spark-codecs/local-1795956047235.snappy": set(),
    "spark-codecs/local-1795956051510.lzf": set(),
}


def _copy_into(source: Path, folder: Path) -> None:
    folder.mkdir()
    if source.is_dir():
        shutil.copytree(source, folder / source.name)
    else:
        shutil.copy(source, folder / source.name)


@pytest.mark.parametrize("relative", sorted(OTHER_LOGS))
def test_every_other_recorded_log_scanned_and_caught_up_agree(
    relative: str, recorded_fixtures: Path, store: Store, tmp_path: Path
) -> None:
    # scan of the file as it lies, and a daemon started after it was written (one poll, one tick): the
    # same findings, each episode by the instant it began, and the same batches read
    source = recorded_fixtures / relative
    scan_dir, log_dir = tmp_path / "scan", tmp_path / "logs"
    _copy_into(source, scan_dir)
    _copy_into(source, log_dir)
    poll = EventLogCollector([scan_dir]).poll(SCAN_NOW)
    assert poll.errors == ()
    report = build_report(Evaluator(RULES), list(poll.samples))
    assert {f.rule for f in report.findings} == OTHER_LOGS[relative]
    runtime, target = _daemon(store, log_dir, RULES)
    batches = [s for s in poll.samples if s.batch_id is not None]
    tick = max(s.observed_at for s in batches) + timedelta(minutes=1)
    stored = runtime.poll(target, tick)
    assert stored.errors == ()
    assert sorted((s.job.job_id, s.batch_id) for s in stored.samples if s.batch_id is not None) == sorted(
        (s.job.job_id, s.batch_id) for s in batches
    )
    events = runtime.evaluate(tick)
    with store.sessions() as session:
        rule_of = {fp: (a.rule, a.labels["job_id"]) for fp, a in load_alerts(session).items()}
    began = sorted((*rule_of[e.fingerprint], e.at) for e in events if e.kind is EventKind.PENDING)
    assert began == sorted((f.rule, f.job.job_id, f.observed_at) for f in report.findings)
    assert _episode_set(store.episodes()) == _episode_set(report.episodes)


def test_a_restarted_daemon_extends_the_episodes_open_when_it_stopped(store: Store, tmp_path: Path) -> None:
    # never_seen_input's stall holds across the middle of the log: the daemon stops there and a new one
    # (same store) reads the rest; its episodes are scan's, none begun twice
    (log,) = (RULE_CASES / "never_seen_input").iterdir()
    lines = _lines_with_times([json.loads(line) for line in log.read_text().splitlines()])
    log_dir = tmp_path / "live"
    log_dir.mkdir()
    path = log_dir / "local-1.inprogress"
    half = len(lines) // 2
    for part in (lines[:half], lines[half:]):
        runtime, target = _daemon(store, log_dir, RULES)  # a new process: nothing in memory
        with path.open("a", encoding="utf-8") as handle:
            for line, at in part:
                handle.write(line + "\n")
                handle.flush()
                runtime.poll(target, at)
                runtime.evaluate(at)
        if part is lines[:half]:
            assert any(e.is_open and e.rule == "watermark_stall" for e in store.episodes())
    assert _episode_set(store.episodes()) == _scan(RULE_CASES / "never_seen_input", RULES)[1]


def test_a_tick_that_does_not_commit_leaves_no_trace_in_the_episodes(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first evaluation fails at its end (storing the cursor); the next one evaluates the same batches
    # again and must store scan's episodes, not ones extended or ended by the first attempt's fold
    from monitor.daemon import evaluate

    (log,) = (RULE_CASES / "backfill_future_row").iterdir()
    source = tmp_path / "logs"
    source.mkdir()
    # the log up to batch 8: the jump's episode is still open at its end (the fold holds it)
    lines = log.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"batchId":9' in line)
    (source / log.name).write_text("".join(lines[:cut]))
    runtime, target = _daemon(store, source, RULES)
    poll = EventLogCollector([source]).poll(SCAN_NOW)
    tick = max(s.observed_at for s in poll.samples) + timedelta(minutes=1)
    runtime.poll(target, tick)

    def broken(*_: object) -> None:
        raise RuntimeError("database went away")

    with monkeypatch.context() as patch:
        patch.setattr(evaluate, "set_cursors", broken)
        with pytest.raises(RuntimeError):
            runtime.evaluate(tick)
    assert store.episodes() == []
    runtime.evaluate(tick)
    stored = store.episodes()
    assert {e.rule for e in stored if e.is_open} == {"future_timestamp", "late_drop_surge"}
    assert _episode_set(stored) == _scan(source, RULES)[1]
