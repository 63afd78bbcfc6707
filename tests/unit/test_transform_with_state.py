"""Real Spark 4.3.0 queries with a Python ``transformWithState`` operator (tests/fixtures/spark/
transform-with-state-4.3.0, see its PROVENANCE.md): its custom metrics are parsed into the batch sample, and
the rules read a processing-time operator as healthy (without ``withWatermark``: no event-time watermark at
all, a batch at every trigger; behind ``withWatermark``: the plan shows the operator ignores the watermark, so
its flat watermark is no stall), while an event-time one whose event times freeze is a stall.

The recordings last about a minute and a half, so the rules' durations are scaled down alike (``for: 30s``
where the default is 10 minutes). Expected values are read off the recordings by hand (progress.jsonl) and
written out here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.spark.eventlog import EventLogCollector
from collectors.spark.progress import parse_progress
from monitor.errors import ProgressFormatError
from monitor.model import Sample, SampleKind
from rules.cadence import report_at
from rules.config import RulesConfig
from rules.registry import Evaluator
from rules.replay import replay
from tests.rule_samples import only_rules

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "transform-with-state-4.3.0"
NOW = datetime(2030, 1, 1, tzinfo=UTC)
#: every batch-time rule that reads the watermark, the state or the rows, scaled to the recording
#: (falling_behind is left out: on the shared 2-core machine the recording's batches 0, 2 and 4 really took
#: longer than the 2 s trigger, 51 s for batch 0 while the Python workers started)
SCALED = {
    "watermark_stall": {"for": "30s"},
    "freshness": {"target": "40s"},
    "state_growth": {"window": "2m", "min_points": 4, "min_watermark_steps": 1},
    "late_drop_surge": {},
    "late_rows_dropped": {},
    "future_timestamp": {},
    "event_time_units": {},
    "join_state_unbounded": {},
}


@pytest.fixture(scope="module", params=["processing_time", "event_time_stall", "processing_time_watermarked"])
def case(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _samples(case: str) -> list[Sample]:
    (log,) = (FIXTURE / case).glob("eventlog_v2_*")
    result = EventLogCollector([log]).poll(NOW)
    assert result.errors == ()
    return sorted(result.samples, key=lambda s: (s.observed_at, s.kind is SampleKind.TERMINATED))


def _batches(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.kind is SampleKind.PROGRESS and s.scope.is_job()]


def _replayed(samples: list[Sample], rules: dict[str, object]) -> dict[int, list[str]]:
    evaluator = Evaluator(RulesConfig.model_validate(only_rules(**rules)))
    return {i.batch_id: sorted(f.rule for f in i.findings) for i in replay(evaluator, samples) if i.batch_id is not None and i.findings}


def test_custom_metrics_of_the_processing_time_operator() -> None:
    batches = _batches(_samples("processing_time"))
    assert [b.batch_id for b in batches] == list(range(13))
    # batch 0 reads 8 rows (4 keys): 4 timers registered; batch 1 (no data) fires them: the Python operator
    # reports fired timers as deleted (numDeletedTimers 4, numExpiredTimers 0); a ValueState with a TTL and a
    # ListState, in each of 2 partitions: numValueStateWithTTLVars 2 + numListStateVars 2
    assert batches[0].extra["transform_with_state"] == {
        "operators": 1,
        "timers_registered": 4,
        "timers_deleted": 0,
        "timers_expired": 0,
        "state_variables": 4,
        "state_variables_with_ttl": 2,
        "state_variables_deleted": 0,
        "rows_removed_by_ttl": 0,
    }
    assert [b.extra["transform_with_state"]["timers_deleted"] for b in batches] == [0, 4, 0, 4, 0, 4, 0, 0, 0, 4, 0, 0, 0]
    assert [b.state_rows_removed for b in batches] == [0, 12, 0, 12, 0, 12, 0, 0, 0, 12, 0, 0, 0]
    # no withWatermark: Spark reports no eventTime at all, in every batch
    assert {b.watermark for b in batches} == {None}
    assert [b.num_input_rows for b in batches] == [8, 0, 8, 0, 8, 0, 8, 0, 0, 0, 0, 8, 0]


def test_custom_metrics_of_the_event_time_operator() -> None:
    batches = _batches(_samples("event_time_stall"))
    # a ValueState without TTL and a ListState, 2 partitions; the event-time timers fire at batches 3 and 5
    assert batches[3].extra["transform_with_state"] == {
        "operators": 1,
        "timers_registered": 0,
        "timers_deleted": 4,
        "timers_expired": 0,
        "state_variables": 4,
        "state_variables_with_ttl": 0,
        "state_variables_deleted": 0,
        "rows_removed_by_ttl": 0,
    }


def test_a_malformed_custom_metric_is_named() -> None:
    line = (FIXTURE / "processing_time" / "progress.jsonl").read_text().splitlines()[0]
    progress = json.loads(line)
    progress["stateOperators"][0]["customMetrics"]["numRegisteredTimers"] = "four"
    with pytest.raises(ProgressFormatError, match=r"stateOperators\[0\]\.customMetrics\.numRegisteredTimers"):
        parse_progress(progress, collector="listener", where="progress.jsonl: line 1")


def test_the_listener_json_gives_the_same_metrics_as_the_event_log(case: str) -> None:
    lines = (FIXTURE / case / "progress.jsonl").read_text().splitlines()
    pushed = [parse_progress(json.loads(line), collector="listener")[0].extra["transform_with_state"] for line in lines]
    assert pushed == [b.extra["transform_with_state"] for b in _batches(_samples(case))]


def test_no_rule_fires_on_the_processing_time_operator() -> None:
    # no event-time watermark (no eventTime in any batch) is no stall, no staleness and no growth: state is
    # cleared by the timers; data batches and timer batches alternate
    assert _replayed(_samples("processing_time"), SCALED) == {}


def test_no_progress_reads_the_batch_at_every_trigger_as_progress() -> None:
    # processing-time mode runs a batch at every trigger (TransformWithStateExec.shouldRunAnotherBatch),
    # data or not: just before each next report arrives, the query is not silent (`for: 10s`)
    samples = _samples("processing_time")
    batches = _batches(samples)
    evaluator = Evaluator(RulesConfig.model_validate(only_rules(no_progress={"for": "10s"})))
    for k in range(len(batches) - 1):
        upto = [s for s in samples if s.observed_at <= batches[k].observed_at and s.kind is not SampleKind.TERMINATED]
        now = report_at(batches[k + 1]) - timedelta(milliseconds=1)
        assert evaluator.evaluate_job(upto, now, clock=True) == [], k
    # a real silence after the last report still fires (batch 12 reported at 05:30:50.508)
    last = report_at(batches[-1])
    upto = [s for s in samples if s.kind is not SampleKind.TERMINATED]
    assert [f.rule for f in evaluator.evaluate_job(upto, last + timedelta(seconds=30), clock=True)] == ["no_progress"]


def test_the_event_time_operator_s_real_stall_fires() -> None:
    # the watermark rests at 05:31:17.174 from batch 5 (05:31:42.057) while batches 6-9 bring 8 rows each
    # with event times frozen at 05:31:22.174: batch 9 is 58 s into the stretch with 3 data batches (6-8)
    # that could have moved it
    found = _replayed(_samples("event_time_stall"), {"watermark_stall": {"for": "30s"}})
    assert found == {9: ["watermark_stall"]}
    evaluator = Evaluator(RulesConfig.model_validate(only_rules(watermark_stall={"for": "30s"})))
    running = [s for s in _samples("event_time_stall") if s.kind is not SampleKind.TERMINATED]
    (stall,) = evaluator.evaluate_job(running, NOW)
    assert stall.message.startswith(
        "the watermark stayed at 2026-12-02T05:31:17.174Z for 58 s (since 2026-12-02T05:31:42.057Z) while 24 rows "
        "arrived in 3 batches; the newest event time was 2026-12-02T05:31:22.174Z."
    )


def test_the_plan_gives_each_operator_s_time_mode(case: str) -> None:
    # `Arguments: transformWithStateUDF(...), [key#8], [key#3, n#4L], Update, ProcessingTime, state info [...]`
    expected = ["EventTime"] if case == "event_time_stall" else ["ProcessingTime"]
    assert {tuple(b.extra["tws_time_modes"]) for b in _batches(_samples(case))} == {tuple(expected)}


def _pushed(case: str) -> list[Sample]:
    """The listener's progress JSON alone (no plan, so no time mode)."""
    lines = (FIXTURE / case / "progress.jsonl").read_text().splitlines()
    return [s for line in lines for s in parse_progress(json.loads(line), collector="listener")]


