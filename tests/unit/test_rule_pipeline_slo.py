"""``pipeline_slo`` (rules.pipeline_slo): a freshness SLO on a pipeline's end, with the SRE workbook's
multiwindow, multi-burn-rate alerts, naming the job where the staleness enters.

Two hand-written Spark jobs, ``a`` (in → mid) and ``b`` (mid → out), one batch a minute each, are judged on
the one pipeline path (``Evaluator.evaluate_pipelines``) at each minute with what had arrived by then, as
the daemon's tick does. The expected alert minutes are worked out by hand in the comments (minutes after
T0 = 2026-11-29 12:00 UTC).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from monitor.errors import ConfigError
from monitor.model import Engine, JobRef, Sample, Severity
from rules.config import RulesConfig
from rules.pipeline import parse_pipelines
from rules.registry import Evaluator
from tests.rule_samples import T0, only_rules, spark

A = JobRef(Engine.SPARK, "qa", name="a")
B = JobRef(Engine.SPARK, "qb", name="b")
SLO = {"freshness": "5m", "objective": "99%", "window": "28d"}


def _config(slo: dict[str, Any] | None = SLO) -> list[dict[str, Any]]:
    jobs = [{"job": "a", "reads": ["in"], "writes": ["mid"]}, {"job": "b", "reads": ["mid"], "writes": ["out"]}]
    return [{"name": "clicks", "jobs": jobs, **({"slo": slo} if slo is not None else {})}]


def _evaluator(config: list[dict[str, Any]], **rules: dict[str, Any]) -> Evaluator:
    """Every other rule off (the pipeline rules on unless ``rules`` says otherwise)."""
    return Evaluator(RulesConfig.model_validate(only_rules(**{"pipeline_slo": {}, **rules})), parse_pipelines(config))


def _history(stalled: JobRef = A, minutes: int = 761) -> dict[JobRef, list[Sample]]:
    """Minutes 0..760. Normally a's watermark is 1 min behind, b's 2 min (b adds 1 min). In minutes 360..389
    the ``stalled`` job adds 9 min more: the end ``b`` is 11 min behind its sources (> 5m: 30 bad minutes)."""
    out: dict[JobRef, list[Sample]] = {A: [], B: []}
    for k in range(minutes):
        bad = 360 <= k <= 389
        a_behind = 10 if bad and stalled == A else 1
        b_behind = a_behind + (10 if bad and stalled == B else 1)
        out[A].append(spark(k, 10, k - a_behind, job=A))
        out[B].append(spark(k, 10, k - b_behind, job=B))
    return out


def _at(history: dict[JobRef, list[Sample]], minute: int) -> list[list[Sample]]:
    return [[s for s in samples if s.observed_at <= T0 + timedelta(minutes=minute)] for samples in history.values()]


def _slo_findings(evaluator: Evaluator, history: dict[JobRef, list[Sample]], minute: int) -> list[Any]:
    return [f for f in evaluator.evaluate_pipelines(_at(history, minute)) if f.rule == "pipeline_slo"]


def test_burn_rate_alerts_follow_the_workbook_table() -> None:
    # The end b is bad in minutes 360..389 (11 min behind > 5m). Budget 1 - 99% = 1% of minutes:
    # * 363: ticket (3d & 6h > 1x): 6h = minutes 4..363 holds 4 bad of 360 = 1.11% (at 362: 3/360 = 0.83%).
    # * 368: page (1h & 5m > 14.4x): 1h = 309..368 holds 9 of 60 = 15% (at 367: 8/60 = 13.3%); 5m all bad.
    # * 394: 5m = 390..394 is clean; 6h & 30m > 6x still holds (30/360 = 8.3%; 25 of 365..394): a page.
    # * 418: 30m = 389..418 holds 1 of 30 = 3.3% < 6%: no page; the ticket holds (30/360 = 8.3%).
    # * 746: 6h = 387..746 holds 3 of 360 = 0.83% < 1%: nothing (at 745: 387 is out, 386..745: 4/360).
    evaluator = _evaluator(_config())
    history = _history()
    transitions: list[tuple[int, Severity | None]] = []
    current: Severity | None = None
    for minute in range(761):
        found = _slo_findings(evaluator, history, minute)
        assert len(found) <= 1
        severity = found[0].severity if found else None
        if severity != current:
            transitions.append((minute, severity))
            current = severity
    assert transitions == [(363, Severity.WARNING), (368, Severity.CRITICAL), (418, Severity.WARNING), (746, None)]


def test_the_finding_names_the_pipeline_and_where_the_staleness_enters() -> None:
    evaluator = _evaluator(_config())
    (page,) = _slo_findings(evaluator, _history(), 368)
    # on the end job b, labelled with the pipeline; a adds 10 min of b's 11 in each of the 9 bad minutes
    assert (page.job, page.labels) == (B, {"pipeline": "clicks"})
    assert page.details["alert"] == "page"
    assert page.details["burn_rate"] == pytest.approx(15.0)
    # 28d = 40,320 minutes allow 403.2 bad at 1%; 9 used
    assert page.details["budget_left_share"] == pytest.approx(1 - 9 / 403.2)
    assert (page.details["entry"], page.details["entry_job"], page.details["entry_minutes"]) == ("spark:qa", "a", 9)
    assert page.details["bad_minutes"] == 9
    assert page.details["end_lag_s"] == 660.0
    assert page.message.startswith(
        "pipeline `clicks`: freshness SLO burning 15.0x too fast: in the last 1 h 15% of the minutes (and 100% of "
        "the last 5 min) had its end `b` more than 5 min behind the pipeline's sources, against an objective of "
        "99% of minutes within 5 min over 28 days (an error budget of 1.0% of minutes). The staleness enters at "
        "`a`: it added the most delay on the path to the end in 9 of the 9 bad minutes of the last 1 h. Page: "
    )
    assert page.message.endswith(
        "The end is 11 min behind its sources now; start with `a` (its pipeline_freshness, watermark_stall, "
        "falling_behind and consumer_lag findings say why it is behind): the jobs after it only pass the delay on."
    )
    # 418: the ticket, judged over 3 days: all 30 bad minutes entered at a; the end is fresh again (2 min)
    (ticket,) = _slo_findings(evaluator, _history(), 418)
    assert ticket.severity is Severity.WARNING
    assert (ticket.details["entry_job"], ticket.details["entry_minutes"], ticket.details["bad_minutes"]) == ("a", 30, 30)
    assert ticket.details["end_lag_s"] == 120.0
    assert "The staleness entered at `a`: it added the most delay on the path to the end in 30 of the 30 bad " \
           "minutes of the last 3 days. Ticket: " in ticket.message


def test_staleness_added_by_the_end_job_enters_there() -> None:
    # b stalls instead (a 1 min behind, b adds 10): the same minutes are bad, the entry is b
    (page,) = _slo_findings(_evaluator(_config()), _history(stalled=B), 368)
    assert (page.details["entry_job"], page.details["entry_minutes"]) == ("b", 9)


def test_no_slo_configured_no_finding_and_the_rule_can_be_turned_off() -> None:
    history = _history(minutes=369)
    assert _slo_findings(_evaluator(_config(slo=None)), history, 368) == []
    assert _slo_findings(_evaluator(_config(), pipeline_slo={"enabled": False}), history, 368) == []
    assert _evaluator(_config(), pipeline_slo={"enabled": False}).pipeline_window() == timedelta(0)
    assert _evaluator(_config()).pipeline_window() == timedelta(days=3)


def test_the_slo_is_judged_beside_pipeline_freshness_on_the_one_path() -> None:
    # pipeline_freshness (target 5m) gives its warning on a and the info on b at 368 too
    evaluator = _evaluator(_config(), pipeline_freshness={"target": "5m"})
    found = evaluator.evaluate_pipelines(_at(_history(minutes=369), 368))
    assert sorted((f.rule, f.job.name, f.severity.name) for f in found) == [
        ("pipeline_freshness", "a", "WARNING"), ("pipeline_freshness", "b", "INFO"), ("pipeline_slo", "b", "CRITICAL"),
    ]


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        parse_pipelines([
            {"name": "p", "jobs": [{"job": "a"}], "slo": {"objective": "99%"}},
            {"name": "q", "jobs": [{"job": "a"}], "slo": {"freshness": "5m", "objective": "100%"}},
            {"name": "r", "jobs": [{"job": "a"}], "slo": {"freshness": "5m", "budget": 1}},
        ])
    assert str(err.value).splitlines() == [
        "pipelines[0].slo.freshness: Field required",
        "pipelines[1].slo.objective: the objective must be above 0% and below 100% (100% leaves no error budget)",
        "pipelines[2].slo.budget: unknown key",
    ]


def test_minutes_a_late_job_has_not_reported_yet_are_judged_again() -> None:
    # b stalls (a 1 min behind, b adds 10 in minutes 360..389), but a's reports reach the daemon 15 min late.
    # Judged at 368 with a's newest report from 353 (watermark 352), a looks 16 min behind and b adds nothing:
    # the provisional entry is a. The minutes after 353 are not settled (a has not reported them), so once a's
    # reports arrive the same evaluator judges them again: all 9 bad minutes of the last hour entered at b,
    # as a fresh evaluator over the complete history says.
    history = _history(stalled=B, minutes=369)
    evaluator = _evaluator(_config())
    for minute in range(369):
        late = [[s for s in history[A] if s.observed_at <= T0 + timedelta(minutes=minute - 15)],
                [s for s in history[B] if s.observed_at <= T0 + timedelta(minutes=minute)]]
        found = [f for f in evaluator.evaluate_pipelines(late) if f.rule == "pipeline_slo"]
    assert [(f.details["entry_job"], f.details["entry_minutes"]) for f in found] == [("a", 9)]
    (page,) = _slo_findings(evaluator, history, 368)
    (fresh,) = _slo_findings(_evaluator(_config()), history, 368)
    assert (page.details["entry_job"], page.details["entry_minutes"]) == ("b", 9)
    assert (page.severity, page.message, page.details) == (fresh.severity, fresh.message, fresh.details)
