"""``freshness_slo`` (rules.slo): the SRE workbook's multiwindow, multi-burn-rate alerts on freshness.

A hand-written history, replayed through the one rule path (rules.replay, as ``tidegauge scan`` and the
daemon do), must give exactly the alerts the workbook's table predicts. The expected alert times are worked
out by hand in the comments (minutes after T0 = 2026-11-29 12:00 UTC).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.errors import ConfigError
from monitor.facts import slo_facts, slo_text
from monitor.model import EpisodeEnd, FindingEpisode, Sample, SampleKind, Scope, Severity
from rules.config import RulesConfig
from rules.registry import Evaluator, validate
from rules.replay import replay
from tests.rule_samples import KAFKA, SPARK, T0, flink, only_rules, spark

SLO = {"freshness": "5m", "objective": "99%", "window": "28d"}


def _history() -> list[Sample]:
    """One Spark batch a minute, minutes 0..760. Fresh (watermark 1 min behind) except minutes 360..389,
    whose batches carry a watermark 10 min behind (> 5m: 30 bad minutes)."""
    return [spark(k, 10, k - 10 if 360 <= k <= 389 else k - 1) for k in range(761)]


def _evaluator(params: dict[str, object]) -> Evaluator:
    return Evaluator(RulesConfig.model_validate(only_rules(freshness_slo=params)))


def _transitions(samples: list[Sample], params: dict[str, object]) -> list[tuple[float, Severity | None]]:
    out: list[tuple[float, Severity | None]] = []
    current: Severity | None = None
    for instant in replay(_evaluator(params), samples):
        found = [f for f in instant.findings if f.rule == "freshness_slo"]
        assert len(found) <= 1
        severity = found[0].severity if found else None
        if severity != current:
            out.append(((instant.at - T0) / timedelta(minutes=1), severity))
            current = severity
    return out


def test_burn_rate_alerts_follow_the_workbook_table() -> None:
    # Budget 1 - 99% = 1% of minutes. Ratios are bad / counted minutes of the window ending at the minute:
    # * 363: ticket (3d & 6h > 1x = 1%): 6h = minutes 4..363 has 4 bad of 360 = 1.11%; 3d = 0..363, 4 of
    #   364 = 1.10% (at 362: 3/360 = 0.83%, not yet).
    # * 368: page (1h & 5m > 14.4x = 14.4%): 1h = 309..368 has 9 of 60 = 15% (at 367: 8/60 = 13.3%); 5m all bad.
    # * 381: 6h & 30m > 6x also holds (22/360 = 6.1%); still a page.
    # * 394: the 5m window 390..394 is clean: the 1h/5m row stops, 6h/30m holds (30/360; 25 of 365..394).
    # * 418: the 30m window 389..418 has 1 bad of 30 = 3.3% < 6%: no page; the ticket holds (30/360 = 8.3%).
    # * 746: the 6h window 387..746 has 3 bad of 360 = 0.83% < 1%: nothing (at 745: 4/360 = 1.11%).
    assert _transitions(_history(), SLO) == [
        (363, Severity.WARNING),
        (368, Severity.CRITICAL),
        (418, Severity.WARNING),
        (746, None),
    ]


def test_finding_says_burn_rate_windows_and_budget_left() -> None:
    samples = _history()
    by_minute = {
        round((i.at - T0) / timedelta(minutes=1)): i.findings for i in replay(_evaluator(SLO), samples)
    }
    (page,) = by_minute[368]
    # 1h: 9 bad of 60 = 15% = 15x the 1% budget; 28d = 40,320 minutes allow 403.2 bad; 9 used -> 97.8% left
    assert page.details["alert"] == "page"
    assert page.details["burn_rate"] == pytest.approx(15.0)
    assert page.details["long_window_seconds"] == 3600.0
    assert page.details["short_window_seconds"] == 300.0
    assert page.details["budget_left_share"] == pytest.approx(1 - 9 / 403.2)
    assert page.details["delay_seconds"] == 600.0
    assert page.message.startswith("freshness SLO burning 15.0x too fast: in the last 1 h 15% of the minutes")
    assert "Page: both the 1 h and 5 min windows burn above 14.4x" in page.message
    assert "At most 98% of the error budget of 28 days is left" in page.message
    (page2,) = by_minute[394]
    # the 6h/30m row: 30 bad of 360 = 8.33% = 8.33x
    assert (page2.details["long_window_seconds"], page2.details["burn_rate"]) == (21600.0, pytest.approx(30 / 360 / 0.01))
    (ticket,) = by_minute[418]
    assert ticket.details["alert"] == "ticket"
    assert ticket.details["long_window_seconds"] == 3 * 86400.0
    assert "Ticket:" in ticket.message


def test_kafka_group_slo_reads_lag_seconds() -> None:
    # a consumer group polled each minute since minute 0: lag 10 min (bad) from minute 120 on; budget 1%.
    # * 121: ticket (3d & 6h > 1%): both windows hold minutes 0..121, 2 bad of 122 = 1.6% (at 120: 1 of 121).
    # * 127: page by the 6h/30m row (> 6%): the 6h window holds only minutes 0..127, 8 bad of 128 = 6.25%, and
    #   the 30m 8 of 30 (at 126: 7 of 127 = 5.5%). The 1h/5m row would page a minute later (128: 9 of 60 = 15%).
    samples = [_group(k, 600.0 if k >= 120 else 5.0) for k in range(130)]
    assert _transitions(samples, SLO) == [(121, Severity.WARNING), (127, Severity.CRITICAL)]


def _group(minute: int, lag_seconds: float) -> Sample:
    """The Kafka lag collector's group-scope sample (its furthest-behind partition's lag in seconds)."""
    return Sample(job=KAFKA, observed_at=T0 + timedelta(minutes=minute), kind=SampleKind.GAUGE,
                  collector="kafka-lag", lag_seconds=lag_seconds)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"freshness": "5m", "objective": "100%"}, "rules.freshness_slo.objective: the objective must be above 0%"),
        ({"freshness": "5m", "objective": 99.5}, "rules.freshness_slo.objective: expected a percentage like 99.5%"),
        ({"freshness": "5m", "objective": "high"}, "rules.freshness_slo.objective: expected a percentage"),
        ({"freshness": 5}, "rules.freshness_slo.freshness: expected a duration with a unit"),
        ({"freshness": "5m", "windows": "28d"}, "rules.freshness_slo.windows: unknown parameter"),
    ],
)
def test_bad_slo_config_names_the_field(params: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigError) as exc:
        validate(RulesConfig.model_validate({"freshness_slo": params}))
    assert error in str(exc.value)


def test_off_without_freshness_and_history_window() -> None:
    assert _transitions(_history()[:400], {}) == []
    assert _evaluator(SLO).history_window() == timedelta(days=3)


def test_flink_subtask_watermarks_give_the_minimum_as_freshness_takes_it() -> None:
    # a Flink job polled each minute with no job-scope watermark: subtask 0 fresh (1 min behind), subtask 1
    # 10 min behind from minute 60 on; the job's watermark is the minimum (freshness rule, case 5), so every
    # minute from 60 is bad. Budget 1%: 6h & 30m (6x): at 63 the 6h window holds 0..63, 4 bad of 64 = 6.25%
    # (at 62: 3 of 63 = 4.8%) -> page at 63; the ticket (3d & 6h > 1%) held from 60 (1 of 61 = 1.6%).
    samples = [
        s
        for k in range(70)
        for s in (flink(k, None, None, 5), flink(k, 0, k - 1), flink(k, 1, k - 10 if k >= 60 else k - 1))
    ]
    assert _transitions(samples, SLO) == [(60, Severity.WARNING), (63, Severity.CRITICAL)]


def test_job_facts_read_the_newest_stored_slo_episode() -> None:
    # the stored episode's details as the rule wrote them (written out, not recomputed): the facts and the
    # one line every surface shows only read them
    details = {"alert": "page", "burn_rate": 15.0, "burn_factor": 14.4, "long_window_seconds": 3600.0,
               "short_window_seconds": 300.0, "budget_left_share": 0.977, "budget_measured_seconds": 22140.0,
               "objective": 0.995, "target_seconds": 300.0, "window_seconds": 2419200.0}
    older = FindingEpisode(id="a", fingerprint="f", rule="freshness_slo", job=SPARK, scope=Scope(),
                           severity=Severity.WARNING, first_at=T0, last_at=T0 + timedelta(hours=1), message="m",
                           ended_by=EpisodeEnd.RESOLVED, details={**details, "alert": "ticket", "burn_rate": 2.0})
    newer = FindingEpisode(id="b", fingerprint="f", rule="freshness_slo", job=SPARK, scope=Scope(),
                           severity=Severity.CRITICAL, first_at=T0 + timedelta(hours=6),
                           last_at=T0 + timedelta(hours=6, minutes=8), message="m", details=details)
    other = FindingEpisode(id="c", fingerprint="g", rule="freshness", job=SPARK, scope=Scope(),
                           severity=Severity.WARNING, first_at=T0, last_at=T0 + timedelta(hours=9), message="m")
    slo = slo_facts([newer, other, older])
    assert slo is not None
    assert (slo.alert, slo.burn_rate, slo.budget_left_share, slo.open) == ("page", 15.0, 0.977, True)
    assert slo_text(slo) == (
        "page: burning 15.0x over 1 h and 5 min (above 14.4x); error budget of 28 days at most 98% left "
        "(99.5% of minutes within 5 min) · still burning at 2026-11-29 18:08 UTC"
    )
    assert slo_facts([other]) is None
