"""Health reports people read: per job, what happened over a period and what to change.

:func:`build_detailed_report` is pure (no clock, no store) and computes no fact of its own: every number
comes from the job facts (:mod:`monitor.facts`, the one model behind the dashboard, the reports and the
``check`` outputs), and this module only turns them into sections and recommendations:

* **freshness SLO attainment** on the data's own clock (each batch's processing time minus its watermark,
  :class:`monitor.facts.FreshnessFacts`), with the p50/p95/max;
* **late rows**: rows dropped by the watermark, their share of the input, and the batch whose event time
  set the watermark that dropped them, flagged when that event time was a mis-dated row (a unit mistake,
  a future-dated row, or a leap beyond the data's own progression in a backfill);
* **findings** of the period (stored finding episodes) and **alerts** raised in it, with how long they
  lasted;
* **state**: first/last size, the Theil-Sen trend, the size projected 24 h on (never negative: "no
  growth" when flat or falling) and the time to the configured limit;
* **consumer lag** (offsets, seconds) per partition with Burrow's status; **restarts**;
* **pipelines** (jobs chained through topics or files, :mod:`monitor.facts.pipeline`): where the staleness
  enters now and in the period's stored ``pipeline_freshness`` findings, and the pipeline's freshness SLO
  (error budget left, burn rate) from its newest stored ``pipeline_slo`` finding;
* **recommendations backed by data**, each saying where its evidence comes from (the progress history;
  ``tidegauge whatif`` over the events gives the exact answer). Rows dropped behind a mis-dated row get no
  delay advice: no delay keeps them; the advice names the row and its remedy.

Unknown is ``None``, never zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from monitor.alerts.lifecycle import Alert
from monitor.facts import DropCause, FactsSettings, JobFacts, PartitionLagFacts, slo_text
from monitor.facts.pipeline import PipelineFacts
from monitor.model import AlertState, Engine, FindingEpisode, Severity, ensure_utc
from monitor.text import batch_range, plural
from monitor.timefmt import BEYOND_RANGE, format_duration, format_instant, format_instant_short, format_lag
from rules.join_state import RULE as JOIN_STATE_RULE

__all__ = [
    "PROGRESS_HISTORY",
    "AlertEpisode",
    "DetailedReport",
    "EpisodeEntry",
    "JobReport",
    "PipelineReport",
    "Recommendation",
    "ReportSettings",
    "build_detailed_report",
    "episode_entries",
]

PROGRESS_HISTORY = "progress history"
_MAX_POINTS = 240

#: What the report measures against: the job facts' settings (one definition).
ReportSettings = FactsSettings


@dataclass(frozen=True, slots=True)
class AlertEpisode:
    """One alert's current or last episode within the period."""

    rule: str
    severity: str
    state: str
    active_at: datetime
    resolved_at: datetime | None
    duration_s: float
    message: str


@dataclass(frozen=True, slots=True)
class EpisodeEntry:
    """One finding episode in the period, as the report shows it (see :class:`monitor.model.FindingEpisode`).

    ``scope`` is the scope's labels as ``source=…, partition=3`` (empty for the whole job); ``ended_by``
    ``resolved`` / ``terminated``, ``None`` while open; ``notified``: an alert was raised for it (``False``
    for history and for what ``scan`` read)."""

    id: str
    rule: str
    severity: str
    scope: str
    first_at: datetime
    last_at: datetime
    first_batch_id: int | None
    last_batch_id: int | None
    ended_by: str | None
    notified: bool
    message: str
    caused_by: tuple[str, ...] = ()


