"""A seeded database for the dashboard and report tests: the demo's simulated fleet run through the real
daemon pipeline on a fixed fake clock (no sleeping, no wall clock).

Event-log jobs are written to an event-log directory and read by the daemon's event-log collector; listener
jobs go through the ingest endpoint's parser (:func:`monitor.daemon.ingest.parse_event_document`) into
``Runtime.ingest``, as a push would; the Flink job and the Kafka groups are served on loopback by the demo's
JobManager and kafka_exporter (answering at the fake time) and polled by the daemon's collectors. Every 2 s of fake time the target is polled and the rules evaluated,
so the database holds samples, runs, alerts (with their lifecycle) and a queued report exactly as a
running daemon writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from monitor.daemon.compose import build
from monitor.daemon.ingest import parse_event_document
from monitor.daemon.web import HttpService
from monitor.demo.exporter import create_exporter_app
from monitor.demo.fleet import Fleet, build_fleet
from monitor.demo.flinkrest import create_flink_app
from monitor.demo.session import INGEST_TOKEN_ENV, WEBHOOK_SECRET_ENV, EventSink, demo_config, demo_paths
from monitor.store import upgrade

START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@dataclass
class Seeded:
    """What was seeded: the database URL, the fleet, the fake time it ended at."""

    url: str
    root: Path
    fleet: Fleet
    end: datetime


def _closing(app: ASGIApp) -> ASGIApp:
    """``app`` answering with ``Connection: close``: the seeded daemon is built but never started, so its
    HTTP clients are never closed; with no keep-alive no socket of theirs stays open."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await app(scope, receive, closing_send)

    return wrapped


def seed(root: Path, seconds: int = 90, *, report_at: int | None = 60) -> Seeded:
    """Run the demo fleet for ``seconds`` of fake time from :data:`START` into a new database under ``root``."""
    paths = demo_paths(root)
    upgrade(paths.db_url)
    environ = {"HOME": str(root), INGEST_TOKEN_ENV: "t" * 32, WEBHOOK_SECRET_ENV: "s" * 32}
    clock = [START]
    start_ms = int(START.timestamp() * 1000)
    fleet = build_fleet(start_ms, (seconds + 30) * 1000, seed=7)
    assert fleet.kafka is not None
    flink = HttpService(_closing(create_flink_app(fleet.flink, lambda: clock[0])), "127.0.0.1", 0)
    exporter = HttpService(_closing(create_exporter_app(fleet.kafka, lambda: clock[0])), "127.0.0.1", 0)
    flink.start()
    exporter.start()
    config = demo_config(paths, port=0, receiver_port=9, dashboard_url="http://127.0.0.1:8501/job",
                         flink_port=flink.port, exporter_port=exporter.port)
    daemon = build(config, db_url=paths.db_url, environ=environ, clock=lambda: clock[0])
    with httpx.Client() as client:
        sink = EventSink(paths.event_logs, "http://127.0.0.1:9/unused", "t" * 32, client)
        runtime = daemon.runtime
        try:
            for second in range(seconds + 1):
                now = START + timedelta(seconds=second)
                clock[0] = now
                events = fleet.step(start_ms + second * 1000)
                sink.deliver([e for e in events if e.job.transport == "eventlog"], start_ms)
                by_job: dict[str, list[dict]] = {}
                for e in events:
                    if e.job.transport == "listener":
                        by_job.setdefault(e.job.app_id, []).append(e.event)
                for app_id, docs in by_job.items():
                    runtime.ingest(parse_event_document(docs, received_at=now, app_id=app_id), "spark-listener")
                if second % 2 == 0:
                    for target in runtime.targets:
                        runtime.poll(target, now)
                    runtime.evaluate(now)
                if report_at is not None and second == report_at:
                    runtime.report("demo-5min", "demo-receiver", now)
        finally:
            daemon.store.dispose()
            exporter.stop(5.0)
            flink.stop(5.0)
    return Seeded(paths.db_url, root, fleet, START + timedelta(seconds=seconds))
