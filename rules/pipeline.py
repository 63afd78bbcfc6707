"""Freshness across a pipeline of jobs (topic → job → topic → job): the graph, local and global lag, and
the ``pipeline_freshness`` rule that names the job where the staleness enters.

**The graph** is inferred from what the jobs already report, and completed by the ``pipelines:`` section of
the configuration where inference cannot see:

* Spark: each source's ``description`` (``KafkaV2[Subscribe[in]]``, ``KafkaSource[Subscribe[a,b]]``,
  ``KafkaV2[Assign[in-0, in-1]]``, ``FileStreamSource[file:/data/in]``, ``DeltaSource[...]``) is what the
  query reads; the ``sink.description`` (``FileSink[/data/out]``, ``DeltaSink[...]``; the collector keeps it
  as ``Sample.extra["sink"]``) what it writes. Spark's Kafka sink describes itself as
  ``org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@1b2c3d``, which names no topic, and
  ``ForeachBatchSink``/``MemorySink``/``NoopTable``/``ConsoleTable$@..`` name nothing: such a job's outputs
  come from the config.
* Flink: a vertex named ``Source: <name>`` reads ``<name>``, one whose chain holds ``Sink: <name>`` writes it
  (``Source: in<br/>+- Map<br/>`` as the REST API gives it). Flink names vertices after the operator's name,
  so this matches topics when the job names its sources and sinks after them.
* Kafka consumer groups: the group reads the topics it has committed offsets on.

Datasets are named as written: a Kafka topic by its name (``in``), a file source or sink by its path
without the ``file:`` scheme (``/data/in``). Two jobs are linked when one writes what the other reads; a
pipeline is a connected set of two or more linked jobs (or a configured one), named by the config or by its
first inputs and last outputs (``in → out``).

**Local and global lag** (the split Materialize makes for its dataflows' freshness): a job's *global* lag is
how far its output trails the pipeline's sources in event time — ``now − its watermark`` (Spark
``eventTime.watermark``, Flink's current input watermark; event times travel with the rows from the
sources) or, for a job without a watermark, its consumer lag in seconds plus the global lag of what it reads.
Its *local* lag is what it adds: its global lag minus the largest global lag of the jobs it reads from (a job
reading only external inputs adds all of it; never negative), or its consumer lag in seconds. ``now`` is the
data's own clock: the newest observation of any job of the pipeline, so a job that stopped reporting keeps
its last watermark and falls behind as the others move on.

**The rule**: when an end of a pipeline (a job nobody downstream reads) is more than ``target`` behind the
sources, follow the path that makes it so (from the end, the upstream job with the largest global lag) back
to its source; the staleness *enters* at the job on that path that adds the most (its largest local lag).
That job gets the finding (``WARNING``); each job downstream of it on the path gets an ``INFO`` finding that
links to it (``details["caused_by"]``, :func:`rules.episodes.link`) instead of a finding of its own.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from monitor.errors import ConfigError
from monitor.model import TRIGGER_EXTRA, Engine, Finding, JobRef, Sample, Severity, TriggerKind
from monitor.timefmt import format_duration, format_instant_short
from rules.cadence import report_cadence
from rules.freshness import job_watermark
from rules.history import JobHistory
from rules.params import Duration, RuleParams
from rules.slo import Objective

_TIME = attrgetter("observed_at")

__all__ = [
    "RULE",
    "NodeLag",
    "Pipeline",
    "PipelineConfig",
    "PipelineEdge",
    "PipelineJobConfig",
    "PipelineNode",
    "PipelineParams",
    "PipelineSloConfig",
    "Staleness",
    "build_pipelines",
    "evaluate_pipelines",
    "flink_datasets",
    "job_endpoints",
    "named_job",
    "node_key",
    "node_lags",
    "parse_pipelines",
    "pipeline_graph",
    "spark_datasets",
    "staleness",
]

RULE = "pipeline_freshness"


# ------------------------------------------------------------------------------------------------ config


class PipelineJobConfig(BaseModel):
    """One job of a configured pipeline: ``job`` is its job name or id (Spark query name or id, Flink job
    name or id, Kafka group id); ``reads``/``writes`` the datasets (topics, paths) it reads and writes beyond
    what it reports itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str = Field(min_length=1)
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    @field_validator("reads", "writes")
    @classmethod
    def _names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name.strip() for name in v):
            raise ValueError("a dataset name (topic or path) may not be empty")
        return tuple(_normalize(name) for name in v)


