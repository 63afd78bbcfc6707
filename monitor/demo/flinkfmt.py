"""Flink 2.x JobManager REST responses, shaped like the recorded real ones (pure: no I/O, no clock).

The shapes follow the Flink 2.3.0 responses recorded in ``tests/fixtures/flink/real-2.3.0/standalone``
(``flink-runtime`` ``rest/handler``): ``/jobs/overview`` (``JobsOverviewHandler``), ``/jobs/<jid>``
(``JobDetailsHandler``: status timestamps, vertices with their task counts and IO metrics, the plan),
``/jobs/<jid>/checkpoints`` (``CheckpointingStatisticsHandler``), ``/jobs/<jid>/exceptions``
(``JobExceptionsHandler``), metric lists ``[{"id": ...}]`` and ``?get=`` values ``[{"id", "value"}]`` whose
values are strings (``MetricCollectionResponseBody``). Vertex metric ids are ``<subtask>.<metric>`` (task
scope) or ``<subtask>.<operator>.<metric>`` (operator scope), the operator name as the metric query service
writes it (:func:`operator_metric_name`: ``Source: payments`` -> ``Source__payments``); ``Long.MIN_VALUE``
(:data:`NO_WATERMARK`) is "no watermark yet". Times are epoch milliseconds; ``-1`` is "not (yet)".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "NO_WATERMARK",
    "CheckpointView",
    "JobView",
    "VertexView",
    "checkpoints",
    "exceptions",
    "job_detail",
    "jobs_overview",
    "long_text",
    "metric_list",
    "metric_values",
    "not_found",
    "operator_metric_name",
]

#: ``Long.MIN_VALUE``: the watermark of a task that has received none (``WatermarkGauge``'s initial value).
NO_WATERMARK = -(2**63)
_EXECUTION_STATES = ("SCHEDULED", "DEPLOYING", "RUNNING", "CREATED", "CANCELED", "RECONCILING", "FINISHED",
                     "FAILED", "INITIALIZING", "CANCELING")  # ExecutionState, in the recorded order
_OVERVIEW_TASKS = ("running", "canceling", "canceled", "total", "created", "scheduled", "deploying",
                   "reconciling", "finished", "initializing", "failed")
_JOB_STATES = ("CREATED", "RUNNING", "RECONCILING", "FAILING", "SUSPENDED", "FAILED", "CANCELLING", "CANCELED",
               "FINISHED", "INITIALIZING", "RESTARTING")  # JobStatus, in the recorded order
_MAX_OPERATOR_NAME = 80  # TaskMetricGroup.METRICS_OPERATOR_NAME_MAX_LENGTH


def operator_metric_name(name: str) -> str:
    """An operator's name as it appears in REST metric ids: at most 80 characters (``TaskMetricGroup``),
    spaces, colons, dots and commas replaced by ``_`` (``MetricQueryService``'s character filter):
    ``Source: payments`` -> ``Source__payments``, ``Timestamps/Watermarks`` unchanged."""
    short = name[:_MAX_OPERATOR_NAME]
    return "".join("_" if c in " :.," else c for c in short)


def long_text(value: int | None) -> str:
    """A Java ``long`` gauge value as the REST API serves it (a string); ``None`` is ``Long.MIN_VALUE``."""
    return str(NO_WATERMARK if value is None else value)


@dataclass(frozen=True, slots=True)
class VertexView:
    """One job vertex (a chain of operators run by ``parallelism`` subtasks).

    Attributes:
        id: 32 hex digits. name: the chained operators' names joined by `` -> ``.
        description: the plan node's description (``Window(...)<br/>+- Sink: ...<br/>``).
        inputs: ids of the upstream vertices (``HASH`` exchange: a ``keyBy``).
        read_records / write_records / read_bytes / write_bytes: the vertex's IO counters.
    """

    id: str
    name: str
    parallelism: int
    description: str
    start_ms: int
    inputs: tuple[str, ...] = ()
    read_records: int = 0
    write_records: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    busy_ms: float = 0.0
    idle_ms: int = 0


@dataclass(frozen=True, slots=True)
class JobView:
    """One running streaming job: ids, name, when it was submitted/created/running, its vertices in
    topological order (sources first)."""

    jid: str
    name: str
    start_ms: int
    created_ms: int
    running_ms: int
    vertices: tuple[VertexView, ...]
    slot_sharing_group: str = "3b4396f9532d759e68af070c0c33da0d"


@dataclass(frozen=True, slots=True)
class CheckpointView:
    """One completed checkpoint: id, trigger and last-acknowledgement times (epoch ms), state size (bytes),
    processed data (bytes), subtasks acknowledged."""

    id: int
    trigger_ms: int
    ack_ms: int
    state_size: int
    processed_data: int
    num_subtasks: int


def _tasks(running: int) -> dict[str, int]:
    counts = dict.fromkeys(_EXECUTION_STATES, 0)
    counts["RUNNING"] = running
    return counts


def jobs_overview(jobs: Iterable[JobView], now_ms: int) -> dict[str, Any]:
    """``GET /jobs/overview``: ``{"jobs": [{"jid", "name", "jobType", "state", "start-time", "tasks", ...}]}``."""
    out = []
    for job in jobs:
        total = sum(v.parallelism for v in job.vertices)
        tasks = dict.fromkeys(_OVERVIEW_TASKS, 0)
        tasks.update(running=total, total=total)
        out.append({
            "jid": job.jid, "name": job.name, "jobType": "STREAMING", "schedulerType": "Default",
            "start-time": job.start_ms, "end-time": -1, "duration": now_ms - job.start_ms, "state": "RUNNING",
            "last-modification": job.running_ms, "tasks": tasks, "pending-operators": 0,
        })
    return {"jobs": out}


def _plan_node(v: VertexView) -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": v.id, "operator": "", "parallelism": v.parallelism, "operator_strategy": "",
        "description": v.description, "optimizer_properties": {},
    }
    if v.inputs:
        node["inputs"] = [
            {"id": i, "num": n, "exchange": "pipelined_bounded", "ship_strategy": "HASH"} for n, i in enumerate(v.inputs)
        ]
    return node


def job_detail(job: JobView, now_ms: int) -> dict[str, Any]:
    """``GET /jobs/<jid>`` of a running job (keys in the recorded order; the plan lists sinks first, as
    Flink's ``JsonPlanGenerator`` does)."""
    stamps = dict.fromkeys(_JOB_STATES, 0)
    stamps.update(CREATED=job.created_ms, RUNNING=job.running_ms, INITIALIZING=job.start_ms)
    vertices = []
    for v in job.vertices:
        vertices.append({
            "id": v.id, "slotSharingGroupId": job.slot_sharing_group, "name": v.name, "maxParallelism": 128,
            "parallelism": v.parallelism, "status": "RUNNING", "start-time": v.start_ms, "end-time": -1,
            "duration": now_ms - v.start_ms, "tasks": _tasks(v.parallelism),
            "metrics": {
                "read-bytes": v.read_bytes, "read-bytes-complete": True, "write-bytes": v.write_bytes,
                "write-bytes-complete": True, "read-records": v.read_records, "read-records-complete": True,
                "write-records": v.write_records, "write-records-complete": True,
                "accumulated-backpressured-time": 0, "accumulated-idle-time": v.idle_ms,
                "accumulated-busy-time": float(v.busy_ms),
            },
        })
    counts = _tasks(len(job.vertices))
    return {
        "jid": job.jid, "application-id": job.jid, "name": job.name, "isStoppable": False, "state": "RUNNING",
        "job-type": "STREAMING", "schedulerType": "Default", "start-time": job.start_ms, "end-time": -1,
        "duration": now_ms - job.start_ms, "maxParallelism": -1, "now": now_ms, "timestamps": stamps,
        "vertices": vertices, "status-counts": counts,
        "plan": {"jid": job.jid, "name": job.name, "type": "STREAMING",
                 "nodes": [_plan_node(v) for v in reversed(job.vertices)]},
        "pending-operators": 0,
    }


def metric_list(ids: Iterable[str]) -> list[dict[str, str]]:
    """``GET .../metrics`` without ``get``: the metric ids, no values."""
    return [{"id": i} for i in ids]


def metric_values(values: Mapping[str, str], requested: Sequence[str]) -> list[dict[str, str]]:
    """``GET .../metrics?get=a,b``: the requested ids with their values, in request order. As Flink's
    ``AbstractMetricsHandler`` does, one unknown id makes the answer ``[]`` (the collector relies on it)."""
    if any(r not in values for r in requested):
        return []
    return [{"id": r, "value": values[r]} for r in requested]


def _stats(values: Sequence[int]) -> dict[str, Any]:
    """``StatsSummaryDto``: min/max/avg as longs, percentiles as doubles (nearest-rank)."""
    if not values:
        return {"min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0}
    ordered = sorted(values)

    def pct(q: float) -> float:
        return float(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))])

    return {"min": ordered[0], "max": ordered[-1], "avg": sum(ordered) // len(ordered), "p50": pct(0.5),
            "p90": pct(0.9), "p95": pct(0.95), "p99": pct(0.99), "p999": pct(0.999)}


