"""The YAML configuration of ``tidegauge run`` (validated with pydantic).

One file holds targets, rules, receivers, routes, silences and reports::

    database: sqlite:////var/lib/tidegauge/tidegauge.db   # optional; default per-user SQLite
    dashboard_url: http://localhost:8501
    server: {host: 127.0.0.1, port: 8321, ingest_token: {env: TIDEGAUGE_INGEST_TOKEN}}
    targets:
      spark_event_logs: [{name: prod-logs, path: /var/log/spark-events, poll_interval: 30s}]
      spark_prometheus: [{name: driver, url: http://driver:4040/metrics/prometheus}]
      flink_rest: [{name: flink, url: http://jobmanager:8081}]
    rules:
      watermark_stall: {for: 10m, severity: warning}
      future_timestamp: {skew: 1h}
      overrides: [{match: {job_name: clicks}, rule: watermark_stall, params: {for: 30m}}]
      pipeline_freshness: {target: 5m}
    pipelines:   # what the jobs' own reports do not show (Spark's Kafka sink names no topic)
      - {name: clicks, jobs: [{job: enrich, writes: [clicks-enriched]}, {job: sessionize}]}
    receivers:
      - {name: ops, type: webhook, url: https://hooks.example/tg, secret: {file: /run/secrets/tg}}
      - {name: slack, type: slack, url: {env: SLACK_WEBHOOK_URL}}
      - {name: am, type: alertmanager, url: http://alertmanager:9093}
    routes: [{receiver: ops, match: {severity: critical}, repeat_interval: 4h}]
    silences: [{matchers: {job_id: q-backfill}, ends_at: "2026-12-31T00:00:00Z", comment: backfill}]
    reports: [{name: daily, cron: "0 8 * * *", receiver: ops}]

Routes group notifications per job (``group_by`` must be ``[engine, job_id]``, the default) and send a
group's first notification at once (``group_wait`` must be ``0s``): other values are rejected rather than
silently ignored. Config ``silences`` match by label equality only (``{label: value}``); the other matcher
operators (``!=``, ``=~``, ``!~``) are available through ``tidegauge silence add``. ``reports`` are cron
expressions (5 fields, UTC, :meth:`apscheduler.triggers.cron.CronTrigger.from_crontab`) and go to a
``webhook`` or ``slack`` receiver (see :mod:`monitor.reports.scheduled`).

``database`` is a SQLAlchemy URL without a password (``sqlite:///...``, ``postgresql+psycopg://user@host/db``
with the password from ``~/.pgpass`` or ``PGPASSWORD``), or, for a URL with credentials, a secret reference
``database: {env: TIDEGAUGE_DATABASE_URL}`` / ``{file: /run/secrets/db-url}`` (see :func:`database_url`).
``server.max_body_bytes`` defaults to :data:`DEFAULT_MAX_BODY_BYTES`, as ``tidegauge serve``.

Secrets (tokens, webhook secrets, Slack URLs, database URLs with a password) are never written in the file: they are references
``{env: NAME}`` or ``{file: PATH}`` resolved by :func:`resolve_secret` with the environment passed in by
the composition root; their values are :class:`pydantic.SecretStr` and never appear in ``repr``, errors or
logs. :func:`load_config` raises :class:`monitor.errors.ConfigError` naming the file, the path to the
field (``receivers[1].url``) and what is allowed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from apscheduler.triggers.cron import CronTrigger
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from collectors import http as pull_http
from collectors.flink.responses import DEFAULT_MAX_JOBS, DEFAULT_MAX_PARALLELISM, FLINK_MAX_PARALLELISM
from collectors.kafka.culprit import parse_field_path
from collectors.spark.eventlog import DEFAULT_MAX_POLL_BYTES, DEFAULT_MAX_RATIO
from collectors.spark.lines import DEFAULT_MAX_LINE_BYTES
from collectors.storage import (
    DEFAULT_MAX_RESPONSE_BYTES,
    SCHEMES,
    StorageError,
    StorageReason,
    is_url,
    require_library,
)
from monitor.durations import parse_duration_ms
from monitor.errors import ConfigError
from rules.config import RulesConfig
from rules.pipeline import PipelineConfig, parse_pipelines

#: Default body limit: 4 MiB (a progress object is 1-50 KB; the listener sends at most ~1 MB per POST).
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


__all__ = [
    "Config",
    "DashboardConfig",
    "DeliveryConfig",
    "DurationMs",
    "HttpReadBounds",
    "ReadDeadlines",
    "Receiver",
    "ReportConfig",
    "Route",
    "SecretRef",
    "check_cron",
    "check_database_url",
    "database_url",
    "load_config",
    "load_document",
    "parse_config",
    "reference_problems",
    "resolve_secret",
    "secret_refs",
    "secret_values",
    "storage_options",
]


def _duration(value: Any) -> Any:
    if isinstance(value, str):
        return parse_duration_ms(value, what="duration")
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30s, 10m, 1h")
    if isinstance(value, int | float):
        raise ValueError(f"expected a duration with a unit (e.g. {value}s), got a bare number")
    return value


DurationMs = Annotated[int, BeforeValidator(_duration), Field(ge=0)]
"""A duration written ``30s``/``10m``/``1h`` in YAML, held as integer milliseconds."""

PositiveDurationMs = Annotated[int, BeforeValidator(_duration), Field(gt=0)]
"""A :data:`DurationMs` that must be above zero (poll intervals)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SecretRef(_Model):
    """Where a secret comes from: exactly one of ``env`` (variable name) or ``file`` (path)."""

    env: str | None = None
    file: Path | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of 'env' or 'file' (secrets are never written in the config)")
        return self


