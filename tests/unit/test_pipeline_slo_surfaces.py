"""A pipeline's freshness SLO on every surface, from what the daemon stored: the hand-written ``clicks``
pipeline (tests/pipeline_seed.py ``seed_pipeline_slo``: ``a`` stalls in minutes 50..59, the end ``b`` is then
11 min behind its sources) ingested and evaluated minute by minute through the daemon's own path, then read
back as facts, as the detailed report's pipeline section and on the dashboard's Pipelines page.

Expected figures, worked out by hand at the last minute 70 (SLO 5 min / 99% / 28 days; budget 1% of
minutes): the 6 h window holds minutes 0..70, 10 bad of 71 = 14.08% = 14.1x; the 30 min window 41..70 holds
10 of 30 = 33% > 6%: a page (the 1 h / 5 min row stopped: 66..70 is clean). 28 days allow 403.2 bad minutes;
10 used leave 97.5% ("at most 98%"). Every bad minute's staleness entered at ``a`` (it adds 10 of b's 11 min).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from monitor.facts import slo_text
from monitor.facts.source import load_pipeline_facts, settings_from_rules
from monitor.model import Severity
from monitor.reports.render import to_html, to_markdown
from monitor.reports.source import collect
from monitor.store import load_episodes, open_store
from tests.pipeline_seed import PipelineSeed, dashboard_on, seed_pipeline_slo
from tests.rule_samples import T0

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
SLO_LINE = (
    "page: burning 14.1x over 6 h and 30 min (above 6x); error budget of 28 days at most 98% left (99% of minutes "
    "within 5 min); the staleness entered at `a` · still burning at 2026-11-29 13:10 UTC"
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> PipelineSeed:
    return seed_pipeline_slo(tmp_path_factory.mktemp("pipeline-slo"))


def test_the_daemon_stores_one_burn_rate_episode_on_the_end_job(seeded: PipelineSeed) -> None:
    store = open_store(seeded.url)
    try:
        with store.sessions() as s:
            found = [e for e in load_episodes(s) if e.rule == "pipeline_slo"]
    finally:
        store.dispose()
    # minute 50: the ticket on 51 minutes of data (1 bad of 51 > 1% on 3 d and 6 h); 55: the page (6/56 on 6 h,
    # 6/30 on 30 min > 6%); still a page at 70 (see the module docstring): one open episode, critical
    (episode,) = found
    assert (episode.job.name, episode.labels, episode.severity) == ("b", {"pipeline": "clicks"}, Severity.CRITICAL)
    assert (episode.first_at, episode.last_at, episode.ended_by) == (
        T0 + timedelta(minutes=50), T0 + timedelta(minutes=70), None)
    assert (episode.details["entry_job"], episode.details["entry_minutes"]) == ("a", 10)


def test_facts_and_the_report_show_budget_burn_and_entry(seeded: PipelineSeed) -> None:
    store = open_store(seeded.url)
    settings = settings_from_rules({"pipeline_freshness": {"target": "5m"}}, seeded.config.pipelines)
    since, until = T0, T0 + timedelta(minutes=71)
    try:
        with store.sessions() as s:
            (facts,) = load_pipeline_facts(s, since, until, config=seeded.config.pipelines, target_s=300.0)
            report = collect(s, "r", since, until, settings=settings)
    finally:
        store.dispose()
    slo = facts.slo
    assert slo is not None
    assert (slo.alert, slo.entry, slo.open) == ("page", "a", True)
    assert slo.burn_rate == pytest.approx(10 / 71 / 0.01)
    assert slo.budget_left_share == pytest.approx(1 - 10 / 403.2)
    assert slo_text(slo) == SLO_LINE
    (p,) = report.pipelines
    assert (p.name, p.jobs, p.slo, p.slo_alert, p.slo_entry) == ("clicks", ("a", "b"), SLO_LINE, "page", "a")
    assert p.entered_at == (("a", 1),)  # one stored pipeline_freshness warning, on a (b's is an info)
    md = to_markdown(report)
    start = md.index("## Pipeline clicks (configured)")
    section = md[start:md.index("\n## ", start) + 1]
    assert section.splitlines()[2:] == [
        "| measure | value |",
        "|---|---|",
        "| jobs (sources first) | `a` → `b` |",
        "| where the staleness enters now | fresh now (every end within 5 min of its sources) |",
        "| where it entered in the period (pipeline_freshness findings) | a (1 finding) |",
        "| adds the most over the period | `a` |",
        "| freshness SLO error budget left | at most 98 % |",
        "| freshness SLO burn rate | 14.1x (page) |",
        f"| freshness SLO | {SLO_LINE} |",
        "",
    ]
    assert "<h2>Pipeline clicks (configured)</h2>" in to_html(report)
    assert report.to_json()["pipelines"][0]["slo_budget_left_pct"] == pytest.approx(100 * (1 - 10 / 403.2))


@pytest.fixture
def app_env(seeded: PipelineSeed, monkeypatch: pytest.MonkeyPatch) -> Iterator[PipelineSeed]:
    with dashboard_on(seeded, monkeypatch) as seed:
        yield seed


def test_pipelines_page_shows_the_slo(app_env: PipelineSeed) -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/pipelines.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["error budget left"] == "≤ 98%"
    assert metrics["burn rate (6 h / 30 min)"] == "14.1×"
    assert metrics["burn-rate alert"] == "page"
    assert any(m.value == "In the SLO's bad minutes (the end too far behind its sources) the staleness entered at "
                          "**`a`**: start there." for m in at.markdown)
    assert SLO_LINE in [c.value for c in at.caption]
    assert at.success[0].value == "Fresh: every end is within 5 min of its sources."
