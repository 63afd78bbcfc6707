"""The Flink REST collector: polls a JobManager's REST API and emits :class:`monitor.model.Sample` records.

What one poll reads (Flink 2.x REST API, see :mod:`collectors.flink.responses` for the shapes):

1. ``/jobs/overview``: every job. Jobs are tracked **by name**: a resubmitted job (new job id) continues
   the same history (``JobRef.job_id`` is the name, ``JobRef.run_id`` the Flink job id), and of several
   jobs with one name only the newest (by start time) is followed. Restarts within one job id are
   counted by the ``numRestarts`` job metric (``Sample.restart_count``).
2. Per followed job, concurrently (at most ``concurrency`` jobs at once):
   ``/jobs/<jid>/metrics?get=numRestarts``, ``/jobs/<jid>`` (state, status timestamps, vertices; read again
   only when the state or the restart count changed, or every ``metric_list_every`` polls),
   ``/jobs/<jid>/checkpoints``, and ``/jobs/<jid>/exceptions`` when the job has restarted or is not
   running (for the cause).
3. Per vertex of a running job: the vertex's metric ids (``/jobs/<jid>/vertices/<vid>/metrics``, listed
   again every ``metric_list_every`` polls or when a vertex changes) and then ``?get=`` of only the ids
   that exist (Flink answers ``[]`` for the whole request if one id is unknown): per subtask the task's
   ``currentInputWatermark`` (what ``/watermarks`` serves), records in/out and rates,
   ``backPressuredTimeMsPerSecond``, and operator metrics (``currentOutputWatermark``, ``sourceIdleTime``,
   ``watermarkLag``, ``pendingRecords``, ``numLateRecordsDropped``).

Samples per poll of a running job (kind ``GAUGE``, ``collector="flink-rest"``, ``observed_at`` = the poll's
``now``):

* one per (vertex, subtask): ``Scope(operator=<vertex id>, subtask=<index>)``, plus ``source=<vertex
  name>`` for source vertices. ``watermark`` is the subtask's input watermark, or for a source vertex its
  output watermark (what it contributes downstream); ``num_input_rows`` the records since the previous
  poll (source vertices: records emitted downstream, so a source whose records are all filtered out
  counts as having none); ``dropped_by_watermark`` the late records dropped since the previous poll;
  ``idle_ms`` the larger of ``sourceIdleTime`` and the time since that record counter last moved (a
  counter still 0 has not moved since the attempt started running), counted up to the previous poll: the
  REST metric store may serve values fetched around then (:func:`collectors.flink.samples.running_job_samples`); ``lag_offsets`` = ``pendingRecords``;
  ``backpressure_ratio``; ``watermark_end_of_input`` when the watermark is ``Long.MAX_VALUE``. ``extra``
  keeps the display values (vertex name, input/output watermark ms, ``sourceIdleTime``, cumulative late
  drops, ``watermarkLag``).
* one for the whole job: ``watermark`` = the minimum input watermark of the last vertex's subtasks
  (unknown if any subtask has none), rows and late drops summed over sources/subtasks since the previous
  poll, ``restart_count`` (``numRestarts``), ``checkpoints_failed`` (``counts.failed``),
  ``state_memory_bytes`` = the latest completed checkpoint's ``state_size``; ``extra`` has the job state,
  the other checkpoint counts, the latest checkpoint failure message, ``running_since_ms`` and the root
  cause of the last failure (``exception``).

A failed, cancelled or finished job gives one job sample and a ``TERMINATED`` lifecycle sample (stamped
with the job's end time) whose ``extra["exception"]`` is the root cause from ``/exceptions``.

Counters between polls (``numRecordsIn``, ``numLateRecordsDropped``) live in memory: the first poll of a
subtask has unknown deltas, and a counter that went down (a restart resets task metrics) counts from zero.

Failures are data: ``/jobs/overview`` failing is one error for the target; a job or vertex failing is one
error entry (``target`` = the endpoint, never with credentials) and the other jobs' samples are kept.
Every request is read within the target's :class:`collectors.http.ReadLimits` (body size, decompressed
size, JSON depth, a deadline per request); all requests of one poll share the poll's deadline, and jobs
not yet polled when it runs out are one ``deadline_exceeded`` error naming how many were skipped.

Limits (per target, checked before anything is allocated for them): at most ``max_jobs`` jobs are polled
(of more, the running ones first, then the newest; one ``field`` error entry on ``/jobs/overview`` names
the limit and how many were left out), and a vertex's ``parallelism`` must be within ``max_parallelism``
(:func:`collectors.flink.responses.check_parallelism`: else the job is one error entry naming
``/jobs/<jid>: vertices[<i>]`` and the field).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from collectors.base import PollsOnce
from collectors.flink.responses import (
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_PARALLELISM,
    FLINK_MAX_PARALLELISM,
    CheckpointStats,
    ExceptionEntry,
    JobDetail,
    JobOverview,
    SubtaskMetrics,
    VertexInfo,
    parse_checkpoints,
    parse_exceptions,
    parse_flink_version_of_config,
    parse_job_detail,
    parse_jobs_overview,
    parse_metric_ids,
    parse_metric_values,
    select_metric_ids,
    subtask_metrics,
)
from collectors.flink.samples import Counters, JobFigures, running_job_samples
from collectors.flink.values import parse_long
from collectors.http import (
    DEFAULT_READ_LIMITS,
    Deadline,
    HttpFailure,
    ReadLimits,
    check_url,
    get_json,
    safe_url,
)
from monitor.errors import InputError
from monitor.model import (
    MAX_DESCRIPTION_CHARS,
    MAX_ID_CHARS,
    CollectorError,
    Engine,
    ErrorKind,
    JobRef,
    PollResult,
    Sample,
    SampleKind,
    check_name,
    ms_to_datetime,
)

__all__ = ["COLLECTOR_NAME", "TERMINAL_STATES", "FlinkRestCollector"]

#: ``Sample.collector`` of this collector's samples.
COLLECTOR_NAME = "flink-rest"
#: Job states after which nothing runs any more (``org.apache.flink.api.common.JobStatus#isGloballyTerminalState``).
TERMINAL_STATES = frozenset({"FAILED", "CANCELED", "FINISHED"})
_MAX_URL_IDS = 60  # ids per ``?get=`` request (keeps URLs well under 8 KiB)


class _Failed(Exception):
    """A request of one job/vertex failed; carries the error entry."""

    def __init__(
        self, message: str, target: str, retryable: bool, kind: ErrorKind = ErrorKind.UNREACHABLE
    ) -> None:
        super().__init__(message)
        self.target = target
        self.retryable = retryable
        self.kind = kind


@dataclass(slots=True)
class _JobState:
    """What the collector remembers of one job id between polls."""

    metric_ids: dict[str, list[str]] = field(default_factory=dict)
    polls_since_list: int = 0
    detail: JobDetail | None = None
    restarts: int | None = None
    urls: dict[str, httpx.URL] = field(default_factory=dict)  # parsed once: httpx's URL parsing is costly
    counters: Counters = field(default_factory=Counters)


@dataclass(slots=True)
class _JobResult:
    samples: list[Sample] = field(default_factory=list)
    errors: list[CollectorError] = field(default_factory=list)
    skipped: bool = False  # the poll's deadline ran out before the job's turn



def _with_version(result: _JobResult, version: str) -> _JobResult:
    """``result`` with its job samples (the ones carrying the job's ``state``) given ``extra["flink_version"]``."""
    samples = [
        dataclasses.replace(s, extra={**s.extra, "flink_version": version})
        if "state" in s.extra and "flink_version" not in s.extra
        else s
        for s in result.samples
    ]
    return _JobResult(samples, result.errors, result.skipped)


def _segment(flink_id: str) -> str:
    """A job or vertex id as one URL path segment, percent-encoded (RFC 3986): Flink prints its ``JobID`` and
    ``JobVertexID`` as 32 hex digits, but an id read from a hostile or broken endpoint may hold ``/``, ``?``
    or control characters, which must not change the request or make the URL unbuildable (the endpoint
    then answers 404, a named error for that job)."""
    return quote(flink_id, safe="")

class FlinkRestCollector(PollsOnce):
    """Poll one Flink JobManager's REST API (see the module docstring for what is read and emitted).

    Args:
        base_url: ``http(s)://host:port`` of the JobManager (or a proxy in front of it), optionally with a
            path prefix.
        client: the HTTP client (built by :func:`collectors.http.make_client` with timeouts, auth headers
            and TLS options; the caller owns and closes it). It must be safe to share between threads
            (``httpx.Client`` is).
        concurrency: at most this many jobs are polled at once (each job's requests run in sequence).
        metric_list_every: list each vertex's metric ids again every this many polls (new operators or
            late-registered metrics such as ``numLateRecordsDropped`` appear).
        cluster: ``JobRef.app_id`` of the samples (default: the base URL without credentials).
        name: ``Sample.collector``.
        limits: the bounds of every read and the poll's deadline (:class:`collectors.http.ReadLimits`).
        max_jobs: poll at most this many jobs (see the module docstring's limits).
        max_parallelism: read no vertex of more subtasks (at most
            :data:`~collectors.flink.responses.FLINK_MAX_PARALLELISM`).

    Raises:
        ValueError: ``base_url`` is not an absolute http(s) URL, ``concurrency`` or ``max_jobs`` < 1, or
            ``max_parallelism`` not within 1 and ``FLINK_MAX_PARALLELISM``.
    """

    def __init__(
        self,
        base_url: str,
        client: httpx.Client,
        *,
        concurrency: int = 8,
        metric_list_every: int = 10,
        cluster: str | None = None,
        name: str = COLLECTOR_NAME,
        limits: ReadLimits = DEFAULT_READ_LIMITS,
        max_jobs: int = DEFAULT_MAX_JOBS,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
    ) -> None:
        self.base_url = check_url(base_url, "flink_rest url").rstrip("/")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_jobs < 1:
            raise ValueError("max_jobs must be at least 1")
        if not 1 <= max_parallelism <= FLINK_MAX_PARALLELISM:
            raise ValueError(f"max_parallelism must be within 1 and {FLINK_MAX_PARALLELISM}")
        self._max_jobs = max_jobs
        self._max_parallelism = max_parallelism
        self.name = name
        self._client = client
        self._concurrency = concurrency
        self._list_every = max(1, metric_list_every)
        self._cluster = cluster or safe_url(self.base_url)
        self._limits = limits
        self._jobs: dict[str, _JobState] = {}
        self._lock = threading.Lock()
        self.flink_version: str | None = None  # the cluster's ``/config`` ``flink-version``, once read
        self._version_error: CollectorError | None = None  # /config's version could not be used
        self._version_polls = 0

    # ------------------------------------------------------------------------------------------ requests

    def _get(self, path: str, budget: Deadline, state: _JobState | None = None) -> Any:
        url: str | httpx.URL = self.base_url + path
        try:
            if state is not None:
                cached = state.urls.get(path)
                if cached is None:
                    cached = state.urls[path] = httpx.URL(self.base_url + path)
                url = cached
            else:
                url = httpx.URL(url)  # built once: the request's own check, and the URL it sends
        except httpx.InvalidURL as exc:  # a metric id with a control character, from the endpoint's own answer
            raise _Failed(
                f"cannot request {path[:200]!r}: {exc} (an id in the endpoint's earlier answer is not URL-safe)",
                self._cluster,
                False,
                ErrorKind.FIELD,
            ) from None
        doc = get_json(self._client, url, self._limits, budget)
        if isinstance(doc, HttpFailure):
            raise _Failed(doc.message, safe_url(url), doc.retryable, doc.kind)
        return doc

    def _parse(self, parser: Callable[..., Any], doc: Any, path: str) -> Any:
        try:
            return parser(doc, path)
        except InputError as exc:
            raise _Failed(str(exc), safe_url(self.base_url + path), False) from None

    def _error(self, exc: _Failed, now: datetime) -> CollectorError:
        return CollectorError(self.name, exc.target, str(exc), now, exc.retryable, exc.kind)

    # -------------------------------------------------------------------------------------------- poll

    def poll(self, now: datetime) -> PollResult:
        """Poll every job once (see the module docstring). Never raises for per-target failures; ends
        within the poll deadline of the collector's :class:`~collectors.http.ReadLimits`."""
        budget = self._limits.poll_deadline()
        try:
            jobs = self._parse(parse_jobs_overview, self._get("/jobs/overview", budget), "/jobs/overview")
        except _Failed as exc:
            return PollResult(errors=(self._error(exc, now),))
        followed = _newest_per_name(jobs)
        notices: list[CollectorError] = []
        if len(followed) > self._max_jobs:
            followed, left_out = _first_jobs(followed, self._max_jobs)
            notices.append(
                CollectorError(
                    self.name,
                    safe_url(self.base_url + "/jobs/overview"),
                    f"/jobs/overview: field 'jobs': {len(followed) + left_out} jobs, over the limit of "
                    f"{self._max_jobs} (the target's max_jobs): polled {len(followed)} (running first, then "
                    f"the newest), {left_out} not polled",
                    now,
                    retryable=True,
                    kind=ErrorKind.FIELD,
                )
            )
        if len(followed) <= 1 or self._concurrency == 1:  # nothing to overlap: no thread to start
            results = [self._poll_job(job, now, budget) for job in followed]
        else:
            with ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="flink-poll") as pool:
                results = list(pool.map(lambda job: self._poll_job(job, now, budget), followed))
        with self._lock:  # forget jobs no longer followed
            keep = {job.jid for job in followed}
            for jid in list(self._jobs):
                if jid not in keep:
                    del self._jobs[jid]
        # the version is asked after the jobs (it never takes their share of the poll's deadline); the job
        # samples of the poll that read it are given it too (a one-poll check knows it)
        if self.flink_version is None and self._version_polls % self._list_every == 0 and not budget.expired():
            self._read_version(now, budget)
            if self.flink_version is not None:
                results = [_with_version(r, self.flink_version) for r in results]
        self._version_polls += 1
        if self._version_error is not None:  # a standing condition: said at every poll until it is read
            notices.append(dataclasses.replace(self._version_error, observed_at=now))
        samples = [s for r in results for s in r.samples]
        errors = notices + [e for r in results for e in r.errors]
        skipped = sum(r.skipped for r in results)
        if skipped:
            errors.append(
                CollectorError(
                    self.name,
                    safe_url(self.base_url),
                    f"deadline exceeded: the poll's {budget.budget_s:g} s ran out before {skipped} of "
                    f"{len(results)} jobs were polled (they are polled next time)",
                    now,
                    retryable=True,
                    kind=ErrorKind.DEADLINE_EXCEEDED,
                )
            )
        return PollResult(tuple(samples), tuple(errors))

    def _read_version(self, now: datetime, budget: Deadline) -> None:
        """Read the cluster's Flink version from ``/config`` (asked until known, every ``metric_list_every``
        polls). An endpoint that does not serve it (a proxy routing only ``/jobs``) leaves it unknown without
        an error: the rules then follow the newest release modelled; a malformed or unmodelled version is an
        error entry kept (:attr:`_version_error`) and reported with every poll until a version is read."""
        try:
            doc = self._get("/config", budget)
        except _Failed:
            return  # not served here (or not now): asked again later
        try:
            self.flink_version = self._parse(parse_flink_version_of_config, doc, "/config")
            self._version_error = None
        except _Failed as exc:
            self._version_error = self._error(exc, now)

    def _state(self, jid: str) -> _JobState:
        with self._lock:
            state = self._jobs.get(jid)
            if state is None:
                state = self._jobs[jid] = _JobState()
            return state

    def _poll_job(self, job: JobOverview, now: datetime, budget: Deadline) -> _JobResult:
        result = _JobResult()
        if budget.expired():
            result.skipped = True
            return result
        path = f"/jobs/{_segment(job.jid)}"
        state = self._state(job.jid)
        relist = state.polls_since_list % self._list_every == 0
        state.polls_since_list += 1
        cached = state.detail
        fresh = cached is None or relist or cached.state != job.state or cached.state != "RUNNING"
        detail: JobDetail | None = None if fresh else cached
        if detail is None:
            detail = self._detail(path, now, result, budget)
            if detail is None:
                return result
        restarts = self._restarts(job.jid, now, result, budget)
        if not fresh and restarts != state.restarts:  # restarted since: new status timestamps
            detail = self._detail(path, now, result, budget)
            if detail is None:
                return result
        state.detail, state.restarts = detail, restarts
        ref = JobRef(Engine.FLINK, detail.name, run_id=detail.jid, name=detail.name, app_id=self._cluster)
        checkpoints = self._checkpoints(detail.jid, now, result, budget)
        exceptions: list[ExceptionEntry] = []
        if detail.state in TERMINAL_STATES or detail.state != "RUNNING" or (restarts or 0) > 0:
            exceptions = self._exceptions(detail.jid, now, result, budget)
        extra: dict[str, Any] = {"state": detail.state, "vertices": len(detail.vertices)}
        if self.flink_version is not None:
            extra["flink_version"] = self.flink_version
        if checkpoints is not None:
            extra.update(
                checkpoints_total=checkpoints.total,
                checkpoints_completed=checkpoints.completed,
                checkpoints_failed=checkpoints.failed,
                checkpoints_in_progress=checkpoints.in_progress,
                checkpoint_duration_ms=checkpoints.latest_duration_ms,
                checkpoint_failure=checkpoints.latest_failure_message,
            )
        if exceptions:
            extra["exception"] = exceptions[0].root_cause
            extra["exception_at"] = exceptions[0].timestamp_ms
        running_since = detail.timestamps.get("RUNNING")
        if running_since is not None:
            extra["running_since_ms"] = running_since
        state_bytes = checkpoints.latest_state_size_bytes if checkpoints is not None else None

        if detail.state in TERMINAL_STATES:
            ended = ms_to_datetime(detail.end_time_ms) or now
            result.samples.append(
                Sample(ref, min(ended, now), SampleKind.TERMINATED, self.name, extra=dict(extra))
            )
            result.samples.append(
                Sample(
                    ref,
                    now,
                    SampleKind.GAUGE,
                    self.name,
                    restart_count=restarts,
                    checkpoints_failed=checkpoints.failed if checkpoints is not None else None,
                    state_memory_bytes=state_bytes,
                    extra=extra,
                )
            )
            return result

        per_vertex: list[tuple[VertexInfo, dict[int, SubtaskMetrics]]] = []
        for vertex in detail.vertices:
            try:
                per_vertex.append((vertex, self._vertex(detail.jid, vertex, state, relist, budget)))
            except _Failed as exc:
                result.errors.append(self._error(exc, now))
        figures = JobFigures(
            restarts=restarts,
            checkpoints_failed=checkpoints.failed if checkpoints is not None else None,
            state_bytes=state_bytes,
            running_since_ms=running_since,
            extra=extra,
        )
        complete = len(per_vertex) == len(detail.vertices)
        result.samples.extend(
            running_job_samples(
                ref, per_vertex, complete, state.counters, figures, now, self.name, store_lags=True
            )
        )
        return result

    def _detail(self, path: str, now: datetime, result: _JobResult, budget: Deadline) -> JobDetail | None:
        try:
            detail: JobDetail = self._parse(
                lambda doc, where: parse_job_detail(doc, where, self._max_parallelism), self._get(path, budget), path
            )
        except _Failed as exc:
            result.errors.append(self._error(exc, now))
            return None
        try:  # what becomes the job's identity and its scopes must be text the store can hold
            check_name(detail.jid, f"{path}: field jid", MAX_ID_CHARS)
            check_name(detail.name, f"{path}: field name (the job's identity)", MAX_ID_CHARS)
            for i, vertex in enumerate(detail.vertices):
                check_name(vertex.id, f"{path}: field vertices[{i}].id", MAX_DESCRIPTION_CHARS)
                check_name(vertex.name, f"{path}: field vertices[{i}].name", MAX_DESCRIPTION_CHARS)
        except ValueError as exc:
            url = safe_url(self.base_url + path)
            result.errors.append(CollectorError(self.name, url, str(exc), now, retryable=False, kind=ErrorKind.FIELD))
            return None
        return detail

    def _restarts(self, jid: str, now: datetime, result: _JobResult, budget: Deadline) -> int | None:
        path = f"/jobs/{_segment(jid)}/metrics?get=numRestarts"
        try:
            values = self._parse(parse_metric_values, self._get(path, budget, self._state(jid)), path)
        except _Failed as exc:
            result.errors.append(self._error(exc, now))
            return None
        return parse_long(values.get("numRestarts"))

    def _checkpoints(
        self, jid: str, now: datetime, result: _JobResult, budget: Deadline
    ) -> CheckpointStats | None:
        path = f"/jobs/{_segment(jid)}/checkpoints"
        try:
            stats: CheckpointStats = self._parse(
                parse_checkpoints, self._get(path, budget, self._state(jid)), path
            )
        except _Failed as exc:
            if "HTTP 404" not in str(exc):  # checkpointing not enabled: nothing to read
                result.errors.append(self._error(exc, now))
            return None
        return stats

    def _exceptions(
        self, jid: str, now: datetime, result: _JobResult, budget: Deadline
    ) -> list[ExceptionEntry]:
        path = f"/jobs/{_segment(jid)}/exceptions?maxExceptions=5"
        try:
            entries: list[ExceptionEntry] = self._parse(parse_exceptions, self._get(path, budget), path)
        except _Failed as exc:
            result.errors.append(self._error(exc, now))
            return []
        return entries

    def _vertex(
        self, jid: str, vertex: VertexInfo, state: _JobState, relist: bool, budget: Deadline
    ) -> dict[int, SubtaskMetrics]:
        base = f"/jobs/{_segment(jid)}/vertices/{_segment(vertex.id)}/metrics"
        ids = state.metric_ids.get(vertex.id)
        if ids is None or relist:
            ids = select_metric_ids(self._parse(parse_metric_ids, self._get(base, budget), base), vertex)
            if ids:  # none yet (tasks still deploying, or before the first metric fetch): list again
                state.metric_ids[vertex.id] = ids
            for key in [k for k in state.urls if k.startswith(f"{base}?get=")]:
                del state.urls[key]
        values: dict[str, str] = {}
        for start in range(0, len(ids), _MAX_URL_IDS):
            chunk = ids[start : start + _MAX_URL_IDS]
            path = f"{base}?get={','.join(chunk)}"
            got = self._parse(parse_metric_values, self._get(path, budget, state), base)
            if not got and chunk:
                # an id went away (a metric unregistered): list again next poll
                state.polls_since_list = 0
            values.update(got)
        return subtask_metrics(values, vertex)


def _first_jobs(jobs: Sequence[JobOverview], limit: int) -> tuple[list[JobOverview], int]:
    """The ``limit`` jobs polled of more (running first, then by start time, newest first), by name as
    :func:`_newest_per_name` orders them, and how many were left out."""
    ranked = sorted(jobs, key=lambda j: (j.state != "RUNNING", -(j.start_time_ms or 0), j.name))
    chosen = sorted(ranked[:limit], key=lambda j: j.name)
    return chosen, len(jobs) - len(chosen)


def _newest_per_name(jobs: Sequence[JobOverview]) -> list[JobOverview]:
    """Of the jobs sharing a name, the newest by start time (a resubmission replaces the old job id)."""
    best: dict[str, JobOverview] = {}
    for job in jobs:
        cur = best.get(job.name)
        if cur is None or (job.start_time_ms or 0) > (cur.start_time_ms or 0):
            best[job.name] = job
    return sorted(best.values(), key=lambda j: j.name)