#: A secret file is a token, password or URL on its first line: anything larger is not one.
MAX_SECRET_FILE_BYTES = 64 * 1024
#: Deepest YAML nesting read (PyYAML's composer recurses once per level; a config nests about 5 levels).
MAX_YAML_DEPTH = 50


def _read_secret_file(path: Path, where: str) -> str:
    """The stripped text of a secret file: a regular file of at most :data:`MAX_SECRET_FILE_BYTES`.

    Opened without blocking and checked on the open descriptor, so a FIFO or terminal never hangs the
    daemon and a device such as ``/dev/zero`` is never read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read secret file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ConfigError(f"{where}: secret file {path} is not a regular file (a device, FIFO or directory)")
        try:
            data = handle.read(MAX_SECRET_FILE_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read secret file {path}: {exc.strerror}") from None
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise ConfigError(f"{where}: secret file {path} is larger than {MAX_SECRET_FILE_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: secret file {path} is not UTF-8 text (byte {exc.start})") from None


def resolve_secret(ref: SecretRef, environ: Mapping[str, str], where: str) -> SecretStr:
    """Read a secret from the environment mapping or a file.

    Raises:
        ConfigError: the variable is unset/empty, or the file is unreadable, not a regular file
            (``/dev/stdin``, ``/dev/zero``, a FIFO), larger than :data:`MAX_SECRET_FILE_BYTES` or not UTF-8;
            the message names ``where`` and the variable/file, never the value.
    """
    if ref.env is not None:
        value = environ.get(ref.env)
        if not value:
            raise ConfigError(f"{where}: environment variable {ref.env} is not set")
        return SecretStr(value)
    assert ref.file is not None
    value = _read_secret_file(ref.file, where)
    if not value:
        raise ConfigError(f"{where}: secret file {ref.file} is empty")
    return SecretStr(value)


def check_database_url(text: str, *, allow_password: bool) -> None:
    """Check ``text`` parses as a SQLAlchemy URL (:func:`sqlalchemy.engine.make_url`).

    Raises:
        ValueError: not a URL, an unknown dialect, or it holds a password and ``allow_password`` is false.
            The message never repeats the text (it may hold a password).
    """
    example = "e.g. sqlite:////var/lib/tidegauge/tidegauge.db or postgresql+psycopg://user@host/dbname"
    try:
        url = make_url(text)
    except ArgumentError:
        raise ValueError(f"not a database URL: expected {example}") from None
    try:
        url.get_dialect()  # imports SQLAlchemy's dialect module only, not the DBAPI driver
    except NoSuchModuleError:
        raise ValueError(f"unknown database dialect {url.drivername!r}: expected {example}") from None
    if not allow_password and (url.password is not None or "password" in url.query):
        raise ValueError(
            "the URL holds a password, which must not be written in the config: write "
            "database: {env: NAME} or database: {file: PATH} holding the URL"
        )


class ServerConfig(_Model):
    """The daemon's HTTP server: ``/metrics``, ``/healthz`` and the Spark listener ingest endpoint."""

    host: str = "127.0.0.1"
    port: int = Field(8321, ge=0, le=65535)
    ingest_token: SecretRef | None = None
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)


#: storage_options keys whose values are credentials: they must be ``{env: ...}``/``{file: ...}`` references.
SECRET_STORAGE_OPTIONS = frozenset({
    "key", "secret", "token", "session_token", "aws_secret_access_key", "aws_session_token", "password",
    "account_key", "sas_token", "connection_string", "client_secret", "credential", "credentials",
})

#: One ``storage_options`` value. Tried left to right, so ``{env: ...}`` and ``{file: ...}`` are always read as
#: a :class:`SecretRef` (a smart union would take ``{file: PATH}`` as a plain mapping, a ``Path`` being no
#: exact match for a string), YAML's scalars keep their types, and any other mapping (``client_kwargs``, ``config_kwargs``) stays a mapping.
StorageOption = Annotated[
    StrictStr | StrictBool | StrictInt | StrictFloat | SecretRef | dict[str, Any], Field(union_mode="left_to_right")
]