class PipelineSloConfig(BaseModel):
    """A pipeline's freshness SLO (``slo:`` of a ``pipelines:`` entry; :mod:`rules.pipeline_slo`):
    ``freshness``: how far behind its sources the pipeline's end may be in a good minute (required);
    ``objective``: the share of good minutes promised (``99.5%``, the default); ``window``: the period the
    error budget ``1 - objective`` is spent over (default 28d)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    freshness: Duration
    objective: Objective = 0.995
    window: Duration = timedelta(days=28)


class PipelineConfig(BaseModel):
    """One entry of the ``pipelines:`` section::

        pipelines:
          - name: clicks
            jobs:
              - {job: enrich, reads: [in], writes: [mid]}   # Spark's Kafka sink names no topic
              - {job: sessionize, writes: [out]}
            slo: {freshness: 5m, objective: 99.5%, window: 28d}   # optional: rules.pipeline_slo
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    jobs: tuple[PipelineJobConfig, ...] = Field(min_length=1)
    slo: PipelineSloConfig | None = None


def parse_pipelines(data: Any, where: str = "pipelines") -> tuple[PipelineConfig, ...]:
    """Validate the ``pipelines:`` section (a list of :class:`PipelineConfig` mappings; ``None``: none).

    Raises:
        ConfigError: ``pipelines[1].jobs[0].job: Field required``, one line per problem; a name used twice.
    """
    if data is None:
        return ()
    if not isinstance(data, Sequence) or isinstance(data, str | bytes):
        raise ConfigError(f"{where}: expected a list of pipelines, got {type(data).__name__}")
    out: list[PipelineConfig] = []
    problems: list[str] = []
    for i, item in enumerate(data):
        if isinstance(item, PipelineConfig):
            out.append(item)
            continue
        try:
            out.append(PipelineConfig.model_validate(item))
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False)
            deeper = {err["loc"][:k] for err in errors for k in range(1, len(err["loc"]))}
            for err in errors:
                if err["loc"] in deeper:
                    continue  # "at least 1 item" of a list whose item failed: the item's error says it
                path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
                msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
                problems.append(f"{where}[{i}]{path}: {msg}")
    seen: set[str] = set()
    for i, p in enumerate(out):
        if p.name in seen:
            problems.append(f"{where}[{i}].name: pipeline {p.name!r} is configured twice")
        seen.add(p.name)
    if problems:
        raise ConfigError("\n".join(problems))
    return tuple(out)


class PipelineParams(RuleParams):
    """``pipeline_freshness`` parameters: ``target`` is how far (event time) an end of a pipeline may trail
    its sources; without a target the rule is off (no default suits every pipeline)."""

    target: Duration | None = None


# -------------------------------------------------------------------------------------------- inference

_WRAPPED = re.compile(r"^(\w+)\[(.*)\]$", re.DOTALL)
_SUBSCRIBE = re.compile(r"^(?:Subscribe|Assign)\[(.*)\]$", re.DOTALL)
_ASSIGNED_PARTITION = re.compile(r"^(.+)-\d+$")
_FLINK_SOURCE = re.compile(r"Source: ([^<\n]+)")
_FLINK_SINK = re.compile(r"Sink: ([^<\n]+)")


def _normalize(name: str) -> str:
    """A dataset's name as the graph keys it: trimmed, ``file:`` scheme and trailing ``/`` dropped."""
    name = name.strip()
    if name.startswith("file:"):
        name = name[len("file:") :]
        if name.startswith("///"):
            name = name[2:]
    return name.rstrip("/") if len(name) > 1 else name


