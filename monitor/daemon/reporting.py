"""The reporting stage: scheduled health reports, queued for a receiver or written to files.

:meth:`ReportStage.report` builds a scheduled health report (:func:`monitor.reports.scheduled.build_report`)
from the stored samples and alerts and queues it in the outbox for its receiver (one row per run, keyed by
report name and scheduled minute); the dispatch stage delivers it like any notification.
:meth:`ReportStage.write_report` writes a detailed report (:mod:`monitor.reports.detailed`, with the
period's finding episodes) into a directory.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.silences import Matcher, matches_all
from monitor.daemon.tick import tick_time
from monitor.model import AlertState
from monitor.reports.detailed import ReportSettings
from monitor.reports.render import Format, to_html
from monitor.reports.scheduled import INPUT_WINDOW as REPORT_INPUT_WINDOW
from monitor.reports.scheduled import HealthReport, build_report
from monitor.reports.source import collect, job_labels, write_files
from monitor.store import load_recent_samples
from monitor.store.alert_repo import enqueue_report, load_alerts

__all__ = ["ReportStage"]

log = logging.getLogger(__name__)


class ReportStage:
    """Runs scheduled reports (see the module docstring).

    Args:
        sessions: the store's session factory.
    """

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def report(
        self,
        name: str,
        receiver: str,
        now: datetime,
        matchers: Sequence[Matcher] = (),
        *,
        detail_since: timedelta | None = None,
        settings: ReportSettings | None = None,
    ) -> HealthReport:
        """One scheduled run of report ``name`` at ``now``: build it from the stored samples (each job's
        last ``lookback``) and current alerts, and queue it for ``receiver`` in the outbox, in one
        transaction. A second run for the same scheduled minute queues nothing (same idempotency key).
        ``matchers`` (over ``engine``, ``job_id``, ``job_name``) keep only the jobs they match. With
        ``detail_since`` the detailed report over ``[now - detail_since, now)`` rides along as JSON and HTML
        (``HealthReport.detail`` / ``.html``, for webhook receivers).

        Returns:
            The report built.
        """
        when = tick_time(now)
        with self._sessions.begin() as session:
            samples = load_recent_samples(session, REPORT_INPUT_WINDOW)
            alerts = load_alerts(session, states=[AlertState.FIRING, AlertState.PENDING])
            if matchers:
                samples = {
                    k: v for k, v in samples.items()
                    if matches_all(matchers, job_labels(k[0].value, k[1], next((s.job.name for s in reversed(v) if s.job.name), None)))
                }  # fmt: skip
                alerts = {
                    fp: a for fp, a in alerts.items()
                    if matches_all(matchers, job_labels(a.labels.get("engine", ""), a.labels.get("job_id", ""),
                                                        a.annotations.get("job_name")))
                }  # fmt: skip
            report = build_report(name, when, samples, alerts.values())
            if detail_since is not None:
                detailed = collect(session, name, when - detail_since, when, matchers=matchers, settings=settings)
                report = dataclasses.replace(report, detail=detailed.to_json(), html=to_html(detailed))
            queued = enqueue_report(session, receiver, report, when)
        log.info(
            "report %s for %s (%d jobs, %s) %s",
            name,
            receiver,
            len(report.jobs),
            report.health.label(),
            "queued" if queued else "already queued for this minute",
        )
        return report

    def write_report(
        self,
        name: str,
        directory: Path,
        formats: Sequence[Format],
        since: timedelta,
        now: datetime,
        *,
        matchers: Sequence[Matcher] = (),
        settings: ReportSettings | None = None,
    ) -> list[Path]:
        """One scheduled run of a detailed report (:mod:`monitor.reports.detailed`) over ``[now - since, now)``,
        written into ``directory`` once per format (:func:`monitor.reports.source.write_files`).

        Returns:
            The files written.
        """
        when = tick_time(now)
        with self._sessions() as session:
            detailed = collect(session, name, when - since, when, matchers=matchers, settings=settings)
        paths = write_files(detailed, directory, formats)
        log.info("report %s: %d jobs (%s) written to %s", name, len(detailed.jobs), detailed.health,
                 ", ".join(str(p) for p in paths))
        return paths