class ReadDeadlines(_Model):
    """The deadlines of a target's reads (:class:`collectors.http.ReadLimits`): ``request_deadline`` for one
    request in all (connect to last byte; default 30s) and ``poll_deadline`` for all requests of one poll
    (default 60s). Past either, the poll's error is ``deadline_exceeded``."""

    request_deadline: PositiveDurationMs = int(pull_http.DEFAULT_REQUEST_DEADLINE_S * 1000)
    poll_deadline: PositiveDurationMs = int(pull_http.DEFAULT_POLL_DEADLINE_S * 1000)


class SparkEventLogTarget(ReadDeadlines):
    """A Spark event-log file or directory to tail: a local path or a URL (``s3://``, ``s3a://``, ``gs://``,
    ``abfs[s]://``, ``hdfs://``, ``webhdfs://``, ``file://``; :mod:`collectors.storage`).

    ``storage_options`` are passed to the store's fsspec file system (s3fs: ``endpoint_url``, ``key``,
    ``secret``, ``token``, ``client_kwargs``...; gcsfs: ``project``, ``token``; adlfs: ``account_name``,
    ``account_key``, ``sas_token``...); the credentials among them (:data:`SECRET_STORAGE_OPTIONS`) must be
    ``{env: NAME}`` or ``{file: PATH}`` references. Without them each library's default chain is used.

    ``max_line_bytes`` (longest line read), ``max_poll_bytes`` (decompressed bytes a poll reads) and
    ``max_ratio`` (a file decompressing to more than this many times its stored size is a bomb) are the
    :class:`collectors.spark.eventlog.EventLogCollector` limits of the same names.

    On a remote store, ``request_deadline`` and ``poll_deadline`` (:class:`ReadDeadlines`) bound each request
    and each poll, and ``max_response_bytes`` (default 32 MiB) each answer of the store (an S3 listing page,
    a ranged GET): :mod:`collectors.storage`.
    """

    name: str
    path: str
    poll_interval: PositiveDurationMs = 30_000
    storage_options: dict[str, StorageOption] = Field(default_factory=dict)
    max_response_bytes: int = Field(DEFAULT_MAX_RESPONSE_BYTES, gt=0)
    max_line_bytes: int = Field(DEFAULT_MAX_LINE_BYTES, gt=0)
    max_poll_bytes: int = Field(DEFAULT_MAX_POLL_BYTES, gt=0)
    max_ratio: int = Field(DEFAULT_MAX_RATIO, gt=1)

    def store_limits(self) -> pull_http.ReadLimits:
        """The bounds of this target's store reads (:func:`collectors.storage.open_storage`)."""
        return pull_http.ReadLimits(
            max_body_bytes=self.max_response_bytes,
            request_deadline_s=self.request_deadline / 1000.0,
            poll_deadline_s=self.poll_deadline / 1000.0,
        )

    @field_validator("path")
    @classmethod
    def _location(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must be a path or a URL")
        if is_url(v):
            try:
                _check_url(v)
            except StorageError as exc:
                raise ValueError(str(exc)) from None
        return v

    @field_validator("storage_options")
    @classmethod
    def _secrets_are_refs(cls, v: dict[str, StorageOption]) -> dict[str, StorageOption]:
        for key, value in v.items():
            if key.lower() in SECRET_STORAGE_OPTIONS and not isinstance(value, SecretRef):
                raise ValueError(f"{key}: a secret is never written in the config: write {{env: NAME}} or {{file: PATH}}")
        return v


def _check_url(url: str) -> None:
    """A URL's scheme is known, it holds no credentials and its store's library is installed (the message
    names the extra to install)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise StorageError(f"unsupported URL scheme {scheme}:// (known: {known})", StorageReason.INVALID)
    parts = urlsplit(url)
    if parts.password is not None or parts.query:
        raise StorageError(
            "credentials and query strings are not read from the URL: use storage_options with {env:}/{file:} references",
            StorageReason.INVALID,
        )
    require_library(url)


def storage_options(target: SparkEventLogTarget, environ: Mapping[str, str], where: str) -> dict[str, Any]:
    """``target.storage_options`` with every secret reference resolved (for the fsspec file system).

    Raises:
        ConfigError: a reference does not resolve (names ``where`` and the option, never a value).
    """
    out: dict[str, Any] = {}
    for key, value in target.storage_options.items():
        if isinstance(value, SecretRef):
            out[key] = resolve_secret(value, environ, f"{where}.storage_options.{key}").get_secret_value()
        else:
            out[key] = value
    return out


class HttpReadBounds(ReadDeadlines):
    """The bounds of every read of an HTTP target (:class:`collectors.http.ReadLimits`): ``timeout`` per
    connect/read, ``max_body_bytes`` on the wire (default 8 MiB), ``max_decompressed_bytes`` of a gzip or
    deflate body (default 16 MiB), and the deadlines of :class:`ReadDeadlines`."""

    timeout: DurationMs = 5_000
    max_body_bytes: int = Field(pull_http.DEFAULT_MAX_BODY_BYTES, gt=0)
    max_decompressed_bytes: int = Field(pull_http.DEFAULT_MAX_DECOMPRESSED_BYTES, gt=0)

    def read_limits(self) -> pull_http.ReadLimits:
        """These bounds as the collectors take them."""
        return pull_http.ReadLimits(
            max_body_bytes=self.max_body_bytes,
            max_decompressed_bytes=self.max_decompressed_bytes,
            request_deadline_s=self.request_deadline / 1000.0,
            poll_deadline_s=self.poll_deadline / 1000.0,
        )


class HttpTarget(HttpReadBounds):
    """An HTTP target (Spark driver PrometheusServlet, Flink REST, a Kafka lag exporter's ``/metrics``)."""

    name: str
    url: str
    poll_interval: PositiveDurationMs = 15_000
    bearer_token: SecretRef | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")


class BasicAuth(_Model):
    """HTTP basic authentication (a JobManager behind an authenticating proxy); the password is a secret."""

    username: str
    password: SecretRef


class FlinkRestTarget(HttpTarget):
    """A Flink JobManager's REST API (``collectors.flink.FlinkRestCollector``).

    Besides :class:`HttpTarget`'s keys: ``basic_auth`` (or ``bearer_token``, not both) for a proxy in
    front of Flink; TLS options ``tls_ca_file`` (PEM bundle to verify the server), ``tls_cert_file`` /
    ``tls_key_file`` (client certificate, Flink's ``security.ssl.rest.authentication-enabled``) and
    ``tls_verify`` (default true); ``concurrency``: jobs polled at once (default 8); ``max_jobs``: jobs
    polled per poll (default 1,000; of more, the running and newest are polled and an error entry says how
    many were left out); ``max_parallelism``: a vertex of more subtasks is an error entry for its job, not
    read (default 4,096; at most 32,768, Flink's own bound).
    """

    basic_auth: BasicAuth | None = None
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_verify: bool = True
    concurrency: int = Field(8, ge=1, le=256)
    max_jobs: int = Field(DEFAULT_MAX_JOBS, ge=1, le=100_000)
    max_parallelism: int = Field(DEFAULT_MAX_PARALLELISM, ge=1, le=FLINK_MAX_PARALLELISM)

    @model_validator(mode="after")
    def _one_auth(self) -> FlinkRestTarget:
        if self.basic_auth is not None and self.bearer_token is not None:
            raise ValueError("give at most one of basic_auth and bearer_token")
        if self.tls_key_file is not None and self.tls_cert_file is None:
            raise ValueError("tls_key_file needs tls_cert_file")
        return self


class FlinkPrometheusTarget(HttpReadBounds):
    """Flink's Prometheus reporters of one cluster (``collectors.flink.prometheus.FlinkPrometheusCollector``):
    the job manager's and every task manager's ``/metrics`` URL, scraped together (one poll deadline).
    ``max_parallelism``: a task whose ``subtask_index`` reaches it is an error entry, not read (default 4,096;
    at most 32,768)."""

    name: str
    urls: list[str] = Field(min_length=1)
    poll_interval: PositiveDurationMs = 15_000
    max_parallelism: int = Field(DEFAULT_MAX_PARALLELISM, ge=1, le=FLINK_MAX_PARALLELISM)

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"must start with http:// or https://: {url!r}")
        return v


class LocateEventTime(_Model):
    """Where a Spark query's or Flink job's future-timestamp jump names the Kafka record that caused it (the
    culprit record, :mod:`collectors.kafka.culprit`): read in this cluster, read-only, when the daemon evaluates.

    ``jobs``: Spark query or Flink job names or ids whose Kafka sources are in this cluster (empty: every job);
    ``event_time_field``: the JSON path of the event time in the record value (``payload.ts``; default the
    record timestamp); ``max_bytes``: keys and values read at most per jump (default 1 MiB); ``timeout``:
    bound of each request and of the read (default 5s).
    """

    jobs: list[str] = Field(default_factory=list)
    event_time_field: str | None = None
    max_bytes: int = Field(1 << 20, gt=0)
    timeout: PositiveDurationMs = 5_000

    @field_validator("event_time_field")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None:
            parse_field_path(v)  # its ValueError names the path and the expected form
        return v


class KafkaTarget(_Model):
    """A Kafka cluster whose consumer groups' lag is evaluated (:mod:`collectors.kafka`).

    ``groups`` lists exact group ids; ``include``/``exclude`` are regular expressions matched against the
    whole group id; with neither ``groups`` nor ``include`` every group the cluster lists is watched.
    ``lag_seconds``: ``interpolated`` (from sampled log-end offsets, kafka-lag-exporter's method, no
    extrapolation), ``exact`` (the timestamp of the record at the committed offset; at most
    ``max_record_fetches`` fetches per poll) or ``none``. Security settings are librdkafka's
    (``security_protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; ``sasl_mechanism``: PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512); ``sasl_password`` and ``ssl_key_password`` are secret references.
    ``auto_offset_reset`` (``earliest``/``latest``, optional): the watched groups' consumer setting, which
    the broker does not publish; with it, a partition a live member owns but never committed is reported
    with the one reading that applies instead of both (:class:`collectors.kafka.lag.Uncommitted`).
    """

    name: str
    bootstrap_servers: str
    groups: list[str] = Field(default_factory=list)
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    poll_interval: PositiveDurationMs = 30_000
    timeout: PositiveDurationMs = 10_000
    concurrency: int = Field(16, ge=1, le=256)
    lag_seconds: Literal["interpolated", "exact", "none"] = "interpolated"
    max_record_fetches: int = Field(100, ge=0)
    auto_offset_reset: Literal["earliest", "latest"] | None = None
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretRef | None = None
    ssl_ca_location: Path | None = None
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None
    ssl_key_password: SecretRef | None = None
    locate_event_time: LocateEventTime | None = None

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, v: str) -> str:
        for part in v.split(","):
            host, sep, port = part.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"expected host:port[,host:port...], got {part.strip()!r}")
        return v

    @field_validator("include", "exclude")
    @classmethod
    def _regexes(cls, v: list[str]) -> list[str]:
        for pattern in v:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _sasl(self) -> KafkaTarget:
        if self.security_protocol.startswith("SASL") and self.sasl_mechanism is None:
            raise ValueError(f"security_protocol {self.security_protocol} needs sasl_mechanism")
        if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and (
            self.sasl_username is None or self.sasl_password is None
        ):
            raise ValueError(f"sasl_mechanism {self.sasl_mechanism} needs sasl_username and sasl_password")
        return self


