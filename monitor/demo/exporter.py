"""The demo's kafka_exporter on loopback: ``GET /metrics`` answers the simulated topic and groups
(:class:`monitor.demo.kafkasim.KafkaSim`) in kafka_exporter's text format (:mod:`monitor.demo.kafkafmt`).

A Starlette app (served by :class:`monitor.daemon.web.HttpService`); the text is the one at ``clock()`` (a
parameter: nothing here reads the wall clock). Content type: Prometheus text format 0.0.4, as the Go
client serves it to a scraper that does not ask for OpenMetrics.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from monitor.demo.kafkasim import KafkaSim

__all__ = ["CONTENT_TYPE", "create_exporter_app"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def create_exporter_app(sim: KafkaSim, clock: Callable[[], datetime]) -> Starlette:
    """The exporter app of ``sim`` (prepared)."""

    def metrics(request: Request) -> Response:
        text = sim.exposition(int(clock().timestamp() * 1000))
        return Response(text, headers={"Content-Type": CONTENT_TYPE})

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])
