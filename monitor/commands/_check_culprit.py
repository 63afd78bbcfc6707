"""``tidegauge check kafka BOOTSTRAP --spark-progress FILE --locate-event-time``: name the Kafka record behind
a Spark query's future-timestamp jump.

The progress file is read as ``check kafka --spark-progress`` reads it; the rules run over each query's
batches (:func:`rules.registry.evaluate`, at the newest batch's own time) and every ``future_timestamp``
finding names the batch whose rows carried the mis-dated record (``details["carrier_batch_id"]``). That
batch's Kafka ``startOffset``/``endOffset`` (:func:`collectors.kafka.spark.source_offsets`) are the ranges
:func:`collectors.kafka.culprit.locate_culprit` searches, read-only, bounded by ``--max-bytes`` and
``--timeout``, with the same connection and security options as the lag check. ``--batch N`` locates in
batch ``N`` of every query whether or not a rule found a jump. The located record is attached to the
finding as the daemon would store it (:func:`rules.future.with_culprit`): ``details["culprit"]`` and one
sentence in the message.

Exit codes: 0 a record was located for every jump (or no jump: nothing to locate), 2 a record could not be
located (the batch's offsets are not in the progress, the broker did not answer, the range is gone).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.kafka import KafkaOptions
from collectors.kafka.culprit import Located, batch_ranges, locate_culprit
from collectors.kafka.spark import source_offsets
from collectors.spark.progress_files import progress_with_sources, read_progress_files
from monitor.errors import InputError
from monitor.model import Finding, Sample
from rules.config import RulesConfig
from rules.future import CARRIER, RULE, culprit_sentence, with_culprit
from rules.registry import evaluate

__all__ = ["LocateResult", "locate_from_progress", "render_json", "render_text"]


@dataclass(frozen=True, slots=True)
class LocateResult:
    """One located batch: the query (its name, else its id), the batch, the finding (with the culprit
    attached) if a rule made one."""

    query: str
    batch_id: int
    finding: Finding | None
    located: Located


def _read(paths: list[Path]) -> tuple[dict[str, list[Sample]], dict[tuple[str, int], Mapping[str, Any]], list[str]]:
    """Samples per query id, progress documents by (query id, batch id), and errors."""
    samples: dict[str, list[Sample]] = {}
    batches: dict[tuple[str, int], Mapping[str, Any]] = {}
    reads, errors = read_progress_files(paths)
    for read in reads:
        errors.extend(read.errors)
        for s in read.samples:
            samples.setdefault(s.job.job_id, []).append(s)
        for job, _at, _kind, doc in read.raw:
            progress = progress_with_sources(doc)
            batch = progress.get("batchId") if progress is not None else None
            if progress is not None and isinstance(batch, int) and not isinstance(batch, bool):
                batches[(job.job_id, batch)] = progress
    return samples, batches, errors


def _locate_batch(
    options: KafkaOptions, query: str, batch_id: int, progress: Mapping[str, Any] | None,
    event_time_field: str | None, max_bytes: int, timeout_s: float,
) -> Located | str:
    """The culprit of one batch, or why its offsets are not known."""
    if progress is None:
        return f"query {query}: batch {batch_id} is not in the progress given (give the file that holds it)"
    sources = source_offsets(progress, f"query {query} batch {batch_id}")
    ranges = tuple(r for src in sources for r in batch_ranges(src.start_offsets, src.end_offsets))
    if not ranges:
        return (
            f"query {query}: batch {batch_id} read no Kafka offsets (its sources have no Kafka startOffset/endOffset "
            "range: not a Kafka source, or an empty batch)"
        )
    try:
        return locate_culprit(options, ranges, event_time_field=event_time_field, max_bytes=max_bytes, timeout_s=timeout_s)
    except ValueError as exc:
        raise InputError(f"--event-time-field: {exc}") from None


def locate_from_progress(
    options: KafkaOptions,
    paths: list[Path],
    *,
    event_time_field: str | None,
    batch: int | None,
    max_bytes: int,
    timeout_s: float,
) -> tuple[list[LocateResult], list[str]]:
    """Locate the culprit record of every ``future_timestamp`` finding in the progress files (or of batch
    ``batch`` of every query).

    Returns:
        The located batches (query id order) and error lines (unreadable documents, batches whose offsets
        are unknown, records that could not be located).

    Raises:
        InputError: ``event_time_field`` is not a path.
    """
    samples, docs, errors = _read(paths)
    results: list[LocateResult] = []
    for query_id, history in sorted(samples.items()):
        now = max(s.observed_at for s in history)
        query = history[-1].job.name or query_id
        findings = [f for f in evaluate(RulesConfig(), {query_id: history}, now) if f.rule == RULE and f.scope.is_job()]
        wanted: list[tuple[int, Finding | None]] = []
        if batch is not None:
            wanted.append((batch, next((f for f in findings if f.details.get(CARRIER) == batch), None)))
        else:
            for f in findings:
                carrier = f.details.get(CARRIER)
                if isinstance(carrier, int):
                    wanted.append((carrier, f))
                else:
                    errors.append(f"query {query}: the future-timestamp finding names no batch that carried the record")
        for batch_id, finding in wanted:
            progress = docs.get((query_id, batch_id))
            got = _locate_batch(options, query, batch_id, progress, event_time_field, max_bytes, timeout_s)
            if isinstance(got, str):
                errors.append(got)
                continue
            errors.extend(f"query {query} batch {batch_id}: {e}" for e in got.errors)
            attached = with_culprit(finding, got.to_details()) if finding is not None else None
            results.append(LocateResult(query, batch_id, attached, got))
    return results, errors


def render_text(results: list[LocateResult]) -> str:
    """One block per located batch: the finding's message (with the record), then the record's fields."""
    if not results:
        return (
            "No future-timestamp jump in the progress given: nothing to locate. (--batch N locates the "
            "latest-dated record of batch N anyway.)"
        )
    out: list[str] = []
    for r in results:
        out.append(f"query {r.query}, batch {r.batch_id}")
        out.append(f"  {r.finding.message if r.finding else culprit_sentence(r.located.to_details())}")
        rec = r.located.record
        if rec is not None:
            out.append(f"  topic      {rec.topic}")
            out.append(f"  partition  {rec.partition}")
            out.append(f"  offset     {rec.offset}")
            out.append(f"  key        {rec.key!r}" if rec.key is not None else "  key        (none)")
            if rec.timestamp is not None:
                out.append(f"  timestamp  {rec.timestamp.isoformat()} ({rec.timestamp_type})")
            field = r.located.event_time_field or "record timestamp"
            raw = f" = {rec.event_time_raw!r}" if rec.event_time_raw is not None else ""
            out.append(f"  event time {rec.event_time.isoformat()} ({field}{raw})")
        ranges = ", ".join(x.describe() for x in r.located.ranges)
        out.append(f"  searched   {ranges} by {r.located.method}; {r.located.scanned} records read")
        out.extend(f"  note: {n}" for n in r.located.notes)
        out.append("")
    return "\n".join(out).rstrip()


def render_json(results: list[LocateResult], errors: list[str]) -> str:
    """``{"located": [{"query", "batch_id", "finding": {"rule", "severity", "message", "details"} | null,
    "culprit": {...}}], "errors": [...]}`` (``culprit``: :meth:`Located.to_details`)."""
    doc = {
        "located": [
            {
                "query": r.query,
                "batch_id": r.batch_id,
                "finding": (
                    {"rule": r.finding.rule, "severity": r.finding.severity.label(), "message": r.finding.message,
                     "details": r.finding.details}
                    if r.finding is not None else None
                ),
                "culprit": r.located.to_details(),
            }
            for r in results
        ],
        "errors": errors,
    }  # fmt: skip
    return json.dumps(doc, indent=2, default=str)
