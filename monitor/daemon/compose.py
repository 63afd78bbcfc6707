"""The daemon's composition root: the one place that reads the environment and the wall clock.

:func:`build` turns a :class:`monitor.config.Config` into running parts, in start order:

1. the store (:func:`monitor.store.open_store`, which refuses an outdated schema), disposed last;
2. the HTTP clients (the notifiers' one, one per HTTP target);
3. the runtime's warm-up: ``/metrics`` shows the stored jobs and alert counts at once after a restart, and
   the config file's silences are stored (once, by a content-derived id);
4. the HTTP server (:mod:`monitor.daemon.web`): ``/metrics``, ``/healthz``, and the Spark listener ingest
   endpoint (:mod:`monitor.daemon.ingest`) when ``server.ingest_token`` is configured;
5. the scheduler (APScheduler ``BackgroundScheduler``): one job per target (``spark_event_logs``:
   :class:`collectors.spark.eventlog.EventLogCollector` with cursors in the database;
   ``spark_prometheus``: :class:`collectors.spark.prometheus.SparkPrometheusCollector`; ``kafka``:
   :class:`collectors.kafka.KafkaLagCollector`; ``kafka_exporters``:
   :class:`collectors.kafka.exporter_scrape.ExporterScrapeCollector`; ``flink_rest``:
   :class:`collectors.flink.FlinkRestCollector` (one pooled client per target, ``concurrency`` jobs at once);
   ``flink_prometheus``: :class:`collectors.flink.prometheus.FlinkPrometheusCollector`) at its
   ``poll_interval``, rule
   evaluation (``evaluation_interval``), the dispatcher (``delivery.interval``), retention clean-up
   (hourly) and one job per ``reports[]`` entry on its cron schedule (APScheduler ``CronTrigger``, UTC),
   which queues the health report in the outbox for the dispatcher to deliver. Every job runs at most one instance at a time and coalesces missed runs; each run reads the
   clock once and passes that ``now`` down (:mod:`monitor.daemon.runtime`).

:func:`run` serves until SIGTERM or SIGINT, then stops the parts in reverse order: the scheduler first,
waiting for running jobs up to :data:`STOP_TIMEOUT_S` (a delivery in flight finishes and is recorded, or its
row stays in the outbox and is sent again, with the same idempotency key, after a restart; a poll still
blocked then is abandoned uncommitted), then the HTTP server, then the store; the process exits within
:data:`monitor.daemon.stopping.STOP_DEADLINE_S` of the first signal, at once on a second
(:class:`monitor.daemon.stopping.StopSignals`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from prometheus_client import CollectorRegistry

from collectors.flink import FlinkRestCollector
from collectors.flink.prometheus import FlinkPrometheusCollector
from collectors.http import abandon, make_client
from collectors.kafka import KafkaLagCollector, KafkaOptions
from collectors.kafka.admin import require_client
from collectors.kafka.exporter_scrape import ExporterScrapeCollector
from collectors.spark.eventlog import COLLECTOR_NAME as EVENTLOG_COLLECTOR
from collectors.spark.eventlog import EventLogCollector
from collectors.spark.prometheus import SparkPrometheusCollector
from monitor import redaction
from monitor.alerts.notification import parse_time
from monitor.alerts.routing import Route
from monitor.alerts.silences import Matcher, MatchOp, Silence
from monitor.config import (
    Config,
    FlinkRestTarget,
    HttpTarget,
    KafkaTarget,
    ReportConfig,
    SecretRef,
    check_cron,
    resolve_secret,
    secret_values,
    storage_options,
)
from monitor.daemon.culprits import CulpritLocator, CulpritTarget
from monitor.daemon.fleet import INGEST_TARGET, Fleet, LeasedResource
from monitor.daemon.ingest import COLLECTOR_NAME as INGEST_COLLECTOR
from monitor.daemon.ingest import create_ingest_app
from monitor.daemon.instance_lock import SqliteRunLock
from monitor.daemon.runtime import Runtime, StoreCursors, Target
from monitor.daemon.service import CallbackService, Service, ServiceGroup
from monitor.daemon.stopping import StopSignals, leave
from monitor.daemon.web import HttpService, create_app
from monitor.errors import ConfigError, InputError
from monitor.metrics.exporter import TidegaugeCollector
from monitor.metrics.latest import LatestSamples
from monitor.model import PollResult
from monitor.notify.alertmanager import AlertmanagerNotifier
from monitor.notify.base import Notifier
from monitor.notify.dispatcher import RetryPolicy
from monitor.notify.slack import SlackNotifier
from monitor.notify.webhook import WebhookNotifier
from monitor.reports.detailed import ReportSettings
from monitor.reports.source import parse_matchers, settings_from_rules
from monitor.store import Store, database_errors, open_store, redact_url
from rules.registry import validate as check_rules

__all__ = [
    "CLEANUP_INTERVAL",
    "Daemon",
    "SchedulerService",
    "build",
    "build_fleet",
    "build_redactor",
    "default_instance_name",
    "report_jobs",
    "run",
    "wall_clock",
]

log = logging.getLogger("tidegauge.daemon")

#: How often retention clean-up runs.
CLEANUP_INTERVAL = timedelta(hours=1)
#: How long a stop may take in total (the scheduler waits for running jobs within it; what still runs after
#: it is abandoned, see :mod:`monitor.daemon.stopping`).
STOP_TIMEOUT_S = 6.0


def wall_clock() -> datetime:
    """The current time, aware UTC (the daemon's only clock read)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class ScheduledJob:
    """A periodic job: ``tick(now)`` every ``interval``, first run ``first_delay`` after start; or, when
    ``cron`` is set (5-field crontab, UTC), at the times it names (``interval``/``first_delay`` unused)."""

    name: str
    interval: timedelta
    tick: Callable[[datetime], object]
    first_delay: timedelta = timedelta(0)
    cron: str | None = None


class SchedulerService:
    """An APScheduler ``BackgroundScheduler`` running :class:`ScheduledJob` s (a :class:`Service`).

    Each run reads ``clock`` once and passes that ``now`` to its job; an exception is logged and the job
    runs again at its next time. *When* jobs run is APScheduler's business and follows its own wall clock
    (it has no clock to inject): the first runs are placed ``first_delay`` after the real start, never
    on ``clock``'s time base, so a test's fake clock far from today cannot make APScheduler replay every
    slot missed since then. ``max_instances=1`` (a slow poll is not started twice) and
    ``coalesce=True`` (missed runs collapse into one).

    Args:
        jobs: the jobs.
        clock: aware-UTC clock.
    """

    def __init__(self, jobs: list[ScheduledJob], clock: Callable[[], datetime]) -> None:
        self._jobs = jobs
        self._clock = clock
        self._scheduler: BackgroundScheduler | None = None
        self._lock = threading.Lock()
        self._failures: dict[str, tuple[int, datetime, str]] = {}  # job -> (consecutive, last at, error)

    @property
    def name(self) -> str:
        """Name for logs."""
        return "scheduler"

    @property
    def running(self) -> bool:
        """Whether the scheduler is running."""
        return self._scheduler is not None and bool(self._scheduler.running)

    def _wrap(self, job: ScheduledJob) -> Callable[[], None]:
        def run_once() -> None:
            now = self._clock()
            try:
                job.tick(now)
            except Exception as exc:
                log.exception("%s failed at %s", job.name, now.isoformat())
                first_line = redaction.redact((str(exc).splitlines() or [""])[0][:300])
                with self._lock:
                    count = self._failures.get(job.name, (0, now, ""))[0] + 1
                    self._failures[job.name] = (
                        count,
                        now,
                        f"{type(exc).__name__}: {first_line}".rstrip(": "),
                    )
            else:
                with self._lock:
                    self._failures.pop(job.name, None)

        return run_once

    def start(self) -> None:
        """Add the jobs and start the scheduler thread."""
        if self._scheduler is not None:
            return
        scheduler = BackgroundScheduler(
            timezone=UTC, job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        )
        start = wall_clock()  # APScheduler's time base (see the class docstring), not ``clock``
        for job in self._jobs:
            if job.cron is not None:
                scheduler.add_job(self._wrap(job), check_cron(job.cron), id=job.name, name=job.name)
                continue
            trigger = IntervalTrigger(seconds=job.interval.total_seconds(), timezone=UTC)
            scheduler.add_job(
                self._wrap(job), trigger, id=job.name, name=job.name, next_run_time=start + job.first_delay
            )
        scheduler.start()
        self._scheduler = scheduler

    def failing(self) -> dict[str, dict[str, Any]]:
        """Jobs whose latest run failed: ``{name: {"consecutive_failures", "last_failure_at", "error"}}``."""
        with self._lock:
            return {
                name: {"consecutive_failures": n, "last_failure_at": at.isoformat(), "error": error}
                for name, (n, at, error) in sorted(self._failures.items())
            }

    def next_run_times(self) -> dict[str, datetime | None]:
        """Each job's next run time (aware UTC; ``None`` when paused); empty when not running."""
        scheduler = self._scheduler
        if scheduler is None:
            return {}
        return {job.id: job.next_run_time for job in scheduler.get_jobs()}

    def stop(self, timeout_s: float) -> None:
        """Stop scheduling and wait up to ``timeout_s`` for running jobs to finish; idempotent."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        waiter = threading.Thread(target=scheduler.shutdown, kwargs={"wait": True}, name="scheduler-stop")
        waiter.start()
        waiter.join(timeout_s)
        if waiter.is_alive():
            log.warning("scheduler jobs still running after %.1fs; exiting without them", timeout_s)


class Daemon:
    """The built daemon: its runtime and its services (see :func:`build`)."""

    def __init__(
        self,
        store: Store,
        runtime: Runtime,
        services: list[Service],
        http: HttpService,
        scheduler: SchedulerService,
    ) -> None:
        self.store = store
        self.runtime = runtime
        self.http = http
        self.scheduler = scheduler
        self._group = ServiceGroup(services, name="tidegauge")

    def start(self) -> None:
        """Start every service in order."""
        self._group.start()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop every service in reverse order (idempotent)."""
        self._group.stop(timeout_s)


def _secret(value: Any, environ: Mapping[str, str], where: str) -> str:
    if isinstance(value, str):
        return value
    return resolve_secret(value, environ, where).get_secret_value()


def build_notifiers(config: Config, environ: Mapping[str, str]) -> list[Notifier]:
    """One notifier per ``receivers[]`` entry, secrets resolved from ``environ`` or files.

    Raises:
        ConfigError: a secret is missing (named by field path, never by value).
    """
    out: list[Notifier] = []
    for i, r in enumerate(config.receivers):
        url = _secret(r.url, environ, f"receivers[{i}].url")
        timeout_s = r.timeout / 1000.0
        if r.type == "webhook":
            assert r.secret is not None  # the config model requires it
            secret = resolve_secret(r.secret, environ, f"receivers[{i}].secret").get_secret_value()
            out.append(WebhookNotifier(r.name, url, secret, config.dashboard_url, timeout_s))
        elif r.type == "slack":
            out.append(SlackNotifier(r.name, url, config.dashboard_url, timeout_s))
        else:
            out.append(AlertmanagerNotifier(r.name, url, config.dashboard_url, timeout_seconds=timeout_s))
    return out


def build_routes(config: Config) -> list[Route]:
    """``routes[]`` as :class:`monitor.alerts.Route` s (label equality matchers); without any route
    every receiver gets every alert (with the default repeat interval)."""
    if not config.routes:
        return [Route(r.name) for r in config.receivers]
    for i, route in enumerate(config.routes):
        if route.repeat_interval <= 0:
            raise ConfigError(f"routes[{i}].repeat_interval: must be longer than 0s")
    return [
        Route(
            receiver=route.receiver,
            matchers=tuple(Matcher(k, MatchOp.EQ, v) for k, v in sorted(route.match.items())),
            repeat_interval=timedelta(milliseconds=route.repeat_interval),
            send_resolved=route.send_resolved,
        )
        for route in config.routes
    ]


def build_silences(config: Config) -> list[Silence]:
    """The config file's ``silences[]`` (label-equality matchers, ``ends_at`` ISO 8601 with offset).

    Each gets a stable id from its content (``config-<hash>``), so a restart does not add it twice; it
    starts when first stored.

    Raises:
        ConfigError: a bad time, label name or an empty matcher set, named by field path.
    """
    out: list[Silence] = []
    for i, sc in enumerate(config.silences):
        where = f"silences[{i}]"
        try:
            ends_at = parse_time(sc.ends_at)
        except ValueError:
            raise ConfigError(
                f"{where}.ends_at: expected ISO 8601 with offset, e.g. 2026-12-01T18:00:00Z"
            ) from None
        identity = json.dumps([sorted(sc.matchers.items()), ends_at.isoformat(), sc.comment])
        try:
            out.append(
                Silence(
                    id="config-" + hashlib.sha256(identity.encode()).hexdigest()[:16],
                    matchers=tuple(Matcher(k, MatchOp.EQ, v) for k, v in sorted(sc.matchers.items())),
                    starts_at=ends_at,
                    ends_at=ends_at,
                    created_by="config",
                    comment=sc.comment,
                )
            )
        except InputError as exc:
            raise ConfigError(f"{where}.matchers: {exc}") from None
    return out


def _reporter(
    runtime: Runtime, report: ReportConfig, settings: ReportSettings, webhook: bool
) -> Callable[[datetime], object]:
    matchers = parse_matchers(report.matchers)
    since = timedelta(milliseconds=report.since)

    def tick(now: datetime) -> object:
        out: list[object] = []
        if report.receiver is not None:  # webhook receivers get the detailed report (JSON + HTML) too
            out.append(runtime.report(report.name, report.receiver, now, matchers,
                                      detail_since=since if webhook else None, settings=settings))
        if report.directory is not None:
            out.append(runtime.write_report(report.name, report.directory, report.formats, since, now,
                                            matchers=matchers, settings=settings))
        return out

    return tick


def report_jobs(config: Config, runtime: Runtime) -> list[ScheduledJob]:
    """One cron :class:`ScheduledJob` per ``reports[]`` entry (named ``report <name>``): the report for its
    receiver (through the outbox) and/or the detailed report files in its directory."""
    settings = settings_from_rules(config.rules.model_dump(by_alias=True, exclude={"overrides"}), config.pipelines)
    kinds = {r.name: r.type for r in config.receivers}
    return [
        ScheduledJob(f"report {r.name}", timedelta(0),
                     _reporter(runtime, r, settings, kinds.get(r.receiver or "") == "webhook"), cron=r.cron)
        for r in config.reports
    ]


def _http_client(
    target: HttpTarget, environ: Mapping[str, str], where: str, clients: list[httpx.Client]
) -> httpx.Client:
    headers = {}
    if target.bearer_token is not None:
        token = resolve_secret(target.bearer_token, environ, f"{where}.bearer_token")
        headers["Authorization"] = f"Bearer {token.get_secret_value()}"
    timeout_s = target.timeout / 1000.0
    client = make_client(connect_timeout_s=timeout_s, read_timeout_s=timeout_s, headers=headers)
    clients.append(client)
    return client


def build_targets(
    config: Config, store: Store, environ: Mapping[str, str], clients: list[httpx.Client]
) -> list[Target]:
    """One :class:`Target` per configured target; HTTP clients made for them are appended to ``clients``
    (the caller closes them).

    Raises:
        ConfigError: a target kind this build has no collector for, duplicate names, a missing secret.
    """
    targets: list[Target] = []
    for i, t in enumerate(config.targets.spark_event_logs):
        cursors = StoreCursors(store.sessions, EVENTLOG_COLLECTOR)
        fs_options = storage_options(t, environ, f"targets.spark_event_logs[{i}]")
        collector = EventLogCollector(
            [t.path], cursors, max_line_bytes=t.max_line_bytes, max_poll_bytes=t.max_poll_bytes, max_ratio=t.max_ratio,
            storage_options=fs_options, store_limits=t.store_limits(),
        )
        targets.append(Target(t.name, collector, timedelta(milliseconds=t.poll_interval), cursors))
    for i, h in enumerate(config.targets.spark_prometheus):
        client = _http_client(h, environ, f"targets.spark_prometheus[{i}]", clients)
        targets.append(
            Target(
                h.name,
                SparkPrometheusCollector(h.url, client, limits=h.read_limits()),
                timedelta(milliseconds=h.poll_interval),
            )
        )
    for i, h in enumerate(config.targets.kafka_exporters):
        client = _http_client(h, environ, f"targets.kafka_exporters[{i}]", clients)
        targets.append(
            Target(
                h.name,
                ExporterScrapeCollector(h.url, client, h.name, h.read_limits()),
                timedelta(milliseconds=h.poll_interval),
            )
        )
    for i, k in enumerate(config.targets.kafka):
        require_client(f"targets.kafka[{i}]")
        options = kafka_options(k, environ, f"targets.kafka[{i}]")
        targets.append(Target(k.name, KafkaLagCollector(options), timedelta(milliseconds=k.poll_interval)))
    for i, f in enumerate(config.targets.flink_rest):
        targets.append(
            Target(f.name, _flink_collector(f, i, environ, clients), timedelta(milliseconds=f.poll_interval))
        )
    for p in config.targets.flink_prometheus:
        client = make_client(connect_timeout_s=p.timeout / 1000.0, read_timeout_s=p.timeout / 1000.0)
        clients.append(client)
        targets.append(
            Target(
                p.name,
                FlinkPrometheusCollector(
                    p.urls, client, cluster=p.name, limits=p.read_limits(), max_parallelism=p.max_parallelism
                ),
                timedelta(milliseconds=p.poll_interval),
            )
        )
    names = [t.name for t in targets]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"targets: names must be unique; repeated: {', '.join(dupes)}")
    return targets