class Targets(_Model):
    """Everything tidegauge polls."""

    spark_event_logs: list[SparkEventLogTarget] = Field(default_factory=list)
    spark_prometheus: list[HttpTarget] = Field(default_factory=list)
    flink_rest: list[FlinkRestTarget] = Field(default_factory=list)
    flink_prometheus: list[FlinkPrometheusTarget] = Field(default_factory=list)
    kafka: list[KafkaTarget] = Field(default_factory=list)
    kafka_exporters: list[HttpTarget] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> Targets:
        names = [
            t.name
            for group in (
                self.spark_event_logs,
                self.spark_prometheus,
                self.flink_rest,
                self.flink_prometheus,
                self.kafka,
                self.kafka_exporters,
            )
            for t in group
        ]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(
                f"target names must be unique (they label metrics and alerts); repeated: {', '.join(dupes)}"
            )
        return self


Severity = Literal["info", "warning", "critical"]


class Receiver(_Model):
    """A notification receiver.

    ``webhook``: ``url`` (plain, or a secret ref) and an HMAC ``secret``; ``slack``: an incoming-webhook
    ``url`` which is itself a secret, so it must be a ref; ``alertmanager``: the Alertmanager base ``url``.
    """

    name: str
    type: Literal["webhook", "slack", "alertmanager"]
    url: str | SecretRef
    secret: SecretRef | None = None
    timeout: DurationMs = 10_000

    @model_validator(mode="after")
    def _check(self) -> Receiver:
        if self.type == "slack" and isinstance(self.url, str):
            raise ValueError("a Slack webhook URL is a secret: write url: {env: NAME} or url: {file: PATH}")
        if self.type == "webhook" and self.secret is None:
            raise ValueError("a webhook receiver needs 'secret' (an {env:} or {file:} ref) to sign payloads")
        if isinstance(self.url, str) and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return self


