"""The dashboard's one data-access module: every page reads (and the Alerts page writes) through here.

Pages only render: they never run SQL, open the store or call collectors. The functions below read the
database the daemon writes (SQLite in WAL mode, so reading never blocks the daemon, or PostgreSQL) through
:mod:`monitor.store`, and are cached with Streamlit: the store is one ``st.cache_resource`` per process,
queries are ``st.cache_data`` with a short ``ttl`` (the daemon keeps writing), so a page rerun within the
ttl costs no query.

Configuration comes from the process environment, set by ``tidegauge dashboard`` (a composition root):
``TIDEGAUGE_DASHBOARD_DB`` (the URL; it may hold a password, so it is not on the command line),
``TIDEGAUGE_DASHBOARD_TOKEN`` (enables silence/expire; read-only without), ``TIDEGAUGE_DASHBOARD_REPORTS``
(a directory of generated report files). :func:`now` is the dashboard's one clock read.

Shapes: time columns are aware UTC ``pandas.Timestamp`` s; durations are seconds (``*_s``); ``None``/NaN
is unknown, never zero.
"""

from __future__ import annotations

import hmac
import html
import json
import os
import re
import shlex
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import streamlit as st

from dashboard.env import DB_ENV, PIPELINES_ENV, REPORTS_ENV, TOKEN_ENV
from dashboard.whatif_flink import FlinkWhatIf, flink_whatif
from monitor.alerts.silences import Silence, parse_matcher
from monitor.durations import parse_timedelta
from monitor.errors import InputError
from monitor.facts import FactsSettings, SloFacts, job_health, slo_text, waiting_text
from monitor.facts.pipeline import PipelineFacts
from monitor.facts.source import data_period, load_job_facts, load_pipeline_facts
from monitor.model import AlertState, Engine, FindingEpisode, worst_episode
from monitor.reports import DEFAULT_SINCE
from monitor.store import Store, load_episodes, load_samples, open_store
from monitor.store.alert_repo import add_silence as store_add_silence
from monitor.store.alert_repo import expire_silence as store_expire_silence
from monitor.store.alert_repo import list_silences, load_alerts
from monitor.store.views import (
    JobSummary,
    job_runs,
    job_summaries,
    newest_sample_time,
    series,
    stored_reports,
)
from monitor.text import batch_range, plain, plural
from monitor.timefmt import format_duration, format_lag

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = [
    "REPORT_PERIODS",
    "STALE_AFTER",
    "DatabaseReport",
    "FlinkWhatIf",
    "JobDetail",
    "PipelineView",
    "ReportFile",
    "add_silence",
    "alert_history",
    "alerts",
    "bytes_text",
    "count_text",
    "database_report",
    "db_label",
    "episodes",
    "expire_silence",
    "fleet",
    "human_lag",
    "job_detail",
    "now",
    "pipelines",
    "report_files",
    "report_json",
    "scheduled_reports",
    "silences",
    "token_configured",
    "token_ok",
    "whatif_flink",
]

#: A job whose newest sample is older than this stopped reporting.
STALE_AFTER = timedelta(minutes=2)
#: How far back the fleet's sparklines and a job's timelines reach (from the newest sample).
SPARK_WINDOW = timedelta(minutes=10)
JOB_WINDOW = timedelta(hours=2)
#: The period whose finding episodes the Fleet and Job pages show (back from the newest stored sample: the
#: data's own clock, so a scanned recording shows its findings whenever it is looked at).
PERIOD = timedelta(days=7)
_TTL = 5  # seconds


def now() -> datetime:
    """The dashboard's clock (aware UTC)."""
    return datetime.now(UTC)


@st.cache_resource(show_spinner=False)
def _store() -> Store:
    url = os.environ.get(DB_ENV)
    return open_store(url, environ=os.environ)


def db_label() -> str:
    """The database URL with any password hidden (for the sidebar)."""
    from monitor.store import redact_url

    return redact_url(_store().engine.url)


def token_configured() -> bool:
    """Whether a dashboard token is configured (silence/expire enabled)."""
    return bool(os.environ.get(TOKEN_ENV))


def token_ok(presented: str) -> bool:
    """Whether ``presented`` is the configured token (constant-time comparison)."""
    expected = os.environ.get(TOKEN_ENV, "")
    return bool(expected) and hmac.compare_digest(presented.encode(), expected.encode())


def human_lag(seconds: float | None) -> str:
    """A lag, freshness or duration in seconds as text (:func:`monitor.timefmt.format_lag`, the one
    formatter): ``"12 s"``, ``"3.5 min"``, ``"... ahead"`` when negative, ``"unknown"`` for None/NaN."""
    return format_lag(None if seconds is None or pd.isna(seconds) else float(seconds))


def count_text(value: Any, unit: str = "") -> str:
    """A count as ``"1,234"`` (with `` unit``, a plural: ``"1 row"``, ``"2 rows"``), ``"unknown"`` for None/NaN."""
    if value is None or pd.isna(value):
        return "unknown"
    if not unit:
        return f"{int(value):,}"
    return plural(int(value), unit.removesuffix("s"), unit)


def bytes_text(value: Any) -> str:
    """A size in bytes as ``"27.5 KiB"``, ``"unknown"`` for None/NaN."""
    if value is None or pd.isna(value):
        return "unknown"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"


def _ts(value: datetime | None) -> pd.Timestamp | None:
    return None if value is None else pd.Timestamp(value)


def _job_window(newest: datetime | None, length: timedelta) -> tuple[datetime, datetime]:
    """``[newest - length, newest + 1 ms)``: a window ending at the job's newest sample (the data's own
    clock: a recorded job is shown over its own last hours, not today's)."""
    end = (newest or now()) + timedelta(milliseconds=1)
    return end - length, end


_EPISODE_COLUMNS = [
    "id", "engine", "job_id", "job_name", "rule", "severity", "scope", "first_at", "last_at", "first_batch_id",
    "last_batch_id", "batches", "ended_by", "notified", "history", "message", "caused_by", "causes",
]


def scope_text(labels: dict[str, Any]) -> str:
    """A finding's scope labels as one line, ``source=Source: telemetry, subtask=1``: a Flink operator's id is
    left out where the vertex's name (``source``) says which it is (the id stays in the alert's labels)."""
    shown = {k: v for k, v in labels.items() if v is not None and v != "" and k not in ("engine", "job_id")}
    if "source" in shown:
        shown.pop("operator", None)
    return ", ".join(f"{k}={plain(str(v))}" for k, v in shown.items())


