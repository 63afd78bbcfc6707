"""``tidegauge scan``: read Spark event logs and progress JSON files, print batch timelines and findings.

Composition root of a one-shot scan: it reads the wall clock once (the poll's ``now``), builds the
collectors, optionally stores what was read (``--db``), replays each query through the daemon's rules
(``-c FILE``: its ``rules:`` section) at each batch's own time, and sets the exit code:
0 no finding reached ``--fail-on`` (or no ``--fail-on``), 1 one did, 2 bad input (a missing path or a path
of unknown format named on the command line, a corrupt compressed frame, a corrupt, truncated or invalid
line: one line on stderr naming the file and line; the other lines and inputs are still scanned and
reported). Files of unknown format found inside a directory are skipped with a warning (exit code
unaffected); an in-progress event log without a complete event yet gets a note (exit code unaffected).
"""

from __future__ import annotations

import sys
from codecs import BOM_UTF8 as UTF8_BOM
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import typer

from collectors.spark.codecs import CODECS, IN_PROGRESS, CodecError, codec_for_name
from collectors.spark.eventlog import (
    APPSTATUS_PREFIX,
    ROLLING_DIR_PREFIX,
    EventLogCollector,
    MemoryCursorStore,
    is_rolling_dir,
)
from collectors.spark.eventlog import COLLECTOR_NAME as EVENTLOG_COLLECTOR
from collectors.spark.progress_files import COLLECTOR_NAME as PROGRESS_COLLECTOR
from collectors.spark.progress_files import looks_like_event_log, read_progress_file
from collectors.storage import Entry, LocalStorage, Storage, StorageError, is_url, open_storage
from monitor.commands._scan_render import build_report, render_json, render_text
from monitor.durations import parse_timedelta
from monitor.errors import EXIT_INTERNAL, InputError
from monitor.model import CollectorError, ErrorKind, FindingEpisode, PollResult, Severity
from rules.registry import Evaluator

__all__ = ["ScanInputs", "classify_inputs", "register", "scan_rules", "store_polls"]

@dataclass
class ScanInputs:
    """Paths sorted by how to read them, the errors of those that cannot be read at all, and the files
    found inside directories (``implicit``: skipped with a warning rather than an error when unreadable).
    Event logs are local paths or URLs (``s3://...``, :mod:`collectors.storage`); progress files are local."""

    event_logs: list[str] = field(default_factory=list)
    progress_files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    implicit: set[Path] = field(default_factory=set)


def _classify_file(storage: Storage, entry: Entry, inputs: ScanInputs, implicit: bool) -> None:
    problems = inputs.warnings if implicit else inputs.errors
    skipped = " (skipped)" if implicit else ""
    shown = storage.display(entry.path)
    try:
        codec = codec_for_name(entry.name)
    except CodecError as exc:
        if implicit:  # e.g. a README.md next to the logs: say it is not a log, not that it is a bad codec
            ext = entry.name.rsplit(".", 1)[-1]
            problems.append(f"{shown}: not an event log: '.{ext}' is no codec Spark writes ({', '.join(CODECS)}){skipped}")
        else:
            problems.append(f"{shown}: unknown format: {exc}")
        return
    if codec is not None:
        inputs.event_logs.append(shown)
        return
    try:
        handle, _ = storage.open(entry.path, entry)
        with handle:
            head = handle.read(4096)
    except StorageError as exc:
        problems.append(f"{shown}: cannot read: {str(exc).removeprefix(shown + ': ')}{skipped}")
        return
    head = head.removeprefix(UTF8_BOM)  # Windows editors save JSON with a byte-order mark
    if looks_like_event_log(head) or (entry.name.endswith(IN_PROGRESS) and not head.strip()):
        # an empty app.inprogress is an event log Spark has not written its first line to yet
        inputs.event_logs.append(shown)
    elif head.lstrip()[:1] in (b"{", b"[") and isinstance(storage, LocalStorage):
        path = Path(entry.path)
        inputs.progress_files.append(path)
        if implicit:
            inputs.implicit.add(path)
    elif head.lstrip()[:1] in (b"{", b"["):
        problems.append(f"{shown}: progress JSON is read from local files only (copy it here){skipped}")
    else:
        problems.append(f"{shown}: unknown format (neither a Spark event log nor streaming progress JSON){skipped}")


