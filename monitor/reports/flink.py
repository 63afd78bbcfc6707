"""What ``tidegauge check flink`` prints: per job its vertices and subtasks, and the findings.

Pure functions over samples from :class:`collectors.flink.FlinkRestCollector`, read through the job facts
(:func:`monitor.facts.job_facts`), and findings from :func:`rules.registry.evaluate` (the same rules the
daemon runs). The newest sample of each job, vertex
and subtask is shown; unknown values are ``null`` in JSON and ``-`` in text (never 0 or 1970).

JSON shape::

    {"jobs": [{"jid", "name", "state", "restarts", "flink_version", "flink_version_followed", "watermark_ms",
      "holding_min", "exception", "checkpoints_failed", "vertices": [{"id", "name",
      "parallelism", "late_records_dropped", "subtasks": [{"subtask", "input_watermark_ms",
      "output_watermark_ms", "source_idle_ms", "idle_ms", "records_in", "records_out",
      "backpressure_ratio", "end_of_input", "splits"?: [{"split", "topic", "partition", "watermark_ms",
      "active_ms_per_s", "paused_ms_per_s", "idle_ms_per_s"}]}]}]}],
     "findings": [{"rule", "severity", "job", "jid", "vertex", "vertex_id", "subtask", "message", "labels",
       "culprit"?, "split"?}],

``splits`` (Flink 2.1+ split-level watermarks, :func:`collectors.flink.samples.split_extra`) is there for a
source subtask whose splits were read; a finding's ``split`` is the split (Kafka partition) it names as
holding the watermark (``split_watermark``'s ``holding_split``, ``watermark_stall``'s ``culprit_split``).
     "errors": ["<endpoint>: <message>", ...]}
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from monitor.facts import JobFacts, job_facts
from monitor.model import MIN_TIME, CollectorError, Finding, Sample, Severity, datetime_to_ms
from monitor.timefmt import format_epoch_ms
from monitor.versions import FlinkVersionError, modelled_flink, parse_flink_version
from rules.common import flink_version

__all__ = ["build_check_report", "render_json", "render_text"]


def _facts(samples: Sequence[Sample]) -> list[JobFacts]:
    """Each job's facts over every poll given (:func:`monitor.facts.job_facts`)."""
    by_job: dict[str, list[Sample]] = {}
    for s in samples:
        by_job.setdefault(s.job.job_id, []).append(s)
    out = []
    for group in by_job.values():
        until = max(s.observed_at for s in group) + timedelta(microseconds=1)
        out.append(job_facts(group, MIN_TIME, until))
    return out


def build_check_report(
    samples: Sequence[Sample], findings: Sequence[Finding], errors: Sequence[CollectorError] = ()
) -> dict[str, Any]:
    """The report document (see the module docstring), read from each job's facts (the newest sample of
    each job, vertex and subtask; who holds the minimum watermark). Jobs by name; vertices in Flink's
    order (sources first); subtasks by index."""
    out_jobs = []
    vertex_names: dict[tuple[str, str], str] = {}
    for facts in sorted(_facts(samples), key=lambda f: f.job_id):
        job_sample = facts.latest
        job: dict[str, Any] = {
            "jid": None if job_sample is None else job_sample.job.run_id,
            "name": facts.name,
            "state": None if job_sample is None else job_sample.extra.get("state"),
            "restarts": None if job_sample is None else job_sample.restart_count,
            "flink_version": None if job_sample is None else job_sample.extra.get("flink_version"),
            # the release whose semantics the rules follow for it (the newest modelled when unknown)
            "flink_version_followed": "{}.{}".format(
                *modelled_flink(None if job_sample is None else flink_version(job_sample))
            ),
            "watermark_ms": None if job_sample is None else datetime_to_ms(job_sample.watermark),
            "holding_min": None if facts.holding_min is None else facts.holding_min.name,
            "vertices": [],
        }
        if job_sample is not None:
            job["exception"] = job_sample.extra.get("exception")
            job["checkpoints_failed"] = job_sample.checkpoints_failed
        vertices: dict[str, dict[str, Any]] = {}
        for series in facts.scopes:  # Flink's topological order is the order the vertices were first seen
            s = series.newest
            operator = series.scope.operator
            if operator is None:
                continue
            if job["jid"] is None:
                job["jid"] = s.job.run_id
            vertex = vertices.setdefault(operator, {
                "id": operator, "name": s.extra.get("vertex"), "parallelism": s.extra.get("parallelism"),
                "late_records_dropped": None, "subtasks": [],
            })
            vertex_names[(facts.job_id, operator)] = str(s.extra.get("vertex"))
            late = s.extra.get("late_records_dropped")
            if late is not None:
                vertex["late_records_dropped"] = (vertex["late_records_dropped"] or 0) + late
            vertex["subtasks"].append({
                "subtask": series.scope.subtask,
                "input_watermark_ms": s.extra.get("input_watermark_ms"),
                "output_watermark_ms": s.extra.get("output_watermark_ms"),
                "source_idle_ms": s.extra.get("source_idle_ms"),
                "idle_ms": s.idle_ms,
                "records_in": s.extra.get("records_in"),
                "records_out": s.extra.get("records_out"),
                "backpressure_ratio": s.backpressure_ratio,
                "end_of_input": bool(s.watermark_end_of_input),
                **({"splits": s.extra["splits"]} if s.extra.get("splits") else {}),
            })
        order: dict[str, int] = {}
        for smp in samples:
            if smp.job.job_id == facts.job_id and smp.scope.operator is not None:
                order.setdefault(smp.scope.operator, len(order))
        job["vertices"] = sorted(vertices.values(), key=lambda v: order.get(v["id"], 0))
        for v in job["vertices"]:
            v["subtasks"].sort(key=lambda t: -1 if t["subtask"] is None else t["subtask"])
        out_jobs.append(job)
    out_findings = [
        {
            "rule": f.rule,
            "severity": f.severity.label(),
            "job": f.job.job_id,
            "jid": f.job.run_id,
            "vertex": vertex_names.get((f.job.job_id, f.scope.operator)) if f.scope.operator else None,
            "vertex_id": f.scope.operator,
            "subtask": f.scope.subtask,
            "message": f.message,
            "labels": dict(f.labels),
            # the located record of a future-timestamp jump (``check flink --locate-event-time``)
            **({"culprit": f.details["culprit"]} if "culprit" in f.details else {}),
            **({"split": split} if (split := f.details.get("holding_split") or f.details.get("culprit_split")) else {}),
        }
        for f in findings
    ]
    return {
        "jobs": out_jobs,
        "findings": out_findings,
        "errors": [e.message if e.target in e.message else f"{e.target}: {e.message}" for e in errors],
    }