DEFAULT_GROUP_BY = ("engine", "job_id")


class Route(_Model):
    """Which alerts go to which receiver (Alertmanager-style): label equality ``match``.

    The dispatcher groups notifications per job and sends a group at once: ``group_by`` other than
    ``[engine, job_id]`` and ``group_wait`` other than ``0s`` are rejected (not silently ignored).
    """

    receiver: str
    match: dict[str, str] = Field(default_factory=dict)
    group_by: list[str] = Field(default_factory=lambda: list(DEFAULT_GROUP_BY))
    group_wait: DurationMs = 0
    repeat_interval: DurationMs = 4 * 3_600_000
    send_resolved: bool = True

    @field_validator("group_by")
    @classmethod
    def _group_by(cls, v: list[str]) -> list[str]:
        if sorted(v) != sorted(DEFAULT_GROUP_BY):
            raise ValueError(
                "only [engine, job_id] is supported: notifications are grouped per job (remove the field)"
            )
        return v

    @field_validator("group_wait")
    @classmethod
    def _group_wait(cls, v: int) -> int:
        if v != 0:
            raise ValueError(
                "only 0s is supported: a group's first notification is sent at once (remove the field)"
            )
        return v


class DeliveryConfig(_Model):
    """How the daemon's dispatcher delivers the outbox (``monitor.notify.dispatcher.RetryPolicy``).

    ``interval``: how often due notifications are sent; ``initial_backoff`` / ``max_backoff``: full-jitter
    retry delays after a retryable failure; ``max_age``: a notification still undelivered after this long
    is given up.
    """

    interval: DurationMs = Field(5_000, gt=0)
    initial_backoff: DurationMs = Field(10_000, gt=0)
    max_backoff: DurationMs = Field(300_000, gt=0)
    max_age: DurationMs = Field(86_400_000, gt=0)

    @model_validator(mode="after")
    def _order(self) -> DeliveryConfig:
        if self.max_backoff < self.initial_backoff:
            raise ValueError("max_backoff must not be shorter than initial_backoff")
        return self