def _checkpoint(c: CheckpointView, newest: bool) -> dict[str, Any]:
    return {
        "className": "completed", "id": c.id, "status": "COMPLETED", "is_savepoint": False, "savepointFormat": None,
        "trigger_timestamp": c.trigger_ms, "latest_ack_timestamp": c.ack_ms, "checkpointed_size": c.state_size,
        "state_size": c.state_size, "end_to_end_duration": c.ack_ms - c.trigger_ms, "alignment_buffered": 0,
        "processed_data": c.processed_data, "persisted_data": 0, "num_subtasks": c.num_subtasks,
        "num_acknowledged_subtasks": c.num_subtasks, "checkpoint_type": "CHECKPOINT", "tasks": {},
        "external_path": "<checkpoint-not-externally-addressable>", "discarded": not newest,
    }


def checkpoints(completed: Sequence[CheckpointView], failed: int, history_size: int = 10) -> dict[str, Any]:
    """``GET /jobs/<jid>/checkpoints``: counts since submission (``failed`` includes the trigger every job
    start declines), the summary over ``completed`` (oldest first), the latest and the newest
    ``history_size`` (``web.checkpoints.history``), newest first; the newest is the one not discarded."""
    recent = list(completed[-history_size:])
    history = [_checkpoint(c, i == 0) for i, c in enumerate(reversed(recent))]
    latest = _checkpoint(completed[-1], True) if completed else None
    sizes = [c.state_size for c in completed]
    return {
        "counts": {"restored": 0, "total": len(completed) + failed, "in_progress": 0, "completed": len(completed),
                   "failed": failed},
        "summary": {
            "checkpointed_size": _stats(sizes), "state_size": _stats(sizes),
            "end_to_end_duration": _stats([c.ack_ms - c.trigger_ms for c in completed]),
            "alignment_buffered": _stats([0] * len(completed)),
            "processed_data": _stats([c.processed_data for c in completed]),
            "persisted_data": _stats([0] * len(completed)),
        },
        "latest": {"completed": latest, "savepoint": None, "failed": None, "restored": None},
        "history": history,
    }


def exceptions() -> dict[str, Any]:
    """``GET /jobs/<jid>/exceptions`` of a job that never failed."""
    return {"exceptionHistory": {"entries": [], "truncated": False}}


def not_found(path: str) -> dict[str, Any]:
    """The body of Flink's 404 (``{"errors": ["Not found: /path"]}``)."""
    return {"errors": [f"Not found: {path}"]}
