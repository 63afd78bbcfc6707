"""Gather a detailed health report from the store, and write report files.

:func:`collect` reads the facts of each job over the period (:func:`monitor.facts.load_period_facts`: its
samples, finding episodes, alerts and runs), keeps the jobs that the job filter selects (label matchers over
``engine``, ``job_id`` and ``job_name``, as in silences: :func:`monitor.alerts.silences.parse_matcher`), and
builds :func:`monitor.reports.detailed.build_detailed_report`. :func:`settings_from_rules` (re-exported from
:mod:`monitor.facts.source`) takes the targets from the ``rules:`` section. :func:`write_files` writes the report in each
asked format into a directory, named ``<report>-<UTC time>.<ext>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session

from monitor.alerts.silences import Matcher, matches_all, parse_matcher
from monitor.facts import FactsSettings
from monitor.facts.source import load_period_facts, load_pipeline_facts, settings_from_rules
from monitor.reports.detailed import DetailedReport, build_detailed_report
from monitor.reports.render import Format, render
from monitor.store.views import job_summaries
from monitor.timefmt import format_basic

__all__ = ["collect", "job_labels", "parse_matchers", "settings_from_rules", "write_files"]  # settings_from_rules: monitor.facts.source


def parse_matchers(texts: Iterable[str]) -> tuple[Matcher, ...]:
    """``["job_name=~payments_.*", "engine=spark"]`` -> matchers (Alertmanager syntax).

    Raises:
        InputError: a malformed matcher (the message names it).
    """
    return tuple(parse_matcher(t) for t in texts if t.strip())


def job_labels(engine: str, job_id: str, name: str | None) -> dict[str, str]:
    """The labels a report's matchers see for a job."""
    return {"engine": engine, "job_id": job_id, "job_name": name or ""}


def collect(
    session: Session,
    name: str,
    since: datetime,
    until: datetime,
    *,
    job: str | None = None,
    matchers: Sequence[Matcher] = (),
    settings: FactsSettings | None = None,
) -> DetailedReport:
    """The detailed report of the jobs selected by ``job`` (a job id or name) and ``matchers``, from their
    facts (:func:`monitor.facts.load_period_facts`); the selected jobs of the database with nothing in the
    period are named in :attr:`DetailedReport.outside_period`; the pipelines with a selected job
    (:func:`monitor.facts.source.load_pipeline_facts`, with ``settings.pipelines`` and
    ``settings.pipeline_target``) in :attr:`DetailedReport.pipelines`.

    Raises:
        ValueError: a naive time.
    """

    def wanted(engine: str, job_id: str, job_name: str | None) -> bool:
        if job is not None and job not in (job_id, job_name):
            return False
        return matches_all(matchers, job_labels(engine, job_id, job_name))

    facts, alerts = load_period_facts(session, since, until, settings=settings, wanted=wanted)
    seen = {(f.engine.value, f.job_id) for f in facts}
    outside = [s.name or s.job_id for s in job_summaries(session)
               if (s.engine, s.job_id) not in seen and wanted(s.engine, s.job_id, s.name)]
    cfg = settings or FactsSettings()
    pipelines = [
        p for p in load_pipeline_facts(
            session, since, until, config=cfg.pipelines,
            target_s=None if cfg.pipeline_target is None else cfg.pipeline_target.total_seconds(),
        )
        if any(wanted(n.job.engine.value, n.job.job_id, n.job.name) for n in p.nodes)
    ]  # fmt: skip
    return build_detailed_report(name, since, until, facts, alerts, outside, pipelines)


def write_files(report: DetailedReport, directory: Path, formats: Iterable[Format]) -> list[Path]:
    """Write ``report`` into ``directory`` (created if missing) once per format; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = format_basic(report.generated_at)
    out = []
    for fmt in formats:
        path = directory / f"{report.name}-{stamp}.{fmt}"
        path.write_text(render(report, fmt), encoding="utf-8")
        out.append(path)
    return out
