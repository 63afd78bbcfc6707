"""Pipeline facts: the graph of jobs, each job's local and global lag now and over the period, and the job
that contributes most (pure: no clock, no store).

One definition, shared with the ``pipeline_freshness`` rule: the graph is :func:`rules.pipeline.build_pipelines`
over :func:`rules.pipeline.job_endpoints` and the ``pipelines:`` section; the lags are
:func:`rules.pipeline.node_lags` (Materialize's split: *local* is what a job adds, *global* how far it
trails the pipeline's sources) and the staleness attribution :func:`rules.pipeline.staleness`. The series
evaluates the same function at each observation of the pipeline's jobs, on the data's own clock.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import fmean

from monitor.facts.compute import slo_facts
from monitor.facts.model import SloFacts
from monitor.model import FindingEpisode, JobRef, Sample
from rules.history import JobHistory, job_history
from rules.pipeline import (
    RULE,
    NodeLag,
    Pipeline,
    PipelineConfig,
    PipelineEdge,
    Staleness,
    build_pipelines,
    job_endpoints,
    named_job,
    node_key,
    node_lags,
    staleness,
)
from rules.pipeline_slo import RULE as SLO_RULE

__all__ = ["MAX_POINTS", "LagPoint", "PipelineFacts", "PipelineNodeFacts", "pipeline_facts"]

#: At most this many instants per pipeline in the period's series (evenly picked, the newest always kept).
MAX_POINTS = 240


@dataclass(frozen=True, slots=True)
class LagPoint:
    """One job's lags at ``at`` (seconds; ``None``: unknown), see :class:`rules.pipeline.NodeLag`."""

    at: datetime
    global_lag_s: float | None
    local_lag_s: float | None


@dataclass(frozen=True, slots=True)
class PipelineNodeFacts:
    """One job of a pipeline.

    Attributes:
        key: ``<engine>:<job_id>`` (:func:`rules.pipeline.node_key`).
        job / name: the job and how it is shown (name, else id).
        reads / writes / upstream: the datasets it reads and writes, the keys of the jobs it reads from.
        now: its lags at the pipeline's newest observation (``None``: no sample in the period).
        points: its lags at each instant of the period, oldest first.
        mean_local_s / max_global_s: over ``points`` (``None``: none known).
    """

    key: str
    job: JobRef
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    upstream: tuple[str, ...]
    now: NodeLag | None
    points: tuple[LagPoint, ...]
    mean_local_s: float | None
    max_global_s: float | None


@dataclass(frozen=True, slots=True)
class PipelineFacts:
    """A pipeline over ``[since, until)``.

    Attributes:
        name / configured: its name; whether the ``pipelines:`` section names it.
        nodes: its jobs, sources first; edges: who feeds whom through which dataset.
        at: the newest observation of any of its jobs (the data's clock of ``now`` values); ``None``
            without one.
        target_s: ``pipeline_freshness``'s target (``None``: the rule is off; nothing is judged stale).
        stale: each stale end now, and where its staleness enters (:class:`rules.pipeline.Staleness`).
        most_now: the job adding the most now (largest local lag), most_period: over the period (largest
            mean local lag); ``None`` when unknown.
        episodes: the stored ``pipeline_freshness`` finding episodes of this pipeline, oldest first.
        slo: the pipeline's freshness SLO as its newest stored ``pipeline_slo`` episode of the period says it
            (error budget left, burn rate, where the staleness entered; ``None``: no burn-rate finding).
    """

    name: str
    configured: bool
    nodes: tuple[PipelineNodeFacts, ...]
    edges: tuple[PipelineEdge, ...]
    at: datetime | None
    target_s: float | None
    stale: tuple[Staleness, ...]
    most_now: str | None
    most_period: str | None
    episodes: tuple[FindingEpisode, ...]
    slo: SloFacts | None = None

    def node(self, key: str) -> PipelineNodeFacts:
        """The node of ``key``. Raises ``KeyError`` when it is not in the pipeline."""
        for n in self.nodes:
            if n.key == key:
                return n
        raise KeyError(key)


def _upto(samples: Sequence[Sample], times: Sequence[datetime], at: datetime) -> JobHistory | None:
    """The history :func:`rules.pipeline.node_lags` reads at ``at``: the newest batch and each scope's newest
    sample at or before ``at``."""
    i = bisect_right(times, at)
    if i == 0:
        return None
    return job_history(samples[:i])


