"""``tidegauge check kafka``: poll a Kafka cluster's consumer groups once (or twice), run the lag rules,
print lag per group, topic and partition. ``--spark-progress FILE`` adds Spark queries, whose offsets live in
their checkpoint: the Kafka source's ``endOffset`` of the newest progress per query against the broker's
log-end offsets (:mod:`collectors.kafka.spark`); without ``--group``/``--include`` only those are shown.
``--locate-event-time`` (with ``--spark-progress``) names the Kafka record behind each future-timestamp jump
of those queries instead (:mod:`monitor.commands._check_culprit`).

Composition root of a one-shot check: it reads the wall clock (each poll's ``now``), sleeps ``--interval``
between two polls, reads the SASL password from the environment variable ``--sasl-password-env`` names,
and sets the exit code as ``tidegauge scan`` does: 0 no finding reached ``--fail-on`` (or none given),
1 one did, 2 bad input (the cluster cannot be reached, a group cannot be read, a bad option).
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from collectors.kafka import KafkaLagCollector, KafkaOptions, Snapshot, group_samples
from collectors.kafka.admin import require_client
from collectors.kafka.culprit import DEFAULT_MAX_BYTES
from collectors.kafka.spark import SparkKafkaSource, source_offsets
from collectors.spark.progress_files import progress_with_sources, read_progress_files
from monitor.commands._check_culprit import locate_from_progress
from monitor.commands._check_culprit import render_json as render_located_json
from monitor.commands._check_culprit import render_text as render_located_text
from monitor.commands._check_errors import json_error_document
from monitor.commands._check_flink import add_flink
from monitor.commands._kafka_options import kafka_options as _options
from monitor.commands.scan import _parse_fail_on
from monitor.durations import parse_timedelta
from monitor.errors import InputError
from monitor.model import Sample
from monitor.reports.kafka import KafkaReport, render_json, render_text
from rules.config import RulesConfig
from rules.registry import evaluate

__all__ = ["register", "run_check"]


def _spark_queries(paths: list[Path]) -> tuple[list[tuple[str, SparkKafkaSource]], list[str]]:
    """The newest progress of each query in the given progress files, as (name, Kafka source) pairs."""
    newest: dict[str, dict[str, Any]] = {}
    reads, errors = read_progress_files(paths)
    for read in reads:
        errors.extend(read.errors)
        for job, _at, _kind, doc in read.raw:
            progress = progress_with_sources(doc)
            if progress is not None:
                newest[job.name or job.job_id] = dict(progress)
    out: list[tuple[str, SparkKafkaSource]] = []
    for name, progress in sorted(newest.items()):
        try:
            out.extend((f"spark:{name}", src) for src in source_offsets(progress, name))
        except InputError as exc:
            errors.append(str(exc))
    return out, errors


def run_check(
    options: KafkaOptions,
    *,
    interval_s: float | None,
    threshold: str | None,
    fail_on: str | None,
    fmt: str,
    spark_progress: list[Path] | None = None,
) -> tuple[int, str, list[str]]:
    """Poll (once, or twice ``interval_s`` apart), evaluate, render.

    Returns:
        ``(exit code, rendered report, error lines)``.

    Raises:
        InputError: the cluster could not be reached (exit code 2 via the CLI).
    """
    from collectors.kafka.admin import KafkaUnreachable

    level = _parse_fail_on(fail_on) if fail_on is not None else None
    rules: dict[str, object] = {"consumer_lag": {"window_samples": 10}}
    if threshold is not None:
        parse_timedelta(threshold, what="--threshold")
        rules["consumer_lag_seconds"] = {"threshold": threshold}
    config = RulesConfig.model_validate(rules)
    collector = KafkaLagCollector(options)
    history: dict[str, list[Sample]] = {}
    polls = 2 if interval_s is not None else 1
    try:
        for i in range(polls):
            if i:
                time.sleep(interval_s or 0)
            now = datetime.now(UTC)
            spark_only = bool(spark_progress) and not options.groups and not options.include
            try:
                snap = Snapshot() if spark_only else collector.snapshot(now)
                if spark_progress:
                    queries, bad = _spark_queries(spark_progress)
                    snap.errors.extend(bad)
                    for name, src in queries:
                        lag = collector.checkpoint_lag(name, src.end_offsets, now)
                        for key, value in sorted(src.metrics.items()):
                            lag.notes.append(f"Spark's own {key}: {value:g} (when the batch was planned)")
                        snap.groups.append(lag)
            except KafkaUnreachable as exc:
                raise InputError(str(exc)) from None
            for g in snap.groups:
                if g.error is None:
                    history.setdefault(g.group, []).extend(group_samples(options.cluster, g, now))
    finally:
        collector.close()
    findings = evaluate(config, history, now)
    report = KafkaReport(snap.groups, findings, polls, list(snap.errors))
    text = render_json(report) if fmt == "json" else render_text(report)
    if snap.errors:
        return 2, text, snap.errors
    if level is not None and findings and report.worst() >= level:
        return 1, text, []
    return 0, text, []


def register(app: typer.Typer) -> None:
    """Add the ``check`` command group (``check kafka``, and ``check flink`` from
    :mod:`monitor.commands._check_flink`) to ``app``."""
    group = typer.Typer(help="One-shot checks of a live system.", no_args_is_help=True)

    @group.command("kafka")
    def kafka(
        bootstrap: str = typer.Argument(..., help="Bootstrap servers, host:port[,host:port...]."),
        groups: list[str] = typer.Option([], "--group", "-g", help="A consumer group to check (repeatable; default: all)."),
        include: list[str] = typer.Option([], "--include", help="Only groups matching this regex (repeatable)."),
        exclude: list[str] = typer.Option([], "--exclude", help="Leave out groups matching this regex (repeatable)."),
        fmt: str = typer.Option("text", "--format", help="Output format: text or json."),
        interval: str | None = typer.Option(
            None, "--interval", help="Poll twice this far apart (e.g. 10s): lag seconds estimates and statuses need two."
        ),
        lag_seconds: str = typer.Option(
            "exact", "--lag-seconds", help="Lag in seconds: exact (read the record at the committed offset), interpolated or none."
        ),
        threshold: str | None = typer.Option(None, "--threshold", help="Report groups more than this far behind (e.g. 5m)."),
        auto_offset_reset: str | None = typer.Option(
            None, "--auto-offset-reset", help="The groups' auto.offset.reset (earliest or latest), if you know it: a "
            "partition a member owns but never committed is then read one way instead of both."
        ),
        fail_on: str | None = typer.Option(
            None, "--fail-on", help="Exit with code 1 if a finding is at least this severe: info, warning or critical."
        ),
        timeout: str = typer.Option("10s", "--timeout", help="Timeout of each request to the cluster."),
        security_protocol: str = typer.Option("PLAINTEXT", "--security-protocol", help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
        sasl_mechanism: str | None = typer.Option(None, "--sasl-mechanism", help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
        sasl_username: str | None = typer.Option(None, "--sasl-username"),
        sasl_password_env: str | None = typer.Option(
            None, "--sasl-password-env", metavar="VAR", help="Environment variable holding the SASL password."
        ),
        ssl_ca: str | None = typer.Option(None, "--ssl-ca", help="CA certificate file (PEM)."),
        spark_progress: list[Path] = typer.Option(
            [], "--spark-progress", help="Spark progress JSON (query.lastProgress, JSON lines or an event log's progress "
            "events): lag of the query's Kafka source endOffset against the broker (repeatable)."
        ),
        locate_event_time: bool = typer.Option(
            False, "--locate-event-time", help="Instead of lag: name the Kafka record behind each future-timestamp jump "
            "of the --spark-progress queries (topic, partition, offset, key, timestamp, event time), read-only."
        ),
        event_time_field: str | None = typer.Option(
            None, "--event-time-field", metavar="PATH", help="With --locate-event-time: the JSON field of the record "
            "value holding the event time (payload.ts or $.payload.ts); default: the record timestamp."
        ),
        batch: int | None = typer.Option(
            None, "--batch", help="With --locate-event-time: locate in this batch of every query, jump or not."
        ),
        max_bytes: int = typer.Option(
            DEFAULT_MAX_BYTES, "--max-bytes", help="With --locate-event-time: read at most this many bytes of records."
        ),
    ) -> None:
        """Check consumer-group lag on a Kafka cluster: per group, topic and partition the committed, log-start and log-end offsets, the lag in records and seconds and Burrow's status (OK, WARN, STALL, STOP, REWIND; NEVER_COMMITTED for a partition a live member owns but the group never committed, with the records waiting under both auto.offset.reset readings unless --auto-offset-reset says which; UNKNOWN when one poll cannot tell).

        --format json prints {"groups": [{"group", "state", "members", "status", "lag", "notes", "partitions": [{"topic", "partition", "committed", "log_start", "log_end", "lag", "lag_seconds", "uncommitted", ...}], ...}], "findings": [...], "polls": N, "errors": [...]} (the README's Kafka section lists every field).

        A one-shot check polls at most twice (--interval): rules that need more polls (rebalance_churn) are for the daemon.

        A check that cannot run (the cluster unreachable within --timeout, the kafka extra not installed, a bad option) prints {"error": "..."} under --format json.

        Exit codes: 0 ok, 1 a finding reached --fail-on, 2 the cluster or a group could not be read, or a bad option.

        --locate-event-time --spark-progress FILE [--event-time-field PATH] names the record behind each future-timestamp jump of the queries in FILE instead (exit code 2 when one cannot be located).
        """
        if fmt not in ("text", "json"):
            raise InputError(f"--format: unknown format {fmt!r} (allowed: text, json)")
        if locate_event_time:
            with json_error_document(fmt):
                code, text, errors = _locate(
                    bootstrap, spark_progress=list(spark_progress), fmt=fmt, timeout=timeout,
                    security_protocol=security_protocol, sasl_mechanism=sasl_mechanism, sasl_username=sasl_username,
                    sasl_password_env=sasl_password_env, ssl_ca=ssl_ca, event_time_field=event_time_field,
                    batch=batch, max_bytes=max_bytes,
                )  # fmt: skip
            for line in errors:
                print(f"tidegauge: error: {line}", file=sys.stderr)
            typer.echo(text)
            raise typer.Exit(code=code)
        if event_time_field is not None or batch is not None:
            raise InputError("--event-time-field and --batch go with --locate-event-time")
        with json_error_document(fmt):
            code, text, errors = _check_kafka(
                bootstrap, groups=groups, include=include, exclude=exclude, fmt=fmt, interval=interval,
                lag_seconds=lag_seconds, threshold=threshold, fail_on=fail_on, timeout=timeout,
                security_protocol=security_protocol, sasl_mechanism=sasl_mechanism, sasl_username=sasl_username,
                sasl_password_env=sasl_password_env, ssl_ca=ssl_ca, spark_progress=list(spark_progress),
                auto_offset_reset=auto_offset_reset,
            )  # fmt: skip
        for line in errors:
            print(f"tidegauge: error: {line}", file=sys.stderr)
        typer.echo(text)
        raise typer.Exit(code=code)

    add_flink(group)
    app.add_typer(group, name="check")


def _locate(
    bootstrap: str,
    *,
    spark_progress: list[Path],
    fmt: str,
    event_time_field: str | None,
    batch: int | None,
    max_bytes: int,
    **connection: Any,
) -> tuple[int, str, list[str]]:
    """``check kafka --locate-event-time`` (:mod:`monitor.commands._check_culprit`).

    Raises:
        InputError: no --spark-progress, a bad option, or the Kafka client not installed.
    """
    require_client("check kafka --locate-event-time")
    if not spark_progress:
        raise InputError("--locate-event-time needs --spark-progress FILE: the batches' Kafka offsets come from the progress")
    if max_bytes < 1:
        raise InputError(f"--max-bytes: expected a positive number of bytes, got {max_bytes}")
    options = _options(bootstrap, **connection)
    results, errors = locate_from_progress(
        options, spark_progress, event_time_field=event_time_field, batch=batch, max_bytes=max_bytes,
        timeout_s=options.request_timeout_s,
    )  # fmt: skip
    text = render_located_json(results, errors) if fmt == "json" else render_located_text(results)
    failed = bool(errors) or any(r.located.record is None for r in results)
    return (2 if failed else 0), text, errors


def _check_kafka(
    bootstrap: str,
    *,
    groups: list[str],
    include: list[str],
    exclude: list[str],
    fmt: str,
    interval: str | None,
    lag_seconds: str,
    threshold: str | None,
    fail_on: str | None,
    timeout: str,
    security_protocol: str,
    sasl_mechanism: str | None,
    sasl_username: str | None,
    sasl_password_env: str | None,
    ssl_ca: str | None,
    spark_progress: list[Path],
    auto_offset_reset: str | None = None,
) -> tuple[int, str, list[str]]:
    """``check kafka`` from its options: see :func:`run_check` (returns the same).

    Raises:
        InputError: a bad option, the Kafka client not installed, or the cluster not reachable.
    """
    require_client("check kafka")
    if lag_seconds not in ("exact", "interpolated", "none"):
        raise InputError(f"--lag-seconds: {lag_seconds!r} (allowed: exact, interpolated, none)")
    if auto_offset_reset not in (None, "earliest", "latest"):
        raise InputError(f"--auto-offset-reset: {auto_offset_reset!r} (allowed: earliest, latest)")
    interval_s = parse_timedelta(interval, what="--interval").total_seconds() if interval else None
    options = _options(
        bootstrap, timeout=timeout, security_protocol=security_protocol, sasl_mechanism=sasl_mechanism,
        sasl_username=sasl_username, sasl_password_env=sasl_password_env, ssl_ca=ssl_ca,
        groups=tuple(groups), include=tuple(include), exclude=tuple(exclude), lag_seconds=lag_seconds,
        auto_offset_reset=auto_offset_reset,
    )  # fmt: skip
    return run_check(
        options, interval_s=interval_s, threshold=threshold, fail_on=fail_on, fmt=fmt,
        spark_progress=spark_progress,
    )