def _report_subdirectories(given: str, names: list[str], inputs: ScanInputs, found_before: int) -> None:
    """Say which subdirectories of ``given`` were not entered (as Spark's History Server reads only the top
    of ``spark.eventLog.dir``): an error when the directory held nothing else to scan, else a warning."""
    shown = ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    if len(inputs.event_logs) + len(inputs.progress_files) == found_before:
        inputs.errors.append(
            f"{given}: no event log or progress file at its top level, and its subdirectories are not "
            f"searched ({shown}): scan the ones that hold the logs, e.g. tidegauge scan "
            + " ".join(f"{given.rstrip('/')}/{n}" for n in sorted(names)[:3])
        )
    else:
        inputs.warnings.append(f"{given}: subdirectories not searched: {shown}")


def classify_inputs(paths: Sequence[Path | str], storage_options: Mapping[str, Any] | None = None) -> ScanInputs:
    """Sort ``paths`` (local paths or URLs of :data:`collectors.storage.SCHEMES`) into event logs and
    progress files.

    Files named by a Spark codec or starting with ``{"Event":`` are event logs; other files starting with
    ``{`` or ``[`` (after an optional UTF-8 byte-order mark and white space) are progress JSON; anything else is an unknown format (an error). A rolling directory
    ``eventlog_v2_<app>`` is one event log; another directory is expanded one level: its rolling
    directories and its files, classified the same way (files inside that are neither are skipped with a
    warning; hidden files and ``appstatus_*`` markers are ignored; other subdirectories are not entered,
    with a warning, or an error when the directory holds nothing to scan). A URL whose store cannot be reached,
    or whose library is not installed, is an error naming it (and the extra to install).
    """
    inputs = ScanInputs()
    for given in paths:
        try:
            storage, path = open_storage(given, storage_options)
            storage.begin_poll()
            top = storage.info(path)
            if not top.is_dir:
                _classify_file(storage, top, inputs, implicit=False)
                continue
            listing = storage.ls(path)
            if is_rolling_dir(path, storage, listing):
                inputs.event_logs.append(storage.display(path) if is_url(str(given)) else str(given))
                continue
            found_before = len(inputs.event_logs) + len(inputs.progress_files)
            other_dirs: list[str] = []
            for entry in listing:
                if entry.name.startswith((".", APPSTATUS_PREFIX)):
                    continue
                if entry.is_dir:
                    if entry.name.startswith(ROLLING_DIR_PREFIX) and is_rolling_dir(entry.path, storage):
                        inputs.event_logs.append(storage.display(entry.path))
                    else:
                        other_dirs.append(entry.name)
                else:
                    _classify_file(storage, entry, inputs, implicit=True)
            if other_dirs:
                _report_subdirectories(str(given), other_dirs, inputs, found_before)
        except StorageError as exc:
            inputs.errors.append(str(exc))
    return inputs


def store_polls(
    db_url: str,
    polls: list[tuple[str, PollResult]],
    cursors: dict[str, dict[str, Any]],
    now: datetime,
    episodes: Sequence[FindingEpisode] = (),
) -> str:
    """Save ``polls`` (collector name, result), the event-log ``cursors`` and the finding ``episodes`` of
    the scan in one transaction.

    Storage is idempotent (re-scanning the same file stores each batch and each episode once: episodes are
    keyed by finding and first instant, :func:`monitor.store.record_episodes`). The cursors let the daemon
    continue tailing where the scan stopped. Returns a one-line summary.

    Raises:
        InputError: the database cannot be opened or written (message without the password).
        SchemaOutdatedError: the schema is not current (run ``tidegauge db upgrade``).
    """
    from sqlalchemy.exc import SQLAlchemyError

    from monitor.store import open_store, record_episodes, redact_url, save_poll, set_cursor

    try:
        store = open_store(db_url)
        try:
            with store.sessions.begin() as session:
                saved = 0
                for collector, poll in polls:
                    counts = save_poll(session, poll, collector=collector)
                    saved += counts.samples_inserted
                for target, state in cursors.items():
                    set_cursor(session, EVENTLOG_COLLECTOR, target, state, now)
                stored = record_episodes(session, episodes)
        finally:
            store.dispose()
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise InputError(f"database {redact_url(db_url)}: {reason}") from None
    return (
        f"stored {saved} new samples and {stored.inserted} new finding episodes"
        f"{f' ({stored.extended} extended)' if stored.extended else ''} in {redact_url(db_url)}"
    )