def _flink_collector(
    f: FlinkRestTarget, index: int, environ: Mapping[str, str], clients: list[httpx.Client]
) -> FlinkRestCollector:
    """The collector of ``targets.flink_rest[index]``: auth from secrets, TLS files, one pooled client.

    Raises:
        ConfigError: a secret that does not resolve, or a TLS file that cannot be loaded (named by its
            config path, never with the secret).
    """
    where = f"targets.flink_rest[{index}]"
    headers: dict[str, str] = {}
    auth: tuple[str, str] | None = None
    if f.bearer_token is not None:
        token = resolve_secret(f.bearer_token, environ, f"{where}.bearer_token")
        headers["Authorization"] = f"Bearer {token.get_secret_value()}"
    if f.basic_auth is not None:
        password = resolve_secret(f.basic_auth.password, environ, f"{where}.basic_auth.password")
        auth = (f.basic_auth.username, password.get_secret_value())
    try:
        client = make_client(
            connect_timeout_s=f.timeout / 1000.0,
            read_timeout_s=f.timeout / 1000.0,
            headers=headers,
            auth=auth,
            tls_verify=f.tls_verify,
            ca_file=str(f.tls_ca_file) if f.tls_ca_file else None,
            cert_file=str(f.tls_cert_file) if f.tls_cert_file else None,
            key_file=str(f.tls_key_file) if f.tls_key_file else None,
            max_connections=f.concurrency,
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{where}: cannot load the TLS files: {exc}") from None
    clients.append(client)
    return FlinkRestCollector(
        f.url,
        client,
        concurrency=f.concurrency,
        cluster=f.name,
        limits=f.read_limits(),
        max_jobs=f.max_jobs,
        max_parallelism=f.max_parallelism,
    )


def build_culprits(config: Config, environ: Mapping[str, str]) -> CulpritLocator | None:
    """The locator of the records behind Spark and Flink future-timestamp jumps: one
    :class:`~monitor.daemon.culprits.CulpritTarget` per ``targets.kafka[]`` with ``locate_event_time``
    (its connection and security settings, its ``timeout`` as the request timeout); ``None`` without one.

    Raises:
        ConfigError: a secret reference does not resolve.
    """
    found: list[CulpritTarget] = []
    for i, k in enumerate(config.targets.kafka):
        spec = k.locate_event_time
        if spec is None:
            continue
        options = dataclasses.replace(
            kafka_options(k, environ, f"targets.kafka[{i}]"), request_timeout_s=spec.timeout / 1000.0
        )
        found.append(CulpritTarget(options, frozenset(spec.jobs), spec.event_time_field, spec.max_bytes))
    return CulpritLocator(found) if found else None


def kafka_options(target: KafkaTarget, environ: Mapping[str, str], where: str) -> KafkaOptions:
    """The collector options of one ``targets.kafka[]`` entry, secrets resolved from ``environ``.

    Raises:
        ConfigError: a secret reference does not resolve (the message names ``where`` and the field).
    """
    security: dict[str, str] = {"security.protocol": target.security_protocol}
    secrets: dict[str, str] = {}
    if target.sasl_mechanism is not None:
        security["sasl.mechanism"] = target.sasl_mechanism
    if target.sasl_username is not None:
        security["sasl.username"] = target.sasl_username
    if target.sasl_password is not None:
        secrets["sasl.password"] = _secret(target.sasl_password, environ, f"{where}.sasl_password")
    for key, path in (
        ("ssl.ca.location", target.ssl_ca_location),
        ("ssl.certificate.location", target.ssl_certificate_location),
        ("ssl.key.location", target.ssl_key_location),
    ):
        if path is not None:
            security[key] = str(path)
    if target.ssl_key_password is not None:
        secrets["ssl.key.password"] = _secret(target.ssl_key_password, environ, f"{where}.ssl_key_password")
    return KafkaOptions(
        cluster=target.name,
        bootstrap_servers=target.bootstrap_servers,
        groups=tuple(target.groups),
        include=tuple(target.include),
        exclude=tuple(target.exclude),
        lag_seconds=target.lag_seconds,
        max_record_fetches=target.max_record_fetches,
        auto_offset_reset=target.auto_offset_reset,
        request_timeout_s=target.timeout / 1000.0,
        concurrency=target.concurrency,
        security=security,
        secrets=secrets,
    )


def build_redactor(config: Config, db_url: str | None, environ: Mapping[str, str]) -> redaction.Redactor:
    """The process's redactor: every secret of ``config`` that resolves in ``environ`` and every
    configured URL (:func:`monitor.config.secret_values`), plus ``--db``'s URL."""
    secrets, urls = secret_values(config, environ)
    if db_url is not None:
        urls.append(db_url)
    return redaction.Redactor(secrets, urls)


def _poller(runtime: Runtime, target: Target, fleet: Fleet) -> Callable[[datetime], object]:
    guard = fleet.poll_guard(target.name)

    def tick(now: datetime) -> object:
        with fleet.polling(target.name, now) as held:
            if not held:  # another instance of the fleet polls it
                return None
            return runtime.poll(target, now, guard)

    return tick


def default_instance_name() -> str:
    """``host:pid``: the instance name when ``--instance`` is not given."""
    return f"{socket.gethostname()}:{os.getpid()}"


def build_fleet(
    config: Config, store: Store, targets: list[Target], name: str, *, ingest: bool
) -> Fleet:
    """This instance's :class:`Fleet`: the configured targets, the ``ingest`` lease (the listener's jobs,
    and those of unknown source) and the receivers as leases."""
    resources = [LeasedResource(t.name, t.source.name, t.interval) for t in targets]
    # always leased: its holder also evaluates the jobs whose source is unknown (stored by `scan --db`,
    # by the demo's seeding, or before migration 0006)
    resources.append(LeasedResource(INGEST_TARGET, INGEST_COLLECTOR if ingest else None, timedelta(seconds=5)))
    interval = timedelta(milliseconds=config.delivery.interval)
    receivers = [LeasedResource(r.name, None, interval) for r in config.receivers]
    return Fleet(store.sessions, name, socket.gethostname(), os.getpid(), resources, receivers)


def build(
    config: Config,
    *,
    db_url: str | None,
    environ: Mapping[str, str],
    clock: Callable[[], datetime] = wall_clock,
    redactor: redaction.Redactor | None = None,
    instance: str | None = None,
) -> Daemon:
    """Wire the daemon's parts (nothing runs until :meth:`Daemon.start`).

    Args:
        config: the validated configuration.
        db_url: database URL (``None``: ``config.database``, else the per-user default of ``environ``).
        environ: the environment (secrets, default database location).
        clock: aware-UTC clock.
        redactor: what stored errors, ``/healthz`` and delivery logs pass through (default:
            :func:`build_redactor`).
        instance: this instance's name in the fleet (default :func:`default_instance_name`). On SQLite
            only one instance may run on a file (:class:`SqliteRunLock`).

    Raises:
        SchemaOutdatedError: the database schema is not current (run ``tidegauge db upgrade``).
        ConfigError: a secret is missing, an unsupported target kind, an invalid URL.
    """
    url: str | None
    if db_url is not None:
        url = db_url
    elif isinstance(config.database, SecretRef):
        url = resolve_secret(config.database, environ, "database").get_secret_value()
    else:
        url = config.database
    redactor = redactor or build_redactor(config, db_url, environ)
    notifiers = build_notifiers(config, environ)
    routes = build_routes(config)
    silences = build_silences(config)
    check_rules(config.rules)
    token = None
    if config.server.ingest_token is not None:
        token = resolve_secret(config.server.ingest_token, environ, "server.ingest_token").get_secret_value()
    store = open_store(url, environ=environ)
    log.info("database %s", redactor.url(redact_url(store.engine.url)))
    clients: list[httpx.Client] = []
    try:
        targets = build_targets(config, store, environ, clients)
    except BaseException:
        for c in clients:
            c.close()
        store.dispose()
        raise
    client = httpx.Client(follow_redirects=False)
    delivery = config.delivery
    fleet = build_fleet(config, store, targets, instance or default_instance_name(), ingest=token is not None)
    runtime = Runtime(
        sessions=store.sessions,
        targets=targets,
        latest=LatestSamples(),
        rules_config=config.rules,
        pipelines=config.pipelines,
        notifiers=notifiers,
        routes=routes,
        http_client=client,
        retention=timedelta(milliseconds=config.retention),
        history_horizon=None
        if config.history_horizon is None
        else timedelta(milliseconds=config.history_horizon),
        retry_policy=RetryPolicy(
            initial_backoff=timedelta(milliseconds=delivery.initial_backoff),
            max_backoff=timedelta(milliseconds=delivery.max_backoff),
            max_age=timedelta(milliseconds=delivery.max_age),
        ),
        redactor=redactor,
        culprits=build_culprits(config, environ),
        fleet=fleet,
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        TidegaugeCollector(
            runtime.latest,
            clock,
            alerts=runtime.alert_counts,
            collectors=runtime.collector_stats,
            deliveries=runtime.delivery_stats,
            held=lambda: {fleet.name: len(fleet.held_targets())},
        )
    )
    jobs = [ScheduledJob("fleet", fleet.interval, fleet.tick, first_delay=fleet.interval)]
    jobs += [ScheduledJob(f"poll {t.name}", t.interval, _poller(runtime, t, fleet)) for t in targets]
    jobs.append(
        ScheduledJob("evaluate", timedelta(milliseconds=config.evaluation_interval), runtime.evaluate)
    )
    jobs.append(ScheduledJob("dispatch", timedelta(milliseconds=delivery.interval), runtime.dispatch))
    jobs.append(
        ScheduledJob("retention", CLEANUP_INTERVAL, runtime.clean_up, first_delay=timedelta(minutes=1))
    )
    jobs.extend(report_jobs(config, runtime))
    scheduler = SchedulerService(jobs, clock)

    def health() -> tuple[bool, dict[str, Any]]:
        ok, body = runtime.health()
        held = fleet.held_targets()
        body["instance"] = fleet.name
        body["targets"] = [
            {**t, "held_since": held[t["name"]].isoformat()} for t in body.get("targets", []) if t["name"] in held
        ]
        body["scheduler"] = "running" if scheduler.running else "stopped"
        failing = scheduler.failing()
        if failing:
            body["failing_jobs"] = failing
        # evaluation or delivery failing again and again means alerts are not raised or not sent
        stuck = [
            n for n in ("evaluate", "dispatch") if failing.get(n, {}).get("consecutive_failures", 0) >= 3
        ]
        if stuck:
            body["degraded"] = stuck + list(body.get("degraded", []))
        return ok and not stuck, redactor.redact_json(body)

    ingest = None
    if token is not None:

        def sink(result: PollResult) -> None:
            runtime.ingest(result, INGEST_COLLECTOR)

        ingest = create_ingest_app(
            token=token, sink=sink, clock=clock, max_body_bytes=config.server.max_body_bytes
        )
    http = HttpService(create_app(registry, health, ingest), config.server.host, config.server.port)

    def close_clients() -> None:
        client.close()
        for c in clients:
            c.close()

    def warm_up() -> None:
        with database_errors(store.engine.url):
            _warm_up()

    def _warm_up() -> None:
        held = fleet.tick(clock())  # hold this instance's share before the first polls
        log.info("instance %s: holds %d target(s), %d receiver(s)", fleet.name, held["target"], held["receiver"])
        loaded = runtime.seed_latest()
        runtime.load_alert_counts()
        runtime.refresh_outbox_backlog()
        if silences:
            log.info("%d silence(s) from the config file added", runtime.sync_silences(silences, clock()))
        log.info("loaded %d recent samples from the store", loaded)

    def abandon_reads() -> None:  # stopped first: a poll in flight ends now, not at its deadline
        for c in clients:
            abandon(c)

    def leave() -> None:
        try:
            with database_errors(store.engine.url):
                fleet.leave(clock())
        except Exception as exc:  # the leases run out on their own
            log.warning("instance %s could not release its leases (%s); they expire on their own", fleet.name, exc)

    services: list[Service] = [CallbackService("store", stop=store.dispose)]
    database = store.engine.url.database
    if store.engine.url.get_backend_name() == "sqlite" and database and database != ":memory:":
        services.append(SqliteRunLock(Path(database)))
    services += [
        CallbackService("http clients", stop=close_clients),
        CallbackService("warm-up", start=warm_up),
        CallbackService("fleet", stop=leave),
        http,
        scheduler,
        CallbackService("pull reads in flight", stop=abandon_reads),
    ]
    return Daemon(store, runtime, services, http, scheduler)


def run(
    config: Config, *, db_url: str | None, stop_timeout_s: float = STOP_TIMEOUT_S, instance: str | None = None
) -> int:
    """Build and start the daemon with ``os.environ`` and the wall clock; serve until SIGTERM/SIGINT.

    Stopping follows :class:`monitor.daemon.stopping.StopSignals`: the services stop in reverse within
    ``stop_timeout_s``; a poll still running then is abandoned (its transaction was not committed), the
    process exits at the latest :data:`~monitor.daemon.stopping.STOP_DEADLINE_S` after the first signal, at
    once on a second one, also while it is still starting.

    Returns:
        0 after a stop.

    Raises:
        SchemaOutdatedError, ConfigError: as :func:`build`.
    """
    with StopSignals() as signals:
        redactor = build_redactor(config, db_url, os.environ)
        redaction.install(redactor)
        daemon = build(config, db_url=db_url, environ=os.environ, redactor=redactor, instance=instance)
        if not signals.stop.is_set():
            daemon.start()
            log.info(
                "tidegauge running; /metrics and /healthz on http://%s:%d", config.server.host, daemon.http.port
            )
        try:
            while not signals.wait(1.0):
                pass
        finally:
            daemon.stop(stop_timeout_s)
    log.info("stopped")
    return leave(0)