def _episode_row(e: FindingEpisode) -> dict[str, Any]:
    return {
        "id": e.id, "engine": e.job.engine.value, "job_id": e.job.job_id, "job_name": e.job.name or e.job.job_id,
        "rule": e.rule, "severity": e.severity.label(),
        "scope": scope_text(dict(e.scope.labels())),
        "first_at": pd.Timestamp(e.first_at), "last_at": pd.Timestamp(e.last_at),
        "first_batch_id": e.first_batch_id, "last_batch_id": e.last_batch_id,
        "batches": batch_range(e.first_batch_id, e.last_batch_id),
        "ended_by": "open" if e.ended_by is None else e.ended_by.value, "notified": e.notified,
        "history": e.history, "message": e.message, "caused_by": list(e.caused_by), "causes": list(e.causes),
    }  # fmt: skip


@st.cache_data(ttl=_TTL, show_spinner=False)
def episodes(
    engine: str | None = None, job_id: str | None = None, since: datetime | None = None, until: datetime | None = None
) -> pd.DataFrame:
    """The stored finding episodes overlapping ``[since, until)`` (``None``: unbounded), of one job when
    given, oldest first: :data:`_EPISODE_COLUMNS` (``batches`` as text, ``ended_by`` ``open`` while open,
    ``caused_by``/``causes`` lists of episode ids)."""
    with _store().sessions() as session:
        found = load_episodes(session, engine=engine, job_id=job_id, since=since, until=until)
    return pd.DataFrame([_episode_row(e) for e in found], columns=_EPISODE_COLUMNS)


def _worst_by_job(found: list[FindingEpisode]) -> dict[tuple[str, str], FindingEpisode]:
    """(engine, job_id) -> the worst episode (:func:`monitor.model.worst_episode`)."""
    by_job: dict[tuple[str, str], list[FindingEpisode]] = {}
    for e in found:
        by_job.setdefault((e.job.engine.value, e.job.job_id), []).append(e)
    out: dict[tuple[str, str], FindingEpisode] = {}
    for key, mine in by_job.items():
        worst = worst_episode(mine)
        if worst is not None:
            out[key] = worst
    return out


@st.cache_data(ttl=_TTL, show_spinner=False)
def fleet() -> pd.DataFrame:
    """One row per job: ``engine, job_id, name, health`` (:func:`monitor.facts.job_health`: the worst
    firing severity now), ``severity``, ``period_health``/``period_severity``/``worst_episode`` (the worst
    finding episode in the :data:`PERIOD` before the newest stored sample; ``ok``/0/``""`` without one), ``firing, pending,
    worst_rule, observed_at`` (its newest sample),
    ``freshness_s`` (:class:`monitor.facts.FreshnessFacts` ``last_s``: the newest batch's processing time
    minus its watermark), ``num_input_rows, state`` (text: rows, or Flink's checkpointed bytes), ``lag``
    (text: the Kafka group's offsets behind), ``freshness_series`` (the facts' freshness per batch over
    :data:`SPARK_WINDOW`, seconds), ``runs, stale`` (no sample for :data:`STALE_AFTER`)."""
    with _store().sessions() as session:
        since_period = data_period(session, PERIOD, now())[0]
        rows = _fleet_rows(session, job_summaries(session), since_period)
    return pd.DataFrame(rows, columns=_FLEET_COLUMNS)


_FLEET_COLUMNS = [
    "engine", "job_id", "name", "health", "severity", "period_health", "period_severity", "worst_episode",
    "worst_episode_message", "firing", "pending", "worst_rule", "observed_at", "freshness_s", "input_rows_per_second",
    "num_input_rows", "state", "lag", "freshness_series", "runs", "stale",
]


def _fleet_rows(session: Session, summaries: list[JobSummary], since_period: datetime) -> list[dict[str, Any]]:
    """:func:`fleet`'s rows for ``summaries`` (:func:`monitor.store.views.job_summaries` entries), read in
    ``session``: one moment's data for every column (the Job page reads its row and its facts together)."""
    one = summaries[0] if len(summaries) == 1 else None
    worst_of = _worst_by_job(load_episodes(session, since=since_period, engine=None if one is None else one.engine,
                                           job_id=None if one is None else one.job_id))
    by_job: dict[tuple[str, str], list[Any]] = {}
    for a in load_alerts(session).values():
        by_job.setdefault((a.labels.get("engine", ""), a.labels.get("job_id", "")), []).append(a)
    recent = {}
    for s in summaries:
        since, until = _job_window(s.observed_at, SPARK_WINDOW)
        recent[(s.engine, s.job_id)] = load_job_facts(session, Engine(s.engine), s.job_id, since, until)
    at = now()
    rows = []
    for s in summaries:
        health = job_health(by_job.get((s.engine, s.job_id), []))
        facts = recent.get((s.engine, s.job_id))
        worst = worst_of.get((s.engine, s.job_id))
        state = "unknown"
        if facts is not None and facts.state.last is not None:
            state = bytes_text(facts.state.last) if facts.state.unit == "bytes" else count_text(facts.state.last, "rows")
        rows.append(
            {
                "engine": s.engine,
                "job_id": s.job_id,
                "name": s.name or s.job_id,
                "health": health.now.label(),
                "severity": int(health.now),
                "period_health": "ok" if worst is None else worst.severity.label(),
                "period_severity": 0 if worst is None else int(worst.severity),
                "worst_episode": "" if worst is None else " ".join(
                    p for p in (worst.rule, batch_range(worst.first_batch_id, worst.last_batch_id)) if p
                ),
                "worst_episode_message": "" if worst is None else worst.message,
                "firing": health.firing,
                "pending": health.pending,
                "worst_rule": health.worst_rule or "",
                "observed_at": _ts(s.observed_at),
                "freshness_s": None if facts is None else facts.freshness.last_s,
                "input_rows_per_second": s.input_rows_per_second,
                "num_input_rows": None if facts is None else facts.last_input_rows,
                "state": state,
                "lag": count_text(s.lag_offsets, "offsets") if s.engine == "kafka" else "",
                "freshness_series": [] if facts is None else
                [b.freshness_s for b in facts.batches if b.freshness_s is not None],
                "runs": s.runs,
                "stale": s.observed_at is None or at - s.observed_at > STALE_AFTER,
            }
        )
    return rows