def spark_datasets(description: str) -> tuple[str, ...]:
    """The datasets a Spark source or sink ``description`` names, or ``()`` when it names none.

    ``KafkaV2[Subscribe[in]]`` / ``KafkaSource[Subscribe[a,b]]`` → the topics (Spark's
    ``KafkaMicroBatchStream``/``KafkaSource`` ``toString``: ``Subscribe[topics]``, ``Assign[topic-partition,
    ...]``; ``SubscribePattern[...]`` names no topic); ``FileStreamSource[file:/data/in]``,
    ``FileSink[/data/out]``, ``DeltaSource[...]``/``DeltaSink[...]`` → the path without ``file:``. Anything
    else (``ForeachBatchSink``, ``MemorySink``, ``NoopTable``, ``KafkaSourceProvider$KafkaTable@5f1d``) → ``()``.
    """
    m = _WRAPPED.match(description.strip())
    if m is None:
        return ()
    kind, inner = m.group(1), m.group(2).strip()
    if kind.startswith("Kafka"):
        sub = _SUBSCRIBE.match(inner)
        if sub is None:
            return ()
        topics: list[str] = []
        for part in sub.group(1).split(","):
            part = part.strip()
            if inner.startswith("Assign"):
                pm = _ASSIGNED_PARTITION.match(part)
                part = pm.group(1) if pm else part
            if part and part not in topics:
                topics.append(part)
        return tuple(topics)
    if kind.endswith(("Source", "Sink")) and inner:
        return (_normalize(inner),)
    return ()