@contextmanager
def _demo_path() -> Iterator[Path]:
    """The bundled rolling event-log directory (package data ``monitor/demo/eventlog_v2_*``)."""
    with as_file(files("monitor").joinpath("demo")) as demo:
        candidates = sorted(p for p in Path(demo).iterdir() if p.name.startswith("eventlog_v2_"))
        if not candidates:
            raise InputError(f"{demo}: the bundled demo event log is missing")
        yield candidates[0]


FAIL_ON_LEVELS = (Severity.INFO, Severity.WARNING, Severity.CRITICAL)


def _parse_fail_on(text: str) -> Severity:
    """``--fail-on``: a severity a finding can have (``ok`` is none: every finding would reach it).

    Raises:
        InputError: any other value (the message lists the allowed ones).
    """
    allowed = ", ".join(level.label() for level in FAIL_ON_LEVELS)
    try:
        level = Severity.parse(text)
    except ValueError:
        level = None
    if level not in FAIL_ON_LEVELS:
        raise InputError(f"--fail-on: unknown severity {text!r}; allowed: {allowed}")
    assert level is not None
    return level


def _error_line(error: CollectorError) -> str:
    return error.message if error.target in error.message else f"{error.target}: {error.message}"


def scan_rules(config: Path | None, future_skew: timedelta | None) -> Evaluator:
    """The rules ``scan`` replays: the ``rules:`` section of ``config`` (the daemon's file) or the defaults,
    with ``--future-skew`` (when given) as ``future_timestamp.skew`` and ``late_drop_surge.skew``.

    Raises:
        ConfigError: the file or its rules are invalid (the message names the file and field).
    """
    from monitor.config import load_config
    from rules.config import RulesConfig

    rules = load_config(config).rules if config is not None else RulesConfig()
    if future_skew is not None:
        extra = dict(rules.model_extra or {})
        text = f"{int(future_skew.total_seconds() * 1000)}ms"
        for name in ("future_timestamp", "late_drop_surge"):
            section = extra.get(name)
            extra[name] = {**(section if isinstance(section, dict) else {}), "skew": text}
        rules = RulesConfig.model_validate({**extra, "overrides": [o.model_dump(by_alias=True) for o in rules.overrides]})
    return Evaluator(rules)


