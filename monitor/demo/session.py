"""One demo run's parts, minus the clock and the environment (which :mod:`monitor.commands.demo` passes in).

* :func:`demo_paths`: where a run keeps its files (a per-user directory, emptied at the start of a run);
* :func:`demo_config`: the daemon configuration of the demo (:class:`monitor.config.Config`): the demo's
  event-log directory as a ``spark_event_logs`` target, the ingest endpoint for listener pushes, the
  simulated JobManager as a ``flink_rest`` target and the simulated kafka_exporter as a
  ``kafka_exporters`` target (both on loopback), the
  built-in webhook receiver, a report to it every five minutes and detailed report files every two minutes
  (into the run's ``reports`` directory, which the dashboard's Reports page lists), and rule parameters scaled to a demo whose jobs
  trigger every 2 s (a stall after 20 s rather than 10 min);
* :class:`EventSink`: writes the fleet's events as event-log lines (``<app id>.inprogress`` files, as
  ``SingleEventLogFileWriter`` names them) or pushes them to the ingest endpoint (as
  :class:`collectors.spark.listener.TidegaugeListener` would);
* :class:`FaultTracker`: which injected faults the daemon has found (a firing alert of one of the fault's
  rules on the fault's job) and notified (the receiver got that alert).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from monitor.alerts.lifecycle import Alert
from monitor.config import Config, parse_config
from monitor.daemon.ingest import APP_ID_HEADER
from monitor.demo import sparkfmt
from monitor.demo.fleet import FAULTS, KAFKA_CLUSTER, Fault, Fleet, SimEvent
from monitor.demo.receiver import Received
from monitor.model import AlertState
from monitor.text import clip

__all__ = [
    "FLINK_TARGET",
    "INGEST_TOKEN_ENV",
    "WEBHOOK_SECRET_ENV",
    "DemoPaths",
    "EventSink",
    "FaultStatus",
    "FaultTracker",
    "demo_config",
    "demo_paths",
]

INGEST_TOKEN_ENV = "TIDEGAUGE_DEMO_INGEST_TOKEN"  # noqa: S105 (variable names, not secrets)
WEBHOOK_SECRET_ENV = "TIDEGAUGE_DEMO_WEBHOOK_SECRET"  # noqa: S105
DASHBOARD_TOKEN_ENV = "TIDEGAUGE_DEMO_DASHBOARD_TOKEN"  # noqa: S105
#: Characters of an alert's first sentence on a fault's terminal line.
MESSAGE_CHARS = 110
#: The name of the demo's ``flink_rest`` target (the Flink samples' ``app_id``).
FLINK_TARGET = "demo-flink"


@dataclass(frozen=True, slots=True)
class DemoPaths:
    """Files of one demo run under ``root``."""

    root: Path

    @property
    def database(self) -> Path:
        """The SQLite database (WAL mode)."""
        return self.root / "demo.db"

    @property
    def event_logs(self) -> Path:
        """The ``spark.eventLog.dir`` of the simulated drivers."""
        return self.root / "eventlog"

    @property
    def reports(self) -> Path:
        """Where on-demand reports are written."""
        return self.root / "reports"

    @property
    def db_url(self) -> str:
        """SQLAlchemy URL of :attr:`database`."""
        return f"sqlite:///{self.database}"


def demo_paths(root: Path, *, fresh: bool = True) -> DemoPaths:
    """The run's paths under ``root``; with ``fresh`` the database and event logs of an earlier run go."""
    paths = DemoPaths(root)
    root.mkdir(parents=True, exist_ok=True)
    if fresh:
        for name in ("demo.db", "demo.db-wal", "demo.db-shm"):
            (root / name).unlink(missing_ok=True)
        shutil.rmtree(paths.event_logs, ignore_errors=True)
    paths.event_logs.mkdir(parents=True, exist_ok=True)
    paths.reports.mkdir(parents=True, exist_ok=True)
    return paths


