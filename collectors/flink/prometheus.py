"""Flink's Prometheus reporter (``plugins/metrics-prometheus``) -> the same samples as the REST collector.

For users who already run ``metrics.reporter.prom.factory.class:
org.apache.flink.metrics.prometheus.PrometheusReporterFactory``: one target lists the job manager's and
the task managers' ``/metrics`` URLs, scraped together each poll. What is read (recorded real output:
``tests/fixtures/flink/real-2.3.0/prometheus_reporter``):

* task manager, per ``job_id``/``task_id`` (the vertex id)/``subtask_index``: task-scope
  ``flink_taskmanager_job_task_<metric>`` and operator-scope
  ``flink_taskmanager_job_task_operator_<metric>{operator_name}`` for the metrics of
  :data:`collectors.flink.responses.TASK_METRICS` / :data:`~collectors.flink.responses.OPERATOR_METRICS`;
* split-level watermarks (Flink 2.1+, FLIP-513): ``flink_taskmanager_job_task_operator_split_watermark_<metric>``
  with a ``split`` label, for the metrics of :data:`~collectors.flink.responses.SPLIT_METRICS`, read as the
  REST ids ``<subtask>.<operator>.split.<split>.watermark.<metric>`` (and capped alike);
* job manager, per ``job_id``: ``numRestarts``, ``numberOfFailedCheckpoints``,
  ``lastCheckpointFullSize`` (the state size) and ``runningTime`` (ms in the current ``RUNNING`` state).

They are rewritten into the REST API's metric ids and parsed by the same code
(:func:`collectors.flink.responses.subtask_metrics`, :func:`collectors.flink.samples.running_job_samples`),
so the samples and the rules' findings are the ones of the REST path. Differences, from the reporter:

* values are doubles: Long.MIN_VALUE arrives as ``-9.223372036854776E18`` (no watermark: unknown) and
  Long.MAX_VALUE as ``9.223372036854776E18`` (end of input); epoch-ms watermarks are below 2**53, so they
  are exact;
* names are sanitized (``tg-late`` -> ``tg_late``, ``Source: seq -> stamp`` -> ``Source:_seq____stamp``):
  ``JobRef.job_id`` is the sanitized job name (a job tracked through REST has its real name), vertex names
  are shown with ``____`` read back as `` -> ``;
* vertices come without their order: sources first, then the others, the one with the lowest input
  watermark (none at all counts lowest) last, whose watermark is the job's (in a pipeline that is the
  sink's);
* a finished job's metrics disappear: no ``TERMINATED`` samples, no exception (use REST for causes).

Bounds: a task's parallelism is one more than the highest ``subtask_index`` served, and one sample per
subtask is made, so an index that is not a decimal below the target's ``max_parallelism`` (at most
:data:`~collectors.flink.responses.FLINK_MAX_PARALLELISM`) leaves that task out with one ``field`` error
entry naming the URL, the series and the label, before anything is allocated for it. Job figures that are
not finite int64 values (``+Inf``, ``NaN``, ``1e30``) are unknown.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

import httpx

from collectors.base import PollsOnce
from collectors.exposition import parse_exposition
from collectors.flink.responses import (
    DEFAULT_MAX_PARALLELISM,
    FLINK_MAX_PARALLELISM,
    OPERATOR_METRICS,
    SPLIT_METRICS,
    TASK_METRICS,
    SubtaskMetrics,
    VertexInfo,
    subtask_metrics,
)
from collectors.flink.samples import Counters, JobFigures, is_source_vertex, running_job_samples
from collectors.flink.values import LONG_MAX, LONG_MIN
from collectors.http import DEFAULT_READ_LIMITS, HttpFailure, ReadLimits, check_url, get_text, safe_url
from monitor.errors import InputError
from monitor.model import CollectorError, Engine, ErrorKind, JobRef, PollResult, datetime_to_ms

__all__ = ["COLLECTOR_NAME", "FlinkPrometheusCollector", "parse_reporter_text"]

COLLECTOR_NAME = "flink-prometheus"
_TASK = "flink_taskmanager_job_task_"
_OPERATOR = "flink_taskmanager_job_task_operator_"
_SPLIT = "split_watermark_"  # operator-scope ``...split_watermark_<metric>{split="<id>"}`` (FLIP-513)
_JOB = "flink_jobmanager_job_"
_JOB_METRICS = frozenset(
    {"numRestarts", "numberOfFailedCheckpoints", "lastCheckpointFullSize", "runningTime"}
)


def _text(value: float) -> str:
    """A reporter double as the REST API's string: exact integers, the int64 markers, ``NaN``."""
    if math.isnan(value):
        return "NaN"
    if value <= -9.2e18:
        return str(LONG_MIN)
    if value >= 9.2e18:
        return str(LONG_MAX)
    return str(int(value)) if value.is_integer() else repr(value)


