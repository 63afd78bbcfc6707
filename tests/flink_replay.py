"""Serve recorded Flink 2.3.0 REST responses (tests/fixtures/flink/real-2.3.0/standalone) as a JobManager.

:func:`standalone_routes` maps request paths of the recorded job to the recorded documents (the files
wrap each response as ``{"_path": ..., "response": ...}``); :func:`mock_transport` answers from such a
map through :class:`httpx.MockTransport` (unknown paths: 404, as Flink answers). A vertex's
``metrics?get=...`` is answered with the recorded ``metrics?get=<selected>`` document, whatever the ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from monitor.model import PollResult

__all__ = ["KAFKA_CULPRIT", "STANDALONE", "load", "mock_transport", "replay_polls", "standalone_routes"]

STANDALONE = Path(__file__).resolve().parent / "fixtures" / "flink" / "real-2.3.0" / "standalone"
#: Recorded polls of a Flink job reading Kafka with a record dated 2099 (``poll-NN.json``; README there).
KAFKA_CULPRIT = STANDALONE.parent / "kafka_culprit"


def load(name: str, folder: Path = STANDALONE) -> Any:
    """The recorded response in ``folder/name`` (unwrapped from ``{"_path", "response"}`` if wrapped)."""
    doc = json.loads((folder / name).read_text())
    if isinstance(doc, dict) and "response" in doc and "_path" in doc:
        return doc["response"]
    return doc


def standalone_routes() -> dict[str, Any]:
    """``path (without query) or path?get -> document`` for the recorded standalone job."""
    job = load("job.json")
    jid = job["jid"]
    routes: dict[str, Any] = {
        "/jobs/overview": load("jobs_overview.json"),
        "/config": load("config.json"),  # the same JobManager's /config (flink-version 2.3.0)
        f"/jobs/{jid}": job,
        f"/jobs/{jid}/metrics?get": load("job_metrics_values.json"),
        f"/jobs/{jid}/checkpoints": load("checkpoints.json"),
        f"/jobs/{jid}/exceptions": load("exceptions.json"),
    }
    for i, vertex in enumerate(job["vertices"]):
        base = f"/jobs/{jid}/vertices/{vertex['id']}"
        routes[f"{base}/metrics"] = load(f"v{i}_metrics_list.json")
        routes[f"{base}/metrics?get"] = load(f"v{i}_metrics_selected.json")
        routes[f"{base}/watermarks"] = load(f"v{i}_watermarks.json")
        routes[f"{base}/backpressure"] = load(f"v{i}_backpressure.json")
    return routes


def route_key(request: httpx.Request) -> str:
    """The routes key of a request: its path, plus ``?get`` when it asks for metric values."""
    path = request.url.path
    return f"{path}?get" if "get" in request.url.params else path


def mock_transport(
    routes: Mapping[str, Any], on_request: Callable[[httpx.Request], httpx.Response | None] | None = None
) -> httpx.MockTransport:
    """A transport answering ``routes`` (JSON), 404 otherwise; ``on_request`` may answer first."""

    def handler(request: httpx.Request) -> httpx.Response:
        if on_request is not None:
            answered = on_request(request)
            if answered is not None:
                return answered
        key = route_key(request)
        if key not in routes:
            return httpx.Response(404, json={"errors": ["Not found: " + request.url.path]})
        return httpx.Response(200, json=routes[key])

    return httpx.MockTransport(handler)


def replay_polls(polls: range, folder: Path = KAFKA_CULPRIT) -> list[PollResult]:
    """Recorded polls (``folder/poll-NN.json``: ``{"now", "routes"}``) through the REST collector
    (``metric_list_every=1``, as recorded), each at its recorded clock."""
    from collectors.flink import FlinkRestCollector

    current: dict[str, Any] = {}
    out: list[PollResult] = []
    with httpx.Client(transport=mock_transport(current)) as client:
        collector = FlinkRestCollector("http://jm:8081", client, metric_list_every=1)
        for n in polls:
            doc = json.loads((folder / f"poll-{n:02d}.json").read_text())
            current.clear()
            current.update(doc["routes"])
            out.append(collector.poll(datetime.fromisoformat(doc["now"])))
    return out
