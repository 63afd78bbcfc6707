"""What ``tidegauge check kafka`` prints: per group, topic and partition the offsets, the lag in records
and seconds and the Burrow status; then the findings of the lag rules.

The status of a partition is its ``consumer_lag`` finding's (WARN, STALL, STOP, REWIND, or NEVER_COMMITTED:
a live member owns it, the group never committed it, and records wait), else ``OK``;
``UNKNOWN`` when its lag is unknown (no committed offset, deleted topic) or when only one poll was made
and the partition is behind (one observation is no trend: poll twice with ``--interval``). A group's
status is the worst of its partitions' (Burrow's group status), ``UNKNOWN`` when none is known.

JSON (``--format json``)::

    {"groups": [{"group", "state", "members", "status", "lag", "lag_seconds", "unknown_partitions",
                 "skew_partitions", "lost_records", "uncommitted_partitions", "group_type", "churn", "notes", "error",
                 "partitions": [{"topic", "partition", "committed", "log_start", "log_end", "lag",
                                 "lag_seconds", "lag_seconds_min", "lag_seconds_method", "lost", "skew",
                                 "assigned", "status", "note", "uncommitted"}]}],

``churn`` is ``null`` after one poll; with ``--interval``, what changed between the two polls:
``{"rebalanced", "members_joined", "members_left", "partitions_moved"}`` (:mod:`collectors.kafka.churn`).
``uncommitted`` is ``null`` unless a live member owns the partition and the group never committed it:
``{"waiting_if_earliest", "waiting_if_latest", "auto_offset_reset", "since", "oldest_waiting"}`` (records;
ISO-8601 UTC times; ``auto_offset_reset`` ``null`` when the target does not give it:
:class:`collectors.kafka.lag.Uncommitted`).
     "findings": [{"rule", "severity", "job_id", "group", "topic", "partition", "message", "details"}],
     "polls": N, "errors": [...]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.kafka import GroupLag, PartitionLag
from monitor.facts import group_status, partition_status
from monitor.model import Finding, Severity, ms_to_datetime
from monitor.timefmt import format_instant, format_lag

__all__ = ["KafkaReport", "render_json", "render_text"]



@dataclass
class KafkaReport:
    """The newest poll's groups, the findings of the lag rules and the number of polls made."""

    groups: list[GroupLag]
    findings: list[Finding]
    polls: int
    errors: list[str] = field(default_factory=list)

    def partition_status(self, group: str, p: PartitionLag) -> str:
        """The partition's Burrow status (:func:`monitor.facts.partition_status` of its ``consumer_lag``
        finding, its lag and the polls made)."""
        found = next(
            (str(f.details.get("status", "UNKNOWN")) for f in self.findings
             if f.rule == "consumer_lag" and f.job.name == group
             and f.scope.source == p.topic and f.scope.partition == p.partition),
            None,
        )
        return partition_status(found, p.lag, self.polls)

    def group_status(self, g: GroupLag) -> str:
        """The group's status (:func:`monitor.facts.group_status`: the worst of its partitions')."""
        behind = self.polls < 2 and any((p.lag or 0) > 1 for p in g.partitions)
        return group_status(
            (self.partition_status(g.group, p) for p in g.partitions),  # type: ignore[misc]
            behind_after_one_poll=behind,
        )

    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), default=Severity.OK)


def _num(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _instant(epoch_ms: int | None) -> str | None:
    at = ms_to_datetime(epoch_ms)
    return None if at is None else format_instant(at)


def _uncommitted_json(p: PartitionLag) -> dict[str, Any] | None:
    u = p.uncommitted
    if u is None:
        return None
    return {"waiting_if_earliest": u.if_earliest, "waiting_if_latest": u.if_latest,
            "auto_offset_reset": u.auto_offset_reset, "since": _instant(u.since_ms),
            "oldest_waiting": _instant(u.oldest_record_ms)}


def _partition_json(report: KafkaReport, group: str, p: PartitionLag) -> dict[str, Any]:
    return {
        "topic": p.topic, "partition": p.partition, "committed": p.committed, "log_start": p.log_start,
        "log_end": p.log_end, "lag": p.lag, "lag_seconds": _num(p.lag_seconds),
        "lag_seconds_min": _num(p.lag_seconds_min), "lag_seconds_method": p.lag_seconds_method,
        "lost": p.lost, "skew": p.skew, "assigned": p.assigned, "status": report.partition_status(group, p),
        "note": "; ".join(n for n in (p.note, p.lag_seconds_note) if n) or None,
        "uncommitted": _uncommitted_json(p),
    }


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule, "severity": f.severity.label(), "job_id": f.job.job_id, "group": f.job.name,
        "topic": f.scope.source, "partition": f.scope.partition, "message": f.message, "details": f.details,
    }


def render_json(report: KafkaReport) -> str:
    """The report as one JSON document (shape: the module docstring)."""
    groups = [
        {
            "group": g.group, "state": g.state, "members": g.members, "status": report.group_status(g),
            "lag": g.lag, "lag_seconds": _num(g.lag_seconds), "unknown_partitions": g.unknown_partitions,
            "skew_partitions": g.skew_partitions, "lost_records": g.lost_records,
            "uncommitted_partitions": len(g.uncommitted), "group_type": g.group_type,
            "churn": None if g.churn is None else {
                "rebalanced": g.churn.rebalanced, "members_joined": g.churn.joined, "members_left": g.churn.left,
                "partitions_moved": g.churn.moved},
            "notes": g.notes,
            "error": g.error, "partitions": [_partition_json(report, g.group, p) for p in g.partitions],
        }
        for g in report.groups
    ]
    doc = {"groups": groups, "findings": [_finding_json(f) for f in report.findings], "polls": report.polls,
           "errors": report.errors}
    return json.dumps(doc, indent=2)


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def render_text(report: KafkaReport) -> str:
    """The report as text: one block per group, one table row per partition, then the findings."""
    out: list[str] = []
    for g in report.groups:
        if g.error is not None:
            out.append(f"group {g.group}: error: {g.error}")
            out.append("")
            continue
        secs = "-" if g.lag_seconds is None else format_lag(g.lag_seconds)
        out.append(
            f"group {g.group}  state {g.state}  members {g.members}  status {report.group_status(g)}  "
            f"lag {_cell(g.lag)}  lag_seconds {secs}"
        )
        for note in g.notes:
            out.append(f"  note: {note}")
        if g.partitions:
            rows = [["topic", "partition", "committed", "log_start", "log_end", "lag", "lag_s", "status", "note"]]
            for p in g.partitions:
                secs_cell = _cell(p.lag_seconds)
                if p.lag_seconds is None and p.lag_seconds_min is not None:
                    secs_cell = f">={p.lag_seconds_min:.0f}"
                note = "; ".join(n for n in (p.note, p.lag_seconds_note) if n)
                rows.append([
                    p.topic, str(p.partition), _cell(p.committed), _cell(p.log_start), _cell(p.log_end),
                    _cell(p.lag), secs_cell, report.partition_status(g.group, p), note,
                ])
            out.extend("  " + line for line in _table(rows))
        out.append("")
    if report.findings:
        out.append("findings:")
        for f in report.findings:
            out.append(f"  [{f.severity.label()}] {f.rule}: {f.message}")
    else:
        out.append("findings: none")
    if report.polls < 2:
        out.append("(one poll: statuses of partitions behind need two; use --interval)")
    return "\n".join(out)