def _long(value: float) -> int | None:
    """A reporter double as an int64 count or duration; not finite or beyond int64: unknown."""
    if not math.isfinite(value) or not LONG_MIN <= value <= LONG_MAX:
        return None
    return int(value)


def _index_problem(index: str, limit: int) -> str | None:
    """Why a ``subtask_index`` label is not read (``None``: it is an index below ``limit``)."""
    digits = len(str(FLINK_MAX_PARALLELISM))
    if not (index.isdigit() and index.isascii()) or len(index) > digits or int(index) >= FLINK_MAX_PARALLELISM:
        return f"{index[:40]!r} is not a Flink subtask index (0 to {FLINK_MAX_PARALLELISM - 1})"
    if int(index) >= limit:
        return f"{index} is over the limit of {limit} subtasks (the target's max_parallelism)"
    return None


class _Job:
    def __init__(self, name: str) -> None:
        self.name = name
        self.values: dict[str, dict[str, str]] = defaultdict(dict)  # task id -> REST-style id -> value
        self.task_names: dict[str, str] = {}
        self.parallelism: dict[str, int] = defaultdict(int)
        self.figures: dict[str, float] = {}
        self.refused: set[str] = set()  # task ids left out (a subtask index out of bounds)


def parse_reporter_text(
    scrapes: Sequence[tuple[str, str]], max_parallelism: int = DEFAULT_MAX_PARALLELISM
) -> tuple[dict[str, _Job], list[str]]:
    """Scrapes (Prometheus text exposition) -> per Flink job id its task values in REST id form.

    Args:
        scrapes: ``(url shown in messages, text)`` per scraped reporter.
        max_parallelism: the target's limit of a task's subtasks (:func:`check_parallelism`).

    Returns:
        The jobs, and one message per task left out because a ``subtask_index`` label was not a decimal
        index below ``max_parallelism`` (naming the URL, the series and the label).

    Raises:
        InputError: a text that is not the exposition format (:func:`collectors.exposition.parse_exposition`).
    """
    jobs: dict[str, _Job] = {}
    problems: list[str] = []
    for url, text in scrapes:
        for sample in parse_exposition(text, url):
            labels = sample.labels
            job_id = labels.get("job_id")
            if not job_id:
                continue
            job = jobs.setdefault(job_id, _Job(labels.get("job_name", job_id)))
            name = sample.name
            if name.startswith(_JOB):
                metric = name[len(_JOB) :]
                if metric in _JOB_METRICS:
                    job.figures[metric] = sample.value
                continue
            task, index = labels.get("task_id"), labels.get("subtask_index")
            if not task or index is None or task in job.refused:
                continue
            where = f"{url}: {name}{{job_id={job_id!r}, task_id={task!r}}}: label subtask_index"
            problem = _index_problem(index, max_parallelism)
            if problem is not None:
                job.refused.add(task)
                job.values.pop(task, None)
                job.task_names.pop(task, None)
                job.parallelism.pop(task, None)
                problems.append(f"{where}: {problem}")
                continue
            job.task_names[task] = labels.get("task_name", task).replace("____", " -> ")
            job.parallelism[task] = max(job.parallelism[task], int(index) + 1)
            if name.startswith(_OPERATOR):
                metric = name[len(_OPERATOR) :]
                operator = labels.get("operator_name")
                if not operator or "." in operator:
                    continue
                if metric in OPERATOR_METRICS:
                    job.values[task][f"{index}.{operator}.{metric}"] = _text(sample.value)
                elif metric.startswith(_SPLIT) and metric[len(_SPLIT) :] in SPLIT_METRICS and labels.get("split"):
                    # a split-scope gauge (Flink 2.1+): the REST id form, parsed (and capped) as REST's is
                    split_id = f"{index}.{operator}.split.{labels['split']}.watermark.{metric[len(_SPLIT) :]}"
                    job.values[task][split_id] = _text(sample.value)
            elif name.startswith(_TASK):
                metric = name[len(_TASK) :]
                if metric in TASK_METRICS:
                    job.values[task][f"{index}.{metric}"] = _text(sample.value)
    return jobs, problems


