"""``join_state_unbounded`` on two real Spark 4.3.0 stream-stream joins (tests/fixtures/spark/stream-join-4.3.0,
see its PROVENANCE.md): the same impressions/clicks join with a time-range condition (state evicted, no
finding) and without one (state kept forever, the finding). Read two ways: the event log (the plan names the
columns) and the listener's progress JSON alone (no plan: the state metrics). Expected values are read off
the recordings by hand and written out here.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from collectors.spark.eventlog import EventLogCollector
from collectors.spark.plans import join_plan
from collectors.spark.progress import parse_progress
from monitor.model import Sample, SampleKind
from monitor.store import upgrade
from rules.config import RulesConfig
from rules.history import job_history
from rules.join_state import JoinStateParams, condition_to_add, evaluate_join_state
from rules.registry import Evaluator
from rules.replay import replay
from rules.state_growth import StateGrowthParams, evaluate_state_growth
from tests.cli import run_cli
from tests.rule_samples import only_rules

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "stream-join-4.3.0"
NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _log(case: str) -> Path:
    (log,) = (FIXTURE / case).glob("eventlog_v2_*")
    return log


def _plan_text(case: str) -> str:
    (events,) = _log(case).glob("events_*")
    (line,) = [line for line in events.read_text().splitlines() if "SparkListenerSQLExecutionStart" in line[:120]]
    description = json.loads(line)["physicalPlanDescription"]
    assert isinstance(description, str)
    return description


def _from_log(case: str) -> list[Sample]:
    result = EventLogCollector([_log(case)]).poll(NOW)
    assert result.errors == ()
    return sorted(result.samples, key=lambda s: s.observed_at)


def _from_progress(case: str) -> list[Sample]:
    lines = (FIXTURE / case / "progress.jsonl").read_text().splitlines()
    return [s for line in lines for s in parse_progress(json.loads(line), collector="listener")]


def _batches(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.kind is SampleKind.PROGRESS and s.scope.is_job()]


JOIN_RULE = Evaluator(RulesConfig.model_validate(only_rules(join_state_unbounded={})))


def _fired(samples: list[Sample], evaluator: Evaluator = JOIN_RULE) -> dict[int, list[str]]:
    return {i.batch_id: [f.rule for f in i.findings] for i in replay(evaluator, samples) if i.batch_id is not None and i.findings}


def test_the_plan_shows_the_join_s_state_cleanup() -> None:
    assert join_plan(_plan_text("range")) == {
        "join_type": "Inner",
        "left_keys": ["ad"],
        "right_keys": ["click_ad"],
        "left_time": "imp_time",
        "right_time": "click_time",
        "condition": "((click_time >= imp_time) AND (click_time <= imp_time + INTERVAL '01' MINUTE))",
        "left_cleanup": True,
        "right_cleanup": True,
    }
    assert join_plan(_plan_text("unbounded")) == {
        "join_type": "Inner",
        "left_keys": ["ad"],
        "right_keys": ["click_ad"],
        "left_time": "imp_time",
        "right_time": "click_time",
        "condition": None,
        "left_cleanup": False,
        "right_cleanup": False,
    }


def test_a_plan_without_a_join_or_cut_short_gives_none() -> None:
    assert join_plan("== Physical Plan ==\n* Project (2)\n+- Scan json  (1)\n") is None
    text = _plan_text("unbounded")
    assert join_plan(text[: text.index("state cleanup")]) is None


def test_the_join_s_state_metrics_are_read_from_its_operator() -> None:
    # numRowsTotal/numRowsRemoved of the `symmetricHashJoin` entry (progress.jsonl): the range join evicts 9
    # rows at batch 3 (24 -> 15), the unbounded one holds 12 more rows every batch and removes none
    range_batches = _batches(_from_progress("range"))
    assert [b.extra["stream_join"] for b in range_batches[2:4]] == [
        {"operators": 1, "rows_total": 24, "rows_removed": 0},
        {"operators": 1, "rows_total": 15, "rows_removed": 9},
    ]
    unbounded = _batches(_from_progress("unbounded"))
    assert [b.extra["stream_join"]["rows_total"] for b in unbounded] == [12, 24, 36, 48, 60, 72, 84, 96, 108, 120]
    assert {b.extra["stream_join"]["rows_removed"] for b in unbounded} == {0}


def test_the_event_log_gives_every_batch_of_the_run_its_join_plan() -> None:
    batches = _batches(_from_log("unbounded"))
    assert [b.batch_id for b in batches] == list(range(10))
    assert {b.extra["join_plan"]["right_cleanup"] for b in batches} == {False}
    assert all("join_plan" not in s.extra for s in _from_log("unbounded") if not s.scope.is_job())


def test_the_range_join_raises_nothing_either_way() -> None:
    assert _fired(_from_log("range")) == {}
    assert _fired(_from_progress("range")) == {}


def test_the_unbounded_join_is_reported_from_its_plan() -> None:
    samples = _from_log("unbounded")
    # batch 1 holds the first computed watermark (04:00:15), batch 2 the first step: from then on the plan
    # (no state cleanup for either side) is the evidence
    assert _fired(samples) == {k: ["join_state_unbounded"] for k in range(2, 10)}
    history = job_history(samples)
    assert history is not None
    (finding,) = evaluate_join_state(JoinStateParams(), history, NOW)
    assert finding.batch_id == 9
    assert finding.message.startswith(
        "join state unbounded: the inner stream-stream join on ad = click_ad keeps its state forever. Its physical "
        "plan has no state cleanup for either side: the join condition (only the join keys) sets no time range "
        "between the two sides' watermarked event-time columns (imp_time, click_time), so Spark never drops a row "
        "of either side. It holds 120 state rows now; 0 were removed in the last 35 s while the watermark advanced "
        "8 times."
    )
    assert "`click_time BETWEEN imp_time - INTERVAL 1 HOUR AND imp_time + INTERVAL 1 HOUR`" in finding.message
    assert "new checkpoint" in finding.message
    assert finding.details["evidence"] == "plan"
    assert finding.details["sides_kept"] == ["left", "right"]


def test_the_unbounded_join_is_reported_from_its_state_metrics_without_a_plan() -> None:
    samples = _from_progress("unbounded")
    # the trend test (state_growth's defaults): 6 points and 3 watermark steps are there from batch 5
    assert _fired(samples) == {k: ["join_state_unbounded"] for k in range(5, 10)}
    history = job_history(samples)
    assert history is not None
    (finding,) = evaluate_join_state(JoinStateParams(), history, NOW)
    assert "Its state grew from 12 to 120 rows in 35 s with none removed while the watermark advanced 8 times." in finding.message
    assert "`<right event time> BETWEEN <left event time> - INTERVAL 1 HOUR" in finding.message
    assert finding.details["evidence"] == "state_metrics"


def test_one_side_kept_is_named() -> None:
    # the range plan with the right side's predicate taken out (as when the left side has no watermark)
    text = _plan_text("range")
    start = text.index("right value predicate")
    one_side = text[:start] + "right = null ]" + text[text.index(" ], 2, Append", start) + 2 :]
    plan = join_plan(one_side)
    assert plan is not None and (plan["left_cleanup"], plan["right_cleanup"]) == (True, False)
    samples = [
        dataclasses.replace(s, extra={**s.extra, "join_plan": plan}) if "join_plan" in s.extra else s
        for s in _from_log("range")
    ]
    history = job_history(samples)
    assert history is not None
    (finding,) = evaluate_join_state(JoinStateParams(), history, NOW)
    assert "has no state cleanup for the right side" in finding.message
    assert "so Spark never drops a row of the right side." in finding.message


def test_state_growth_leaves_a_join_s_growth_to_the_join_rule() -> None:
    samples = _from_progress("unbounded")
    history = job_history(samples)
    assert history is not None
    assert evaluate_state_growth(StateGrowthParams(), history, NOW) == []
    # the same batches without the join's entry (as a non-join operator): state_growth reports them
    plain = job_history([dataclasses.replace(s, extra={k: v for k, v in s.extra.items() if k != "stream_join"}) for s in samples])
    assert plain is not None
    assert [f.rule for f in evaluate_state_growth(StateGrowthParams(), plain, NOW)] == ["state_growth"]


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        (None, "<right event time> BETWEEN <left event time> - INTERVAL 1 HOUR AND <left event time> + INTERVAL 1 HOUR"),
        ({"left_time": "imp_time", "right_time": None}, "<right event time> BETWEEN imp_time - INTERVAL 1 HOUR AND imp_time + INTERVAL 1 HOUR"),
    ],
)
def test_condition_to_add(plan: dict[str, object] | None, expected: str) -> None:
    assert condition_to_add(plan) == expected


def test_the_stored_finding_is_shown_by_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `scan --db` stores the episode; `report` shows it and its recommendation points at it (not at the
    # dropDuplicates advice of a plain growing state)
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    code, out, _ = run_cli(["scan", "--db", url, str(_log("unbounded"))], capsys)
    assert code == 0 and "WARNING  join_state_unbounded [ad_clicks_unbounded] (held batches 2-9)" in out
    code, report, _ = run_cli(["report", "--db", url, "--format", "md"], capsys)
    assert code == 0
    assert "| join_state_unbounded | warning | batches 2-9 |" in report
    assert (
        "State grows by about 10,800 rows/h with nothing removed: a stream-stream join without a time range "
        "between its two sides' event-time columns keeps every row. Add the condition the join_state_unbounded "
        "finding above names."
    ) in report
    assert "dropDuplicatesWithinWatermark" not in report


def test_state_growth_judges_a_join_whose_plan_evicts_both_sides() -> None:
    # the unbounded join's batches as if their plan showed a cleanup for both sides: the join rule is silent
    # (the plan says eviction works), so a growth with nothing removed is still state_growth's to report
    plan = {**(join_plan(_plan_text("range")) or {})}
    samples = [
        dataclasses.replace(s, extra={**s.extra, "join_plan": plan}) if s.scope.is_job() else s
        for s in _from_progress("unbounded")
    ]
    history = job_history(samples)
    assert history is not None
    assert evaluate_join_state(JoinStateParams(), history, NOW) == []
    assert [f.rule for f in evaluate_state_growth(StateGrowthParams(), history, NOW)] == ["state_growth"]


def test_a_plan_not_shaped_as_spark_writes_it_falls_back_to_the_state_metrics(tmp_path: Path) -> None:
    # the unbounded log with its plan's `state cleanup` renamed: no error, the batches carry no plan, and the
    # rule judges the join's state rows (from batch 5, as with the listener's JSON alone)
    (events,) = _log("unbounded").glob("events_*")
    log_dir = tmp_path / "eventlog_v2_local-1"
    log_dir.mkdir()
    (log_dir / "events_1_local-1").write_text(events.read_text().replace("state cleanup [", "state cleanuq ["))
    result = EventLogCollector([log_dir]).poll(NOW)
    assert result.errors == ()
    samples = sorted(result.samples, key=lambda s: s.observed_at)
    assert all("join_plan" not in s.extra for s in samples)
    assert _fired(samples) == {k: ["join_state_unbounded"] for k in range(5, 10)}


@pytest.mark.parametrize(
    "arguments",
    [
        "[" + "a], [" * 100_000,  # key lists that never close
        "[a], [b], Inner, condition = [ " + "full = , right " * 50_000,  # no end of the condition
        "[a], [b], Inner, condition = [ full = null ], state info [ ], state cleanup [ left " + ", right " * 50_000,
    ],
)
def test_a_hostile_plan_section_is_read_in_one_pass(arguments: str) -> None:
    # plain finds over a section cut at 20,000 characters: no pattern to backtrack over (the plan comes from a
    # file); a section without the shape Spark writes gives None, one with it (the last) what it says
    text = f"(1) StreamingSymmetricHashJoin\nLeft output [1]: [a#1-T5ms]\nRight output [1]: [b#2]\nArguments: {arguments}\n"
    plan = join_plan(text)
    if plan is not None:
        assert (plan["left_time"], plan["right_time"], plan["left_cleanup"]) == ("a", None, True)


def test_the_dashboard_job_page_shows_the_stored_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from dashboard import data

    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    assert run_cli(["scan", "--db", url, str(_log("unbounded"))], capsys)[0] == 0
    monkeypatch.setenv(data.DB_ENV, url)
    monkeypatch.setattr(data, "now", lambda: datetime(2026, 12, 2, 5, 30, tzinfo=UTC))
    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        page = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "job.py"
        at = AppTest.from_file(str(page), default_timeout=60)
        at.query_params["engine"] = "spark"
        at.query_params["job_id"] = "ec3c6e08-0c0c-4bb8-986c-f913496eeb1c"
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        table = next(d.value for d in at.dataframe if "rule" in d.value.columns)
        assert table[["severity", "rule", "batches"]].to_dict("records") == [
            {"severity": "warning", "rule": "join_state_unbounded", "batches": "batches 2-9"}
        ]
        (shown,) = [m.value for m in at.markdown if m.value.startswith("join state unbounded:")]
        assert "`click_time BETWEEN imp_time - INTERVAL 1 HOUR AND imp_time + INTERVAL 1 HOUR`" in shown
    finally:
        st.cache_data.clear()
        st.cache_resource.clear()
