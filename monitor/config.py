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
    receivers:
      - {name: ops, type: webhook, url: https://hooks.example/tg, secret: {file: /run/secrets/tg}}
      - {name: slack, type: slack, url: {env: SLACK_WEBHOOK_URL}}
      - {name: am, type: alertmanager, url: http://alertmanager:9093}
    routes: [{receiver: ops, match: {severity: critical}, repeat_interval: 4h}]

Secrets (tokens, webhook secrets, Slack URLs) are never written in the file: they are references
``{env: NAME}`` or ``{file: PATH}`` resolved by :func:`resolve_secret` with the environment passed in by
the composition root; their values are :class:`pydantic.SecretStr` and never appear in ``repr``, errors or
logs. :func:`load_config` raises :class:`monitor.errors.ConfigError` naming the file, the path to the
field (``receivers[1].url``) and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from monitor.durations import parse_duration_ms
from monitor.errors import ConfigError

__all__ = [
    "Config",
    "DeliveryConfig",
    "DurationMs",
    "Receiver",
    "Route",
    "SecretRef",
    "load_config",
    "parse_config",
    "resolve_secret",
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


def resolve_secret(ref: SecretRef, environ: Mapping[str, str], where: str) -> SecretStr:
    """Read a secret from the environment mapping or a file.

    Raises:
        ConfigError: the variable is unset/empty or the file is unreadable; the message names ``where``
            and the variable/file, never the value.
    """
    if ref.env is not None:
        value = environ.get(ref.env)
        if not value:
            raise ConfigError(f"{where}: environment variable {ref.env} is not set")
        return SecretStr(value)
    assert ref.file is not None
    try:
        value = ref.file.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read secret file {ref.file}: {exc.strerror}") from None
    if not value:
        raise ConfigError(f"{where}: secret file {ref.file} is empty")
    return SecretStr(value)


class ServerConfig(_Model):
    """The daemon's HTTP server: ``/metrics``, ``/healthz`` and the Spark listener ingest endpoint."""

    host: str = "127.0.0.1"
    port: int = Field(8321, ge=0, le=65535)
    ingest_token: SecretRef | None = None
    max_body_bytes: int = Field(1_048_576, gt=0)


class SparkEventLogTarget(_Model):
    """A Spark event-log file or directory to tail."""

    name: str
    path: Path
    poll_interval: DurationMs = 30_000


class HttpTarget(_Model):
    """An HTTP target (Spark driver PrometheusServlet, Flink REST)."""

    name: str
    url: str
    poll_interval: DurationMs = 15_000
    timeout: DurationMs = 5_000
    bearer_token: SecretRef | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")


class KafkaTarget(_Model):
    """A Kafka cluster whose consumer groups' lag is evaluated."""

    name: str
    bootstrap_servers: str
    groups: list[str] = Field(default_factory=list)
    poll_interval: DurationMs = 30_000


class Targets(_Model):
    """Everything tidegauge polls."""

    spark_event_logs: list[SparkEventLogTarget] = Field(default_factory=list)
    spark_prometheus: list[HttpTarget] = Field(default_factory=list)
    flink_rest: list[HttpTarget] = Field(default_factory=list)
    kafka: list[KafkaTarget] = Field(default_factory=list)


Severity = Literal["info", "warning", "critical"]


class RuleOverride(_Model):
    """Per-job parameter overrides: ``match`` on ``job_id``/``job_name``/``engine``."""

    match: dict[str, str]
    rule: str
    params: dict[str, Any]


class RulesConfig(_Model):
    """Rule parameters by rule name (free-form here; each rule validates its own) plus overrides."""

    model_config = ConfigDict(extra="allow", frozen=True)
    overrides: list[RuleOverride] = Field(default_factory=list)


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


class Route(_Model):
    """Which alerts go to which receiver (Alertmanager-style): label equality ``match``."""

    receiver: str
    match: dict[str, str] = Field(default_factory=dict)
    group_by: list[str] = Field(default_factory=lambda: ["engine", "job_id"])
    group_wait: DurationMs = 0
    repeat_interval: DurationMs = 4 * 3_600_000
    send_resolved: bool = True


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
    """A silence declared in the config (the CLI adds others to the database)."""

    matchers: dict[str, str]
    ends_at: str
    comment: str = ""


class ReportConfig(_Model):
    """A scheduled health report (cron expression, UTC) sent to a receiver."""

    name: str
    cron: str
    receiver: str


class Config(_Model):
    """The whole configuration file."""

    database: str | None = None
    dashboard_url: str | None = None
    server: ServerConfig = Field(default_factory=ServerConfig)
    targets: Targets = Field(default_factory=Targets)
    rules: RulesConfig = Field(default_factory=RulesConfig)
    receivers: list[Receiver] = Field(default_factory=list)
    routes: list[Route] = Field(default_factory=list)
    silences: list[SilenceConfig] = Field(default_factory=list)
    reports: list[ReportConfig] = Field(default_factory=list)
    evaluation_interval: DurationMs = 15_000
    retention: DurationMs = 14 * 86_400_000
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)

    @model_validator(mode="after")
    def _references(self) -> Config:
        names = [r.name for r in self.receivers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"receiver names must be unique; repeated: {', '.join(dupes)}")
        for i, route in enumerate(self.routes):
            if route.receiver not in names:
                raise ValueError(
                    f"routes[{i}].receiver: no receiver named {route.receiver!r} (have: {', '.join(names) or 'none'})"
                )
        for i, report in enumerate(self.reports):
            if report.receiver not in names:
                raise ValueError(f"reports[{i}].receiver: no receiver named {report.receiver!r}")
        return self


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "SecretRef") or part.startswith(("function-", "literal[")):
            continue  # union branch names, not part of the user's path
        else:
            out += ("." if out else "") + part
    return out or "(top level)"


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
            line = f"{source}: {_loc(err['loc'])}: {err['msg']}"
            if err["type"] == "extra_forbidden":
                line = f"{source}: {_loc(err['loc'])}: unknown field"
            elif err["type"] == "literal_error" and "ctx" in err:
                line = f"{source}: {_loc(err['loc'])}: must be one of {err['ctx'].get('expected')}"
            if line not in seen:
                seen.append(line)
        raise ConfigError("\n".join(seen)) from None


def load_config(path: Path) -> Config:
    """Read and validate a YAML config file.

    Raises:
        ConfigError: unreadable file, YAML syntax error (with line/column) or invalid fields.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}:{where}: {problem}") from None
    return parse_config(data, str(path))
