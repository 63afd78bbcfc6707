"""The recorded two-query chain through the daemon's own path (tests/pipeline_seed.py: listener ingest, the
evaluate stage, the store) 30 s into ``chain_a``'s stall, then read back: the stored ``pipeline_freshness``
episodes (the warning on ``chain_a``, ``chain_b``'s info linked to it) and the dashboard's Pipelines page
under Streamlit's ``AppTest`` (what it shows is what the store holds)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from monitor.commands.dashboard import pipelines_json
from monitor.model import Severity
from monitor.store import load_episodes, open_store
from tests.pipeline_seed import PipelineSeed, dashboard_on, seed_pipeline

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
A_ID = "1b9eaaeb-5778-417b-afff-5fa9b52e21a3"
B_ID = "7af35c0d-fcd4-4bec-8fce-cf8d0b089e21"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> PipelineSeed:
    return seed_pipeline(tmp_path_factory.mktemp("pipeline"), lines=36)


@pytest.fixture
def app_env(seeded: PipelineSeed, monkeypatch: pytest.MonkeyPatch) -> Iterator[PipelineSeed]:
    with dashboard_on(seeded, monkeypatch) as seed:
        yield seed


def test_the_daemon_stores_the_entry_and_links_the_downstream_job(seeded: PipelineSeed) -> None:
    store = open_store(seeded.url)
    try:
        with store.sessions() as s:
            found = [e for e in load_episodes(s) if e.rule == "pipeline_freshness" and e.ended_by is None]
    finally:
        store.dispose()
    by_job = {e.job.job_id: e for e in found}
    assert set(by_job) == {A_ID, B_ID}
    entry, down = by_job[A_ID], by_job[B_ID]
    assert (entry.severity, down.severity) == (Severity.WARNING, Severity.INFO)
    assert down.caused_by == (entry.id,)
    assert entry.causes == (down.id,)
    assert entry.labels == {"pipeline": "chain"}
    # both began when chain_b's idle event at 23:24:11 put the end 15.1 s behind (chain_a adding 12.4 s)
    assert entry.first_at.isoformat() == down.first_at.isoformat() == "2026-12-01T23:24:11+00:00"
    assert "The staleness enters at this job: it adds 33 s" in entry.message


def test_the_dashboard_is_told_the_config() -> None:
    from monitor.config import Config

    cfg = Config.model_validate({"rules": {"pipeline_freshness": {"target": "5m"}},
                                 "pipelines": [{"name": "p", "jobs": [{"job": "a", "writes": ["t"]}]}]})
    assert json.loads(pipelines_json(cfg)) == {
        "target_s": 300.0, "pipelines": [{"name": "p", "jobs": [{"job": "a", "reads": [], "writes": ["t"]}]}],
    }
    assert json.loads(pipelines_json(Config()))["target_s"] is None


def test_pipelines_page_shows_where_the_staleness_enters(app_env: PipelineSeed) -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/pipelines.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Pipelines"
    (error,) = at.error
    assert error.value.startswith("**Stale:** the end `chain_b` is 36 s behind its sources. The staleness "
                                  "**enters at `chain_a`**, which adds 33 s of it.")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"adds the most now": "chain_a", "adds the most over the period": "chain_a"}
    nodes = at.dataframe[0].value
    assert list(nodes["job"]) == ["chain_a", "chain_b"]
    assert list(nodes["adds now"]) == ["33 s", "3 s"]
    assert list(nodes["behind sources now"]) == ["33 s", "36 s"]
    assert list(nodes["role"]) == ["entry", "downstream"]
    findings = at.dataframe[1].value
    open_rows = findings[findings["ended_by"] == "open"]
    assert sorted(zip(open_rows["job_name"], open_rows["severity"], open_rows["caused by"], strict=True)) == [
        ("chain_a", "warning", ""), ("chain_b", "info", "chain_a"),
    ]
