"""``tidegauge check flink URL``: poll a Flink JobManager once (twice with ``--interval``) and judge it.

Composition root of a one-shot check: it builds the HTTP client and the collector, reads the wall clock
for each poll's ``now``, sleeps ``--interval`` between the two polls (counters such as
``numLateRecordsDropped`` and record counts need two polls to give a rate), runs the same rules as the
daemon (:func:`rules.registry.evaluate`) over the samples and prints :mod:`monitor.reports.flink`.

Exit codes as for ``scan``: 0 no finding reached ``--fail-on`` (or none given), 1 one did, 2 the
JobManager could not be read at all (bad URL, unreachable, not a Flink REST API, an answer refused by a
read bound: too large, too deeply nested, a redirect to another host, no answer within ``--deadline``). An
error of one job or vertex is printed on stderr and in the report and does not change the exit code.
Every read is bounded as the daemon's (:class:`collectors.http.ReadLimits`, defaults); ``--deadline``
bounds each poll.

``--locate-event-time --kafka BOOTSTRAP`` names the Kafka record behind each source subtask's
future-timestamp jump: the offsets its ``KafkaSourceReader`` handed on between the polls around the jump
(``currentOffset``; the finding's ``details["kafka_offset_ranges"]``) are searched in that cluster, read-only,
as ``check kafka --locate-event-time`` does (:func:`monitor.daemon.culprits.locate_flink`), with the same
security options; the record is attached to the finding (message and ``culprit`` in the JSON). Exit code 2
when a jump's record could not be located.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import typer

from collectors.flink import FlinkRestCollector
from collectors.flink.responses import DEFAULT_MAX_JOBS
from collectors.http import DEFAULT_READ_LIMITS, ReadLimits, check_url, make_client
from collectors.kafka.admin import require_client
from collectors.kafka.culprit import DEFAULT_MAX_BYTES, parse_field_path
from monitor.commands._check_errors import json_error_document
from monitor.commands._kafka_options import kafka_options
from monitor.commands.scan import _parse_fail_on
from monitor.config import load_config
from monitor.daemon.culprits import CulpritTarget, locate_flink
from monitor.durations import parse_timedelta
from monitor.errors import InputError
from monitor.model import CollectorError, Engine, Sample, Severity
from monitor.reports.flink import build_check_report, render_json, render_text
from rules.config import RulesConfig
from rules.future import with_culprit
from rules.registry import evaluate

__all__ = ["add_flink", "run_check_flink"]


def run_check_flink(
    url: str,
    *,
    fmt: str = "text",
    interval: timedelta = timedelta(seconds=11),
    rules: RulesConfig | None = None,
    fail_on: Severity | None = None,
    token: str | None = None,
    timeout_s: float = 5.0,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    max_jobs: int = DEFAULT_MAX_JOBS,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    culprits: CulpritTarget | None = None,
) -> int:
    """Poll, judge and print; returns the exit code (see the module docstring). ``limits`` bound every
    read and each poll, ``max_jobs`` the jobs polled (:class:`~collectors.flink.FlinkRestCollector`); ``transport`` replaces the network, ``clock`` (aware UTC) and ``sleep`` the wall
    clock (tests). ``culprits``: the Kafka cluster where future-timestamp jumps' records are located (exit
    code 2 when one is not).

    Raises:
        InputError: the JobManager could not be read at all (one line per error; exit code 2 via the CLI).
    """
    now_of = clock or (lambda: datetime.now(UTC))
    headers = {"Authorization": f"Bearer {token}"} if token else None
    rules = rules or RulesConfig()
    with make_client(
        connect_timeout_s=timeout_s, read_timeout_s=timeout_s, headers=headers, transport=transport
    ) as client:
        try:
            check_url(url, "check flink URL (the JobManager's REST address, e.g. http://jobmanager:8081)")
            collector = FlinkRestCollector(url, client, limits=limits, max_jobs=max_jobs)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        samples: list[Sample] = []
        errors: list[CollectorError] = []
        polls = 2 if interval > timedelta(0) else 1
        now = now_of()
        for i in range(polls):
            if i:
                sleep(interval.total_seconds())
                now = now_of()
            result = collector.poll(now)
            samples.extend(result.samples)
            errors = list(result.errors)  # the errors of the newest poll
            if not result.samples and result.errors and i == 0:
                raise InputError("\n".join(e.message for e in result.errors))
    history: dict[tuple[Engine, str], list[Sample]] = {}
    for s in samples:
        history.setdefault((s.job.engine, s.job.job_id), []).append(s)
    findings = evaluate(rules, history, now)
    not_located = 0
    if culprits is not None:
        located = [(f, locate_flink(culprits, f)) for f in findings]
        not_located = sum(1 for _, c in located if c is not None and c.get("record") is None)
        findings = [with_culprit(f, c) if c is not None else f for f, c in located]
    report = build_check_report(samples, findings, errors)
    for line in report["errors"]:
        print(f"tidegauge: warning: {line}", file=sys.stderr)
    typer.echo(render_json(report) if fmt == "json" else render_text(report))
    if not_located:
        return 2
    if fail_on is not None and any(f.severity >= fail_on for f in findings):
        return 1
    return 0


def _rules(config: Path | None, idle_for: str | None, future_skew: str | None) -> RulesConfig:
    base = load_config(config).rules if config is not None else RulesConfig()
    data = base.model_dump(by_alias=True)
    if idle_for is not None:
        parse_timedelta(idle_for, what="--idle-for")
        data["idle_source"] = {**(data.get("idle_source") or {}), "for": idle_for}
    if future_skew is not None:
        parse_timedelta(future_skew, what="--future-skew")
        data["future_timestamp"] = {**(data.get("future_timestamp") or {}), "skew": future_skew}
    return RulesConfig.model_validate(data)


def add_flink(group: typer.Typer) -> None:
    """Add ``flink`` to the ``check`` command group (:mod:`monitor.commands.check` registers the group)."""

    @group.command("flink")
    def flink(
        url: str = typer.Argument(..., help="The JobManager's REST address, e.g. http://jobmanager:8081."),
        fmt: str = typer.Option("text", "--format", help="Output format: text or json."),
        interval: str = typer.Option(
            "11s",
            "--interval",
            help="Poll again after this long (rates and late drops need two polls; Flink refreshes REST "
            "metrics every 10 s by default). 0s polls once.",
        ),
        idle_for: str | None = typer.Option(
            None, "--idle-for", help="A subtask without data this long is idle (idle_source for; default 5m)."
        ),
        future_skew: str | None = typer.Option(
            None, "--future-skew", help="How far ahead of the poll time a watermark may be (default 1h)."
        ),
        fail_on: str | None = typer.Option(
            None,
            "--fail-on",
            help="Exit with code 1 if a finding is at least this severe: info, warning or critical.",
        ),
        config: Path | None = typer.Option(
            None, "--config", "-c", help="Take rule parameters from this tidegauge config's rules: section."
        ),
        deadline: str = typer.Option(
            f"{DEFAULT_READ_LIMITS.poll_deadline_s:g}s",
            "--deadline",
            help="Each poll ends within this, all its requests together (a slow or hostile endpoint is an "
            "error, not a hang).",
        ),
        token_env: str | None = typer.Option(
            None,
            "--token-env",
            metavar="VAR",
            help="Send Authorization: Bearer $VAR (a proxy in front of Flink).",
        ),
        timeout: str = typer.Option("5s", "--timeout", help="Connect and read timeout of each request."),
        max_body_bytes: int = typer.Option(
            DEFAULT_READ_LIMITS.max_body_bytes, "--max-body-bytes", min=1, help="Largest answer read, bytes on the wire."
        ),
        max_decompressed_bytes: int = typer.Option(
            DEFAULT_READ_LIMITS.max_decompressed_bytes,
            "--max-decompressed-bytes",
            min=1,
            help="Largest size a gzip/deflate answer may decode to, bytes.",
        ),
        max_jobs: int = typer.Option(
            DEFAULT_MAX_JOBS, "--max-jobs", min=1, help="Poll at most this many jobs (running first, then newest)."
        ),
        locate_event_time: bool = typer.Option(
            False, "--locate-event-time", help="Name the Kafka record behind each source subtask's future-timestamp "
            "jump (topic, partition, offset, key, timestamp, event time), read-only in the --kafka cluster.",
        ),
        kafka: str | None = typer.Option(
            None, "--kafka", metavar="BOOTSTRAP", help="With --locate-event-time: the Kafka cluster the sources read."
        ),
        event_time_field: str | None = typer.Option(
            None, "--event-time-field", metavar="PATH", help="With --locate-event-time: the JSON field of the record "
            "value holding the event time (payload.ts or $.payload.ts); default: the record timestamp.",
        ),
        max_bytes: int = typer.Option(
            DEFAULT_MAX_BYTES, "--max-bytes", help="With --locate-event-time: read at most this many bytes of records."
        ),
        security_protocol: str = typer.Option(
            "PLAINTEXT", "--security-protocol", help="With --kafka: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."
        ),
        sasl_mechanism: str | None = typer.Option(
            None, "--sasl-mechanism", help="With --kafka: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."
        ),
        sasl_username: str | None = typer.Option(None, "--sasl-username", help="With --kafka: the SASL user."),
        sasl_password_env: str | None = typer.Option(
            None, "--sasl-password-env", metavar="VAR", help="With --kafka: environment variable holding the SASL password."
        ),
        ssl_ca: str | None = typer.Option(None, "--ssl-ca", help="With --kafka: CA certificate file (PEM)."),
    ) -> None:
        """Poll a Flink JobManager's REST API and print per job its vertices, each subtask's input/output watermark, idle subtasks, late drops and the findings.

        --format json prints {"jobs": [{"jid", "name", "state", "restarts", "flink_version", "flink_version_followed", "watermark_ms", "holding_min", "exception", "checkpoints_failed", "vertices": [{"id", "name", "parallelism", "late_records_dropped", "subtasks": [{"subtask", "input_watermark_ms", "output_watermark_ms", "source_idle_ms", "splits"?, ...}]}]}], "findings": [{"rule", "severity", "job", "jid", "vertex", "vertex_id", "subtask", "message", "labels", "split"?}], "errors": [...]}. labels.check is a rule's sub-check; in text it follows the rule (split_watermark/alignment_paused).

        A check that cannot run (the JobManager unreachable, a bad option) prints {"error": "..."} under --format json.

        Exit codes: 0 ok, 1 a finding reached --fail-on, 2 the JobManager could not be read.

        --locate-event-time --kafka BOOTSTRAP [--event-time-field PATH] names the Kafka record behind each source subtask's future-timestamp jump, from the offsets its Kafka reader read between the polls around the jump (exit code 2 when one cannot be located).
        """
        if fmt not in ("text", "json"):
            raise InputError(f"--format: unknown format {fmt!r} (allowed: text, json)")
        with json_error_document(fmt):
            wait = (
                parse_timedelta(interval, what="--interval")
                if interval.strip() not in ("0", "0s")
                else timedelta(0)
            )
            threshold = _parse_fail_on(fail_on) if fail_on is not None else None
            poll_s = parse_timedelta(deadline, what="--deadline").total_seconds()
            if poll_s <= 0:
                raise InputError("--deadline: must be positive")
            timeout_s = parse_timedelta(timeout, what="--timeout").total_seconds()
            if timeout_s <= 0:
                raise InputError("--timeout: must be positive")
            limits = ReadLimits(
                max_body_bytes=max_body_bytes,
                max_decompressed_bytes=max_decompressed_bytes,
                request_deadline_s=min(DEFAULT_READ_LIMITS.request_deadline_s, poll_s),
                poll_deadline_s=poll_s,
            )
            token = None
            if token_env is not None:
                import os

                token = os.environ.get(token_env)
                if not token:
                    raise InputError(f"--token-env: environment variable {token_env} is not set")
            culprits = None
            if locate_event_time:
                if kafka is None:
                    raise InputError("--locate-event-time needs --kafka BOOTSTRAP: the cluster the Flink sources read")
                if max_bytes < 1:
                    raise InputError(f"--max-bytes: expected a positive number of bytes, got {max_bytes}")
                if event_time_field is not None:
                    try:
                        parse_field_path(event_time_field)
                    except ValueError as exc:
                        raise InputError(f"--event-time-field: {exc}") from None
                require_client("check flink --locate-event-time")
                options = kafka_options(
                    kafka, timeout=timeout, security_protocol=security_protocol, sasl_mechanism=sasl_mechanism,
                    sasl_username=sasl_username, sasl_password_env=sasl_password_env, ssl_ca=ssl_ca,
                )  # fmt: skip
                culprits = CulpritTarget(options, event_time_field=event_time_field, max_bytes=max_bytes)
            elif kafka is not None or event_time_field is not None:
                raise InputError("--kafka and --event-time-field go with --locate-event-time")
            code = run_check_flink(
                url,
                fmt=fmt,
                interval=wait,
                rules=_rules(config, idle_for, future_skew),
                fail_on=threshold,
                token=token,
                timeout_s=timeout_s,
                limits=limits,
                max_jobs=max_jobs,
                culprits=culprits,
            )
        raise typer.Exit(code=code)