def _order(per_vertex: list[tuple[VertexInfo, dict[int, SubtaskMetrics]]]) -> None:
    def key(item: tuple[VertexInfo, dict[int, SubtaskMetrics]]) -> tuple[int, float]:
        vertex, subs = item
        if is_source_vertex(vertex, subs):
            return (0, 0.0)
        marks = [s.input_watermark.epoch_ms for s in subs.values()]
        lowest = (
            -math.inf
            if not marks or any(m is None for m in marks)
            else min(m for m in marks if m is not None)
        )
        return (1, -lowest)

    per_vertex.sort(key=key)


class FlinkPrometheusCollector(PollsOnce):
    """Scrape the job manager's and task managers' Prometheus reporters of one Flink cluster.

    Args:
        urls: the reporters' ``/metrics`` URLs (job manager and every task manager).
        client: the HTTP client (the caller owns it).
        cluster: ``JobRef.app_id`` of the samples (default: the first URL without credentials).
        name: ``Sample.collector``.
        limits: the bounds of every scrape; the scrapes of one poll share its deadline.
        max_parallelism: read no task of more subtasks (see the module docstring's bounds).

    Raises:
        ValueError: no URL, one that is not an absolute http(s) URL, or ``max_parallelism`` not within 1
            and ``FLINK_MAX_PARALLELISM``.
    """

    def __init__(
        self,
        urls: Sequence[str],
        client: httpx.Client,
        *,
        cluster: str | None = None,
        name: str = COLLECTOR_NAME,
        limits: ReadLimits = DEFAULT_READ_LIMITS,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
    ) -> None:
        if not urls:
            raise ValueError("flink prometheus: give at least one /metrics URL")
        if not 1 <= max_parallelism <= FLINK_MAX_PARALLELISM:
            raise ValueError(f"max_parallelism must be within 1 and {FLINK_MAX_PARALLELISM}")
        self._max_parallelism = max_parallelism
        self.urls = [check_url(u, "flink prometheus url") for u in urls]
        self.name = name
        self._client = client
        self._cluster = cluster or safe_url(self.urls[0])
        self._limits = limits
        self._counters: dict[str, Counters] = {}

    def poll(self, now: datetime) -> PollResult:
        """Scrape every URL once; an unreachable or unparseable one is an error entry, the others count."""
        scrapes: list[tuple[str, str]] = []
        errors: list[CollectorError] = []
        budget = self._limits.poll_deadline()
        for url in self.urls:
            body = get_text(self._client, url, self._limits, budget)
            if isinstance(body, HttpFailure):
                errors.append(body.to_error(self.name, safe_url(url), now))
            else:
                scrapes.append((safe_url(url), body))
        try:
            jobs, problems = parse_reporter_text(scrapes, self._max_parallelism)
        except InputError as exc:
            errors.append(CollectorError(self.name, self._cluster, str(exc), now, False))
            return PollResult(errors=tuple(errors))
        errors.extend(
            CollectorError(self.name, self._cluster, problem, now, retryable=True, kind=ErrorKind.FIELD)
            for problem in problems
        )
        now_ms = datetime_to_ms(now)
        assert now_ms is not None
        samples = []
        for job_id in sorted(jobs, key=lambda j: jobs[j].name):
            job = jobs[job_id]
            if not job.values:
                continue  # only job-manager figures: the job is not running on a scraped task manager
            per_vertex = []
            for task, values in job.values.items():
                vertex = VertexInfo(task, job.task_names[task], job.parallelism[task], "RUNNING")
                per_vertex.append((vertex, subtask_metrics(values, vertex)))
            _order(per_vertex)
            fig: dict[str, int | None] = {k: _long(v) for k, v in job.figures.items()}
            running = fig.get("runningTime")
            since = now_ms - running if running is not None and 0 < running <= now_ms else None
            figures = JobFigures(
                restarts=fig.get("numRestarts"),
                checkpoints_failed=fig.get("numberOfFailedCheckpoints"),
                state_bytes=fig.get("lastCheckpointFullSize"),
                running_since_ms=since,
                extra={"state": "RUNNING", "vertices": len(per_vertex)}
                | ({"running_since_ms": since} if since is not None else {}),
            )
            try:  # a job or vertex name the model cannot hold (too long, a NUL): this job is skipped
                ref = JobRef(Engine.FLINK, job.name, run_id=job_id, name=job.name, app_id=self._cluster)
                counters = self._counters.setdefault(job_id, Counters())
                samples.extend(running_job_samples(ref, per_vertex, True, counters, figures, now, self.name))
            except ValueError as exc:
                message = f"job {job_id[:80]!r}: {exc}; job skipped"
                errors.append(
                    CollectorError(self.name, self._cluster, message, now, retryable=False, kind=ErrorKind.FIELD)
                )
        for gone in set(self._counters) - set(jobs):
            del self._counters[gone]
        return PollResult(tuple(samples), tuple(errors))
