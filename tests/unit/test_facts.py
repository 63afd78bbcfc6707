"""monitor.facts over recorded real runs: each number is read off the recording (its progress lines or
REST documents, quoted in the comments) or derived by hand, never recomputed with the facts code.

Spark: the four PySpark 4.3.0 rule cases of tests/fixtures/spark/rule-cases (PROVENANCE.md there).
Flink: the recorded Flink 2.3.0 standalone job (tests/fixtures/flink/real-2.3.0/standalone), one poll.
Kafka: a consumer group written out sample by sample (Burrow's statuses, rules.consumer_lag.burrow).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from monitor.facts import FactsSettings, JobFacts, group_status, job_facts, job_health, partition_status
from monitor.model import MIN_TIME, AlertState, Engine, JobRef, Sample, SampleKind, Scope, Severity
from tests.rule_samples import recorded_case

FAR = datetime(2100, 1, 1, tzinfo=UTC)


def t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def spark_facts(case: str) -> JobFacts:
    return job_facts(recorded_case(case), MIN_TIME, FAR)


@dataclass(frozen=True)
class SparkCase:
    case: str
    batches: int
    input_rows: int
    dropped_rows: int
    # (batch id, event-time max, mis-dated kind, first and last dropping batch) of the top cause, or None
    cause: tuple[int, datetime, str | None, int, int] | None
    inferred_delay_s: float | None
    freshness_last_s: float | None
    state: tuple[str, int, int, bool]  # unit, first, last, growing
    restarts: tuple[datetime, ...]
    holding_suffix: str | None  # the held source's description ends with this


CASES = [
    # 1. backfill_future_row: batches 0-10; rows 12 (b0) + 12 (b2) + 13 (b4) + 12 x 5 (b6-b10) = 97; dropped
    #    12 in each of b6-b10 = 60, all against the watermark set by batch 4, whose eventTime.max
    #    2024-03-02T12:02:00Z leapt 24 h 5 s past the previous max 2024-03-01T12:01:55Z (b2) while the rows
    #    after it continue 2024-03-01: a mis-dated row ("leap"), not a future one (2024 < processing 2026).
    #    Delay: b1's watermark 11:50:55 after b0's max 12:00:55 -> 600 s. Freshness of b10: processing
    #    2026-12-01T09:43:58Z - watermark 2024-03-02T11:52:00Z = 1004 days - 2:08:02. State numRowsTotal
    #    12 (b0) ... 1 (b10): falling, no growth. One run, one source.
    SparkCase("backfill_future_row", 11, 97, 60, (4, t("2024-03-02T12:02:00Z"), "leap", 6, 10), 600.0,
              (timedelta(days=1004) - timedelta(hours=2, minutes=8, seconds=2)).total_seconds(),
              ("rows", 12, 1, False), (), None),
    # 2. backfill_fast: 20 batches, 10 files of 12 rows, nothing dropped; the watermark follows each max by
    #    10 min (b0 max 13:50 -> b1 watermark 13:40): 600 s; freshness of b19: 2026-12-01T09:44:56.001Z -
    #    2024-03-02T07:40:00Z = 1004 days + 2:04:56.001; state 12, 2, 14, 2, ... 2: a saw-tooth, no growth.
    SparkCase("backfill_fast", 20, 120, 0, None, 600.0,
              (timedelta(days=1004) + timedelta(hours=2, minutes=4, seconds=56, milliseconds=1)).total_seconds(),
              ("rows", 12, 2, False), (), None),
    # 3. never_seen_input: every watermark is 1970-01-01T00:00:00.000Z (no watermark yet): no delay, no
    #    freshness. Rows: 10 x 8 (run 1) + 20 + 20 = 120 from input a; input b (`.../b`) never has a row and
    #    holds the minimum. Runs start 09:40:03.503Z, 09:40:36.175Z and 09:40:37.591Z (QueryStartedEvent):
    #    two restarts. State 1 ... 3 rows: growing.
    SparkCase("never_seen_input", 10, 120, 0, None, None, None, ("rows", 1, 3, True),
              (t("2026-12-01T09:40:36.175Z"), t("2026-12-01T09:40:37.591Z")), "/b]"),
    # 4. epoch_units: b4's eventTime.max is +56135-05-22T09:20:00.000Z (epoch ms read as seconds; the parser
    #    keeps the supported maximum 8999-12-31T23:59:59.999Z); it set the watermark that dropped 12 rows in
    #    each of b6-b8 = 36: a unit mistake. Rows 12 + 12 + 13 + 12 x 3 = 73. Delay 600 s (b1 11:50:55
    #    after b0's 12:00:55). Freshness of b8: the watermark is thousands of years ahead of processing time.
    SparkCase("epoch_units", 9, 73, 36, (4, t("8999-12-31T23:59:59.999Z"), "units", 6, 8), 600.0, None,
              ("rows", 12, 1, False), (), None),
]


@pytest.mark.parametrize("c", CASES, ids=[c.case for c in CASES])
def test_spark_facts_of_recorded_runs(c: SparkCase) -> None:
    f = spark_facts(c.case)
    assert f.engine is Engine.SPARK and len(f.batches) == c.batches
    assert (f.drops.input_rows, f.drops.dropped_rows) == (c.input_rows, c.dropped_rows)
    if c.cause is None:
        assert f.drops.causes == ()
    else:
        top = f.drops.causes[0]
        assert (top.batch_id, top.event_time_max, top.mis_dated, top.first_dropped_batch, top.last_dropped_batch) == c.cause
        assert top.dropped_rows == c.dropped_rows
    assert f.inferred_delay_s == c.inferred_delay_s
    if c.freshness_last_s is not None:
        assert f.freshness.last_s == pytest.approx(c.freshness_last_s, abs=1e-3)
    elif c.case == "epoch_units":
        # the watermark (+56135, kept as the supported maximum 8999-12-31) is beyond the model's range: how
        # far ahead is unknown, never a duration computed from the stand-in
        assert f.freshness.last_s is None and f.freshness.last_beyond_range
    else:
        assert f.freshness.last_s is None
    assert (f.state.unit, f.state.first, f.state.last, f.state.growing) == c.state
    if not c.state[3]:
        assert f.state.projected_24h is None  # "no growth": nothing projected, never a negative size
    else:
        assert f.state.projected_24h is not None and f.state.projected_24h > c.state[2]
    assert f.restarts == c.restarts
    if c.holding_suffix is None:
        assert f.holding_min is None
    else:
        assert f.holding_min is not None and str(f.holding_min.scope.source).endswith(c.holding_suffix)


def test_the_placeholder_watermark_is_no_watermark_in_every_series() -> None:
    # backfill_future_row batch 0 reports 1970-01-01T00:00:00.000Z, batch 1 2024-03-01T11:50:55.000Z
    f = spark_facts("backfill_future_row")
    assert [p.watermark for p in f.batches[:2]] == [None, t("2024-03-01T11:50:55Z")]
    assert f.batches[0].freshness_s is None


def test_state_eviction_facts() -> None:
    # backfill_future_row: the watermark moves 11:50:55 -> 11:51:55 (b3) -> 2024-03-02T11:52 (b5): twice;
    # b5 evicts 36 rows (numRowsRemoved). never_seen_input: the watermark never leaves 1970: no advance.
    f = spark_facts("backfill_future_row")
    assert (f.state.watermark_advances, f.state.rows_removed) == (2, 36)
    g = spark_facts("never_seen_input")
    assert (g.state.watermark_advances, g.state.rows_removed) == (0, 0)


def test_freshness_is_on_the_data_clock_whatever_the_period_end() -> None:
    samples = recorded_case("backfill_future_row")
    a = job_facts(samples, MIN_TIME, FAR)
    b = job_facts(samples, MIN_TIME, t("2026-12-01T10:00:00Z"))
    assert a.freshness == b.freshness


def test_flink_facts_of_the_recorded_job() -> None:
    import httpx  # noqa: F401  (the collector's client)

    from collectors.flink import FlinkRestCollector
    from collectors.http import make_client
    from tests.flink_replay import mock_transport, standalone_routes

    now = datetime(2026, 11, 29, 11, 40, 33, tzinfo=UTC)  # one minute after the recorded poll
    with make_client(transport=mock_transport(standalone_routes())) as client:
        poll = FlinkRestCollector("http://jm:8081", client).poll(now)
    f = job_facts(poll.samples, MIN_TIME, now + timedelta(seconds=1))
    assert (f.engine, f.name, len(f.batches)) == (Engine.FLINK, "exp-event-time-job", 1)
    # checkpoints.json latest.completed.state_size 12628 bytes; numRestarts 0
    assert (f.state.unit, f.state.last, f.state.growing) == ("bytes", 12628, False)
    assert f.restarts == () and f.latest is not None and f.latest.restart_count == 0
    # the job watermark is the lowest input watermark, java-window's 1795952365175 = 11:39:25.175Z
    assert f.batches[0].watermark == t("2026-11-29T11:39:25.175Z")
    assert f.freshness.last_s == pytest.approx(67.825)  # the poll at 11:40:33 - 11:39:25.175
    # source subtask 1 has no output watermark (Long.MIN_VALUE) while subtask 0 has 1795952369440, yet the
    # windows' input watermarks (1795952369440, 1795952365175) advance: the valve leaves subtask 1 out as idle
    # (the job drops every record of subtask 1 before its assigner, withIdleness), so nobody holds the minimum
    assert f.holding_min is None
    # per vertex and subtask: 2 source subtasks + 2 x 2 window subtasks
    assert len([s for s in f.scopes if s.scope.subtask is not None]) == 6


GROUP = JobRef(Engine.KAFKA, "prod/orders", name="orders")
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def kafka(seconds: int, partition: int, committed: int | None, log_end: int) -> Sample:
    lag = None if committed is None else log_end - committed
    return Sample(job=GROUP, observed_at=T0 + timedelta(seconds=seconds), kind=SampleKind.GAUGE,
                  collector="kafka-lag", scope=Scope(source="orders", partition=partition),
                  committed_offset=committed, log_end_offset=log_end, lag_offsets=lag, extra={"assigned": True})


def test_kafka_lag_per_partition_with_burrow_status() -> None:
    samples = []
    for i in range(5):  # polls every 10 s
        # p0: the consumer commits 100 a poll, the log grows 200 a poll: lag 100, 200, ..., 500, never 0 in
        #     the window and never falling -> WARN (a lag of 0 anywhere in the window would make it OK)
        samples.append(kafka(10 * i, 0, 1000 + 100 * i, 1100 + 200 * i))
        # p1: the commit stays at 500 while the log grows: every offset in the window equal -> STALL
        #     (the last commit is 40 s old, the window spans 40 s: not longer, so not STOP)
        samples.append(kafka(10 * i, 1, 500, 600 + 10 * i))
        # p2: caught up at every poll -> OK
        samples.append(kafka(10 * i, 2, 70 + i, 70 + i))
        # p3: no committed offset: unknown lag, never 0
        samples.append(kafka(10 * i, 3, None, 90))
    f = job_facts(samples, MIN_TIME, T0 + timedelta(seconds=41))
    status = {p.partition: p.status for p in f.lag}
    assert status == {0: "WARN", 1: "STALL", 2: "OK", 3: "UNKNOWN"}
    p0 = next(p for p in f.lag if p.partition == 0)
    assert (p0.lag_offsets, p0.lag_offsets_max, len(p0.points)) == (500, 500, 5)
    assert next(p for p in f.lag if p.partition == 3).lag_offsets is None
    assert f.lag_status == "STALL"  # the group's: its worst partition's
    assert [p.partition for p in f.lag][:2] == [1, 0]  # worst first


@pytest.mark.parametrize(
    ("finding", "lag", "polls", "expected"),
    [
        ("STOP", 5, 3, "STOP"),  # the rule's finding wins
        (None, None, 3, "UNKNOWN"),  # no committed offset
        (None, 40, 1, "UNKNOWN"),  # behind after one poll: no trend yet
        (None, 1, 1, "OK"),  # a transaction marker is never behind
        (None, 40, 2, "OK"),  # two polls and no finding
    ],
)
def test_partition_status(finding: str | None, lag: int | None, polls: int, expected: str) -> None:
    assert partition_status(finding, lag, polls) == expected


def test_group_status_is_the_worst_known() -> None:
    assert group_status(["OK", "UNKNOWN", "WARN"]) == "WARN"
    assert group_status(["UNKNOWN"]) == "UNKNOWN"
    assert group_status(["OK", "OK"], behind_after_one_poll=True) == "UNKNOWN"
    assert group_status(["REWIND", "STOP", "STALL"]) == "STOP"


def test_health_now_and_over_the_period() -> None:
    from dataclasses import replace

    from monitor.alerts.lifecycle import Alert
    from monitor.model import Finding, FindingEpisode

    job = JobRef(Engine.SPARK, "q")
    finding = Finding("watermark_stall", Severity.WARNING, job, "flat", T0)
    firing = replace(Alert.from_finding(finding, T0), state=AlertState.FIRING, fired_at=T0)
    pending = replace(Alert.from_finding(replace(finding, rule="late_drop_surge", severity=Severity.CRITICAL), T0),
                      state=AlertState.PENDING)
    episode = FindingEpisode(id="e1", fingerprint="f", rule="future_timestamp", job=job, scope=Scope(),
                             severity=Severity.CRITICAL, first_at=T0 - timedelta(hours=3),
                             last_at=T0 - timedelta(hours=2), message="jump")
    h = job_health([firing, pending], T0 - timedelta(hours=4), T0 + timedelta(hours=1), [episode])
    # now: the firing warning (the pending critical has not held for its `for`); the period: the episode
    assert (h.now, h.period, h.firing, h.pending, h.worst_rule) == (
        Severity.WARNING, Severity.CRITICAL, 1, 1, "watermark_stall")
    later = job_health([], T0, T0 + timedelta(hours=1), [episode])  # the episode ended before the period
    assert (later.now, later.period) == (Severity.OK, Severity.OK)


def test_settings_reach_the_facts() -> None:
    f = job_facts(recorded_case("never_seen_input"), MIN_TIME, FAR, settings=FactsSettings(state_limit_rows=3))
    assert f.state.hours_to_limit == 0.0  # already at the limit of 3 rows