@dataclass(frozen=True)
class JobDetail:
    """One job's page data over :data:`JOB_WINDOW` (ending at its newest sample), from the job facts
    (:func:`monitor.facts.load_job_facts`); the page computes nothing.

    Attributes:
        summary: the fleet row of the job (a dict of :func:`fleet`'s columns).
        batches: the job-scope observations (Spark micro-batches, Flink/Kafka polls): ``observed_at,
            batch_id, run_id, watermark, event_time_max, freshness_s, input_rows, dropped_rows, state_rows,
            state_bytes, lag_offsets, lag_seconds, batch_duration_ms``.
        scopes: per input / vertex subtask / partition: ``name, source, partition, subtask, vertex,
            observed_at, watermark, input_rows, dropped_rows, idle_ms, lag_offsets, lag_seconds,
            backpressure_pct, end_of_input``.
        lag: per Kafka partition, worst Burrow status first: ``topic, partition, status, lag_offsets,
            lag_offsets_max, lag_seconds, lag_seconds_max, owned`` (a live member owns it: ``yes``/``no``/
            ``unknown``), ``waiting`` / ``waiting_short`` (a partition owned and never committed: :func:`monitor.facts.waiting_text`,
            else ``""``); ``lag_status``: the group's status; ``members``: the group's member count as the
            collector last saw it (``None``: unknown).
        runs: ``run_id, first_seen, last_seen``; ``restarts``: when the job restarted in the window.
        alerts: the job's alerts (:func:`alerts` columns).
        drops: what dropped rows: ``batch_id, observed_at, event_time_max, dropped_rows, mis_dated, ahead_s``
            (most rows first); ``dropped_rows``: the total (``None``: no count reported);
            ``drops_by_scope``: Flink's drops per window-vertex subtask ``name, dropped_rows``.
        holding_min: who holds the minimum watermark: ``name, reason`` (the one the rules name), or ``None``.
        state_unit / state_slope_per_h / state_growing / state_projected_24h: the state trend
            (:class:`monitor.facts.StateFacts`); ``state_projection``: ``observed_at, state`` of that trend
            ahead (empty unless growing).
        trigger_ms: the median spacing of the job's batches (its trigger interval, as observed).
        inferred_delay_s: the watermark delay inferred from the batches.
        episodes: the job's finding episodes in the :data:`PERIOD` before the newest stored sample
            (:func:`episodes` columns).
        slo: the freshness SLO's newest burn-rate finding (:class:`monitor.facts.SloFacts`) as ``alert,
            burn_rate, windows, budget_left_pct, open, text``; ``None`` without one in the window.
    """

    summary: dict[str, Any]
    batches: pd.DataFrame
    scopes: pd.DataFrame
    lag: pd.DataFrame
    lag_status: str
    members: int | None
    runs: pd.DataFrame
    restarts: list[pd.Timestamp]
    alerts: pd.DataFrame
    drops: pd.DataFrame
    dropped_rows: int | None
    drops_by_scope: pd.DataFrame
    holding_min: dict[str, str] | None
    state_unit: str
    state_slope_per_h: float | None
    state_growing: bool
    state_projected_24h: float | None
    state_projection: pd.DataFrame
    trigger_ms: float | None
    inferred_delay_s: float | None
    episodes: pd.DataFrame
    slo: dict[str, Any] | None = None


def _slo(facts: SloFacts | None) -> dict[str, Any] | None:
    if facts is None:
        return None
    return {
        "alert": facts.alert, "burn_rate": facts.burn_rate, "open": facts.open, "text": slo_text(facts),
        "windows": f"{format_duration(facts.long_window_s)} / {format_duration(facts.short_window_s)}",
        "budget_left_pct": 100.0 * facts.budget_left_share, "entry": facts.entry,
    }


_BATCH_COLUMNS = ["observed_at", "batch_id", "run_id", "watermark", "event_time_max", "freshness_s", "input_rows",
                  "dropped_rows", "state_rows", "state_bytes", "lag_offsets", "lag_seconds"]
_SCOPE_COLUMNS = ["name", "source", "partition", "subtask", "vertex", "observed_at", "watermark", "input_rows",
                  "dropped_rows", "idle_ms", "lag_offsets", "lag_seconds", "backpressure_pct", "end_of_input"]