def flink_datasets(vertex_name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(reads, writes)`` named by a Flink vertex name: ``Source: <name>`` reads ``<name>``, ``Sink: <name>``
    anywhere in the chain (``...<br/>+- Sink: out<br/>``) writes it (Flink's ``JobVertex`` names are the
    chained operators' names)."""
    reads = tuple(dict.fromkeys(s.strip() for s in _FLINK_SOURCE.findall(vertex_name) if s.strip()))
    writes = tuple(dict.fromkeys(s.strip() for s in _FLINK_SINK.findall(vertex_name) if s.strip()))
    return reads, writes


def job_endpoints(history: JobHistory) -> tuple[frozenset[str], frozenset[str]]:
    """``(reads, writes)``: the datasets ``history``'s job reports reading and writing (see the module
    docstring): Spark source descriptions (its per-source scopes) and the newest batch's
    ``extra["sink"]``; Flink vertex names; a Kafka group's topics."""
    reads: set[str] = set()
    writes: set[str] = set()
    if history.engine is Engine.SPARK:
        for scope in history.series:
            if scope.source is not None:
                reads.update(spark_datasets(scope.source))
        for batch in reversed(history.batches):
            sink = batch.extra.get("sink")
            if isinstance(sink, str):
                writes.update(spark_datasets(sink))
                break
    elif history.engine is Engine.FLINK:
        for scope, samples in history.series.items():
            vertex = samples[-1].extra.get("vertex") or scope.source
            if isinstance(vertex, str):
                r, w = flink_datasets(vertex)
                reads.update(r)
                writes.update(w)
    else:
        reads.update(scope.source for scope in history.series if scope.source is not None)
    return frozenset(reads), frozenset(writes)


# ------------------------------------------------------------------------------------------------ graph


def node_key(job: JobRef) -> str:
    """A job's node key in the graph: ``<engine>:<job_id>`` (``spark:7f3c…``)."""
    return f"{job.engine.value}:{job.job_id}"


@dataclass(frozen=True, slots=True)
class PipelineNode:
    """One job of a pipeline: its key (:func:`node_key`), the job, what it reads and writes (reported and
    configured), and the keys of the jobs it reads from."""

    key: str
    job: JobRef
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    upstream: tuple[str, ...]

    @property
    def name(self) -> str:
        """How messages name the job: its name, else its id."""
        return self.job.name or self.job.job_id


@dataclass(frozen=True, slots=True)
class PipelineEdge:
    """``upstream`` writes ``dataset``, which ``downstream`` reads."""

    upstream: str
    downstream: str
    dataset: str


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A connected set of jobs: nodes sources first (a topological order; a cycle is broken where it
    closes), edges, and how it is named (``configured``: by the ``pipelines:`` section)."""

    name: str
    nodes: tuple[PipelineNode, ...]
    edges: tuple[PipelineEdge, ...]
    configured: bool = False

    def node(self, key: str) -> PipelineNode:
        """The node of ``key``. Raises ``KeyError`` when it is not in the pipeline."""
        for n in self.nodes:
            if n.key == key:
                return n
        raise KeyError(key)

    @property
    def ends(self) -> tuple[str, ...]:
        """The keys of the jobs no job of the pipeline reads from (its outputs)."""
        feeding = {e.upstream for e in self.edges}
        return tuple(n.key for n in self.nodes if n.key not in feeding)


def _configured(job: JobRef, config: Iterable[PipelineConfig]) -> list[tuple[PipelineConfig, PipelineJobConfig]]:
    return [(p, j) for p in config for j in p.jobs if j.job in (job.name, job.job_id)]


def build_pipelines(
    jobs: Sequence[tuple[JobRef, frozenset[str], frozenset[str]]], config: Sequence[PipelineConfig] = ()
) -> list[Pipeline]:
    """The pipelines among ``jobs`` (each ``(job, reads, writes)`` as :func:`job_endpoints` gives them),
    with the ``reads``/``writes`` of ``config`` added to the jobs it names (by name or id).

    Returns:
        One :class:`Pipeline` per connected set of two or more linked jobs, or of jobs a configured pipeline
        names; ordered by name. A configured pipeline's name wins (the first configured one when several
        share a connected set); otherwise ``first inputs → last outputs`` (``in → out``), or the jobs'
        names when the ends name no dataset.
    """
    reads: dict[str, set[str]] = {}
    writes: dict[str, set[str]] = {}
    refs: dict[str, JobRef] = {}
    named: dict[str, str] = {}
    for job, r, w in jobs:
        key = node_key(job)
        refs[key] = job
        reads[key], writes[key] = set(r), set(w)
        for p, j in _configured(job, config):
            reads[key].update(j.reads)
            writes[key].update(j.writes)
            named.setdefault(key, p.name)
    writers: dict[str, list[str]] = {}
    for key in sorted(refs):
        for d in writes[key]:
            writers.setdefault(d, []).append(key)
    edges = sorted(
        {PipelineEdge(w, key, d) for key in refs for d in reads[key] for w in writers.get(d, ()) if w != key},
        key=lambda e: (e.upstream, e.downstream, e.dataset),
    )
    # connected sets (union-find over the edges)
    parent = {key: key for key in refs}

    def root(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for e in edges:
        parent[root(e.upstream)] = root(e.downstream)
    groups: dict[str, list[str]] = {}
    for key in sorted(refs):
        groups.setdefault(root(key), []).append(key)
    out: list[Pipeline] = []
    for members in groups.values():
        names = [named[k] for k in members if k in named]
        if len(members) < 2 and not names:
            continue
        mine = [e for e in edges if e.downstream in members]
        upstream = {k: tuple(sorted({e.upstream for e in mine if e.downstream == k})) for k in members}
        order = _topological(members, upstream)
        nodes = tuple(
            PipelineNode(k, refs[k], tuple(sorted(reads[k])), tuple(sorted(writes[k])), upstream[k]) for k in order
        )
        name = names[0] if names else _auto_name(nodes, mine)
        out.append(Pipeline(name, nodes, tuple(mine), configured=bool(names)))
    out.sort(key=lambda p: p.name)
    return out


def _topological(members: list[str], upstream: Mapping[str, tuple[str, ...]]) -> list[str]:
    order: list[str] = []
    done: set[str] = set()
    visiting: set[str] = set()

    def visit(k: str) -> None:
        if k in done or k in visiting:
            return  # a cycle closes here
        visiting.add(k)
        for u in upstream[k]:
            visit(u)
        visiting.discard(k)
        done.add(k)
        order.append(k)

    for k in members:
        visit(k)
    return order


def _auto_name(nodes: Sequence[PipelineNode], edges: Sequence[PipelineEdge]) -> str:
    internal = {e.dataset for e in edges}
    inputs = sorted({d for n in nodes if not n.upstream for d in n.reads if d not in internal})
    fed = {e.upstream for e in edges}
    outputs = sorted({d for n in nodes if n.key not in fed for d in n.writes if d not in internal})
    if inputs and outputs:
        return f"{', '.join(inputs)} → {', '.join(outputs)}"
    return " → ".join(n.name for n in nodes)


# ------------------------------------------------------------------------------------------------- lags


@dataclass(frozen=True, slots=True)
class NodeLag:
    """One job's freshness in its pipeline at ``at`` (seconds; ``None``: unknown).

    Attributes:
        global_lag_s: how far its output trails the pipeline's sources in event time (``at − watermark``;
            without a watermark: its consumer lag in seconds plus the global lag of what it reads).
        local_lag_s: what this job adds (its global lag minus the largest global lag of the jobs it reads
            from, never negative; without a watermark: its consumer lag in seconds).
        basis: ``watermark`` or ``consumer_lag``: which measure it rests on.
        watermark: the watermark used (``None`` for ``consumer_lag``).
        last_seen: the job's newest observation (it may have stopped reporting before ``at``).
    """

    key: str
    global_lag_s: float | None
    local_lag_s: float | None
    basis: Literal["watermark", "consumer_lag"] | None
    watermark: datetime | None
    last_seen: datetime | None


def node_lags(pipeline: Pipeline, histories: Mapping[str, JobHistory], at: datetime) -> dict[str, NodeLag]:
    """Every node's :class:`NodeLag` at ``at`` (the data's clock), from each job's history up to ``at``
    (``histories`` by :func:`node_key`; a job without one, or without a sample at or before ``at``, is
    unknown): each job's newest batch and scope samples at or before ``at`` are read, so the same histories
    give the lags at any earlier minute (the ``pipeline_slo`` SLI, :mod:`rules.pipeline_slo`).

    The watermark is :func:`rules.freshness.job_watermark` (the job's newest, or the minimum over its
    subtasks when all are known; Spark's "no watermark yet" 1970 is none); the consumer lag is the newest
    job-scope ``lag_seconds``. A Spark job in real-time mode has run a batch unreported since its newest
    report: :meth:`rules.cadence.Cadence.unreported_at` of it is not counted.
    """
    out: dict[str, NodeLag] = {}
    for node in pipeline.nodes:
        hist = histories.get(node.key)
        ups = [g for u in node.upstream if (lag := out.get(u)) is not None and (g := lag.global_lag_s) is not None]
        up = max(ups) if ups else None
        batch, newest, seen = _as_of(hist, at) if hist is not None else (None, [], None)
        if batch is None and not newest:
            out[node.key] = NodeLag(node.key, None, None, None, None, seen)
            continue
        wm = job_watermark(batch, newest)
        if wm is not None:
            unreported = _unreported(hist, batch, at)
            g = max(0.0, (at - wm - unreported).total_seconds()) if unreported else (at - wm).total_seconds()
            local = g if up is None else max(0.0, g - up)
            out[node.key] = NodeLag(node.key, g, local, "watermark", wm, seen)
            continue
        lag_s = batch.lag_seconds if batch is not None else None
        if lag_s is not None:
            g = lag_s + (up or 0.0)
            out[node.key] = NodeLag(node.key, g, lag_s, "consumer_lag", None, seen)
        else:
            out[node.key] = NodeLag(node.key, None, None, None, None, seen)
    return out


def _unreported(hist: JobHistory | None, batch: Sample | None, at: datetime) -> timedelta:
    """A Spark job in real-time mode reports its watermark only at the end of each long batch
    (:meth:`rules.cadence.Cadence.unreported_at`); 0 for every other job (read from the batch's mark first:
    the pipeline SLO asks at every minute)."""
    if hist is None or batch is None or batch.extra.get(TRIGGER_EXTRA) != TriggerKind.REAL_TIME.value:
        return timedelta(0)
    return report_cadence(hist).unreported_at(batch, at)


def _as_of(hist: JobHistory, at: datetime) -> tuple[Sample | None, list[Sample], datetime | None]:
    """The newest batch, each scope's newest sample and the newest observation of ``hist`` at or before
    ``at`` (all of them when ``at`` is at or after the history's newest sample)."""
    if hist.newest_at is not None and hist.newest_at <= at:
        batch = hist.batches[-1] if hist.batches else None
        return batch, [s[-1] for s in hist.series.values() if s], hist.newest_at
    i = bisect_right(hist.batches, at, key=_TIME)
    batch = hist.batches[i - 1] if i else None
    newest = [ss[j - 1] for ss in hist.series.values() if (j := bisect_right(ss, at, key=_TIME))]
    seen = max((s.observed_at for s in ([batch] if batch else []) + newest), default=None)
    return batch, newest, seen


@dataclass(frozen=True, slots=True)
class Staleness:
    """Why an end of a pipeline is stale: ``path`` (keys, source first) is the chain of largest global lags
    leading to ``end``; ``entry`` the job on it that adds the most (largest local lag; the most upstream of
    equals): where the staleness enters. ``end_lag_s``: the end's global lag."""

    end: str
    path: tuple[str, ...]
    entry: str
    end_lag_s: float
    target_s: float


def staleness(pipeline: Pipeline, lags: Mapping[str, NodeLag], target_s: float) -> list[Staleness]:
    """For each end of ``pipeline`` whose global lag exceeds ``target_s``, where its staleness enters
    (:class:`Staleness`); ends with an unknown lag are skipped."""
    out: list[Staleness] = []
    for end in pipeline.ends:
        g = lags[end].global_lag_s
        if g is None or g <= target_s:
            continue
        path = [end]
        seen = {end}
        while True:
            ups = [
                (lag, u) for u in pipeline.node(path[0]).upstream
                if u not in seen and (lag := lags[u].global_lag_s) is not None
            ]  # fmt: skip
            if not ups:
                break
            _, u = max(ups)
            path.insert(0, u)
            seen.add(u)
        # not "the first job beyond the target": a job adding a little on top of an upstream job's large
        # delay would be blamed until that job crossed the target itself, and the blame would then move
        entry = max(path, key=lambda k: (lags[k].local_lag_s or 0.0, -path.index(k)))
        out.append(Staleness(end, tuple(path), entry, g, target_s))
    return out


# ------------------------------------------------------------------------------------------------- rule


def _lag_details(pipeline: Pipeline, lags: Mapping[str, NodeLag]) -> list[dict[str, Any]]:
    return [
        {"key": n.key, "job": n.name, "global_lag_s": lags[n.key].global_lag_s,
         "local_lag_s": lags[n.key].local_lag_s, "basis": lags[n.key].basis}
        for n in pipeline.nodes
    ]  # fmt: skip


def _entry_message(pipeline: Pipeline, s: Staleness, lags: Mapping[str, NodeLag], at: datetime) -> str:
    lag = lags[s.entry]
    end = pipeline.node(s.end)
    adds = format_duration(lag.local_lag_s or 0.0)
    where = (
        f"its watermark {format_instant_short(lag.watermark)} is {format_duration(lag.global_lag_s or 0.0)} behind "
        f"the pipeline's newest observation {format_instant_short(at)}"
        if lag.watermark is not None
        else f"its consumer lag is {format_duration(lag.local_lag_s or 0.0)}"
    )
    silent = ""
    if lag.last_seen is not None and (at - lag.last_seen).total_seconds() > max(1.0, s.target_s / 10):
        silent = f"; it has reported nothing since {format_instant_short(lag.last_seen)}"
    down = [pipeline.node(k).name for k in s.path[s.path.index(s.entry) + 1 :]]
    passes = f" The jobs after it (`{'`, `'.join(down)}`) only pass the delay on." if down else ""
    head = (
        f"pipeline `{pipeline.name}` is stale: its end `{end.name}` is {format_duration(s.end_lag_s)} behind its "
        f"sources (target {format_duration(s.target_s)}). The staleness enters at this job: it adds {adds} "
        f"({where}{silent})."
    )
    fix = (
        " Look here first: this job's watermark_stall, falling_behind, consumer_lag and target_health findings,"
        " its driver and executors (or task managers), and whether its input still arrives."
    )
    return head + passes + fix


def _downstream_message(pipeline: Pipeline, s: Staleness, key: str, lags: Mapping[str, NodeLag]) -> str:
    entry = pipeline.node(s.entry)
    lag = lags[key]
    return (
        f"pipeline `{pipeline.name}`: this job is {format_duration(lag.global_lag_s or 0.0)} behind the sources "
        f"(target {format_duration(s.target_s)}) but adds only {format_duration(lag.local_lag_s or 0.0)}; the "
        f"staleness enters upstream at `{entry.name}` (see its pipeline_freshness finding). Nothing to change "
        "here: it catches up once that job does."
    )


def pipeline_findings(
    params: PipelineParams, pipeline: Pipeline, histories: Mapping[str, JobHistory]
) -> list[Finding]:
    """The ``pipeline_freshness`` findings of one pipeline on the data's clock (the newest observation of
    any of its jobs): for each stale end, one ``WARNING`` on the job where the staleness enters and one
    ``INFO`` on each job after it on the path, linked to it (``details["caused_by"]`` names the entry's
    rule, engine and job id). Labels: ``pipeline`` (part of the fingerprint). ``[]`` without a target."""
    if params.target is None:
        return []
    times = [t for n in pipeline.nodes if (h := histories.get(n.key)) is not None and (t := h.newest_at) is not None]
    if not times:
        return []
    at = max(times)
    lags = node_lags(pipeline, histories, at)
    target_s = params.target.total_seconds()
    made: dict[str, Finding] = {}
    for s in staleness(pipeline, lags, target_s):
        entry = pipeline.node(s.entry)
        details: dict[str, Any] = {
            "pipeline": pipeline.name, "end": s.end, "entry": s.entry, "path": list(s.path),
            "end_lag_s": s.end_lag_s, "target_s": target_s, "nodes": _lag_details(pipeline, lags),
        }  # fmt: skip
        if s.entry not in made:
            made[s.entry] = Finding(
                RULE, Severity.WARNING, entry.job, _entry_message(pipeline, s, lags, at), at,
                labels={"pipeline": pipeline.name}, details={**details, "role": "entry"},
            )  # fmt: skip
        for key in s.path[s.path.index(s.entry) + 1 :]:
            if key in made:
                continue
            cause = {"rule": RULE, "engine": entry.job.engine.value, "job_id": entry.job.job_id}
            made[key] = Finding(
                RULE, Severity.INFO, pipeline.node(key).job, _downstream_message(pipeline, s, key, lags), at,
                labels={"pipeline": pipeline.name},
                details={**details, "role": "downstream", "caused_by": cause},
            )  # fmt: skip
    return list(made.values())


def named_job(history: JobHistory) -> JobRef:
    """``history``'s job with its name: a Spark ``QueryIdleEvent`` (the newest sample of an idle query)
    carries none, its batches do."""
    if history.job.name is not None:
        return history.job
    name = next((b.job.name for b in reversed(history.batches) if b.job.name is not None), None)
    return history.job if name is None else replace(history.job, name=name)


def evaluate_pipelines(
    params: PipelineParams, config: Sequence[PipelineConfig], histories: Iterable[JobHistory]
) -> list[Finding]:
    """``pipeline_freshness`` over every job's history: the graph (:func:`build_pipelines` over
    :func:`job_endpoints` and ``config``), then :func:`pipeline_findings` for each pipeline."""
    if params.target is None:
        return []
    graph, by_key = pipeline_graph(config, histories)
    out: list[Finding] = []
    for pipeline in graph:
        out.extend(pipeline_findings(params, pipeline, by_key))
    return out


def pipeline_graph(
    config: Sequence[PipelineConfig], histories: Iterable[JobHistory]
) -> tuple[list[Pipeline], dict[str, JobHistory]]:
    """The pipelines among ``histories``' jobs (:func:`build_pipelines` over :func:`job_endpoints` and
    ``config``) and the histories by :func:`node_key`."""
    by_key = {node_key(h.job): h for h in histories}
    jobs = [(named_job(h), *job_endpoints(h)) for h in by_key.values()]
    return build_pipelines(jobs, config), by_key
