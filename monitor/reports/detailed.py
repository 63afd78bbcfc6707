"""Health reports people read: per job, what happened over a period and what to change.

:func:`build_detailed_report` is pure (no clock, no store): from each job's samples over ``[since, until)``,
the stored alerts and the job's runs it computes, per job:

* **freshness SLO attainment**: the share of whole-job progress samples whose freshness (the sample's
  processing time minus its watermark, seconds; Spark's epoch placeholder watermark excluded) is within
  the target, with the p50/p95/max; a watermark more than ``future_skew`` *ahead* of processing time (moved
  by a future-dated row) misses the target too;
* **late rows**: rows dropped by the watermark (Spark ``numRowsDroppedByWatermark``), their share of the
  input, and what caused them: each dropping batch is attributed to the earlier batch whose event-time max
  set the watermark the rows were late against (Spark's watermark is the max event time seen minus the
  delay, ``WatermarkTracker``), flagged when that event time was ahead of its batch's processing time by
  more than ``future_skew`` (a future-dated row);
* **alerts** raised in the period (current or last episode of each alert) and how long they lasted;
* **state growth**: first/last state rows, the Theil-Sen trend (:func:`rules.state_growth.theil_sen_slope`,
  the rule's own estimator), the size projected 24 h on and the time to ``limit_rows`` when set;
* **consumer lag** (offsets, seconds): last and max; **restarts**: the runs started in the period;
* **recommendations backed by data**, each saying where its evidence comes from. tidegauge stores no raw
  events, so they come from the **progress history**: the delay is inferred per batch as
  ``max event time seen before the batch - its watermark`` (median), and the observed lateness of a batch
  as ``max event time seen before it - its eventTime.min`` (an upper bound on its rows' lateness; p99.9
  over batches). A what-if replay (``tidegauge whatif``) over the events gives the exact answer.

Unknown is ``None``, never zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from monitor.alerts.lifecycle import Alert
from monitor.model import AlertState, Sample, SampleKind, Severity, ensure_utc
from rules.state_growth import theil_sen_slope

__all__ = [
    "PROGRESS_HISTORY",
    "AlertEpisode",
    "DetailedReport",
    "DropCause",
    "JobReport",
    "Recommendation",
    "ReportSettings",
    "attribute_drops",
    "build_detailed_report",
    "cause_indices",
]

PROGRESS_HISTORY = "progress history"
WHATIF_REPLAY = "what-if replay"
_EPOCH_YEAR = 1970
_MAX_POINTS = 240


@dataclass(frozen=True, slots=True)
class ReportSettings:
    """What the report measures against.

    Attributes:
        freshness_target: the freshness SLO (the config's ``rules.freshness.target``; 15 min by default).
        future_skew: an event time this far ahead of its batch is a future-dated row (``future_timestamp``'s
            ``skew``).
        state_limit_rows: ``rules.state_growth.limit_rows``, for the time-to-limit projection.
    """

    freshness_target: timedelta = timedelta(minutes=15)
    future_skew: timedelta = timedelta(hours=1)
    state_limit_rows: int | None = None


@dataclass(frozen=True, slots=True)
class DropCause:
    """Rows dropped against the watermark that batch ``batch_id``'s event-time max set."""

    batch_id: int | None
    observed_at: datetime | None
    event_time_max: datetime | None
    dropped_rows: int
    future_dated: bool


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
class Recommendation:
    """A change to make, with the numbers behind it and where they come from (:data:`PROGRESS_HISTORY`)."""

    text: str
    source: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobReport:
    """One job's section (see the module docstring; times aware UTC, durations in seconds)."""

    engine: str
    job_id: str
    name: str | None
    health: str
    batches: int
    freshness_target_s: float
    freshness_attainment_pct: float | None
    freshness_p50_s: float | None
    freshness_p95_s: float | None
    freshness_max_s: float | None
    input_rows: int | None
    dropped_rows: int | None
    dropped_share_pct: float | None
    drop_causes: tuple[DropCause, ...]
    alerts: tuple[AlertEpisode, ...]
    state_rows_first: int | None
    state_rows_last: int | None
    state_slope_rows_per_h: float | None
    state_projected_24h: float | None
    state_hours_to_limit: float | None
    lag_offsets_last: int | None
    lag_offsets_max: int | None
    lag_seconds_last: float | None
    lag_seconds_max: float | None
    restarts: tuple[datetime, ...]
    inferred_delay_s: float | None
    lateness_p999_s: float | None
    recommendations: tuple[Recommendation, ...]
    series: dict[str, list[Any]]

    def to_json(self) -> dict[str, Any]:
        """JSON object (times ISO-8601 UTC)."""
        doc: dict[str, Any] = _jsonable(asdict(self))
        return doc


@dataclass(frozen=True, slots=True)
class DetailedReport:
    """A report over ``[since, until)``: ``name``, when generated, and one :class:`JobReport` per job
    (worst health first)."""

    name: str
    generated_at: datetime
    since: datetime
    until: datetime
    jobs: tuple[JobReport, ...]

    @property
    def health(self) -> str:
        """The worst job health (``ok`` without jobs)."""
        worst = max((Severity.parse(j.health) for j in self.jobs), default=Severity.OK)
        return worst.label()

    def to_json(self) -> dict[str, Any]:
        """The whole report as JSON (``tidegauge report --format json``)."""
        return {
            "name": self.name,
            "generated_at": _iso(self.generated_at),
            "since": _iso(self.since),
            "until": _iso(self.until),
            "health": self.health,
            "jobs": [j.to_json() for j in self.jobs],
        }


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _real(wm: datetime | None) -> datetime | None:
    return wm if wm is not None and wm.year > _EPOCH_YEAR else None


def _rank(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (``p`` in [0, 1])."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(p * len(s)) - 1)]


def cause_indices(event_time_max: Sequence[datetime | None], dropped: Sequence[int | None]) -> list[int | None]:
    """For each batch (oldest first) that dropped rows, the index of the earlier batch with the largest
    event-time max so far (the one that set the watermark, Spark's ``WatermarkTracker``); ``None`` for a
    batch without drops or without an earlier event time.

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(event_time_max) != len(dropped):
        raise ValueError("cause_indices: one event-time max and one dropped count per batch")
    out: list[int | None] = []
    best: int | None = None
    for i, (t, n) in enumerate(zip(event_time_max, dropped, strict=True)):
        out.append(best if n else None)
        if t is not None and (best is None or (top := event_time_max[best]) is None or t > top):
            best = i
    return out


def attribute_drops(batches: Sequence[Sample], future_skew: timedelta = timedelta(hours=1)) -> list[DropCause]:
    """Attribute each batch's dropped rows to the batch whose event-time max set the watermark
    (:func:`cause_indices`).

    Args:
        batches: whole-job progress samples, oldest first.
        future_skew: an event-time max this far ahead of its batch's own time is a future-dated row.

    Returns:
        One :class:`DropCause` per causing batch (rows summed), most rows first; drops with no earlier event
        time are one cause with ``batch_id=None``.
    """
    index = cause_indices([b.event_time_max for b in batches], [b.dropped_by_watermark for b in batches])
    rows: dict[int | None, int] = {}
    for b, cause in zip(batches, index, strict=True):
        if b.dropped_by_watermark:
            rows[cause] = rows.get(cause, 0) + b.dropped_by_watermark
    out = []
    for cause, n in rows.items():
        c = None if cause is None else batches[cause]
        ahead = c is not None and c.event_time_max is not None and c.event_time_max - c.observed_at > future_skew
        out.append(DropCause(None if c is None else c.batch_id, None if c is None else c.observed_at,
                             None if c is None else c.event_time_max, n, bool(ahead)))
    return sorted(out, key=lambda d: -d.dropped_rows)


def _batches(samples: Iterable[Sample]) -> list[Sample]:
    """Whole-job progress samples, one per (run, batch), oldest first."""
    seen: dict[tuple[str | None, int | None, datetime], Sample] = {}
    for s in samples:
        if s.kind is SampleKind.PROGRESS and s.scope.is_job():
            seen.setdefault((s.job.run_id, s.batch_id, s.observed_at), s)
    return sorted(seen.values(), key=lambda s: s.observed_at)


def _thin(values: list[Any]) -> list[Any]:
    if len(values) <= _MAX_POINTS:
        return values
    step = len(values) / _MAX_POINTS
    return [values[int(i * step)] for i in range(_MAX_POINTS)]


def _episodes(alerts: Iterable[Alert], since: datetime, until: datetime) -> list[AlertEpisode]:
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


def _fmt(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _job_report(
    key: tuple[str, str], samples: Sequence[Sample], alerts: Sequence[Alert], runs: Sequence[tuple[str, datetime]],
    since: datetime, until: datetime, settings: ReportSettings,
) -> JobReport:
    batches = _batches(samples)
    name = next((s.job.name for s in reversed(samples) if s.job.name), None)
    if name is None:
        name = next((a.annotations["job_name"] for a in alerts if "job_name" in a.annotations), None)
    target = settings.freshness_target.total_seconds()
    fresh = [(b.observed_at, (b.observed_at - wm).total_seconds()) for b in batches if (wm := _real(b.watermark))]
    values = [v for _, v in fresh]
    # a watermark ahead of processing time by more than the skew was moved by a future-dated row: not fresh
    skew = settings.future_skew.total_seconds()
    attainment = None if not values else 100.0 * sum(1 for v in values if -skew <= v <= target) / len(values)
    inputs = [b.num_input_rows for b in batches if b.num_input_rows is not None]
    drops = [b.dropped_by_watermark for b in batches if b.dropped_by_watermark is not None]
    input_rows = sum(inputs) if inputs else None
    dropped = sum(drops) if drops else None
    share = None if not input_rows or dropped is None else 100.0 * dropped / input_rows
    causes = attribute_drops(batches, settings.future_skew)

    state = [(b.observed_at, b.state_rows_total) for b in batches if b.state_rows_total is not None]
    slope = projected = to_limit = None
    if len(state) >= 3 and state[-1][0] > state[0][0]:
        xs = [(t - state[0][0]).total_seconds() for t, _ in state]
        slope = theil_sen_slope(xs, [float(v) for _, v in state]) * 3600.0
        projected = state[-1][1] + slope * 24
        if settings.state_limit_rows is not None and slope > 0:
            to_limit = max(0.0, (settings.state_limit_rows - state[-1][1]) / slope)
    lag_o = [b.lag_offsets for b in batches if b.lag_offsets is not None]
    lag_s = [b.lag_seconds for b in batches if b.lag_seconds is not None]

    # delay and lateness from the progress history (see the module docstring)
    delays: list[float] = []
    lateness: list[float] = []
    seen_max: datetime | None = None
    for b in batches:
        wm = _real(b.watermark)
        if seen_max is not None and wm is not None and seen_max - wm >= timedelta(0):
            delays.append((seen_max - wm).total_seconds())
        low = b.event_time_min
        if seen_max is not None and low is not None and low.year > _EPOCH_YEAR:
            lateness.append(max(0.0, (seen_max - low).total_seconds()))
        if b.event_time_max is not None and (b.event_time_max - b.observed_at) <= settings.future_skew:
            seen_max = b.event_time_max if seen_max is None else max(seen_max, b.event_time_max)
    delay = _rank(delays, 0.5)
    late_p999 = _rank(lateness, 0.999)

    episodes = _episodes(alerts, since, until)
    restarts = tuple(first for _, first in runs[1:] if since <= first < until)
    recs = _recommend(settings, delay, late_p999, dropped, share, causes, attainment, slope, batches, restarts)
    firing = [a.severity for a in alerts if a.state is AlertState.FIRING]
    series = {
        "freshness_at": _thin([t for t, _ in fresh]), "freshness_s": _thin(values),
        "state_at": _thin([t for t, _ in state]), "state_rows": _thin([v for _, v in state]),
        "dropped_at": [b.observed_at for b in batches if b.dropped_by_watermark],
        "dropped_rows": [b.dropped_by_watermark for b in batches if b.dropped_by_watermark],
    }
    return JobReport(
        engine=key[0], job_id=key[1], name=name, health=max(firing, default=Severity.OK).label(), batches=len(batches),
        freshness_target_s=target, freshness_attainment_pct=attainment, freshness_p50_s=_rank(values, 0.5),
        freshness_p95_s=_rank(values, 0.95), freshness_max_s=max(values) if values else None,
        input_rows=input_rows, dropped_rows=dropped, dropped_share_pct=share, drop_causes=tuple(causes),
        alerts=tuple(episodes), state_rows_first=state[0][1] if state else None,
        state_rows_last=state[-1][1] if state else None, state_slope_rows_per_h=slope, state_projected_24h=projected,
        state_hours_to_limit=to_limit, lag_offsets_last=lag_o[-1] if lag_o else None,
        lag_offsets_max=max(lag_o) if lag_o else None, lag_seconds_last=lag_s[-1] if lag_s else None,
        lag_seconds_max=max(lag_s) if lag_s else None, restarts=restarts, inferred_delay_s=delay,
        lateness_p999_s=late_p999, recommendations=tuple(recs), series=series,
    )


def _recommend(
    settings: ReportSettings, delay: float | None, late: float | None, dropped: int | None, share: float | None,
    causes: Sequence[DropCause], attainment: float | None, slope: float | None, batches: Sequence[Sample],
    restarts: Sequence[datetime],
) -> list[Recommendation]:
    out: list[Recommendation] = []
    future = [c for c in causes if c.future_dated]
    if future:
        c = future[0]
        out.append(Recommendation(
            f"{c.dropped_rows:,} rows were dropped against the watermark a future-dated row set (batch {c.batch_id}, "
            f"event time {c.event_time_max:%Y-%m-%d %H:%M} UTC). Filter rows with event_time > now + "
            f"{_fmt(settings.future_skew.total_seconds())} before withWatermark.",
            PROGRESS_HISTORY, {"batch_id": c.batch_id, "dropped_rows": c.dropped_rows},
        ))
    elif dropped and share is not None and share > 0.1 and late is not None:
        suggest = max(late, delay or 0.0) * 1.2
        out.append(Recommendation(
            f"{dropped:,} rows ({share:.2f}%) were dropped as late; the oldest rows arrived up to {_fmt(late)} behind "
            f"the newest event time (p99.9){f', over the {_fmt(delay)} delay' if delay else ''}. A delay of about "
            f"{_fmt(suggest)} would keep them.",
            PROGRESS_HISTORY, {"dropped_rows": dropped, "lateness_p999_s": late, "inferred_delay_s": delay},
        ))
    elif not dropped and delay and late and delay > 3 * late:
        out.append(Recommendation(
            f"Observed lateness p99.9 is {_fmt(late)}; your {_fmt(delay)} delay keeps windows open about "
            f"{delay / late:.0f}x longer than the data needs (state and latency). Consider a delay near "
            f"{_fmt(late * 1.5)}.",
            PROGRESS_HISTORY, {"lateness_p999_s": late, "inferred_delay_s": delay},
        ))
    if attainment is not None and attainment < 99.0:
        out.append(Recommendation(
            f"Freshness met its {_fmt(settings.freshness_target.total_seconds())} target in {attainment:.1f}% of "
            "batches: look for watermark stalls (an idle input under the min policy) or slow batches.",
            PROGRESS_HISTORY, {"attainment_pct": attainment},
        ))
    removed = sum(b.state_rows_removed or 0 for b in batches)
    if slope is not None and slope > 0 and removed == 0 and len(batches) >= 3:
        out.append(Recommendation(
            f"State grows by about {slope:,.0f} rows/h with nothing removed: the state key cannot be evicted by the "
            "watermark (e.g. dropDuplicates without the event-time column). Add the event-time column to the key, "
            "use dropDuplicatesWithinWatermark, or a state TTL.",
            PROGRESS_HISTORY, {"slope_rows_per_h": slope},
        ))
    if restarts:
        out.append(Recommendation(
            f"The query restarted {len(restarts)} time(s): each restart replays from the last checkpoint; check "
            "the driver logs for the cause.", PROGRESS_HISTORY, {"restarts": len(restarts)},
        ))
    return out


def build_detailed_report(
    name: str,
    since: datetime,
    until: datetime,
    samples: Mapping[tuple[str, str], Sequence[Sample]],
    alerts: Iterable[Alert],
    runs: Mapping[tuple[str, str], Sequence[tuple[str, datetime]]] | None = None,
    settings: ReportSettings | None = None,
) -> DetailedReport:
    """Build the report (pure).

    Args:
        name: the report's name.
        since / until: the period (aware UTC); ``until`` is also the generation time.
        samples: each job's samples in the period by ``(engine, job_id)``, any order.
        alerts: stored alerts (each job's by its ``engine``/``job_id`` labels).
        runs: each job's runs as ``(run_id, first_seen)``, oldest first (a run after the first is a restart).
        settings: targets (:class:`ReportSettings`).

    Raises:
        ValueError: a naive time.
    """
    start = ensure_utc(since, "since")
    end = ensure_utc(until, "until")
    assert start is not None and end is not None
    cfg = settings or ReportSettings()
    by_job: dict[tuple[str, str], list[Alert]] = {}
    for a in alerts:
        by_job.setdefault((a.labels.get("engine", "-"), a.labels.get("job_id", "-")), []).append(a)
    keys = sorted(set(samples) | {k for k, v in by_job.items() if _episodes(v, start, end)})
    jobs = [
        _job_report(k, sorted(samples.get(k, []), key=lambda s: s.observed_at), by_job.get(k, []),
                    (runs or {}).get(k, []), start, end, cfg)
        for k in keys
    ]
    jobs.sort(key=lambda j: -Severity.parse(j.health))
    return DetailedReport(name, end, start, end, tuple(jobs))