def demo_config(
    paths: DemoPaths, *, port: int, receiver_port: int, dashboard_url: str, with_dashboard_token: bool = True,
    flink_port: int | None = None, exporter_port: int | None = None,
) -> Config:
    """The daemon configuration of the demo (see the module docstring); ``flink_port`` / ``exporter_port``:
    where the simulated JobManager and kafka_exporter listen on 127.0.0.1 (``None``: no such target).

    Secrets are references to variables the demo sets in the environment it passes to the daemon
    (:data:`INGEST_TOKEN_ENV`, :data:`WEBHOOK_SECRET_ENV`), as a user's config would.
    """
    doc: dict[str, Any] = {
        "database": paths.db_url,
        "dashboard_url": dashboard_url,
        "server": {"host": "127.0.0.1", "port": port, "ingest_token": {"env": INGEST_TOKEN_ENV}},
        "targets": {"spark_event_logs": [{"name": "demo-drivers", "path": str(paths.event_logs), "poll_interval": "2s"}]},
        "evaluation_interval": "2s",
        "rules": {
            "watermark_stall": {"for": "16s", "min_data_batches": 3},
            "idle_source": {"for": "16s"},
            # 20 batches and 10 watermark steps in 40 s: the window must be full and the watermark moving. A
            # fresh window aggregation's state grows until its first window closes (~20 s, with the 10 s delay
            # and windows): 6 points fired and resolved it on every query in the warm-up; and an input pinning
            # the watermark grows windows' state for a while (the stall, not the key, is the cause)
            "state_growth": {"window": "40s", "min_points": 20, "min_watermark_steps": 10, "critical_within": "10m"},
            "late_drop_surge": {"window": "20s", "max_share": 0.05, "min_dropped": 5},
            "falling_behind": {"trigger_interval": "2s", "batches": 3},
            "target_health": {"restart_window": "5m"},
            # Burrow's window of 6 polls (12 s); a healthy group's lag stays below a second of production
            "consumer_lag": {"window_samples": 6, "allowed_lag": 150},
        },
        "receivers": [
            {
                "name": "demo-receiver",
                "type": "webhook",
                "url": f"http://127.0.0.1:{receiver_port}/hook",
                "secret": {"env": WEBHOOK_SECRET_ENV},
                "timeout": "5s",
            }
        ],
        "reports": [
            {"name": "demo-5min", "cron": "*/5 * * * *", "receiver": "demo-receiver"},
            {"name": "demo-fleet", "cron": "*/2 * * * *", "directory": str(paths.reports),
             "formats": ["html", "md", "json"], "since": "1h"},
        ],
        "delivery": {"interval": "2s", "initial_backoff": "2s", "max_backoff": "10s"},
    }
    if flink_port is not None:
        doc["targets"]["flink_rest"] = [{"name": FLINK_TARGET, "url": f"http://127.0.0.1:{flink_port}", "poll_interval": "2s"}]
    if exporter_port is not None:
        doc["targets"]["kafka_exporters"] = [
            {"name": KAFKA_CLUSTER, "url": f"http://127.0.0.1:{exporter_port}/metrics", "poll_interval": "2s"}
        ]
    return parse_config(doc, "<demo>")


@dataclass
class EventSink:
    """Delivers the fleet's events: event-log lines for ``eventlog`` jobs, pushes for ``listener`` jobs.

    Args:
        event_logs: the event-log directory.
        ingest_url: ``http://127.0.0.1:<port>/api/v1/spark/events``.
        token: the ingest bearer token.
        client: the HTTP client (closed by the caller).
    """

    event_logs: Path
    ingest_url: str
    token: str = field(repr=False)
    client: httpx.Client
    _opened: set[str] = field(default_factory=set)
    pushed: int = 0
    push_failures: int = 0

    def deliver(self, events: Sequence[SimEvent], start_ms: int) -> None:
        """Write or push ``events`` (per job, in order)."""
        by_job: dict[str, list[SimEvent]] = {}
        for e in events:
            by_job.setdefault(e.job.name, []).append(e)
        for batch in by_job.values():
            job = batch[0].job
            if job.transport == "eventlog":
                self._write(job.app_id, job.name, [e.event for e in batch], start_ms)
            else:
                self._push(job.app_id, [e.event for e in batch])

    def _write(self, app_id: str, app_name: str, events: list[dict[str, Any]], start_ms: int) -> None:
        path = self.event_logs / f"{app_id}.inprogress"
        lines = []
        if app_id not in self._opened:
            self._opened.add(app_id)
            lines += [sparkfmt.line(sparkfmt.log_start()), sparkfmt.line(sparkfmt.application_start(app_name, app_id, start_ms))]
        lines += [sparkfmt.line(e) for e in events]
        with path.open("a", encoding="utf-8") as out:
            out.write("".join(lines))

    def _push(self, app_id: str, events: list[dict[str, Any]]) -> None:
        try:
            response = self.client.post(
                self.ingest_url,
                json=events,
                headers={"Authorization": f"Bearer {self.token}", APP_ID_HEADER: app_id},
                timeout=5.0,
            )
        except httpx.HTTPError:
            self.push_failures += 1
            return
        if response.status_code == 202:
            self.pushed += len(events)
        else:
            self.push_failures += 1


