"""A database holding the recorded two-query Spark pipeline (tests/fixtures/spark/pipeline-chain-4.3.0) as
the daemon stores it: each listener event pushed through the ingest endpoint's parser
(:func:`monitor.daemon.ingest.parse_event_document`) into ``Runtime.ingest`` in the order the driver received
them, and the rules evaluated after each (``Runtime.evaluate``), on a fake clock that is the events' own
times (never earlier than the previous one: ``chain_a``'s batch 4 arrived 30 s after it was triggered).

The config: ``pipeline_freshness`` with a 15 s target, and the ``pipelines:`` section naming the chain
(Spark's Kafka sink names no topic).

:func:`seed_pipeline_slo` stores a hand-written two-query pipeline with a freshness SLO the same way
(``pipeline_slo``'s burn-rate finding, for the surfaces' tests).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.daemon.compose import build
from monitor.daemon.ingest import parse_event_document
from monitor.model import Engine, JobRef, PollResult, Sample, ensure_utc
from monitor.store import upgrade

CHAIN = Path(__file__).resolve().parent / "fixtures" / "spark" / "pipeline-chain-4.3.0" / "listener_events.jsonl"
PIPELINES = [{"name": "chain", "jobs": [{"job": "chain_a", "writes": ["mid"]}, {"job": "chain_b", "writes": ["out"]}]}]
TARGET = "15s"


@dataclass(frozen=True)
class PipelineSeed:
    """The seeded database, its config and the fake time the feed ended at."""

    url: str
    config: Config
    end: datetime


def _time(event: dict[str, object]) -> datetime:
    progress = event.get("progress")
    stamp = progress["timestamp"] if isinstance(progress, dict) else event["timestamp"]
    return ensure_utc(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")), "timestamp")


def seed_pipeline(root: Path, lines: int | None = None) -> PipelineSeed:
    """Feed the recorded chain (its first ``lines`` events; all when ``None``) into a new SQLite database
    under ``root``. ``lines=36``: everything that had arrived 30 s into ``chain_a``'s stall."""
    url = f"sqlite:///{root / 'pipeline.db'}"
    upgrade(url)
    config = Config.model_validate({"rules": {"pipeline_freshness": {"target": TARGET}}, "pipelines": PIPELINES})
    clock: list[datetime] = []
    daemon = build(config, db_url=url, environ={"HOME": str(root)}, clock=lambda: clock[-1])
    try:
        for line in CHAIN.read_text().splitlines()[:lines]:
            event = json.loads(line)
            at = _time(event)
            clock.append(at if not clock or at > clock[-1] else clock[-1])
            daemon.runtime.ingest(parse_event_document(event, received_at=clock[-1], app_id="local-chain"),
                                  "spark-listener")
            daemon.runtime.evaluate(clock[-1])
    finally:
        daemon.store.dispose()
    return PipelineSeed(url, config, clock[-1])


SLO_PIPELINES = [{
    "name": "clicks",
    "jobs": [{"job": "a", "reads": ["in"], "writes": ["mid"]}, {"job": "b", "reads": ["mid"], "writes": ["out"]}],
    "slo": {"freshness": "5m", "objective": "99%", "window": "28d"},
}]


def slo_history(minutes: int = 71) -> list[list[Sample]]:
    """Two hand-written Spark queries, ``a`` (in → mid) and ``b`` (mid → out), one batch a minute each
    (minutes after 2026-11-29 12:00 UTC, :data:`tests.rule_samples.T0`), grouped by minute. ``a``'s watermark
    is 1 min behind, ``b``'s 2 min; in minutes 50..59 ``a`` stalls and falls 10 min behind (``b`` 11 min:
    the end is more than 5 min behind its sources for 10 minutes)."""
    from tests.rule_samples import spark

    a = JobRef(Engine.SPARK, "qa", run_id="ra", name="a")
    b = JobRef(Engine.SPARK, "qb", run_id="rb", name="b")
    out = []
    for k in range(minutes):
        behind = 10 if 50 <= k <= 59 else 1
        out.append([spark(k, 10, k - behind, job=a), spark(k, 10, k - behind - 1, job=b)])
    return out


def seed_pipeline_slo(root: Path, minutes: int = 71) -> PipelineSeed:
    """:func:`slo_history` through the daemon's own path (``Runtime.ingest`` of each minute's batches, then
    ``Runtime.evaluate`` at that minute) into a new SQLite database under ``root``, with the ``clicks``
    pipeline's SLO (:data:`SLO_PIPELINES`: 5 min, 99%, 28 days) and ``pipeline_freshness`` at 5 min."""
    url = f"sqlite:///{root / 'pipeline-slo.db'}"
    upgrade(url)
    config = Config.model_validate({"rules": {"pipeline_freshness": {"target": "5m"}}, "pipelines": SLO_PIPELINES})
    clock: list[datetime] = []
    daemon = build(config, db_url=url, environ={"HOME": str(root)}, clock=lambda: clock[-1])
    try:
        for batch in slo_history(minutes):
            clock.append(batch[0].observed_at)
            daemon.runtime.ingest(PollResult(tuple(batch)), "spark-listener")
            daemon.runtime.evaluate(clock[-1])
    finally:
        daemon.store.dispose()
    return PipelineSeed(url, config, clock[-1])


@contextmanager
def dashboard_on(seed: PipelineSeed, monkeypatch: pytest.MonkeyPatch) -> Iterator[PipelineSeed]:
    """The dashboard (under Streamlit's AppTest) pointed at ``seed``'s database and pipelines, with Streamlit's
    caches cleared before and after."""
    import streamlit as st

    from dashboard import data
    from monitor.commands.dashboard import pipelines_json

    monkeypatch.setenv(data.DB_ENV, seed.url)
    monkeypatch.setenv(data.PIPELINES_ENV, pipelines_json(seed.config))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield seed
    st.cache_resource.clear()
