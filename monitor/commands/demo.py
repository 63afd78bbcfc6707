"""``tidegauge demo [--duration 120s] [--dir DIR]``: all of tidegauge on a simulated fleet, no cluster needed.

A composition root (it reads the clock and the environment and wires the parts of :mod:`monitor.demo`):

1. a fresh SQLite database (WAL) in a per-user directory (``$XDG_DATA_HOME/tidegauge/demo``, else
   ``~/.local/share/tidegauge/demo``; ``--dir`` elsewhere), migrated to the newest schema;
2. the built-in webhook receiver (:mod:`monitor.demo.receiver`) on loopback;
3. the daemon (:func:`monitor.daemon.compose.build`) with the demo's config (:func:`monitor.demo.session.demo_config`):
   ``/metrics``, ``/healthz``, the listener ingest endpoint, rule evaluation and notification delivery;
4. the dashboard (``tidegauge dashboard``'s Streamlit process), unless ``--no-dashboard``;
5. the simulated fleet (:mod:`monitor.demo.fleet`), writing Spark event logs and pushing listener events,
   serving a Flink job as a JobManager's REST API (:mod:`monitor.demo.flinkrest`) and two Kafka consumer
   groups as kafka_exporter's ``/metrics`` (:mod:`monitor.demo.exporter`), both on loopback ports picked at
   start, with eight faults injected on a schedule.

It prints the URLs, then one line per fault as it is injected, detected and notified. Ctrl-C (or the end
of ``--duration``) stops everything in reverse order. With ``--duration`` the exit code is 0 when every
fault was detected and notified, 1 otherwise (the missing ones are listed).
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import typer

__all__ = ["demo_root", "register"]

DEFAULT_HORIZON = timedelta(hours=1)


def demo_root(environ: dict[str, str] | os._Environ[str]) -> Path:
    """The per-user demo directory (next to the default database, see :func:`monitor.store.default_db_path`)."""
    from monitor.store import default_db_path

    return default_db_path(environ).parent / "demo"


def _clock() -> datetime:
    return datetime.now(UTC)


def _wait_http(url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    return False


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to ``app``."""

    @app.command("demo")
    def demo_cmd(
        duration: str | None = typer.Option(None, "--duration", help="Run this long, then stop (e.g. 120s)."),
        directory: Path | None = typer.Option(None, "--dir", help="Where to keep the demo's files."),
        port: int = typer.Option(8321, "--port", help="Daemon port (/metrics, /healthz, ingest); 0 picks one."),
        receiver_port: int = typer.Option(8502, "--receiver-port", help="Webhook receiver port; 0 picks one."),
        dashboard_port: int = typer.Option(8501, "--dashboard-port", help="Dashboard port."),
        no_dashboard: bool = typer.Option(False, "--no-dashboard", help="Do not start the dashboard."),
        seed: int = typer.Option(7, "--seed", help="Seed of the simulated fleet."),
    ) -> None:
        """Run the daemon, the dashboard and a simulated Spark, Flink and Kafka fleet with injected faults."""
        from monitor.commands.dashboard import launch
        from monitor.daemon.compose import build
        from monitor.daemon.stopping import StopSignals, leave
        from monitor.daemon.web import HttpService
        from monitor.demo.exporter import create_exporter_app
        from monitor.demo.fleet import build_fleet
        from monitor.demo.flinkrest import create_flink_app
        from monitor.demo.receiver import Inbox, create_receiver_app
        from monitor.demo.session import (
            DASHBOARD_TOKEN_ENV,
            INGEST_TOKEN_ENV,
            WEBHOOK_SECRET_ENV,
            EventSink,
            FaultTracker,
            demo_config,
            demo_paths,
        )
        from monitor.durations import parse_duration_ms
        from monitor.store import upgrade
        from monitor.store.alert_repo import load_alerts

        run_for = None if duration is None else timedelta(milliseconds=parse_duration_ms(duration, what="--duration"))
        root = directory if directory is not None else demo_root(os.environ)
        paths = demo_paths(root)
        # the daemon's log goes to a file: the terminal shows the URLs and one line per fault
        log_file = root / "daemon.log"
        log_handler = logging.FileHandler(log_file, mode="w", encoding="utf-8")
        log_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.basicConfig(level=logging.INFO, handlers=[log_handler], force=True)
        logging.getLogger("httpx").setLevel(logging.WARNING)
        upgrade(paths.db_url)
        ingest_token = secrets.token_hex(24)
        webhook_secret = secrets.token_hex(24)
        dashboard_token = secrets.token_hex(8)
        environ = {
            **os.environ,
            INGEST_TOKEN_ENV: ingest_token,
            WEBHOOK_SECRET_ENV: webhook_secret,
            DASHBOARD_TOKEN_ENV: dashboard_token,
        }
        dashboard_url = f"http://127.0.0.1:{dashboard_port}"

        child: list[subprocess.Popen[bytes]] = []

        def kill_dashboard() -> None:
            for process in child:
                process.kill()

        with StopSignals(before_exit=kill_dashboard) as signals:
            stop = signals.stop
            inbox = Inbox()
            receiver = HttpService(create_receiver_app(webhook_secret, _clock, inbox), "127.0.0.1", receiver_port)
            daemon = None
            dashboard: subprocess.Popen[bytes] | None = None
            client = httpx.Client()
            servers = [receiver]
            code = 0
            try:
                # the fleet first (the Flink and Kafka servers answer from it), then the servers, whose
                # (possibly picked) ports the daemon's config names
                start = _clock()
                start_ms = int(start.timestamp() * 1000)
                horizon = run_for + timedelta(seconds=30) if run_for is not None else DEFAULT_HORIZON
                fleet = build_fleet(start_ms, int(horizon.total_seconds() * 1000), seed=seed)
                assert fleet.kafka is not None
                flink = HttpService(create_flink_app(fleet.flink, _clock), "127.0.0.1", 0)
                exporter = HttpService(create_exporter_app(fleet.kafka, _clock), "127.0.0.1", 0)
                servers += [flink, exporter]
                for server in servers:
                    server.start()
                config = demo_config(paths, port=port, receiver_port=receiver.port, dashboard_url=f"{dashboard_url}/job",
                                     flink_port=flink.port, exporter_port=exporter.port)
                daemon = build(config, db_url=paths.db_url, environ=environ, clock=_clock)
                daemon.start()
                if not no_dashboard:
                    dashboard = launch(paths.db_url, dashboard_token, "127.0.0.1", dashboard_port, environ,
                                       reports_dir=paths.reports, quiet=True)
                    child.append(dashboard)
                sink = EventSink(paths.event_logs, f"http://127.0.0.1:{daemon.http.port}/api/v1/spark/events",
                                 ingest_token, client)
                tracker = FaultTracker(fleet, start)
                typer.echo(f"tidegauge demo: files in {root}")
                typer.echo(f"  dashboard        {dashboard_url}" + ("" if dashboard else "  (not started)"))
                typer.echo(f"  receiver page    http://127.0.0.1:{receiver.port}/")
                typer.echo(f"  flink rest api   http://127.0.0.1:{flink.port}/jobs/overview  (simulated JobManager)")
                typer.echo(f"  kafka exporter   http://127.0.0.1:{exporter.port}/metrics  (simulated kafka_exporter)")
                typer.echo(f"  metrics          http://127.0.0.1:{daemon.http.port}/metrics")
                typer.echo(f"  health           http://127.0.0.1:{daemon.http.port}/healthz")
                typer.echo(f"  database         {paths.db_url}")
                typer.echo(f"  daemon log       {log_file}")
                typer.echo(f"  report files     {paths.reports}  (every 2 min; also on the dashboard's Reports page)")
                token_file = root / "dashboard-token"
                token_file.touch(mode=0o600)
                token_file.write_text(dashboard_token + "\n", encoding="utf-8")
                typer.echo(f"  dashboard token  in {token_file}  (to silence/expire alerts on the Alerts page)")
                typer.echo("Faults are injected within the first 30 s; each line below says when one is found."
                           + (" Ctrl-C stops." if run_for is None else f" Running for {duration}."))
                last_check = 0.0
                while not stop.is_set():
                    now = _clock()
                    if run_for is not None and now - start >= run_for:
                        break
                    sink.deliver(fleet.step(int(now.timestamp() * 1000)), start_ms)
                    if time.monotonic() - last_check >= 1.0:
                        last_check = time.monotonic()
                        with daemon.store.sessions() as session:
                            alerts = list(load_alerts(session).values())
                        for line in tracker.update(now, alerts, inbox.snapshot()):
                            typer.echo(line)
                    stop.wait(0.25)
                if run_for is not None:
                    missing = tracker.missing()
                    if missing:
                        code = 1
                        for s in missing:
                            typer.echo(f"NOT {'notified' if s.detected_at else 'detected'}: {s.fault.title} in {s.fault.job}")
                    else:
                        typer.echo(f"all {len(tracker.statuses)} faults detected and notified")
            finally:
                # within the stop deadline (monitor.daemon.stopping): the dashboard, the daemon, the servers
                typer.echo("stopping ...")
                if dashboard is not None:
                    dashboard.terminate()
                    try:
                        dashboard.wait(timeout=3)
                    except subprocess.TimeoutExpired:
                        dashboard.kill()
                        dashboard.wait()
                if daemon is not None:
                    daemon.stop(4.0)
                for server in reversed(servers):
                    server.stop(0.5)
                client.close()
        raise typer.Exit(leave(code))