def _times(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    for col in columns:
        frame[col] = pd.to_datetime(frame[col], utc=True)
    return frame


def _owned(extra: dict[str, Any]) -> str:
    value = extra.get("assigned")
    return "unknown" if value is None else "yes" if value else "no"


@st.cache_data(ttl=_TTL, show_spinner=False)
def job_detail(engine: str, job_id: str) -> JobDetail | None:
    """The job's data over the last :data:`JOB_WINDOW` (from its newest sample); ``None``: no such job in
    this database."""
    members = None
    # one session: the header row, the facts, the findings and the alerts are read at one moment (a header
    # from a cached fleet read before the newest poll disagreed with the findings evaluated on that poll)
    with _store().sessions() as session:
        mine = [s for s in job_summaries(session) if s.engine == engine and s.job_id == job_id]
        if not mine:
            return None
        since_period = data_period(session, PERIOD, now())[0]
        (summary,) = _fleet_rows(session, mine, since_period)
        since, until = _job_window(mine[0].observed_at, JOB_WINDOW)
        facts = load_job_facts(session, Engine(engine), job_id, since, until)
        found = load_episodes(session, engine=engine, job_id=job_id, since=since_period)
        all_alerts = _alert_frame(session)
        durations = series(session, ["batch_duration_ms"], since=since, until=until, job_id=job_id, engine=engine)
        runs = job_runs(session, engine, job_id)
        if engine == "kafka":  # the collector's member count, as Burrow / the exporter reported it
            whole = [s for s in load_samples(session, job_id=job_id, since=until - SPARK_WINDOW, until=until,
                                             engine=Engine.KAFKA) if s.scope.is_job()]
            count = whole[-1].extra.get("members") if whole else None
            members = count if isinstance(count, int) else None
    if facts is None:
        return None
    batches = _times(pd.DataFrame([{c: getattr(b, c) for c in _BATCH_COLUMNS} for b in facts.batches],
                                  columns=_BATCH_COLUMNS), ["observed_at", "watermark", "event_time_max"])
    duration = {pd.Timestamp(r[3]): r[8] for r in durations}
    batches["batch_duration_ms"] = [duration.get(t) for t in batches["observed_at"]]
    scope_rows = []
    for sc in facts.scopes:
        vertex = sc.newest.extra.get("vertex") or sc.scope.source or sc.scope.operator
        for pt in sc.points:
            scope_rows.append({
                "name": plain(sc.name), "source": sc.scope.source, "partition": sc.scope.partition,
                "subtask": sc.scope.subtask, "vertex": vertex if sc.scope.subtask is not None else None,
                "observed_at": pt.observed_at, "watermark": pt.watermark, "input_rows": pt.input_rows,
                "dropped_rows": pt.dropped_rows, "idle_ms": pt.idle_ms, "lag_offsets": pt.lag_offsets,
                "lag_seconds": pt.lag_seconds,
                "backpressure_pct": None if pt.backpressure_ratio is None else 100.0 * pt.backpressure_ratio,
                "end_of_input": pt.end_of_input,
            })
    scopes = _times(pd.DataFrame(scope_rows, columns=_SCOPE_COLUMNS), ["observed_at", "watermark"])
    owned = {(sc.scope.source, sc.scope.partition): _owned(sc.newest.extra) for sc in facts.scopes}
    lag = pd.DataFrame(
        [{"topic": p.topic, "partition": p.partition, "status": p.status, "lag_offsets": p.lag_offsets,
          "lag_offsets_max": p.lag_offsets_max, "lag_seconds": p.lag_seconds, "lag_seconds_max": p.lag_seconds_max,
          "owned": owned.get((p.topic, p.partition), "unknown"), "waiting": waiting_text(p),
          "waiting_short": waiting_text(p, short=True)} for p in facts.lag],
        columns=["topic", "partition", "status", "lag_offsets", "lag_offsets_max", "lag_seconds", "lag_seconds_max",
                 "owned", "waiting", "waiting_short"],
    )
    causes = _times(pd.DataFrame(
        [{"batch_id": c.batch_id, "observed_at": c.observed_at, "event_time_max": c.event_time_max,
          "dropped_rows": c.dropped_rows, "mis_dated": c.mis_dated or "", "ahead_s": c.ahead_s}
         for c in facts.drops.causes],
        columns=["batch_id", "observed_at", "event_time_max", "dropped_rows", "mis_dated", "ahead_s"],
    ), ["observed_at", "event_time_max"])
    state = facts.state
    projection = pd.DataFrame(columns=["observed_at", "state"])
    known = batches[["observed_at", "state_bytes" if state.unit == "bytes" else "state_rows"]].dropna()
    if state.growing and state.slope_per_h is not None and state.last is not None and not known.empty:
        # the trend drawn ahead as far as the fit looks back (at most 30 min)
        last_at = known["observed_at"].iloc[-1]
        ahead = min(pd.Timedelta(minutes=30), max(last_at - known["observed_at"].iloc[0], pd.Timedelta(seconds=1)))
        grown = state.slope_per_h * (ahead / pd.Timedelta(hours=1))
        projection = pd.DataFrame({"observed_at": [last_at, last_at + ahead],
                                   "state": [float(state.last), float(state.last) + grown]})
    run_frame = pd.DataFrame(
        [(r.run_id, pd.Timestamp(r.first_seen), pd.Timestamp(r.last_seen)) for r in runs],
        columns=["run_id", "first_seen", "last_seen"],
    )
    job_alerts = all_alerts[(all_alerts["engine"] == engine) & (all_alerts["job_id"] == job_id)]
    hold = facts.holding_min
    return JobDetail(
        summary=summary, batches=batches, scopes=scopes, lag=lag, lag_status=facts.lag_status, members=members,
        runs=run_frame, restarts=[pd.Timestamp(t) for t in facts.restarts], alerts=job_alerts.reset_index(drop=True),
        drops=causes, dropped_rows=facts.drops.dropped_rows,
        drops_by_scope=pd.DataFrame([(plain(n), d) for n, d in facts.drops.by_scope], columns=["name", "dropped_rows"]),
        holding_min=None if hold is None else {"name": plain(hold.name), "reason": hold.reason},
        state_unit=state.unit, state_slope_per_h=state.slope_per_h, state_growing=state.growing,
        state_projected_24h=state.projected_24h, state_projection=projection, trigger_ms=facts.batch_spacing_ms,
        inferred_delay_s=facts.inferred_delay_s,
        episodes=pd.DataFrame([_episode_row(e) for e in found], columns=_EPISODE_COLUMNS),
        slo=_slo(facts.slo),
    )


_ALERT_COLUMNS = [
    "fingerprint", "rule", "severity", "state", "engine", "job_id", "job_name", "scope", "message", "active_at",
    "fired_at", "resolved_at", "duration_s", "labels", "batch_id", "silenced_by",
]


def _silenced_by(labels: dict[str, str], active: list[Silence], at: datetime) -> str:
    """The first active silence muting ``labels``, as ``matchers ("comment", until HH:MM UTC)``; ``""``."""
    for s in active:
        if s.mutes(labels, at):
            comment = f'"{s.comment}", ' if s.comment else ""
            return f"{', '.join(str(m) for m in s.matchers)} ({comment}until {s.ends_at:%Y-%m-%d %H:%M} UTC)"
    return ""


@st.cache_data(ttl=_TTL, show_spinner=False)
def alerts() -> pd.DataFrame:
    """Every stored alert (its current or last episode): :data:`_ALERT_COLUMNS`; ``duration_s`` is how long
    the episode has lasted (to ``resolved_at``, or to now while active); ``silenced_by``: for an open alert
    that an active silence mutes now (the dispatcher's test, :func:`monitor.alerts.silences.is_silenced` on
    :meth:`~monitor.alerts.lifecycle.Alert.all_labels`), the silence's matchers and comment, else ``""``."""
    with _store().sessions() as session:
        return _alert_frame(session)


def _alert_frame(session: Session) -> pd.DataFrame:
    """:func:`alerts` read in ``session``."""
    stored = list(load_alerts(session).values())
    active = [x for x in list_silences(session) if x.active(now())]
    at = now()
    rows = []
    for a in stored:
        end = a.resolved_at or at
        scope = scope_text(dict(sorted(a.labels.items())))
        rows.append(
            {
                "fingerprint": a.fingerprint,
                "rule": a.rule,
                "severity": a.severity.label(),
                "state": a.state.value,
                "engine": a.labels.get("engine", ""),
                "job_id": a.labels.get("job_id", ""),
                "job_name": a.annotations.get("job_name", ""),
                "scope": scope,
                "message": a.message,
                "active_at": _ts(a.active_at),
                "fired_at": _ts(a.fired_at),
                "resolved_at": _ts(a.resolved_at),
                "duration_s": (end - a.active_at).total_seconds(),
                "labels": dict(a.labels),
                "batch_id": a.annotations.get("batch_id", ""),
                "silenced_by": _silenced_by(a.all_labels(), active, at)
                if a.state in (AlertState.FIRING, AlertState.PENDING) else "",
            }
        )
    order = {"firing": 0, "pending": 1, "resolved": 2, "inactive": 3}
    frame = pd.DataFrame(rows, columns=_ALERT_COLUMNS)
    if not frame.empty:
        frame["_o"] = frame["state"].map(order)
        frame["_s"] = frame["severity"].map({"critical": 0, "warning": 1, "info": 2, "ok": 3})
        frame = frame.sort_values(["_o", "_s", "active_at"], ascending=[True, True, False]).drop(columns=["_o", "_s"])
    return frame.reset_index(drop=True)


def _when(value: Any, missing: str) -> str:
    """An optional instant as ``YYYY-MM-DD HH:MM:SS UTC``; ``missing`` when there is none."""
    return missing if value is None or pd.isna(value) else f"{value:%Y-%m-%d %H:%M:%S} UTC"


def alert_history(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`alerts` rows as the Alerts page's history table, every cell text a person reads (no empty or
    ``None`` cell): ``rule, severity, state, job, scope, active since, fired at, resolved at, lasted,
    silenced``."""
    return pd.DataFrame({
        "rule": frame["rule"],
        "severity": frame["severity"],
        "state": frame["state"],
        "job": [n or j for n, j in zip(frame["job_name"], frame["job_id"], strict=True)],
        "scope": [x or "whole job" for x in frame["scope"]],
        "active since": [_when(v, "unknown") for v in frame["active_at"]],
        "fired at": [_when(v, "never fired") for v in frame["fired_at"]],
        "resolved at": [_when(v, "still open" if st_ in ("firing", "pending") else "unknown")
                        for v, st_ in zip(frame["resolved_at"], frame["state"], strict=True)],
        "lasted": [human_lag(v) for v in frame["duration_s"]],
        "silenced": [x or "no" for x in frame["silenced_by"]],
    })


@st.cache_data(ttl=_TTL, show_spinner=False)
def silences() -> pd.DataFrame:
    """Every stored silence: ``id, state, matchers, starts_at, ends_at, created_by, comment``."""
    with _store().sessions() as session:
        stored = list_silences(session)
    at = now()
    return pd.DataFrame(
        [
            (s.id, s.state(at), ", ".join(str(m) for m in s.matchers), pd.Timestamp(s.starts_at), pd.Timestamp(s.ends_at),
             s.created_by, s.comment)
            for s in stored
        ],
        columns=["id", "state", "matchers", "starts_at", "ends_at", "created_by", "comment"],
    )


def _clear() -> None:
    silences.clear()
    alerts.clear()


def add_silence(token: str, matchers: list[str], duration: timedelta, comment: str, author: str) -> str:
    """Store a silence (matchers as ``tidegauge silence add`` takes them) starting now; returns its id.

    Raises:
        PermissionError: ``token`` is not the configured dashboard token (or none is configured).
        InputError: a bad matcher, a non-positive duration, or matchers that would mute every alert.
    """
    if not token_ok(token):
        raise PermissionError("the dashboard token is wrong or not configured: the dashboard is read-only")
    if duration <= timedelta(0):
        raise InputError("the duration must be positive")
    start = now()
    silence = Silence(
        id=str(uuid.uuid4()),
        matchers=tuple(parse_matcher(m) for m in matchers if m.strip()),
        starts_at=start,
        ends_at=start + duration,
        created_by=author or "dashboard",
        comment=comment,
    )
    with _store().sessions.begin() as session:
        store_add_silence(session, silence, start)
    _clear()
    return silence.id


def expire_silence(token: str, silence_id: str) -> bool:
    """Expire a silence now; returns False when it does not exist or already ended.

    Raises:
        PermissionError: ``token`` is not the configured dashboard token.
    """
    if not token_ok(token):
        raise PermissionError("the dashboard token is wrong or not configured: the dashboard is read-only")
    with _store().sessions.begin() as session:
        done = store_expire_silence(session, silence_id, now())
    _clear()
    return done


@st.cache_data(ttl=_TTL, show_spinner=False)
def scheduled_reports() -> list[dict[str, Any]]:
    """The newest scheduled health reports queued for delivery in this database: ``id, receiver, state,
    created_at, name, health, document`` (:meth:`monitor.reports.scheduled.HealthReport.to_json`), ``html``
    (the detailed report as sent to webhook receivers, ``None`` when the receiver got none) and ``jobs``:
    one row per job ``job, engine, health, open alerts, job_id``."""
    with _store().sessions() as session:
        stored = stored_reports(session)
    out = []
    for r in stored:
        doc = r.document
        jobs = pd.DataFrame(
            [
                {"job": j.get("name") or j.get("job_id"), "engine": j.get("engine"), "health": j.get("health"),
                 "open alerts": "; ".join(f"{a['rule']} ({a['state']})" for a in j.get("alerts", [])) or "none",
                 "job_id": j.get("job_id")}
                for j in doc.get("jobs", [])
            ],
            columns=["job", "engine", "health", "open alerts", "job_id"],
        )
        out.append({"id": r.id, "receiver": r.receiver, "state": r.state, "created_at": pd.Timestamp(r.created_at),
                    "name": str(doc.get("name", "report")), "health": str(doc.get("health", "unknown")),
                    "html": doc.get("html"), "jobs": jobs, "document": doc})
    return out


def report_json(document: dict[str, Any]) -> str:
    """A stored report document as indented JSON text (for download)."""
    return json.dumps(document, indent=2, ensure_ascii=False)


#: The periods the Reports page offers, ending at the newest stored sample (the data's own clock, so a
#: scanned recording from last year reports on its own hours, not on today's).
#: The Reports page's periods: label -> ``tidegauge report --since`` value.
REPORT_PERIODS: dict[str, str] = {
    "last hour": "1h",
    "last 6 hours": "6h",
    "last 24 hours": "24h",
    "last 7 days": "7d",
    "last 30 days": "30d",
}
#: The period the Reports page opens with: the CLI's default (:data:`monitor.reports.DEFAULT_SINCE`).
REPORT_DEFAULT = next(label for label, since in REPORT_PERIODS.items() if since == DEFAULT_SINCE)


@dataclass(frozen=True)
class DatabaseReport:
    """A detailed health report of this database (:func:`monitor.reports.source.collect`), rendered.

    Attributes:
        since / until: the period (aware UTC); ``until`` is just after the newest stored sample.
        health: the worst job health of the period; ``jobs``: how many jobs it covers.
        command: the ``tidegauge report`` command line that writes the same HTML (the database URL with
            any password hidden).
        html / markdown / json: the report as :mod:`monitor.reports.render` renders it (``tidegauge
            report --format html|md|json`` gives the same text).
    """

    since: datetime
    until: datetime
    health: str
    jobs: int
    html: str
    markdown: str
    json: str
    command: str


@st.cache_data(ttl=_TTL, show_spinner="Building the report ...")
def database_report(period: str) -> DatabaseReport | None:
    """The detailed report of every job of this database over ``period`` (a key of
    :data:`REPORT_PERIODS`) ending at the newest stored sample, with the report defaults (freshness target
    15 min, future skew 1 h: :class:`monitor.reports.detailed.ReportSettings`) and the pipelines the dashboard
    was given (:func:`pipelines_config`); ``None`` for an empty
    database. Raises KeyError for an unknown period."""
    from monitor.reports.render import to_html, to_json_text, to_markdown
    from monitor.reports.source import collect

    flag = REPORT_PERIODS[period]
    name = f"tidegauge ({period})"
    with _store().sessions() as session:
        if newest_sample_time(session) is None:
            return None
        since, until = data_period(session, parse_timedelta(flag), now())
        config, target, _ = pipelines_config()  # the pipelines' section (the Pipelines page says any problem)
        settings = FactsSettings(pipelines=tuple(config),
                                 pipeline_target=None if target is None else timedelta(seconds=target))
        report = collect(session, name, since, until, settings=settings)
    command = (f"tidegauge report --db {shlex.quote(db_label())} --since {flag} --name {shlex.quote(name)} "
               "--format html -o report.html")
    return DatabaseReport(report.since, report.until, report.health, len(report.jobs), to_html(report),
                          to_markdown(report), to_json_text(report), command)


@dataclass(frozen=True)
class ReportFile:
    """A report written by ``tidegauge report -o`` or a scheduled report into the reports directory: one
    report (``stem``, ``<name>-<UTC time>``) in one or more formats.

    Attributes:
        paths: format (``html``, ``md``, ``json``) -> file.
        job_ids: the job ids the report covers (read from the file: the HTML's ``job-<id>`` anchors, the
            Markdown's ``Job id`` lines, the JSON's ``jobs[].job_id``).
        of_this_database: every job it covers is a job of this database (a report with no job, or of
            another database, is not).
    """

    stem: str
    paths: dict[str, Path]
    job_ids: frozenset[str]
    of_this_database: bool


_JOB_IDS = {
    ".html": re.compile(r"<h2 id='job-([^']*)'>"),
    ".md": re.compile(r"^Job id `([^`]*)`\.$", re.MULTILINE),
}


def _report_job_ids(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except ValueError:
            return set()
        jobs = doc.get("jobs", []) if isinstance(doc, dict) else []
        return {str(j["job_id"]) for j in jobs if isinstance(j, dict) and "job_id" in j}
    return {html.unescape(m) for m in _JOB_IDS[path.suffix].findall(text)}


def report_files() -> list[ReportFile]:
    """The reports in the reports directory (``.html``, ``.md``, ``.json``), newest first, each marked
    whether it is of this database (see :class:`ReportFile`)."""
    folder = os.environ.get(REPORTS_ENV)
    if not folder or not Path(folder).is_dir():
        return []
    files = [p for p in Path(folder).iterdir() if p.suffix in (".html", ".md", ".json") and p.is_file()]
    files.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    known = set(fleet()["job_id"])
    by_stem: dict[str, dict[str, Path]] = {}
    for path in files:
        by_stem.setdefault(path.stem, {})[path.suffix.lstrip(".")] = path
    out = []
    for stem, paths in by_stem.items():
        ids: set[str] = set()
        for path in paths.values():
            ids |= _report_job_ids(path)
        out.append(ReportFile(stem, paths, frozenset(ids), bool(ids) and ids <= known))
    return out


# ------------------------------------------------------------------------------------------ what-if lab

SAMPLES_DIR = Path(__file__).parent / "samples"


SAMPLES = ("sensor_future_row.csv", "orders_backlog.csv", "flink_two_splits.csv")


def sample_files() -> list[str]:
    """Names of the stored event samples (CSV files in ``dashboard/samples/``, see its docstring)."""
    return [name for name in SAMPLES if (SAMPLES_DIR / name).is_file()]


@dataclass(frozen=True)
class WhatIf:
    """One what-if replay (:func:`monitor.watermark.replay`) and its delay sweep.

    Attributes:
        batches: per batch ``batch_id, kind, processing_time, watermark, input_rows, late_rows,
            state_rows, emitted, emit_latency_s`` (the oldest emitted window's end to the batch's processing
            time, seconds).
        mover: the batch and row that moved the watermark the most: ``{"batch_id", "processing_time",
            "row", "event_time", "advance_s"}`` (``row`` = 1-based line of the events file, header = line 1),
            or ``None``.
        summary: :meth:`monitor.watermark.Summary` as JSON (``dropped_rows``, ``dropped_share``, ...).
        sweep: ``delay_s, dropped_rows, dropped_share_pct, latency_p95_s, peak_state_rows`` per delay.
        recommended_delay_s: the smallest delay dropping at most ``100 - target`` % of rows — without the
            mis-dated rows when there are any (:func:`monitor.watermark.diagnose.advise_delay`).
        bad_rows: rows whose event time could not be read.
        misdated: the mis-dated rows, ``{"line", "batch_id", "event_time" (ISO text, any year), "advance_s"}``
            each (``[]``: none).
        recommended_delay_with_s: with mis-dated rows, the delay the target needs with them kept (decades
            for a row dated 2099: for comparison, never the recommendation); else ``recommended_delay_s``.
        no_data_basis: what decided when no-data batches ran (the engine's sentence,
            :func:`monitor.watermark.plan.no_data_basis_text`).
        file_batches: the events have a ``batch`` column and no ``arrival_time`` (the backlog / caught-up
            choice then decides the no-data batches).
    """

    batches: pd.DataFrame
    mover: dict[str, Any] | None
    summary: dict[str, Any]
    sweep: pd.DataFrame
    recommended_delay_s: float | None
    bad_rows: int
    misdated: list[dict[str, Any]] = field(default_factory=list)
    recommended_delay_with_s: float | None = None
    no_data_basis: str = ""
    file_batches: bool = False


def _ms(seconds: float) -> int:
    """A number widget's seconds as the engine's integer milliseconds."""
    return round(seconds * 1000)


def _shape(window: str, window_s: float, slide_s: float | None) -> dict[str, Any]:
    """The lab's operator choice (``tumbling``, ``sliding``, ``session``: ``window_s`` is the gap, or
    ``dedup``: ``dropDuplicatesWithinWatermark``) as the keyword settings of the one what-if builder
    (:mod:`monitor.watermark.whatif_config`)."""
    if window == "dedup":
        return {"dedup": "within_watermark"}
    if window == "session":
        return {"gap_ms": _ms(window_s)}
    if window == "sliding":
        return {"size_ms": _ms(window_s), "slide_ms": _ms(slide_s or window_s)}
    return {"size_ms": _ms(window_s)}


def _load_events(content: bytes, suffix: str) -> Any:
    """An uploaded/stored events file's bytes as a :class:`monitor.watermark.EventsTable`."""
    import tempfile

    from monitor.watermark.io import load_events

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"events{suffix}"
        path.write_bytes(content)
        return load_events(path)