class SilenceConfig(_Model):
    """A silence declared in the config (the CLI adds others to the database).

    ``matchers`` is a mapping ``{label: value}``: label equality only (Alertmanager's ``label=value``).
    For ``!=``, ``=~`` or ``!~`` matchers use ``tidegauge silence add`` (:func:`monitor.alerts.silences.parse_matcher`).
    """

    matchers: dict[str, str]
    ends_at: str
    comment: str = ""


ReportFormat = Literal["html", "md", "json"]


def _html_only() -> list[ReportFormat]:
    return ["html"]


class ReportConfig(_Model):
    """A scheduled health report (:mod:`monitor.reports.scheduled`) sent to a ``webhook`` or ``slack`` receiver and/or
    written to ``directory`` as a detailed report (:mod:`monitor.reports.detailed`) in ``formats``.

    ``cron`` is a 5-field crontab expression evaluated in UTC (APScheduler
    :meth:`~apscheduler.triggers.cron.CronTrigger.from_crontab`), e.g. ``"0 8 * * *"`` (daily 08:00 UTC).
    ``matchers`` (label matchers as ``tidegauge silence add`` takes them, over ``engine``, ``job_id`` and
    ``job_name``) select the jobs: one job, or a team's (``job_name=~payments_.*``); none selects all.
    ``since`` is the period the detailed report covers (default 24h).
    """

    name: str = Field(min_length=1)
    cron: str
    receiver: str | None = None
    matchers: list[str] = Field(default_factory=list)
    since: PositiveDurationMs = 86_400_000
    directory: Path | None = None
    formats: list[ReportFormat] = Field(default_factory=_html_only)

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        check_cron(v)
        return v

    @field_validator("matchers")
    @classmethod
    def _matchers(cls, v: list[str]) -> list[str]:
        from monitor.alerts.silences import parse_matcher
        from monitor.errors import InputError

        for text in v:
            try:
                parse_matcher(text)
            except (InputError, ValueError) as exc:
                raise ValueError(f"matcher {text!r}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _where(self) -> ReportConfig:
        if self.receiver is None and self.directory is None:
            raise ValueError("give a receiver, a directory, or both")
        return self


def check_cron(expr: str) -> CronTrigger:
    """The APScheduler trigger of a 5-field crontab expression (UTC).

    Raises:
        ValueError: not a valid crontab expression (the message says what is expected).
    """
    try:
        return CronTrigger.from_crontab(expr, timezone="UTC")
    except ValueError as exc:
        raise ValueError(
            f"not a valid cron expression ({exc}); expected 5 fields: minute hour day month day-of-week, "
            "e.g. '0 8 * * *'"
        ) from None


class DashboardConfig(_Model):
    """``tidegauge dashboard``: ``token`` (a secret ref) enables silencing and expiring alerts from the
    dashboard; without it the dashboard is read-only (and says so)."""

    token: SecretRef | None = None


class Config(_Model):
    """The whole configuration file."""

    database: str | SecretRef | None = None
    dashboard_url: str | None = None
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    targets: Targets = Field(default_factory=Targets)
    rules: RulesConfig = Field(default_factory=RulesConfig)
    #: pipelines of jobs (``pipeline_freshness``): what the jobs' own reports do not show (rules/pipeline.py)
    pipelines: tuple[PipelineConfig, ...] = ()
    receivers: list[Receiver] = Field(default_factory=list)
    routes: list[Route] = Field(default_factory=list)
    silences: list[SilenceConfig] = Field(default_factory=list)
    reports: list[ReportConfig] = Field(default_factory=list)
    evaluation_interval: DurationMs = 15_000
    #: batches already older than this when first seen are stored, shown and scanned but notify nobody
    #: (``None``: the longest window of the enabled rules, :func:`rules.registry.history_window`)
    history_horizon: DurationMs | None = None
    retention: DurationMs = 14 * 86_400_000
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)

    @field_validator("pipelines")
    @classmethod
    def _pipelines(cls, v: tuple[PipelineConfig, ...]) -> tuple[PipelineConfig, ...]:
        try:
            return parse_pipelines(v)  # names unique
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("database")
    @classmethod
    def _database(cls, v: str | SecretRef | None) -> str | SecretRef | None:
        if isinstance(v, str):
            check_database_url(v, allow_password=False)
        return v

    @model_validator(mode="after")
    def _references(self) -> Config:
        problems = reference_problems(
            [(r.name, r.type) for r in self.receivers],
            [r.receiver for r in self.routes],
            [(r.name, r.receiver) for r in self.reports],
        )
        if problems:
            raise ValueError("\n".join(problems))
        return self