def episode_entries(episodes: Iterable[FindingEpisode]) -> list[EpisodeEntry]:
    """``episodes`` as report entries, in ``first_at`` order."""
    return [
        EpisodeEntry(
            e.id, e.rule, e.severity.label(), ", ".join(f"{k}={v}" for k, v in e.scope.labels().items()),
            e.first_at, e.last_at, e.first_batch_id, e.last_batch_id,
            None if e.ended_by is None else e.ended_by.value, e.notified, e.message, e.caused_by,
        )
        for e in sorted(episodes, key=lambda e: (e.first_at, e.id))
    ]


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A change to make, with the numbers behind it and where they come from (:data:`PROGRESS_HISTORY`)."""

    text: str
    source: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobReport:
    """One job's section (times aware UTC, durations in seconds; every number from :class:`monitor.facts.JobFacts`).

    ``health`` is the health now (the worst firing alert), ``period_health`` the severity of the worst finding
    episode of the period (``worst_episode``); ``state_projected_24h`` is ``None`` unless the state grows
    (``state_growing``).
    """

    engine: str
    job_id: str
    name: str | None
    health: str
    period_health: str
    batches: int
    watermark_last: datetime | None
    freshness_target_s: float
    freshness_attainment_pct: float | None
    freshness_p50_s: float | None
    freshness_p95_s: float | None
    freshness_max_s: float | None
    freshness_last_s: float | None
    input_rows: int | None
    dropped_rows: int | None
    dropped_share_pct: float | None
    drop_causes: tuple[DropCause, ...]
    drops_by_scope: tuple[tuple[str, int], ...]
    episodes: tuple[EpisodeEntry, ...]
    worst_episode: EpisodeEntry | None
    alerts: tuple[AlertEpisode, ...]
    state_unit: str
    state_first: int | None
    state_last: int | None
    state_slope_per_h: float | None
    state_growing: bool
    state_projected_24h: float | None
    state_hours_to_limit: float | None
    lag: tuple[PartitionLagFacts, ...]
    lag_status: str
    lag_offsets_last: int | None
    lag_offsets_max: int | None
    lag_seconds_last: float | None
    lag_seconds_max: float | None
    holding_min: str | None
    restarts: tuple[datetime, ...]
    inferred_delay_s: float | None
    lateness_p999_s: float | None
    recommendations: tuple[Recommendation, ...]
    series: dict[str, list[Any]]
    freshness_ahead: str | None = None
    lateness_note: str | None = None
    slo_burn: str | None = None
    """The freshness SLO's newest burn-rate finding (:func:`monitor.facts.slo_text`): burn rate, windows,
    error budget left; ``None`` without one in the period."""

    @property
    def worst(self) -> Severity:
        """The worse of the health now and over the period."""
        return max(Severity.parse(self.health), Severity.parse(self.period_health))

    def to_json(self) -> dict[str, Any]:
        """JSON object (times ISO-8601 UTC)."""
        doc = asdict(self)
        doc["lag"] = [{k: v for k, v in p.items() if k != "points"} for p in doc["lag"]]
        out: dict[str, Any] = _jsonable(doc)
        return out


@dataclass(frozen=True, slots=True)
class PipelineReport:
    """One pipeline's section (every value from :class:`monitor.facts.pipeline.PipelineFacts`).

    Attributes:
        name / configured: the pipeline; whether the ``pipelines:`` section names it.
        jobs: its jobs' names, sources first.
        stale_now: where the staleness of each stale end enters now (``the end `b` is 36 s behind its sources;
            the staleness enters at `a` (adds 33 s)``); ``fresh now (within 5 min)``; or ``not judged (no
            target: rules.pipeline_freshness.target)``.
        entered_at: the jobs the period's stored ``pipeline_freshness`` warnings were on (where the staleness
            entered), with how many episodes each.
        most_period: the job adding the most over the period (largest mean local lag), ``None``: unknown.
        slo: the SLO's one line (:func:`monitor.facts.slo_text`), ``None`` without a ``pipeline_slo`` finding.
        slo_budget_left_pct / slo_burn_rate / slo_alert / slo_entry: its figures (``None`` without one).
    """

    name: str
    configured: bool
    jobs: tuple[str, ...]
    stale_now: str
    entered_at: tuple[tuple[str, int], ...]
    most_period: str | None
    slo: str | None
    slo_budget_left_pct: float | None
    slo_burn_rate: float | None
    slo_alert: str | None
    slo_entry: str | None

    @property
    def entered_text(self) -> str:
        """``a (2 findings), b (1 finding)``, or ``none`` when no stored finding said where it entered."""
        if not self.entered_at:
            return "none"
        return ", ".join(f"{job} ({plural(n, 'finding')})" for job, n in self.entered_at)


def _pipeline_report(p: PipelineFacts) -> PipelineReport:
    names = {n.key: n.name for n in p.nodes}
    if p.target_s is None:
        stale_now = "not judged (no target: set rules.pipeline_freshness.target)"
    elif not p.stale:
        stale_now = f"fresh now (every end within {format_duration(p.target_s)} of its sources)"
    else:
        parts = []
        for s in p.stale:
            entry = p.node(s.entry)
            adds = "" if entry.now is None or entry.now.local_lag_s is None else (
                f" (adds {format_lag(entry.now.local_lag_s)})")
            parts.append(f"the end `{names[s.end]}` is {format_lag(s.end_lag_s)} behind its sources; the staleness "
                         f"enters at `{names[s.entry]}`{adds}")
        stale_now = "; ".join(parts)
    counts: dict[str, int] = {}
    for e in p.episodes:
        if e.severity is not Severity.INFO:  # the entry's finding; the jobs after it get INFO
            job = e.job.name or e.job.job_id
            counts[job] = counts.get(job, 0) + 1
    slo = p.slo
    return PipelineReport(
        p.name, p.configured, tuple(n.name for n in p.nodes), stale_now,
        tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        None if p.most_period is None else names.get(p.most_period), None if slo is None else slo_text(slo),
        None if slo is None else 100.0 * slo.budget_left_share, None if slo is None else slo.burn_rate,
        None if slo is None else slo.alert, None if slo is None else slo.entry,
    )


@dataclass(frozen=True, slots=True)
class DetailedReport:
    """A report over ``[since, until)``: ``name``, when generated, and one :class:`JobReport` per job
    (worst health first)."""

    name: str
    generated_at: datetime
    since: datetime
    until: datetime
    jobs: tuple[JobReport, ...]
    outside_period: tuple[str, ...] = ()
    pipelines: tuple[PipelineReport, ...] = ()

    @property
    def outside_note(self) -> str | None:
        """``1 job has no sample in this period: <name>`` for the database's jobs left out (``None``: none)."""
        if not self.outside_period:
            return None
        n = len(self.outside_period)
        return f"{plural(n, 'job')} {'has' if n == 1 else 'have'} no sample in this period: " + ", ".join(
            self.outside_period)

    @property
    def health(self) -> str:
        """The worst job health, now or over the period (``ok`` without jobs)."""
        return max((j.worst for j in self.jobs), default=Severity.OK).label()

    def to_json(self) -> dict[str, Any]:
        """The whole report as JSON (``tidegauge report --format json``)."""
        return {
            "name": self.name,
            "generated_at": format_instant(self.generated_at),
            "since": format_instant(self.since),
            "until": format_instant(self.until),
            "health": self.health,
            "jobs": [j.to_json() for j in self.jobs],
            "outside_period": list(self.outside_period),
            "pipelines": [_jsonable(asdict(p)) for p in self.pipelines],
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _thin(values: list[Any]) -> list[Any]:
    if len(values) <= _MAX_POINTS:
        return values
    step = len(values) / _MAX_POINTS
    return [values[int(i * step)] for i in range(_MAX_POINTS)]


def _alert_episodes(alerts: Iterable[Alert], since: datetime, until: datetime) -> list[AlertEpisode]:
    out = []
    for a in alerts:
        if a.state is AlertState.INACTIVE:
            continue
        end = a.resolved_at or until
        if end < since or a.active_at >= until:
            continue
        out.append(
            AlertEpisode(a.rule, a.severity.label(), a.state.value, a.active_at, a.resolved_at,
                         (end - a.active_at).total_seconds(), a.message)
        )
    return sorted(out, key=lambda e: (-Severity.parse(e.severity), e.active_at))


def mis_dated_what(c: DropCause) -> str:
    """What a mis-dated row's event time was: ``an event time beyond year 8999 (a unit mistake)``,
    ``2099-01-01T00:00Z (a future-dated row, 72 years ahead of its processing time)``."""
    assert c.event_time_max is not None
    ahead = "" if c.ahead_s is None else format_duration(c.ahead_s)
    if c.mis_dated == "units":
        return f"{format_instant_short(c.event_time_max)} (an event time in the wrong unit)"
    if c.mis_dated == "future":
        return f"{format_instant_short(c.event_time_max)} (a future-dated row, {ahead} ahead of its processing time)"
    return f"{format_instant_short(c.event_time_max)} (a mis-dated row, {ahead} beyond the data's own progression)"


def freshness_ahead_text(f: JobFacts) -> str | None:
    """``5 of 11 batches from batch 7, up to 72 years ahead: moved by batch 6's event time 2099-...``;
    ``None`` when the watermark was never ahead of processing time."""
    fr = f.freshness
    if not fr.ahead_batches:
        return None
    size = (f"{BEYOND_RANGE} (how far is unknown)" if fr.ahead_max_s is None
            else f"up to {format_lag(-fr.ahead_max_s)}")
    text = f"{fr.ahead_batches} of {plural(fr.batches, 'batch')} from batch {fr.first_ahead_batch}, {size}"
    c = fr.ahead_cause
    if c is not None and c.event_time_max is not None:
        text += f": moved there by batch {c.batch_id}'s event time {mis_dated_what(c)}"
    return text


def lateness_note(f: JobFacts) -> str | None:
    """When a mis-dated row drives the observed lateness: which, and the p99.9 without it; ``None`` else."""
    c = f.lateness_mis_dated
    if c is None or c.event_time_max is None:
        return None
    return (f"driven by batch {c.batch_id}'s event time {mis_dated_what(c)}: rows behind it look late; without it "
            f"{format_lag(f.lateness_without_mis_dated_s)}")


def _mis_dated_text(c: DropCause, engine: Engine) -> str:
    """What the mis-dated row was and what to do about it (never a longer delay)."""
    assert c.event_time_max is not None and c.observed_at is not None
    ahead = "" if c.ahead_s is None else format_duration(c.ahead_s)
    if c.mis_dated == "units":
        what = (f"an event time {BEYOND_RANGE} in batch {c.batch_id} (at {format_instant_short(c.observed_at)})"
                if c.ahead_s is None else
                f"an event time of {format_instant_short(c.event_time_max)} in batch {c.batch_id}")
        why = "a unit mistake (milliseconds or microseconds read as seconds)"
        remedy = "Fix the event-time column's unit (e.g. timestamp_millis instead of timestamp_seconds)"
    elif c.mis_dated == "future":
        what = (f"an event time of {format_instant_short(c.event_time_max)} in batch {c.batch_id}, {ahead} ahead of "
                "its processing time")
        why = "a future-dated row"
        remedy = "Filter rows whose event time is ahead of the processing time by more than the allowed skew"
    else:
        what = (f"an event time of {format_instant_short(c.event_time_max)} in batch {c.batch_id}, {ahead} beyond "
                "the data's own progression (the rows after it continue the old one)")
        why = "a mis-dated row"
        remedy = "Filter or repair implausible event times (ahead of the rest of the data)"
    where = ("before withWatermark" if engine is Engine.SPARK
             else "before the WatermarkStrategy assigns timestamps" if engine is Engine.FLINK else "upstream")
    return (f"{plural(c.dropped_rows, 'row')} ({batch_range(c.first_dropped_batch, c.last_dropped_batch)}) were "
            f"dropped against the watermark {why} set: {what}. No watermark delay keeps them. {remedy} {where}.")


def _recommend(f: JobFacts) -> list[Recommendation]:
    out: list[Recommendation] = []
    d = f.drops
    mis = d.mis_dated
    late = f.lateness_p999_s
    delay = f.inferred_delay_s
    for c in mis:
        out.append(Recommendation(
            _mis_dated_text(c, f.engine), PROGRESS_HISTORY,
            {"batch_id": c.batch_id, "dropped_rows": c.dropped_rows, "mis_dated": c.mis_dated},
        ))
    if not mis and d.dropped_rows and d.share_pct is not None and d.share_pct > 0.1 and late is not None:
        suggest = max(late, delay or 0.0) * 1.2
        knob = "forBoundedOutOfOrderness (or allowedLateness)" if f.engine is Engine.FLINK else "withWatermark's delay"
        out.append(Recommendation(
            f"{d.dropped_rows:,} rows ({d.share_pct:.2f}%) were dropped as late; the oldest rows arrived up to "
            f"{format_duration(late)} behind the newest event time (p99.9)"
            f"{f', over the {format_duration(delay)} delay' if delay else ''}. A delay ({knob}) of about "
            f"{format_duration(suggest)} would keep them.",
            PROGRESS_HISTORY, {"dropped_rows": d.dropped_rows, "lateness_p999_s": late, "inferred_delay_s": delay},
        ))
    elif not d.dropped_rows and delay and late and delay > 3 * late:
        out.append(Recommendation(
            f"Observed lateness p99.9 is {format_duration(late)}; your {format_duration(delay)} delay keeps windows "
            f"open about {delay / late:.0f}x longer than the data needs (state and latency). Consider a delay near "
            f"{format_duration(late * 1.5)}.",
            PROGRESS_HISTORY, {"lateness_p999_s": late, "inferred_delay_s": delay},
        ))
    fresh = f.freshness
    if fresh.attainment_pct is not None and fresh.attainment_pct < 99.0:
        cause = ("a mis-dated row moved the watermark (above)" if mis else
                 f"{f.holding_min.name} holds the minimum watermark" if f.holding_min is not None else
                 "look for watermark stalls (an idle input under the min policy) or slow batches; in a backfill "
                 "or replay the event times trail processing time by design")
        out.append(Recommendation(
            f"Freshness (processing time − watermark, on the data's own clock) met its "
            f"{format_duration(fresh.target_s)} target in {fresh.attainment_pct:.1f}% of batches: {cause}.",
            PROGRESS_HISTORY, {"attainment_pct": fresh.attainment_pct},
        ))
    s = f.state
    if s.growing and s.slope_per_h is not None and s.watermark_advances == 0:
        held = f" ({f.holding_min.name} holds it: see above)" if f.holding_min is not None else ""
        out.append(Recommendation(
            f"State grows by about {s.slope_per_h:,.0f} {s.unit}/h because the watermark did not advance in the "
            f"period{held}: nothing is old enough to evict. Fix what holds the watermark; the state follows.",
            PROGRESS_HISTORY, {"slope_per_h": s.slope_per_h, "unit": s.unit},
        ))
    elif s.growing and s.slope_per_h is not None and not s.rows_removed and len(f.batches) >= 3:
        if f.engine is Engine.FLINK:
            text = (f"Checkpointed state grows by about {s.slope_per_h:,.0f} bytes/h: keyed state that nothing "
                    "clears grows with every key. Give it a state TTL (StateTtlConfig), clear it from an event-time "
                    "timer, or key windows so the watermark ends them.")
        elif any(e.rule == JOIN_STATE_RULE for e in f.episodes):
            # the stored join_state_unbounded finding names the join and the condition to add
            text = (f"State grows by about {s.slope_per_h:,.0f} {s.unit}/h with nothing removed: a stream-stream join "
                    "without a time range between its two sides' event-time columns keeps every row. Add the "
                    "condition the join_state_unbounded finding above names.")
        else:
            text = (f"State grows by about {s.slope_per_h:,.0f} {s.unit}/h with nothing removed: the state key cannot "
                    "be evicted by the watermark (e.g. dropDuplicates without the event-time column). Add the "
                    "event-time column to the key, use dropDuplicatesWithinWatermark, or a state TTL.")
        out.append(Recommendation(text, PROGRESS_HISTORY, {"slope_per_h": s.slope_per_h, "unit": s.unit}))
    if f.restarts:
        what = "job" if f.engine is Engine.FLINK else "query"
        out.append(Recommendation(
            f"The {what} restarted {len(f.restarts)} time(s): each restart replays from the last checkpoint; check "
            f"the {'JobManager exceptions' if f.engine is Engine.FLINK else 'driver logs'} for the cause.",
            PROGRESS_HISTORY, {"restarts": len(f.restarts)},
        ))
    return out


def _job_report(f: JobFacts, alerts: Sequence[Alert]) -> JobReport:
    points = f.batches
    fresh = [(p.observed_at, p.freshness_s) for p in points if p.freshness_s is not None]
    state = [(p.observed_at, p.state_rows if f.state.unit == "rows" else p.state_bytes) for p in points]
    state = [(t, v) for t, v in state if v is not None]
    wm = [(p.observed_at, p.watermark) for p in points if p.watermark is not None]
    if not wm:  # Flink jobs whose job sample has no watermark: the lowest of the subtasks' newest
        marks = [s.points[-1].watermark for s in f.scopes if s.points and s.points[-1].watermark is not None]
        wm_last = min(marks) if marks else None
    else:
        wm_last = wm[-1][1]
    offsets = [p.lag_offsets for p in points if p.lag_offsets is not None]
    secs = [p.lag_seconds for p in points if p.lag_seconds is not None]
    entries = episode_entries(f.episodes)
    worst = f.health.worst_episode
    series = {
        "freshness_at": _thin([t for t, _ in fresh]), "freshness_s": _thin([v for _, v in fresh]),
        "state_at": _thin([t for t, _ in state]), "state_values": _thin([v for _, v in state]),
        "dropped_at": [p.observed_at for p in points if p.dropped_rows],
        "dropped_rows": [p.dropped_rows for p in points if p.dropped_rows],
        "lag_at": _thin([p.observed_at for p in points if p.lag_offsets is not None]), "lag_offsets": _thin(offsets),
    }
    return JobReport(
        engine=f.engine.value, job_id=f.job_id, name=f.name, health=f.health.now.label(),
        period_health=(Severity.OK if worst is None else worst.severity).label(), batches=len(points),
        watermark_last=wm_last,
        freshness_target_s=f.freshness.target_s, freshness_attainment_pct=f.freshness.attainment_pct,
        freshness_p50_s=f.freshness.p50_s, freshness_p95_s=f.freshness.p95_s, freshness_max_s=f.freshness.max_s,
        freshness_last_s=f.freshness.last_s, input_rows=f.drops.input_rows, dropped_rows=f.drops.dropped_rows,
        dropped_share_pct=f.drops.share_pct,
        drop_causes=tuple(sorted(f.drops.causes, key=lambda c: (c.first_dropped_batch is None, c.first_dropped_batch or 0))), drops_by_scope=f.drops.by_scope,
        episodes=tuple(entries), worst_episode=next((x for x in entries if worst is not None and x.id == worst.id), None),
        alerts=tuple(_alert_episodes(alerts, f.since, f.until)), state_unit=f.state.unit,
        state_first=f.state.first, state_last=f.state.last, state_slope_per_h=f.state.slope_per_h,
        state_growing=f.state.growing, state_projected_24h=f.state.projected_24h,
        state_hours_to_limit=f.state.hours_to_limit, lag=f.lag, lag_status=f.lag_status,
        lag_offsets_last=offsets[-1] if offsets else None, lag_offsets_max=max(offsets) if offsets else None,
        lag_seconds_last=secs[-1] if secs else None, lag_seconds_max=max(secs) if secs else None,
        holding_min=None if f.holding_min is None else f"{f.holding_min.name}: {f.holding_min.reason}",
        restarts=f.restarts, inferred_delay_s=f.inferred_delay_s, lateness_p999_s=f.lateness_p999_s,
        recommendations=tuple(_recommend(f)), series=series, freshness_ahead=freshness_ahead_text(f),
        lateness_note=lateness_note(f), slo_burn=None if f.slo is None else slo_text(f.slo),
    )


def build_detailed_report(
    name: str,
    since: datetime,
    until: datetime,
    facts: Iterable[JobFacts],
    alerts: Mapping[tuple[str, str], Sequence[Alert]] | None = None,
    outside_period: Sequence[str] = (),
    pipelines: Iterable[PipelineFacts] = (),
) -> DetailedReport:
    """Build the report (pure) from each job's facts over the period (:func:`monitor.facts.job_facts`).

    Args:
        name: the report's name.
        since / until: the period (aware UTC); ``until`` is also the generation time.
        facts: one :class:`monitor.facts.JobFacts` per job.
        alerts: each job's stored alerts by ``(engine, job_id)`` (listed when active in the period).
        outside_period: the names of the selected jobs of the database with nothing in the period.
        pipelines: the pipelines' facts over the period (:func:`monitor.facts.source.load_pipeline_facts`).

    Raises:
        ValueError: a naive time.
    """
    start = ensure_utc(since, "since")
    end = ensure_utc(until, "until")
    assert start is not None and end is not None
    by_job = alerts or {}
    jobs = [_job_report(f, by_job.get((f.engine.value, f.job_id), ())) for f in facts]
    jobs.sort(key=lambda j: (-j.worst, -Severity.parse(j.health), j.engine, j.job_id))
    return DetailedReport(name, end, start, end, tuple(jobs), tuple(outside_period),
                          tuple(_pipeline_report(p) for p in pipelines))