def _run_scan(
    paths: Sequence[Path | str], fmt: str, rules: Evaluator, fail_on: Severity | None, db: str | None
) -> int:
    now = datetime.now(UTC)
    inputs = classify_inputs(paths)
    bad = list(inputs.errors)
    warnings = list(inputs.warnings)
    polls: list[tuple[str, PollResult]] = []
    cursors = MemoryCursorStore()
    notes: list[str] = []
    internal: list[str] = []  # a bug met on one file or line (quarantined: the rest is scanned)
    if inputs.event_logs:
        collector = EventLogCollector(inputs.event_logs, cursors, keep_raw=db is not None)
        poll = collector.poll(now, to_end=True)  # the whole files, over as many budgets as they take
        for error in poll.errors:
            if error.kind is ErrorKind.INTERNAL:
                internal.append(_error_line(error))
            else:
                (warnings if error.retryable else bad).append(_error_line(error))
        notes.extend(
            f"{path}: still being written by Spark (in progress); it holds no complete event yet"
            for path in collector.waiting_files
        )
        polls.append((EVENTLOG_COLLECTOR, poll))
    for path in inputs.progress_files:
        try:
            read = read_progress_file(path)
        except InputError as exc:
            (warnings if path in inputs.implicit else bad).append(
                f"{exc} (skipped)" if path in inputs.implicit else str(exc)
            )
            continue
        except OSError as exc:
            bad.append(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        bad.extend(read.errors)
        polls.append((PROGRESS_COLLECTOR, PollResult(tuple(read.samples), (), tuple(read.raw))))
    samples = [s for _, poll in polls for s in poll.samples]
    report = build_report(rules, samples, bad, now=now)
    for line in bad:
        print(f"tidegauge: error: {line}", file=sys.stderr)
    for line in warnings:
        print(f"tidegauge: warning: {line}", file=sys.stderr)
    for line in notes:
        print(f"tidegauge: note: {line}", file=sys.stderr)
    for line in internal:
        print(f"tidegauge: internal error: {line}", file=sys.stderr)
    if db is not None:
        print(store_polls(db, polls, cursors.states, now, report.episodes), file=sys.stderr)
    if fmt == "json":
        typer.echo(render_json(report))
    elif samples or not bad:  # nothing read and an error said why: no "Findings: none" as if all were well
        typer.echo(render_text(report))
    if internal:
        return EXIT_INTERNAL
    if bad:
        return 2
    if fail_on is not None and report.findings and report.worst() >= fail_on:
        return 1
    return 0


def register(app: typer.Typer) -> None:
    """Add the ``scan`` command to ``app``."""

    @app.command("scan")
    def scan(
        paths: list[str] = typer.Argument(
            None,
            help="Event-log files or directories (local, or URLs: s3://, s3a://, gs://, abfs[s]://, hdfs://, webhdfs://, file://), and progress JSON files.",
            show_default=False,
        ),
        fmt: str = typer.Option("text", "--format", help="Output format: text or json."),
        config: Path | None = typer.Option(
            None, "-c", "--config", metavar="FILE", help="Use the rules: section of this daemon config file."
        ),
        future_skew: str | None = typer.Option(
            None, "--future-skew", help="How far ahead of a batch's time an event time may be (1h, 30m, 90s); sets rules.future_timestamp.skew (default 1h)."
        ),
        fail_on: str | None = typer.Option(
            None, "--fail-on", help="Exit with code 1 if a finding is at least this severe: info, warning or critical."
        ),
        db: str | None = typer.Option(
            None, "--db", metavar="URL", help="Also store what was read in this database (run `tidegauge db upgrade` first)."
        ),
        demo: bool = typer.Option(False, "--demo", help="Scan the bundled recorded Spark 4.3.0 event log."),
    ) -> None:
        """Scan Spark event logs and progress files: per-query batch timelines and findings.

        Reads event logs (single files, .inprogress files, rolling eventlog_v2_* directories; zstd, lz4, snappy, lzf or plain) and progress JSON (one object, an array, or JSON lines). Prints per query the batches (id, time, input rows, watermark and its advance, event-time max, rows dropped by the watermark, state rows) and the findings of the daemon's rules, replayed at each batch's own time (each reported once, with the first and last batch it held).

        --format json prints {"queries": [...], "findings": [...], "errors": [...]}.

        Exit codes: 0 ok, 1 a finding reached --fail-on, 2 bad input (a named path missing or of unknown format, a corrupt frame or line in any file read), 3 internal error (traceback with tidegauge --debug). Files of unknown format inside a directory are skipped with a warning and do not change the exit code.
        """
        if fmt not in ("text", "json"):
            raise InputError(f"--format: unknown format {fmt!r} (allowed: text, json)")
        skew = parse_timedelta(future_skew, what="--future-skew") if future_skew is not None else None
        rules = scan_rules(config, skew)
        threshold = _parse_fail_on(fail_on) if fail_on is not None else None
        given = list(paths or [])
        if demo:
            with _demo_path() as demo_path:
                code = _run_scan([demo_path, *given], fmt, rules, threshold, db)
        else:
            if not given:
                raise InputError("scan: give at least one PATH (or --demo)")
            code = _run_scan(given, fmt, rules, threshold, db)
        raise typer.Exit(code=code)
