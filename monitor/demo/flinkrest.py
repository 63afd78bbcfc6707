"""The demo's Flink JobManager on loopback: the REST endpoints tidegauge's Flink collector reads, answered
for the simulated jobs (:class:`monitor.demo.flinksim.FlinkSimJob`) in Flink 2.x shapes (:mod:`monitor.demo.flinkfmt`).

A Starlette app (served by :class:`monitor.daemon.web.HttpService`, like the demo's webhook receiver)::

    GET /jobs/overview
    GET /jobs/<jid>                                  (JobDetailsHandler)
    GET /jobs/<jid>/metrics[?get=a,b]                job-scope metrics (numRestarts, checkpoint counters)
    GET /jobs/<jid>/checkpoints
    GET /jobs/<jid>/exceptions[?maxExceptions=n]
    GET /jobs/<jid>/vertices/<vid>/metrics[?get=a,b] the metric ids, or their values
    GET /jobs/<jid>/vertices/<vid>/watermarks

Anything else, or an unknown job or vertex, is Flink's 404 (``{"errors": ["Not found: ..."]}``). The values
are those at ``clock()`` (a parameter: nothing here reads the wall clock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from monitor.demo import flinkfmt
from monitor.demo.flinksim import FlinkSimJob

__all__ = ["create_flink_app"]


def create_flink_app(jobs: Sequence[FlinkSimJob], clock: Callable[[], datetime]) -> Starlette:
    """The JobManager REST app of ``jobs`` (prepared), answering at ``clock()``."""
    by_id = {j.jid: j for j in jobs}

    def now_ms() -> int:
        return int(clock().timestamp() * 1000)

    def missing(request: Request) -> JSONResponse:
        return JSONResponse(flinkfmt.not_found(request.url.path), status_code=404)

    def requested(request: Request) -> list[str] | None:
        got = request.query_params.get("get")
        return None if got is None else [p for p in got.split(",") if p]

    def job_of(request: Request) -> FlinkSimJob | None:
        return by_id.get(request.path_params["jid"])

    def overview(request: Request) -> JSONResponse:
        at = now_ms()
        return JSONResponse(flinkfmt.jobs_overview([j.view(at) for j in jobs], at))

    def detail(request: Request) -> JSONResponse:
        job = job_of(request)
        if job is None:
            return missing(request)
        at = now_ms()
        return JSONResponse(flinkfmt.job_detail(job.view(at), at))

    def values_or_ids(request: Request, values: dict[str, str]) -> JSONResponse:
        ids = requested(request)
        body: Any = flinkfmt.metric_list(sorted(values)) if ids is None else flinkfmt.metric_values(values, ids)
        return JSONResponse(body)

    def job_metrics(request: Request) -> JSONResponse:
        job = job_of(request)
        return missing(request) if job is None else values_or_ids(request, job.job_metrics(now_ms()))

    def checkpoints(request: Request) -> JSONResponse:
        job = job_of(request)
        return missing(request) if job is None else JSONResponse(
            flinkfmt.checkpoints(job.completed_checkpoints(now_ms()), failed=1)
        )

    def exceptions(request: Request) -> JSONResponse:
        return missing(request) if job_of(request) is None else JSONResponse(flinkfmt.exceptions())

    def vertex_metrics(request: Request) -> JSONResponse:
        job = job_of(request)
        values = job.metric_values(request.path_params["vid"], now_ms()) if job is not None else {}
        return missing(request) if not values else values_or_ids(request, values)

    def watermarks(request: Request) -> JSONResponse:
        job = job_of(request)
        vid = request.path_params["vid"]
        if job is None or vid not in (job.source_vertex, job.window_vertex):
            return missing(request)
        marks = job.watermarks(vid, now_ms())
        return JSONResponse(flinkfmt.metric_values(marks, sorted(marks)))

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return missing(request)

    return Starlette(
        routes=[
            Route("/jobs/overview", overview, methods=["GET"]),
            Route("/jobs/{jid}", detail, methods=["GET"]),
            Route("/jobs/{jid}/metrics", job_metrics, methods=["GET"]),
            Route("/jobs/{jid}/checkpoints", checkpoints, methods=["GET"]),
            Route("/jobs/{jid}/exceptions", exceptions, methods=["GET"]),
            Route("/jobs/{jid}/vertices/{vid}/metrics", vertex_metrics, methods=["GET"]),
            Route("/jobs/{jid}/vertices/{vid}/watermarks", watermarks, methods=["GET"]),
        ],
        exception_handlers={404: not_found},
    )