def render_json(report: dict[str, Any]) -> str:
    """The report as indented JSON."""
    return json.dumps(report, indent=2, sort_keys=False)


def _time(ms: int | None) -> str:
    return "-" if ms is None else format_epoch_ms(ms)


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _version_text(version: str | None, followed: str) -> str:
    """The job header's Flink release: as ``/config`` gave it, with the release the rules follow when that is
    another one ("2.4-SNAPSHOT", "1.20.1": read by :func:`monitor.versions.parse_flink_version`, the one
    parser of the rules and the collector), or unknown."""
    if not version:
        return f", Flink version unknown (/config not read): rules follow {followed}"
    try:
        read: str | None = "{}.{}".format(*parse_flink_version(version))
    except FlinkVersionError:
        read = None
    return f", Flink {version}" + ("" if read == followed else f" (rules follow {followed})")


def render_text(report: dict[str, Any]) -> str:
    """The report as text: per job a header, per vertex a table of subtasks, then the findings."""
    lines: list[str] = []
    for job in report["jobs"]:
        lines.append(
            f"job {job['name']} ({job['jid']}): {job['state'] or '-'}, restarts {_cell(job['restarts'])}, "
            f"watermark {_time(job['watermark_ms'])}"
            + _version_text(job["flink_version"], job["flink_version_followed"])
        )
        if job.get("exception"):
            lines.append(f"  last exception: {job['exception']}")
        if job.get("holding_min"):
            lines.append(f"  holds the minimum watermark: {job['holding_min']}")
        for v in job["vertices"]:
            lines.append(
                f"  vertex {v['name']} [{v['id']}] parallelism {_cell(v['parallelism'])}, late records dropped "
                f"{_cell(v['late_records_dropped'])}"
            )
            lines.append(
                "    subtask  input watermark           output watermark          sourceIdleTime ms  quiet ms  "
                "task records in/out"
            )
            for t in v["subtasks"]:
                out_wm = "+inf (end of input)" if t["end_of_input"] else _time(t["output_watermark_ms"])
                lines.append(
                    f"    {t['subtask']:>7}  {_time(t['input_watermark_ms']):<24}  {out_wm:<24}  "
                    f"{_cell(t['source_idle_ms']):>17}  {_cell(t['idle_ms']):>8}  "
                    f"{_cell(t['records_in'])}/{_cell(t['records_out'])}"
                )
                for sp in t.get("splits", ()):
                    lines.append(
                        f"             split {sp['split']}: watermark {_time(sp['watermark_ms'])}, ms/s reading "
                        f"{_ms(sp['active_ms_per_s'])}, paused by alignment {_ms(sp['paused_ms_per_s'])}, idle "
                        f"{_ms(sp['idle_ms_per_s'])}"
                    )
        lines.append("")
    if report["jobs"]:
        lines.append(
            "(sourceIdleTime: the source's own idle time, '-' off a source; quiet: the longer of it and the time "
            "the subtask's record counters have not moved; records are the task's, so a source chained with a "
            "filter that drops everything shows 0 out while it reads)"
        )
    if report["findings"]:
        ranks = {s.label(): s for s in Severity}
        counts = Counter(ranks[f["severity"]] for f in report["findings"])
        lines.append("findings (" + ", ".join(f"{n} {s.label()}" for s, n in sorted(counts.items(), reverse=True)) + "):")
        for f in report["findings"]:
            where = f["job"]
            if f["vertex"]:
                where += f" / {f['vertex']}"
            if f["subtask"] is not None:
                where += f" / subtask {f['subtask']}"
            check = f["labels"].get("check")  # the rule's sub-check, as the README names it
            rule = f"{f['rule']}/{check}" if check else f["rule"]
            lines.append(f"  [{f['severity']}] {rule} ({where}): {f['message']}")
    else:
        lines.append("findings: none")
    for e in report["errors"]:
        lines.append(f"error: {e}")
    return "\n".join(lines)
