"""Read job facts from the store: one job (:func:`load_job_facts`) or every job of a period
(:func:`load_period_facts`), and the targets from the config's ``rules:`` (:func:`settings_from_rules`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from monitor.alerts.lifecycle import Alert
from monitor.durations import parse_timedelta
from monitor.facts.compute import job_facts
from monitor.facts.model import FactsSettings, JobFacts
from monitor.facts.pipeline import PipelineFacts, pipeline_facts
from monitor.model import Engine, FindingEpisode, JobRef, Sample
from monitor.store import load_episodes, load_samples
from monitor.store.alert_repo import load_alerts
from monitor.store.views import job_runs, newest_sample_time
from rules.pipeline import PipelineConfig

__all__ = ["data_period", "load_job_facts", "load_period_facts", "load_pipeline_facts", "settings_from_rules"]


def data_period(session: Session, length: timedelta, now: datetime) -> tuple[datetime, datetime]:
    """The period ``[since, until)`` of ``length`` that every surface (``tidegauge report``, the dashboard)
    shows, on the data's own clock: it ends just after the newest stored sample (``until`` = that sample's
    observation time + 1 ms), never after ``now``; on an empty store it ends at ``now``. A live daemon's
    newest sample is seconds old, so this is "the last ``length``"; a scanned recording of 2024 is shown
    as its own last ``length``, not as an empty week of today.

    Args:
        session: an open store session.
        length: the period's length (positive).
        now: the caller's clock (aware UTC), read once by the composition root.

    Returns:
        ``(since, until)``, aware UTC datetimes with ``until - since == length``.
    """
    newest = newest_sample_time(session)
    until = now if newest is None else min(now, newest + timedelta(milliseconds=1))
    return until - length, until


def settings_from_rules(
    rules: Mapping[str, Any] | None, pipelines: Sequence[PipelineConfig] = ()
) -> FactsSettings:
    """:class:`FactsSettings` from the config's ``rules:`` mapping (durations as ``30m`` text, seconds or
    :class:`timedelta`): ``freshness.target``, ``future_timestamp.skew``/``min_jump``/``jump_factor``,
    ``state_growth.limit_rows``/``limit_bytes``, ``pipeline_freshness.target`` (unless disabled); and the
    config's ``pipelines:`` section.

    Raises:
        InputError: a duration that does not parse (the message names ``rules.<rule>.<key>``).
    """
    rules = rules or {}
    defaults = FactsSettings()

    def section(rule: str) -> Mapping[str, Any]:
        value = rules.get(rule)
        return value if isinstance(value, Mapping) else {}

    def duration(rule: str, key: str, default: timedelta) -> timedelta:
        value = section(rule).get(key)
        if value is None:
            return default
        if isinstance(value, timedelta):
            return value
        return parse_timedelta(str(value), what=f"rules.{rule}.{key}")

    def opt_int(rule: str, key: str) -> int | None:
        value = section(rule).get(key)
        return None if value is None else int(value)

    factor = section("future_timestamp").get("jump_factor")
    fresh = section("pipeline_freshness")
    pipeline_on = fresh.get("enabled") is not False and fresh.get("target") is not None
    return FactsSettings(
        freshness_target=duration("freshness", "target", defaults.freshness_target),
        future_skew=duration("future_timestamp", "skew", defaults.future_skew),
        min_jump=duration("future_timestamp", "min_jump", defaults.min_jump),
        jump_factor=defaults.jump_factor if factor is None else float(factor),
        state_limit_rows=opt_int("state_growth", "limit_rows"),
        state_limit_bytes=opt_int("state_growth", "limit_bytes"),
        pipelines=tuple(pipelines),
        pipeline_target=duration("pipeline_freshness", "target", timedelta(0)) if pipeline_on else None,
    )


def _key(alert: Alert) -> tuple[str, str]:
    return alert.labels.get("engine", ""), alert.labels.get("job_id", "")


def load_period_facts(
    session: Session,
    since: datetime,
    until: datetime,
    *,
    settings: FactsSettings | None = None,
    wanted: Callable[[str, str, str | None], bool] | None = None,
) -> tuple[list[JobFacts], dict[tuple[str, str], list[Alert]]]:
    """The facts of every job with samples, a finding episode or an alert in ``[since, until)``, and each
    job's alerts by ``(engine, job_id)``.

    Args:
        wanted: ``(engine, job_id, job name) -> keep?`` (a report's job filter); all jobs when ``None``.

    Raises:
        ValueError: a naive time.
    """
    by_job: dict[tuple[str, str], list[Sample]] = {}
    for s in load_samples(session, since=since, until=until):
        by_job.setdefault((s.job.engine.value, s.job.job_id), []).append(s)
    alerts: dict[tuple[str, str], list[Alert]] = {}
    for a in load_alerts(session).values():
        alerts.setdefault(_key(a), []).append(a)
    episodes: dict[tuple[str, str], list[FindingEpisode]] = {}
    for e in load_episodes(session, since=since, until=until):
        episodes.setdefault((e.job.engine.value, e.job.job_id), []).append(e)
    names: dict[tuple[str, str], str | None] = {
        k: next((s.job.name for s in reversed(v) if s.job.name), None) for k, v in by_job.items()
    }
    for key, found in episodes.items():
        names.setdefault(key, next((e.job.name for e in reversed(found) if e.job.name), None))
    for key, items in alerts.items():
        if key in names or key[0] not in {e.value for e in Engine}:
            continue
        if any(a.active_at < until and (a.resolved_at is None or a.resolved_at >= since) for a in items):
            names[key] = next((a.annotations["job_name"] for a in items if "job_name" in a.annotations), None)
    out = []
    for key in sorted(names):
        if wanted is not None and not wanted(key[0], key[1], names[key]):
            continue
        runs = [(r.run_id, r.first_seen) for r in job_runs(session, key[0], key[1])]
        out.append(job_facts(
            by_job.get(key, []), since, until, alerts=alerts.get(key, []), runs=runs, settings=settings,
            job=JobRef(Engine(key[0]), key[1], name=names[key]), episodes=episodes.get(key, []),
        ))
    return out, {k: v for k, v in alerts.items() if k in names}


def load_job_facts(
    session: Session, engine: Engine, job_id: str, since: datetime, until: datetime,
    settings: FactsSettings | None = None,
) -> JobFacts | None:
    """One job's facts over ``[since, until)``; ``None`` when the job has no sample or finding episode in
    the period and no stored alert.

    Raises:
        ValueError: a naive time.
    """
    samples = load_samples(session, job_id=job_id, since=since, until=until, engine=engine)
    alerts = [a for a in load_alerts(session).values() if _key(a) == (engine.value, job_id)]
    episodes = load_episodes(session, engine=engine, job_id=job_id, since=since, until=until)
    if not samples and not alerts and not episodes:
        return None
    runs = [(r.run_id, r.first_seen) for r in job_runs(session, engine.value, job_id)]
    name = next((a.annotations["job_name"] for a in alerts if "job_name" in a.annotations), None)
    return job_facts(samples, since, until, alerts=alerts, runs=runs, settings=settings,
                     job=JobRef(engine, job_id, name=name), episodes=episodes)


def load_pipeline_facts(
    session: Session, since: datetime, until: datetime, *, config: Sequence[PipelineConfig] = (),
    target_s: float | None = None,
) -> list[PipelineFacts]:
    """Every pipeline among the jobs with samples in ``[since, until)`` (:func:`monitor.facts.pipeline.
    pipeline_facts`: the graph from what the jobs report plus ``config``, the ``pipelines:`` section), with
    its stored ``pipeline_freshness`` episodes of the period and its SLO from the newest ``pipeline_slo`` one;
    ``target_s``: the rule's target (seconds).

    Raises:
        ValueError: a naive time.
    """
    by_job: dict[tuple[str, str], list[Sample]] = {}
    for s in load_samples(session, since=since, until=until):
        by_job.setdefault((s.job.engine.value, s.job.job_id), []).append(s)
    episodes = load_episodes(session, since=since, until=until)
    return pipeline_facts({f"{k[0]}:{k[1]}": v for k, v in by_job.items()}, since, until, config=config,
                          target_s=target_s, episodes=episodes)