def test_a_processing_time_operator_behind_with_watermark_is_no_stall() -> None:
    # withWatermark("event_time", "5 seconds") in front of a processing-time operator: the watermark rests at
    # 05:45:33.381 from batch 6 (05:45:42.695) while batches 8, 10, 12 and 14 bring 8 rows each with event
    # times frozen at 05:45:38.381, yet the operator keeps working (its timers clear the state: numRowsRemoved
    # 20, 12 and 12 at batches 10, 12 and 14) since it never reads the watermark. Read without the plan (the
    # listener's JSON), the flat watermark looks like a stall and its lag like staleness; the event log's plan
    # shows the mode, and neither fires
    rules = {"watermark_stall": {"for": "10s"}, "freshness": {"target": "20s"}}
    assert _replayed(_pushed("processing_time_watermarked"), rules) == {
        1: ["freshness"],  # batch 0 took 36.6 s: the first watermark is 42 s old at batch 1
        2: ["freshness"],
        12: ["freshness"],
        13: ["freshness", "watermark_stall"],
        14: ["freshness", "watermark_stall"],
    }
    assert _replayed(_samples("processing_time_watermarked"), rules) == {}
    assert _replayed(_samples("processing_time_watermarked"), SCALED) == {}


def test_freshness_slo_leaves_the_processing_time_operator_s_watermark_alone() -> None:
    from rules.freshness import job_watermark

    batches = _batches(_samples("processing_time_watermarked"))
    assert [job_watermark(b, []) for b in batches] == [None] * len(batches)
    # read without the plan, the reported watermark is the job's (batch 14's: 05:45:33.381)
    pushed = [s for s in _pushed("processing_time_watermarked") if s.scope.is_job()]
    assert job_watermark(pushed[-1], []) == datetime(2026, 12, 2, 5, 45, 33, 381000, tzinfo=UTC)


def test_job_facts_give_the_processing_time_operator_no_freshness() -> None:
    # the pages and reports show job facts: no freshness where the rules judge none, the watermark still shown
    from monitor.facts import job_facts

    samples = _samples("processing_time_watermarked")
    facts = job_facts(samples, datetime(2026, 12, 2, tzinfo=UTC), NOW)
    assert [p.freshness_s for p in facts.batches] == [None] * 15
    assert facts.batches[-1].watermark == datetime(2026, 12, 2, 5, 45, 33, 381000, tzinfo=UTC)
    pushed = job_facts(_pushed("processing_time_watermarked"), datetime(2026, 12, 2, tzinfo=UTC), NOW)
    assert pushed.batches[-1].freshness_s == 25.039  # 05:45:58.420 - 05:45:33.381, without the plan
