"""Gather a detailed health report from the store, and write report files.

:func:`collect` reads each job's samples over the period, the stored alerts and the runs, keeps the jobs
that the job filter selects (label matchers over ``engine``, ``job_id`` and ``job_name``, as in silences:
:func:`monitor.alerts.silences.parse_matcher`), and builds :func:`monitor.reports.detailed.build_detailed_report`.
:func:`settings_from_rules` takes the targets from the ``rules:`` section (``freshness.target``,
``future_timestamp.skew``, ``state_growth.limit_rows``). :func:`write_files` writes the report in each
asked format into a directory, named ``<report>-<UTC time>.<ext>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from monitor.alerts.silences import Matcher, matches_all, parse_matcher
from monitor.durations import parse_timedelta
from monitor.model import Sample
from monitor.reports.detailed import DetailedReport, ReportSettings, build_detailed_report
from monitor.reports.render import Format, render
from monitor.store import load_samples
from monitor.store.alert_repo import load_alerts
from monitor.store.views import job_runs

__all__ = ["collect", "job_labels", "parse_matchers", "settings_from_rules", "write_files"]


def parse_matchers(texts: Iterable[str]) -> tuple[Matcher, ...]:
    """``["job_name=~payments_.*", "engine=spark"]`` -> matchers (Alertmanager syntax).

    Raises:
        InputError: a malformed matcher (the message names it).
    """
    return tuple(parse_matcher(t) for t in texts if t.strip())


def job_labels(engine: str, job_id: str, name: str | None) -> dict[str, str]:
    """The labels a report's matchers see for a job."""
    return {"engine": engine, "job_id": job_id, "job_name": name or ""}


def settings_from_rules(rules: Mapping[str, Any] | None) -> ReportSettings:
    """:class:`ReportSettings` from the config's ``rules:`` mapping (durations as ``30m`` text or seconds).

    Raises:
        InputError: a duration that does not parse.
    """
    rules = rules or {}

    def duration(rule: str, key: str, default: timedelta) -> timedelta:
        value = (rules.get(rule) or {}).get(key)
        if value is None:
            return default
        if isinstance(value, timedelta):
            return value
        return parse_timedelta(str(value), what=f"rules.{rule}.{key}")

    limit = (rules.get("state_growth") or {}).get("limit_rows")
    return ReportSettings(
        freshness_target=duration("freshness", "target", timedelta(minutes=15)),
        future_skew=duration("future_timestamp", "skew", timedelta(hours=1)),
        state_limit_rows=None if limit is None else int(limit),
    )


def collect(
    session: Session,
    name: str,
    since: datetime,
    until: datetime,
    *,
    job: str | None = None,
    matchers: Sequence[Matcher] = (),
    settings: ReportSettings | None = None,
) -> DetailedReport:
    """The detailed report of the jobs selected by ``job`` (a job id or name) and ``matchers``.

    Raises:
        ValueError: a naive time.
    """
    by_job: dict[tuple[str, str], list[Sample]] = {}
    for s in load_samples(session, since=since, until=until):
        by_job.setdefault((s.job.engine.value, s.job.job_id), []).append(s)
    alerts = list(load_alerts(session).values())

    def wanted(engine: str, job_id: str, job_name: str | None) -> bool:
        if job is not None and job not in (job_id, job_name):
            return False
        return matches_all(matchers, job_labels(engine, job_id, job_name))

    names = {k: next((s.job.name for s in reversed(v) if s.job.name), None) for k, v in by_job.items()}
    for a in alerts:
        key = (a.labels.get("engine", ""), a.labels.get("job_id", ""))
        names.setdefault(key, a.annotations.get("job_name"))
    keep = {k for k, n in names.items() if wanted(k[0], k[1], n)}
    samples = {k: v for k, v in by_job.items() if k in keep}
    kept_alerts = [a for a in alerts if (a.labels.get("engine", ""), a.labels.get("job_id", "")) in keep]
    runs = {k: [(r.run_id, r.first_seen) for r in job_runs(session, k[0], k[1])] for k in keep}
    return build_detailed_report(name, since, until, samples, kept_alerts, runs, settings)


def write_files(report: DetailedReport, directory: Path, formats: Iterable[Format]) -> list[Path]:
    """Write ``report`` into ``directory`` (created if missing) once per format; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = report.generated_at.strftime("%Y%m%dT%H%M%SZ")
    out = []
    for fmt in formats:
        path = directory / f"{report.name}-{stamp}.{fmt}"
        path.write_text(render(report, fmt), encoding="utf-8")
        out.append(path)
    return out