@dataclass
class FaultStatus:
    """Where one fault stands."""

    fault: Fault
    job_id: str
    injected_at: datetime | None = None
    detected_at: datetime | None = None
    notified_at: datetime | None = None
    alert: Alert | None = None

    def line(self, start: datetime, what: str | None = None) -> str:
        """The line of one step, e.g. ``[  31s] DETECTED  future-dated row in clicks_per_window -> ...``.

        ``what``: ``injected``, ``DETECTED`` or ``NOTIFIED`` (default: the latest step reached, or
        ``scheduled``). The alert's first sentence is shortened at a word boundary (:func:`monitor.text.clip`).
        """
        steps = {"injected": self.injected_at, "DETECTED": self.detected_at, "NOTIFIED": self.notified_at}
        if what is None:
            what = next((w for w in ("NOTIFIED", "DETECTED", "injected") if steps[w] is not None), "scheduled")
        at = steps.get(what) or start
        text = f"[{(at - start).total_seconds():4.0f}s] {what:<9} {self.fault.title} in {self.fault.job}"
        if self.alert is not None and what in ("DETECTED", "NOTIFIED"):
            message = self.alert.message.split(". ")[0]
            text += f" -> {self.alert.rule} ({self.alert.severity.label()}): {clip(message, MESSAGE_CHARS)}"
        return text


@dataclass
class FaultTracker:
    """Follows each fault of :data:`FAULTS` from injected to detected to notified."""

    fleet: Fleet
    start: datetime
    statuses: list[FaultStatus] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.statuses = [FaultStatus(f, self.fleet.job_id(f)) for f in FAULTS]

    def update(self, now: datetime, alerts: Iterable[Alert], inbox: Sequence[Received]) -> list[str]:
        """Advance the statuses at ``now``; returns one line per step (injected, detected, notified) each
        fault reached now."""
        firing = [a for a in alerts if a.state is AlertState.FIRING or a.fired_at is not None]
        told: set[tuple[str, str]] = set()
        for item in inbox:
            for alert in item.body.get("alerts", []):
                if alert.get("status") == "firing":
                    told.add((str(alert.get("rule")), str(alert.get("labels", {}).get("job_id"))))
        changed: list[str] = []
        for s in self.statuses:
            before = {"injected": s.injected_at, "DETECTED": s.detected_at, "NOTIFIED": s.notified_at}
            if s.injected_at is None and (now - self.start).total_seconds() >= s.fault.at_s:
                s.injected_at = now
            if s.injected_at is not None and s.detected_at is None:
                found = [a for a in firing if a.rule in s.fault.rules and a.labels.get("job_id") == s.job_id]
                if found:
                    s.alert = max(found, key=lambda a: a.severity)
                    s.detected_at = now
            if (
                s.detected_at is not None
                and s.notified_at is None
                and any((rule, s.job_id) in told for rule in s.fault.rules)
            ):
                s.notified_at = now
            after = {"injected": s.injected_at, "DETECTED": s.detected_at, "NOTIFIED": s.notified_at}
            # one line per step reached now, in order: a fault found in the same tick it was injected
            # still prints its injected line first
            changed.extend(s.line(self.start, what) for what in after if after[what] != before[what])
        return changed

    @property
    def done(self) -> bool:
        """Every fault detected and notified."""
        return all(s.notified_at is not None for s in self.statuses)

    def missing(self) -> list[FaultStatus]:
        """The faults not yet detected or not yet notified."""
        return [s for s in self.statuses if s.notified_at is None]


def environ_with_secrets(environ: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """``environ`` plus the demo's generated secrets (what the daemon's config references)."""
    return {**environ, **secrets}