@st.cache_data(show_spinner="Replaying ...", max_entries=16)
def whatif(
    content: bytes,
    suffix: str,
    *,
    delay_s: float,
    window: str,
    window_s: float,
    slide_s: float | None,
    trigger_s: float | None,
    policy: str,
    future_skew_s: float | None,
    sweep_s: tuple[float, ...],
    target_pct: float,
    backlog: bool = False,
) -> WhatIf:
    """Replay an events file (``content`` of a ``.csv``/``.jsonl``/``.parquet``) through the reference
    watermark engine (Spark semantics), and sweep the delay.

    Args:
        window: ``tumbling``, ``sliding``, ``session`` (``window_s`` is the gap) or ``dedup`` (on ``key``).
        trigger_s: a processing-time trigger (needs ``arrival_time``), ``None`` for the file's own batches.
        future_skew_s: model ``filter(event_time <= current_timestamp() + skew)`` (needs ``arrival_time``).
        backlog: without arrival times, the query started on the file's batches already waiting (one
            no-data batch at the end) rather than a live query caught up between them.

    Raises:
        monitor.errors.InputError / ConfigError: the file or the settings do not fit (the message says why).
    """
    from monitor.timefmt import format_epoch_ms
    from monitor.watermark import plan_batches, replay
    from monitor.watermark.diagnose import advise_delay
    from monitor.watermark.plan import no_data_basis_text
    from monitor.watermark.sweep import sweep
    from monitor.watermark.whatif_config import spark_config

    events = _load_events(content, suffix)
    config = spark_config(
        delay_ms=_ms(delay_s), **_shape(window, window_s, slide_s), policy=policy,
        trigger_ms=None if trigger_s is None else _ms(trigger_s),
        max_future_skew_ms=None if future_skew_s is None else _ms(future_skew_s),
        backlog=backlog and events.batch is not None and events.arrival_ms is None,
    )
    plan = plan_batches(events, config)
    result = replay(events, config, plan=plan)
    rows = []
    mover = None
    best = 0
    for b in result.batches:
        rows.append({
            "batch_id": b.batch_id, "kind": b.kind,
            "processing_time": pd.Timestamp(b.processing_time_ms, unit="ms", tz="UTC") if b.processing_time_ms is not None else None,
            "watermark": pd.Timestamp(b.watermark_ms, unit="ms", tz="UTC") if b.watermark_ms > 0 else None,
            "input_rows": b.input_rows, "late_rows": b.late_row_count, "state_rows": b.state_rows,
            "emitted": len(b.emitted),
            # window emission latency: the batch's processing time minus the end of the windows it emits
            "emit_latency_s": None if b.processing_time_ms is None or len(b.emitted) == 0
            else float(b.processing_time_ms - int(b.emitted.end_us.min()) // 1000) / 1000.0,
        })
        advance = b.next_watermark_ms - b.watermark_ms
        if b.watermark_ms > 0 and advance > best and b.event_time is not None:
            best = advance
            mover = {"batch_id": b.batch_id, "advance_s": advance / 1000.0, "event_time_ms": b.event_time.max_ms,
                     "processing_time": rows[-1]["processing_time"]}
    if mover is not None:
        times = events.event_time_us // 1000
        idx = int(np.argmax(np.where(events.valid & (times == mover["event_time_ms"]), 1, 0)))
        mover["row"] = events.line_of(idx)
        mover["event_time"] = pd.Timestamp(mover.pop("event_time_ms"), unit="ms", tz="UTC")
    summaries = sweep(events, config, sorted({_ms(s) for s in sweep_s}))
    sweep_rows = [
        {"delay_s": s.delay_ms / 1000, "dropped_rows": s.dropped_rows, "dropped_share_pct": 100 * s.dropped_share,
         "latency_p95_s": None if s.latency is None or s.latency.p95_ms is None else s.latency.p95_ms / 1000,
         "peak_state_rows": s.peak_state_rows}
        for s in summaries
    ]
    advice = advise_delay(events, config, target_pct, candidates_ms=sorted({_ms(s) for s in sweep_s}))
    misdated = [{"line": m.line, "batch_id": m.batch_id,
                 "event_time": format_epoch_ms(m.event_time_us // 1000, always_millis=False),
                 "advance_s": (m.watermark_after_ms - m.watermark_before_ms) / 1000} for m in advice.misdated]
    return WhatIf(
        batches=pd.DataFrame(rows), mover=mover, summary=result.to_json()["summary"],
        sweep=pd.DataFrame(sweep_rows), recommended_delay_s=advice.recommended.delay_ms / 1000,
        bad_rows=len(events.bad_rows), misdated=misdated, recommended_delay_with_s=advice.with_rows.delay_ms / 1000,
        no_data_basis=no_data_basis_text(plan.basis, config.trigger_ms),
        file_batches=events.batch is not None and events.arrival_ms is None,
    )


@st.cache_data(show_spinner="Replaying (Flink) ...", max_entries=16)
def whatif_flink(
    content: bytes,
    suffix: str,
    *,
    delay_s: float,
    window: str,
    window_s: float,
    slide_s: float | None,
    allowed_lateness_s: float,
    idleness_s: float | None,
    watermark_interval_ms: int | None,
    per_event_watermarks: bool,
    late_side_output: bool,
    sweep_s: tuple[float, ...],
    target_pct: float,
    name: str = "the events file",
) -> FlinkWhatIf:
    """Replay an events file (``name``, for messages) through the engine's Flink mode (``forBoundedOutOfOrderness(delay)``,
    ``withIdleness``, ``pipeline.auto-watermark-interval`` or per-event watermarks, a window with
    ``allowedLateness`` and optionally ``sideOutputLateData``), and sweep the delay; a
    :class:`dashboard.whatif_flink.FlinkWhatIf`.

    Args:
        window: ``tumbling``, ``sliding`` (``slide_s``) or ``session`` (``window_s`` is the gap).
        watermark_interval_ms: ``None`` for Flink's 200 ms default; ignored with per-event watermarks
            unless an idleness timeout is given (it then paces the idleness checks).

    Raises:
        monitor.errors.InputError / ConfigError: the file or the settings do not fit (the message says why).
    """
    from monitor.watermark.whatif_config import flink_config

    config = flink_config(
        delay_ms=_ms(delay_s), **_shape(window, window_s, slide_s), allowed_lateness_ms=_ms(allowed_lateness_s),
        idleness_ms=None if idleness_s is None else _ms(idleness_s),
        watermark_interval_ms=None if per_event_watermarks and idleness_s is None else watermark_interval_ms,
        per_event_watermarks=per_event_watermarks, late_side_output=late_side_output,
    )
    events = _load_events(content, suffix)
    return flink_whatif(events, name, config, sorted({_ms(s) for s in sweep_s}), target_pct)


def sample_bytes(name: str) -> bytes:
    """The content of stored sample ``name`` (one of :func:`sample_files`). Raises KeyError."""
    if name not in sample_files():
        raise KeyError(name)
    return (SAMPLES_DIR / name).read_bytes()


# --------------------------------------------------------------------------------------------- pipelines


@dataclass(frozen=True)
class PipelineView:
    """One pipeline as the Pipelines page shows it (from :class:`monitor.facts.pipeline.PipelineFacts`).

    Attributes:
        name / configured / target_s: the pipeline, whether the config names it, the rule's target (s).
        at: the pipeline's newest observation (the data's clock of the ``*_now_s`` columns).
        nodes: one row per job, sources first: ``key``, ``job`` (name), ``engine``, ``job_id``, ``reads``,
            ``writes``, ``global_now_s``, ``local_now_s``, ``basis``, ``last_seen``, ``mean_local_s``,
            ``max_global_s``, ``role`` (``entry`` where a stale end's staleness enters, ``downstream`` after it
            on the path, ``""``).
        edges: ``upstream``, ``downstream`` (node keys), ``dataset``.
        global_lag / local_lag: ``at`` plus one column per job (its name), seconds, over the period.
        stale: one dict per stale end: ``end``, ``entry`` (job names), ``end_lag_s``, ``entry_adds_s``.
        most_now / most_period: the job adding the most now / over the period (its name).
        episodes: the stored ``pipeline_freshness`` episodes of the pipeline (:data:`_EPISODE_COLUMNS`).
        slo: the pipeline's freshness SLO from its newest stored ``pipeline_slo`` episode (as the Job page's
            ``slo``, plus ``entry``: the job where the staleness entered); ``None``: no burn-rate finding.
    """

    name: str
    configured: bool
    target_s: float | None
    at: pd.Timestamp | None
    nodes: pd.DataFrame
    edges: pd.DataFrame
    global_lag: pd.DataFrame
    local_lag: pd.DataFrame
    stale: list[dict[str, Any]]
    most_now: str | None
    most_period: str | None
    episodes: pd.DataFrame
    slo: dict[str, Any] | None = None


def pipelines_config() -> tuple[list[Any], float | None, str | None]:
    """``(pipelines: section, target seconds, problem)`` from :data:`PIPELINES_ENV` (set by ``tidegauge
    dashboard -c FILE``); without it, no configured pipeline and no target (the graph is what the jobs
    report). ``problem`` names what is wrong with the variable (then the rest is empty)."""
    from rules.pipeline import parse_pipelines

    raw = os.environ.get(PIPELINES_ENV)
    if not raw:
        return [], None, None
    try:
        doc = json.loads(raw)
        target = doc.get("target_s")
        return list(parse_pipelines(doc.get("pipelines"))), None if target is None else float(target), None
    except (ValueError, TypeError, AttributeError, InputError) as exc:
        return [], None, f"{PIPELINES_ENV}: {exc}"


def _pipeline_view(p: PipelineFacts) -> PipelineView:
    names = {n.key: n.name for n in p.nodes}
    roles: dict[str, str] = {}
    for s in p.stale:
        for k in s.path[s.path.index(s.entry) + 1 :]:
            roles.setdefault(k, "downstream")
        roles[s.entry] = "entry"
    nodes = pd.DataFrame([{
        "key": n.key, "job": n.name, "engine": n.job.engine.value, "job_id": n.job.job_id,
        "reads": ", ".join(n.reads), "writes": ", ".join(n.writes),
        "global_now_s": None if n.now is None else n.now.global_lag_s,
        "local_now_s": None if n.now is None else n.now.local_lag_s,
        "basis": None if n.now is None else n.now.basis,
        "last_seen": _ts(None if n.now is None else n.now.last_seen),
        "mean_local_s": n.mean_local_s, "max_global_s": n.max_global_s, "role": roles.get(n.key, ""),
    } for n in p.nodes])  # fmt: skip
    edges = pd.DataFrame([{"upstream": e.upstream, "downstream": e.downstream, "dataset": e.dataset} for e in p.edges],
                         columns=["upstream", "downstream", "dataset"])

    def series(which: str) -> pd.DataFrame:
        rows: dict[datetime, dict[str, Any]] = {}
        for n in p.nodes:
            for pt in n.points:
                rows.setdefault(pt.at, {"at": pd.Timestamp(pt.at)})[n.name] = getattr(pt, which)
        return pd.DataFrame([rows[t] for t in sorted(rows)], columns=["at", *(n.name for n in p.nodes)])

    return PipelineView(
        p.name, p.configured, p.target_s, _ts(p.at), nodes, edges, series("global_lag_s"), series("local_lag_s"),
        [{"end": names[s.end], "entry": names[s.entry], "end_lag_s": s.end_lag_s,
          "entry_adds_s": next((n.now.local_lag_s for n in p.nodes if n.key == s.entry and n.now), None)}
         for s in p.stale],
        names.get(p.most_now) if p.most_now else None, names.get(p.most_period) if p.most_period else None,
        pd.DataFrame([_episode_row(e) for e in p.episodes], columns=_EPISODE_COLUMNS), _slo(p.slo),
    )


@st.cache_data(ttl=_TTL, show_spinner=False)
def pipelines() -> tuple[list[PipelineView], str | None]:
    """Every pipeline over the last :data:`JOB_WINDOW` (back from the newest stored sample), by name, and a
    problem with the pipelines' configuration (``None``: none)."""
    config, target, problem = pipelines_config()
    with _store().sessions() as session:
        since, until = _job_window(newest_sample_time(session), JOB_WINDOW)
        found = load_pipeline_facts(session, since, until, config=config, target_s=target)
    return [_pipeline_view(p) for p in found], problem