def reference_problems(
    receivers: list[tuple[str, str]], route_receivers: list[str], reports: list[tuple[str, str | None]]
) -> list[str]:
    """Problems of the references between sections, one line each (``routes[2].receiver: no receiver
    named 'pager' ...``): receiver and report names unique, routes and reports naming a receiver,
    reports not going to an Alertmanager receiver.

    Args:
        receivers: ``(name, type)`` of each receiver; route_receivers: each route's receiver;
            reports: ``(name, receiver)`` of each report (``None``: a report written to a directory only).
    """
    problems: list[str] = []
    names = [name for name, _ in receivers]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append(f"receivers: names must be unique; repeated: {', '.join(dupes)}")
    for i, receiver in enumerate(route_receivers):
        if receiver not in names:
            problems.append(
                f"routes[{i}].receiver: no receiver named {receiver!r} (have: {', '.join(names) or 'none'})"
            )
    kinds = dict(receivers)
    for i, (_, report_receiver) in enumerate(reports):
        if report_receiver is None:
            continue
        if report_receiver not in names:
            problems.append(f"reports[{i}].receiver: no receiver named {report_receiver!r}")
        elif kinds[report_receiver] == "alertmanager":
            problems.append(
                f"reports[{i}].receiver: {report_receiver!r} is an alertmanager receiver; reports go to webhook or "
                "slack receivers"
            )
    report_names = [name for name, _ in reports]
    dupes = sorted({n for n in report_names if report_names.count(n) > 1})
    if dupes:
        problems.append(f"reports: names must be unique; repeated: {', '.join(dupes)}")
    return problems


def database_url(cfg: Config, environ: Mapping[str, str], source: str) -> str | None:
    """The configured database URL (``None``: the per-user default), resolving a secret reference.

    Raises:
        ConfigError: the reference does not resolve, or its value is not a database URL; the message
            names ``source`` and ``database``, never the value.
    """
    if not isinstance(cfg.database, SecretRef):
        return cfg.database
    where = f"{source}: database"
    url = resolve_secret(cfg.database, environ, where).get_secret_value()
    try:
        check_database_url(url, allow_password=True)
    except ValueError as exc:
        raise ConfigError(f"{where}: the secret's value is {exc}") from None
    return url


def secret_refs(cfg: Config) -> list[tuple[str, SecretRef]]:
    """Every secret reference of ``cfg`` with its field path (``receivers[1].url``), in file order."""
    refs: list[tuple[str, SecretRef]] = []
    if isinstance(cfg.database, SecretRef):
        refs.append(("database", cfg.database))
    if cfg.dashboard.token is not None:
        refs.append(("dashboard.token", cfg.dashboard.token))
    if cfg.server.ingest_token is not None:
        refs.append(("server.ingest_token", cfg.server.ingest_token))
    for i, r in enumerate(cfg.receivers):
        if isinstance(r.url, SecretRef):
            refs.append((f"receivers[{i}].url", r.url))
        if r.secret is not None:
            refs.append((f"receivers[{i}].secret", r.secret))
    for group in ("spark_prometheus", "flink_rest", "kafka_exporters"):
        for i, t in enumerate(getattr(cfg.targets, group)):
            if t.bearer_token is not None:
                refs.append((f"targets.{group}[{i}].bearer_token", t.bearer_token))
    for i, t in enumerate(cfg.targets.spark_event_logs):
        for key, value in t.storage_options.items():
            if isinstance(value, SecretRef):
                refs.append((f"targets.spark_event_logs[{i}].storage_options.{key}", value))
    for i, k in enumerate(cfg.targets.kafka):
        for field in ("sasl_password", "ssl_key_password"):
            ref = getattr(k, field)
            if ref is not None:
                refs.append((f"targets.kafka[{i}].{field}", ref))
    return refs


def secret_values(cfg: Config, environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """What the process's redactor (:class:`monitor.redaction.Redactor`) must know about ``cfg``.

    Returns:
        ``(secrets, urls)``: the value of every secret reference that resolves (one that does not is
        reported by whoever needs it) and the configured URLs that are not secrets as a whole (webhook
        and Alertmanager receivers written in the file, HTTP targets, the database URL), whose passwords
        and query values are hidden. A plain webhook receiver URL is listed among the secrets: a
        receiver's path is often its credential.
    """
    secrets: list[str] = []
    for where, ref in secret_refs(cfg):
        try:
            secrets.append(resolve_secret(ref, environ, where).get_secret_value())
        except ConfigError:
            continue
    urls: list[str] = []
    for r in cfg.receivers:
        if isinstance(r.url, str):
            (secrets if r.type == "webhook" else urls).append(r.url)
    urls += [t.url for t in (*cfg.targets.spark_prometheus, *cfg.targets.flink_rest, *cfg.targets.kafka_exporters)]
    urls += [t.path for t in cfg.targets.spark_event_logs if "://" in t.path]
    if isinstance(cfg.database, str):
        urls.append(cfg.database)
    return secrets, urls


_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "SecretRef") or part.startswith(("function-", "literal[")):
            continue  # union branch names, not part of the user's path
        else:
            out += ("." if out else "") + part
    return out


