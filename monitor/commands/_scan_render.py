"""Per-query batch timelines and findings for ``tidegauge scan``: building them and printing them.

Input is the samples of any number of Spark queries (from event logs and progress files); a query is
identified by its Spark query ``id`` (stable across restarts; each restart has a new ``runId``). The
report keeps the query-scope progress samples as the batch timeline and replays each query's samples
through the daemon's rules (:func:`rules.replay.replay`: at each batch's own time, with the history up to
that batch), reporting each finding once with the first and last batch it held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

import orjson

from monitor.model import Finding, FindingEpisode, Sample, SampleKind, Severity, TriggerKind
from monitor.timefmt import format_duration, format_instant, is_beyond_range
from rules.batches import progress_batches, real_watermark
from rules.cadence import trigger_kind
from rules.common import is_epoch
from rules.episodes import Episode, episodes, held, link, to_record
from rules.registry import Evaluator
from rules.replay import replay

__all__ = ["QueryReport", "ScanReport", "build_report", "iso", "render_json", "render_text"]

_TIME = attrgetter("observed_at")


def iso(value: datetime | None) -> str | None:
    """:func:`monitor.timefmt.format_instant` (``2026-11-29T11:32:48.289Z``); ``None`` stays ``None``."""
    return None if value is None else format_instant(value)


@dataclass(frozen=True, slots=True)
class QueryReport:
    """One streaming query: identity, runs in order of appearance, batches in time order, and the trigger of
    its newest run as the rules read it (:func:`rules.cadence.trigger_kind`)."""

    query_id: str
    name: str | None
    run_ids: tuple[str, ...]
    app_ids: tuple[str, ...]
    batches: tuple[Sample, ...]
    idle_events: int
    trigger: TriggerKind = TriggerKind.MICRO_BATCH


@dataclass(frozen=True, slots=True)
class ScanReport:
    """Everything ``scan`` prints: queries and findings (findings sorted by query, then time), and the
    finding episodes behind the findings as ``scan --db`` stores them (same order)."""

    queries: tuple[QueryReport, ...]
    findings: tuple[Finding, ...]
    errors: tuple[str, ...] = field(default=())
    episodes: tuple[FindingEpisode, ...] = field(default=())

    def worst(self) -> Severity:
        """The highest severity among the findings (``OK`` if none)."""
        return max((f.severity for f in self.findings), default=Severity.OK)


def episode_finding(episode: Episode) -> Finding:
    """An episode as one finding: the message as last seen, the batch it named when it first held, and
    ``first_batch_id``/``last_batch_id``/``first_at``/``last_at`` (the batches it held over) in ``details``."""
    last = episode.last
    details = {
        **last.details,
        "episode_id": episode.id,
        "first_batch_id": episode.first_batch_id,
        "last_batch_id": episode.last_batch_id,
        "first_at": iso(episode.first_at),
        "last_at": iso(episode.last_at),
        "ended_by": None if episode.ended_by is None else episode.ended_by.value,
    }
    return Finding(
        rule=last.rule,
        severity=episode.severity,
        job=episode.first.job,
        message=last.message,
        observed_at=episode.first_at,
        scope=last.scope,
        batch_id=episode.first.batch_id,
        labels=last.labels,
        details=details,
    )


def build_report(
    evaluator: Evaluator, samples: Sequence[Sample], errors: Sequence[str] = (), *, now: datetime | None = None
) -> ScanReport:
    """Group ``samples`` by query id (first appearance order) and replay each query through the rules.

    Each query's instants are folded into episodes (:func:`rules.episodes.episodes`, the daemon's fold);
    those that held for their rule's ``for`` (:func:`rules.episodes.held`) are the findings and the
    episodes. ``now`` (the scan's poll time) marks an episode ``history`` when its first instant is older
    than the rules' history window (:meth:`Evaluator.history_window`, the daemon's default horizon) before
    it; without ``now`` none is.
    """
    horizon = evaluator.history_window()
    by_query: dict[str, list[Sample]] = {}
    for sample in samples:
        by_query.setdefault(sample.job.job_id, []).append(sample)
    queries: list[QueryReport] = []
    findings: list[Finding] = []
    records: list[FindingEpisode] = []
    for query_id, query_samples in by_query.items():
        ordered = sorted(query_samples, key=_TIME)
        run_ids = tuple(dict.fromkeys(s.job.run_id for s in ordered if s.job.run_id is not None))
        app_ids = tuple(dict.fromkeys(s.job.app_id for s in ordered if s.job.app_id is not None))
        names = [s.job.name for s in ordered if s.job.name]
        batches = tuple(progress_batches(ordered))
        queries.append(
            QueryReport(
                query_id=query_id,
                name=names[-1] if names else None,
                run_ids=run_ids,
                app_ids=app_ids,
                batches=batches,
                idle_events=sum(1 for s in ordered if s.kind is SampleKind.IDLE and s.scope.is_job()),
                trigger=trigger_kind(batches),
            )
        )
        instants = list(replay(evaluator, ordered))
        flags = [now is not None and now - i.at > horizon for i in instants]
        kept = [e for e in episodes(instants, history=flags) if held(e, evaluator)]
        findings.extend(episode_finding(e) for e in kept)
        records.extend(link([to_record(e) for e in kept]))
    return ScanReport(tuple(queries), tuple(findings), tuple(errors), tuple(records))


def _advance(prev: Sample | None, batch: Sample) -> timedelta | None:
    """How far the watermark moved since the previous batch; ``None`` unless both are real watermarks
    (unknown, or Spark's 1970-01-01 "not computed yet" placeholder: see :func:`rules.common.is_epoch`) and
    within the model's range (:func:`monitor.timefmt.is_beyond_range`: no duration from its stand-in); 0 when
    it did not move."""
    if prev is None:
        return None
    before, after = real_watermark(prev), real_watermark(batch)
    if before is None or after is None:
        return None
    if before == after:
        return timedelta(0)
    return None if is_beyond_range(before) or is_beyond_range(after) else after - before


def _advance_ms(prev: Sample | None, batch: Sample) -> int | None:
    delta = _advance(prev, batch)
    return None if delta is None else int(delta.total_seconds() * 1000)


def _batch_json(prev: Sample | None, batch: Sample) -> dict[str, Any]:
    return {
        "batch_id": batch.batch_id,
        "run_id": batch.job.run_id,
        "timestamp": iso(batch.observed_at),
        "num_input_rows": batch.num_input_rows,
        "watermark": iso(batch.watermark),
        "watermark_is_placeholder": is_epoch(batch.watermark),
        "watermark_advance_ms": _advance_ms(prev, batch),
        "event_time_min": iso(batch.event_time_min),
        "event_time_max": iso(batch.event_time_max),
        "dropped_by_watermark": batch.dropped_by_watermark,
        "state_rows": batch.state_rows_total,
        "state_rows_removed": batch.state_rows_removed,
        "batch_duration_ms": batch.batch_duration_ms,
    }


def _finding_json(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity.label(),
        "query_id": finding.job.job_id,
        "query_name": finding.job.name,
        "run_id": finding.job.run_id,
        "batch_id": finding.batch_id,
        "observed_at": iso(finding.observed_at),
        "first_batch_id": finding.details.get("first_batch_id"),
        "last_batch_id": finding.details.get("last_batch_id"),
        "message": finding.message,
        "details": finding.details,
    }


def render_json(report: ScanReport) -> str:
    """The report as one JSON document (see ``tidegauge scan --help``)."""
    queries = []
    for query in report.queries:
        prevs: list[Sample | None] = [None, *query.batches[:-1]]
        queries.append(
            {
                "id": query.query_id,
                "name": query.name,
                "run_ids": list(query.run_ids),
                "app_ids": list(query.app_ids),
                "idle_events": query.idle_events,
                "trigger": query.trigger.value,
                "batches": [_batch_json(p, b) for p, b in zip(prevs, query.batches, strict=True)],
            }
        )
    document = {
        "queries": queries,
        "findings": [_finding_json(f) for f in report.findings],
        "errors": list(report.errors),
    }
    # orjson: several times faster than json.dumps on a long timeline; non-ASCII text is written as UTF-8
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _advance_text(prev: Sample | None, batch: Sample) -> str:
    delta = _advance(prev, batch)
    if delta is None:
        moved = prev is not None and is_beyond_range(batch.watermark) and batch.watermark != prev.watermark
        return "unknown" if moved else "-"
    if not delta:
        return "0"
    return ("+" if delta.total_seconds() > 0 else "-") + format_duration(delta)


_HEADERS = ("batch", "run", "time (UTC)", "rows", "watermark", "wm advance", "event-time max", "dropped", "state rows")


def _held(finding: Finding) -> str:
    first, last = finding.details.get("first_batch_id"), finding.details.get("last_batch_id")
    if first is None:
        return ""
    return f" (held at batch {first})" if first == last else f" (held batches {first}-{last})"


def render_text(report: ScanReport) -> str:
    """A readable table per query, then the findings."""
    lines: list[str] = []
    if not report.queries:
        lines.append("No streaming queries found.")
    for query in report.queries:
        title = f"Query {query.name or '(unnamed)'}  id {query.query_id}"
        runs = len(query.run_ids)
        title += f"  ({runs} run{'s' if runs != 1 else ''}"
        if query.app_ids:
            title += f", app {', '.join(query.app_ids)}"
        title += ")"
        lines.append(title)
        if query.trigger is TriggerKind.REAL_TIME:
            lines.append(
                "  real-time mode (trigger(realTime=...)): each batch runs for its whole duration and reports once, at "
                "its end; the rules expect no report in between"
            )
        rows: list[tuple[str, ...]] = [_HEADERS]
        prev: Sample | None = None
        for batch in query.batches:
            rows.append(
                (
                    _cell(batch.batch_id),
                    (batch.job.run_id or "-")[:8],
                    _cell(iso(batch.observed_at)),
                    _cell(batch.num_input_rows),
                    _cell(iso(real_watermark(batch))),  # Spark's 1970 placeholder shows as "-"
                    _advance_text(prev, batch),
                    _cell(iso(batch.event_time_max)),
                    _cell(batch.dropped_by_watermark),
                    _cell(batch.state_rows_total),
                )
            )
            prev = batch
        widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADERS))]
        for row in rows:
            cells = [
                c.rjust(w) if i in (0, 3, 7, 8) else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ]
            lines.append("  " + "  ".join(cells).rstrip())
        if not query.batches:
            lines.append("  (no batches)")
        if query.idle_events:
            lines.append(f"  {query.idle_events} idle event(s) (no batch ran)")
        lines.append("")
    if report.findings:
        counts = {s: sum(1 for f in report.findings if f.severity is s) for s in Severity}
        summary = ", ".join(f"{n} {s.label()}" for s, n in sorted(counts.items(), reverse=True) if n)
        lines.append(f"Findings ({summary}):")
        for finding in report.findings:
            who = finding.job.name or finding.job.job_id
            lines.append(f"  {finding.severity.label().upper():<8} {finding.rule} [{who}]{_held(finding)} {finding.message}")
    else:
        lines.append("Findings: none.")
    return "\n".join(lines)