def _pick(instants: Sequence[datetime], limit: int) -> list[datetime]:
    if len(instants) <= limit:
        return list(instants)
    step = (len(instants) - 1) / (limit - 1)
    return [instants[round(i * step)] for i in range(limit)]


def pipeline_facts(
    samples: Mapping[str, Sequence[Sample]],
    since: datetime,
    until: datetime,
    *,
    config: Sequence[PipelineConfig] = (),
    target_s: float | None = None,
    episodes: Sequence[FindingEpisode] = (),
) -> list[PipelineFacts]:
    """Every pipeline among the jobs of ``samples`` over ``[since, until)``.

    Args:
        samples: each job's samples in the period, oldest first, keyed by anything (one job per key).
        since / until: the period (aware UTC).
        config: the ``pipelines:`` section.
        target_s: ``rules.pipeline_freshness.target`` in seconds (``None``: off).
        episodes: stored finding episodes of the period; the ``pipeline_freshness`` ones labelled with a
            pipeline's name are kept on it, the newest ``pipeline_slo`` one gives its ``slo``.

    Returns:
        One :class:`PipelineFacts` per pipeline, by name.
    """
    by_key: dict[str, list[Sample]] = {}
    for found in samples.values():
        kept = sorted((s for s in found if since <= s.observed_at < until), key=lambda s: s.observed_at)
        if kept:
            by_key[node_key(kept[-1].job)] = kept
    now_hist = {k: h for k, v in by_key.items() if (h := job_history(v)) is not None}
    graph = build_pipelines([(named_job(h), *job_endpoints(h)) for h in now_hist.values()], config)
    out: list[PipelineFacts] = []
    for pipeline in graph:
        out.append(_one(pipeline, by_key, now_hist, target_s, episodes))
    return out


def _one(
    pipeline: Pipeline,
    by_key: Mapping[str, list[Sample]],
    now_hist: Mapping[str, JobHistory],
    target_s: float | None,
    episodes: Sequence[FindingEpisode],
) -> PipelineFacts:
    keys = [n.key for n in pipeline.nodes]
    instants = sorted({s.observed_at for k in keys for s in by_key.get(k, ())})
    at = instants[-1] if instants else None
    now = node_lags(pipeline, now_hist, at) if at is not None else {}
    times = {k: [s.observed_at for s in by_key.get(k, ())] for k in keys}
    series: dict[str, list[LagPoint]] = {k: [] for k in keys}
    for t in _pick(instants, MAX_POINTS):
        hists = {
            k: h for k in keys
            if (h := _upto(by_key.get(k, []), times[k], t)) is not None
        }  # fmt: skip
        for k, lag in node_lags(pipeline, hists, t).items():
            series[k].append(LagPoint(t, lag.global_lag_s, lag.local_lag_s))
    nodes: list[PipelineNodeFacts] = []
    for n in pipeline.nodes:
        pts = tuple(series[n.key])
        local = [p.local_lag_s for p in pts if p.local_lag_s is not None]
        glob = [p.global_lag_s for p in pts if p.global_lag_s is not None]
        nodes.append(PipelineNodeFacts(
            n.key, n.job, n.name, n.reads, n.writes, n.upstream, now.get(n.key) if n.key in now_hist else None,
            pts, fmean(local) if local else None, max(glob) if glob else None,
        ))  # fmt: skip
    stale = tuple(staleness(pipeline, now, target_s)) if target_s is not None and now else ()
    known_now = [(lag.local_lag_s, k) for k, lag in now.items() if lag.local_lag_s is not None]
    most_now = max(known_now)[1] if known_now else None
    known_period = [(n.mean_local_s, n.key) for n in nodes if n.mean_local_s is not None]
    most_period = max(known_period)[1] if known_period else None
    mine = tuple(sorted(
        (e for e in episodes if e.rule == RULE and e.labels.get("pipeline") == pipeline.name),
        key=lambda e: (e.first_at, e.id),
    ))  # fmt: skip
    slo = slo_facts((e for e in episodes if e.labels.get("pipeline") == pipeline.name), SLO_RULE)
    return PipelineFacts(
        pipeline.name, pipeline.configured, tuple(nodes), pipeline.edges, at, target_s, stale, most_now,
        most_period, mine, slo,
    )