def parse_config(data: Any, source: str = "<config>") -> Config:
    """Validate an already-parsed YAML document.

    Raises:
        ConfigError: ``"<source>: <field.path>: <what is wrong / allowed>"`` for the first errors (all
            errors are listed, one per line).
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        seen: list[str] = []
        for err in exc.errors(include_url=False, include_input=False):
            msg = err["msg"]
            for prefix in _PYDANTIC_PREFIXES:
                msg = msg.removeprefix(prefix)
            if err["type"] == "extra_forbidden":
                msg = "unknown field"
            elif err["type"] == "model_type" and err.get("ctx", {}).get("class_name") == "SecretRef":
                msg = "a secret is never written in the config: write {env: NAME} or {file: PATH}"
            elif err["type"] == "literal_error" and "ctx" in err:
                msg = f"must be one of {err['ctx'].get('expected')}"
            where = _loc(err["loc"])
            # Top-level (whole-file) checks name their own field path at the start of each line.
            for part in msg.splitlines() or [msg]:
                line = f"{source}: {where}: {part}" if where else f"{source}: {part}"
                if line not in seen:
                    seen.append(line)
        raise ConfigError("\n".join(seen)) from None


_DEPTH_PROBLEM = f"nested deeper than {MAX_YAML_DEPTH} levels"
_LIBYAML_DEPTH_PROBLEM = "exceeded maximum nesting depth"


class _PythonEventParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's pure-Python reader, scanner and parser (where PyYAML was built without libyaml)."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


_EventParser: Any = _PythonEventParser
if yaml.__with_libyaml__:  # PyYAML's wheels include libyaml
    from yaml._yaml import CParser

    _EventParser = CParser


class _DepthLimitedLoader(Composer, _EventParser, SafeConstructor, Resolver):  # type: ignore[misc]
    """PyYAML's safe loader refusing nesting deeper than :data:`MAX_YAML_DEPTH` before composing it.

    The events come from libyaml (``yaml._yaml.CParser``, as in ``yaml.CSafeLoader``: the pure-Python
    scanner and parser were about 97% of :func:`load_config`) where PyYAML has it; the nodes always come
    from PyYAML's Python ``Composer``, listed first so that its ``compose_node`` (with the depth limit) is
    the one called: ``CParser`` alone composes in C, recursively and without a limit.
    """

    def __init__(self, stream: str) -> None:
        _EventParser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        depth = getattr(self, "_tg_depth", 0)
        if depth >= MAX_YAML_DEPTH:
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, _DEPTH_PROBLEM, mark)
        self._tg_depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._tg_depth = depth


def _safe_load(text: str, source: str) -> Any:
    """``yaml.safe_load`` with the depth limit; a ``RecursionError`` (anyway) or a scalar PyYAML cannot
    convert becomes a ConfigError naming ``source``."""
    try:
        return yaml.load(text, Loader=_DepthLimitedLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        if exc.problem != _LIBYAML_DEPTH_PROBLEM:
            raise
        # libyaml's own limit (1,000 flow levels), met first when its scanner reads ahead: the same error
        raise yaml.composer.ComposerError(None, None, _DEPTH_PROBLEM, exc.problem_mark) from None
    except RecursionError:
        raise ConfigError(f"{source}: YAML nested too deeply") from None
    except (ValueError, OverflowError, TypeError) as exc:
        # PyYAML's constructors on scalars it cannot convert: a 4,300+ digit int, a timestamp like
        # 2026-13-45, a merge key on a scalar
        reason = str(exc).split(";")[0].splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ConfigError(f"{source}: a value cannot be read: {reason}") from None


def _reader_error_line(text: str, position: int) -> int:
    """The line of a ``ReaderError``'s position: a UTF-8 byte offset from libyaml, a character offset from
    PyYAML's Python reader."""
    if _EventParser is _PythonEventParser:
        return text.count("\n", 0, position) + 1
    return text.encode("utf-8").count(b"\n", 0, position) + 1


def load_config(path: Path) -> Config:
    """Read and validate a YAML config file.

    Raises:
        ConfigError: unreadable file, YAML syntax error (with line/column) or invalid fields.
    """
    return parse_config(load_document(path), str(path))


def load_document(path: Path) -> Any:
    """Read a YAML config file into plain data, not validated (``config check`` looks at the parts
    that are valid when others are not).

    Raises:
        ConfigError: unreadable file or YAML syntax error (with line/column).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})") from None
    try:
        data = _safe_load(text, str(path))
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a control character, U+FFFE)
        line = _reader_error_line(text, exc.position)
        raise ConfigError(f"{path}: line {line}: character #x{exc.character:04x} is not allowed in YAML") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}:{where}: {problem}") from None
    return data
