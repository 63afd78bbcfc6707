"""Compute one job's facts over a period from its samples (pure: no clock, no store).

:func:`job_facts` is the one place every surface's numbers come from. Each concept has one definition,
shared with the rules where a rule needs it too (the rules cannot import this package):

* Spark's "no watermark yet": :func:`rules.common.is_epoch`;
* which input / partition / subtask holds the minimum: :func:`rules.common.holding_input`;
* the inferred delay: :func:`rules.batches.inferred_delay` (the smallest ``max seen - watermark``);
* a mis-dated row (a leap beyond the data's own progression): :func:`rules.leaps.find_leap`;
* the state trend: :func:`rules.state_growth.theil_sen_slope`;
* Burrow's partition status: the ``consumer_lag`` rule (:func:`rules.consumer_lag.evaluate_lag`);
* the job's health: :func:`job_health` (the worst severity, Burrow's group status).

The job's observations are split as the rules split them (:func:`rules.history.job_history`): job-scope
``PROGRESS`` and ``GAUGE`` samples are the batches (Spark micro-batches, Flink and Kafka polls), the
narrower scopes their own series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import pairwise
from statistics import median
from typing import Literal

from monitor.alerts.lifecycle import Alert
from monitor.facts.model import (
    BatchPoint,
    DropCause,
    DropFacts,
    FactsSettings,
    FreshnessFacts,
    HealthFacts,
    HoldingMin,
    JobFacts,
    LagStatus,
    PartitionLagFacts,
    ScopePoint,
    ScopeSeries,
    SloFacts,
    StateFacts,
)
from monitor.model import (
    AlertState,
    Engine,
    FindingEpisode,
    JobRef,
    Sample,
    Scope,
    Severity,
    ensure_utc,
    worst_episode,
)
from monitor.timefmt import format_duration, format_instant_short, is_beyond_range, seconds_between
from rules.batches import UNITS_HIGH, inferred_delay, real_watermark
from rules.common import (
    flink_scope_name,
    holding_input,
    holding_split,
    is_epoch,
    scope_name,
    split_name,
    watermark_unused,
)
from rules.consumer_lag import LagParams, evaluate_lag, sample_instant
from rules.history import JobHistory, job_history
from rules.leaps import find_leap
from rules.slo import RULE as SLO_RULE
from rules.slo import format_objective
from rules.state_growth import theil_sen_slope

__all__ = [
    "LAG_STATUS_ORDER",
    "cause_indices",
    "drop_facts",
    "freshness_facts",
    "group_status",
    "job_facts",
    "job_health",
    "partition_status",
    "state_facts",
    "waiting_text",
]

#: Burrow's statuses from best to worst (``UNKNOWN`` below ``OK``: it never makes a group worse;
#: ``NEVER_COMMITTED`` above ``OK`` and below Burrow's errors).
LAG_STATUS_ORDER: dict[LagStatus, int] = {
    "UNKNOWN": -1, "OK": 0, "NEVER_COMMITTED": 1, "WARN": 2, "STALL": 3, "REWIND": 4, "STOP": 5,
}


def _rank(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (``p`` in [0, 1]); ``None`` for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(p * len(s)) - 1)]


def _total(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# ------------------------------------------------------------------------------------------------ drops


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


def drop_facts(batches: Sequence[Sample], scopes: Sequence[ScopeSeries], settings: FactsSettings) -> DropFacts:
    """Rows dropped by the watermark over ``batches`` (job-scope, oldest first) and the batch whose event
    time set the watermark that dropped them (:func:`cause_indices` over the batches' real event-time maxima),
    each cause judged mis-dated or not (see :class:`monitor.facts.DropCause`)."""
    input_rows = _total(b.num_input_rows for b in batches)
    dropped = _total(b.dropped_by_watermark for b in batches)
    share = None if not input_rows or dropped is None else 100.0 * dropped / input_rows
    # every real event time counts here, a unit mistake's too (year 2200 and later): it sets the watermark
    maxes = [
        b.event_time_max if b.num_input_rows and b.event_time_max is not None and not is_epoch(b.event_time_max)
        else None
        for b in batches
    ]
    index = cause_indices(maxes, [b.dropped_by_watermark for b in batches])
    leap = find_leap(batches, settings.min_jump, settings.jump_factor) if dropped else None
    grouped: dict[int | None, list[int]] = {}
    for i, cause in enumerate(index):
        if batches[i].dropped_by_watermark:
            grouped.setdefault(cause, []).append(i)
    causes: list[DropCause] = []
    for cause, droppers in grouped.items():
        rows = sum(batches[i].dropped_by_watermark or 0 for i in droppers)
        first, last = batches[droppers[0]].batch_id, batches[droppers[-1]].batch_id
        if cause is None:
            causes.append(DropCause(None, None, None, rows, first, last, None, None))
            continue
        c = batches[cause]
        top = c.event_time_max
        assert top is not None
        kind: Literal["future", "leap", "units"] | None = None
        ahead: float | None = None
        if top >= UNITS_HIGH:
            kind, ahead = "units", seconds_between(top, c.observed_at)
        elif top - c.observed_at > settings.future_skew:
            kind, ahead = "future", (top - c.observed_at).total_seconds()
        elif leap is not None and leap.index == cause:
            kind, ahead = "leap", leap.leap.total_seconds()
        causes.append(DropCause(c.batch_id, c.observed_at, top, rows, first, last, kind, ahead))
    causes.sort(key=lambda d: -d.dropped_rows)
    by_scope = sorted(
        ((s.name, n) for s in scopes if (n := sum(p.dropped_rows or 0 for p in s.points))), key=lambda x: -x[1]
    )
    return DropFacts(input_rows, dropped, share, tuple(causes), tuple(by_scope))


# ------------------------------------------------------------------------------------------------ state


def state_facts(batches: Sequence[Sample], engine: Engine, settings: FactsSettings) -> StateFacts:
    """The state's size and Theil-Sen trend over ``batches`` (job-scope, oldest first): rows for Spark
    (``numRowsTotal``), bytes for Flink (the latest completed checkpoint's ``state_size``: Flink reports no
    rows) or when no rows are known. Never projects a negative size: a flat or falling trend is "no growth"
    (``growing`` False, nothing projected)."""
    rows = [(b.observed_at, b.state_rows_total) for b in batches if b.state_rows_total is not None]
    unit: Literal["rows", "bytes"] = "rows"
    points: list[tuple[datetime, int]] = [(t, v) for t, v in rows if v is not None]
    if engine is Engine.FLINK or not points:
        unit = "bytes"
        points = [(b.observed_at, b.state_memory_bytes) for b in batches if b.state_memory_bytes is not None]
    first = points[0][1] if points else None
    last = points[-1][1] if points else None
    slope = None
    if len(points) >= 3 and points[-1][0] > points[0][0]:
        t0 = points[0][0]
        xs = [(t - t0).total_seconds() for t, _ in points]
        slope = theil_sen_slope(xs, [float(v) for _, v in points]) * 3600.0
    growing = slope is not None and slope > 0
    projected = to_limit = None
    if growing and slope is not None and last is not None:
        projected = max(0.0, last + slope * 24)
        limit = settings.state_limit_rows if unit == "rows" else settings.state_limit_bytes
        if limit is not None:
            to_limit = max(0.0, (limit - last) / slope)
    removed = _total(b.state_rows_removed for b in batches)
    marks = [wm for b in batches if (wm := real_watermark(b)) is not None]
    advances = sum(1 for a, b in pairwise(marks) if b > a)
    return StateFacts(unit, first, last, slope, growing, projected, to_limit, removed, advances)


# -------------------------------------------------------------------------------------------- freshness


def freshness_facts(
    points: Sequence[BatchPoint], settings: FactsSettings, mis_dated: Sequence[DropCause] = (),
) -> FreshnessFacts:
    """Freshness over the batches' own clock (:class:`monitor.facts.FreshnessFacts`); ``mis_dated``: the
    period's mis-dated rows (:attr:`monitor.facts.DropFacts.mis_dated`), to name what moved a watermark
    ahead of processing time."""
    marked = [p for p in points if p.watermark is not None]
    fresh = [(p.observed_at, p.freshness_s) for p in marked if p.freshness_s is not None]
    values = [v for _, v in fresh if v is not None]
    target = settings.freshness_target.total_seconds()
    skew = settings.future_skew.total_seconds()
    within = sum(1 for v in values if -skew <= v <= target)
    attainment = None if not marked else 100.0 * within / len(marked)
    ahead = [p for p in marked if is_beyond_range(p.watermark) or (p.freshness_s is not None and p.freshness_s < 0)]
    first = ahead[0] if ahead else None
    amounts = [-p.freshness_s for p in ahead if p.freshness_s is not None]
    cause = None
    if first is not None:
        before = [c for c in mis_dated if c.observed_at is not None and c.observed_at <= first.observed_at]
        cause = before[-1] if before else (mis_dated[0] if mis_dated else None)
    newest = marked[-1] if marked else None
    return FreshnessFacts(
        target_s=target, attainment_pct=attainment, p50_s=_rank(values, 0.5), p95_s=_rank(values, 0.95),
        max_s=max(values) if values else None,
        last_s=None if newest is None else newest.freshness_s,
        last_at=None if newest is None else newest.observed_at,
        batches=len(marked), ahead_batches=len(ahead), first_ahead_batch=None if first is None else first.batch_id,
        ahead_max_s=max(amounts) if amounts else None,
        beyond_range_batches=sum(1 for p in ahead if is_beyond_range(p.watermark)),
        last_beyond_range=newest is not None and is_beyond_range(newest.watermark), ahead_cause=cause,
    )


# ------------------------------------------------------------------------------------------------- lag


def partition_status(finding_status: str | None, lag: int | None, polls: int) -> LagStatus:
    """A partition's Burrow status: its ``consumer_lag`` finding's (WARN, STALL, STOP, REWIND, or
    NEVER_COMMITTED: a live member owns it, never committed, records wait), else ``OK``;
    ``UNKNOWN`` when its lag is unknown (no committed offset, deleted topic), or when fewer than two polls
    were made and it is behind (one observation is no trend). A lag of 1 is a transactional producer's
    commit marker, never behind."""
    if finding_status is not None:
        return finding_status  # type: ignore[return-value]
    if lag is None:
        return "UNKNOWN"
    if lag > 1 and polls < 2:
        return "UNKNOWN"
    return "OK"


def group_status(statuses: Iterable[LagStatus], *, behind_after_one_poll: bool = False) -> LagStatus:
    """A group's status: the worst known status of its partitions (Burrow's group status); ``UNKNOWN``
    when none is known, or when all are ``OK`` but a partition is behind after a single poll."""
    known = [s for s in statuses if s != "UNKNOWN"]
    worst: LagStatus = max(known, key=lambda s: LAG_STATUS_ORDER[s]) if known else "UNKNOWN"
    if worst == "OK" and behind_after_one_poll:
        return "UNKNOWN"
    return worst


def _lag_facts(
    job: JobRef, series: dict[Scope, list[Sample]], scopes: Sequence[ScopeSeries], samples: Sequence[Sample],
    until: datetime, params: LagParams,
) -> tuple[tuple[PartitionLagFacts, ...], LagStatus]:
    parts = [s for s in scopes if s.scope.partition is not None and s.scope.source is not None]
    if job.engine is not Engine.KAFKA or not parts:
        return (), "UNKNOWN"
    history = job_history(samples)
    assert history is not None
    status: dict[tuple[str | None, int | None], str] = {}
    for f in evaluate_lag(params, history, until):
        status[(f.scope.source, f.scope.partition)] = str(f.details.get("status"))
    out = []
    for s in parts:
        lags = [p.lag_offsets for p in s.points if p.lag_offsets is not None]
        secs = [p.lag_seconds for p in s.points if p.lag_seconds is not None]
        newest = s.points[-1]
        polls = len(series.get(s.scope, ()))
        earliest, latest, reset, since, oldest = _uncommitted(s.newest)
        out.append(PartitionLagFacts(
            waiting_if_earliest=earliest, waiting_if_latest=latest, auto_offset_reset=reset,
            uncommitted_since=since, oldest_waiting=oldest,
            topic=str(s.scope.source), partition=int(s.scope.partition or 0), lag_offsets=newest.lag_offsets,
            lag_offsets_max=max(lags) if lags else None, lag_seconds=newest.lag_seconds,
            lag_seconds_max=max(secs) if secs else None,
            status=partition_status(status.get((s.scope.source, s.scope.partition)), newest.lag_offsets, polls),
            points=s.points,
        ))
    out.sort(key=lambda p: (-LAG_STATUS_ORDER[p.status], p.topic, p.partition))
    return tuple(out), group_status(p.status for p in out)


def _uncommitted(
    sample: Sample,
) -> tuple[int | None, int | None, str | None, datetime | None, datetime | None]:
    """The never-committed numbers of a partition's newest sample (the collector's ``uncommitted_*`` fields,
    :mod:`collectors.kafka.collector`): ``(waiting_if_earliest, waiting_if_latest, auto_offset_reset,
    uncommitted_since, oldest_waiting)`` as :class:`PartitionLagFacts` holds them; all ``None`` when it has none."""
    extra = sample.extra
    earliest, latest = extra.get("uncommitted_if_earliest"), extra.get("uncommitted_if_latest")
    since = sample_instant(extra.get("uncommitted_since_ms"))
    if sample.committed_offset is not None or not isinstance(earliest, int) or not isinstance(latest, int) \
            or since is None:
        return None, None, None, None, None
    reset = extra.get("auto_offset_reset")
    return (earliest, latest, reset if isinstance(reset, str) else None, since,
            sample_instant(extra.get("oldest_waiting_ms")))


def waiting_text(p: PartitionLagFacts, *, short: bool = False) -> str:
    """What waits on a partition a live member owns but the group never committed (its facts' numbers), for
    the dashboard and the reports: ``"1,200 if auto.offset.reset is earliest (oldest 2026-11-30T07:50Z) ·
    300 if latest (produced since 2026-11-30T08:00Z)"``, one reading when the target gives the setting;
    ``short``: the numbers only (``"1,200 if earliest · 300 if latest"``, ``"1,200 (earliest)"``); ``""``
    for any other partition."""
    if p.waiting_if_earliest is None or p.waiting_if_latest is None:
        return ""
    if short:
        if p.auto_offset_reset in ("earliest", "latest"):
            count = p.waiting_if_earliest if p.auto_offset_reset == "earliest" else p.waiting_if_latest
            return f"{count:,} ({p.auto_offset_reset})"
        return f"{p.waiting_if_earliest:,} if earliest · {p.waiting_if_latest:,} if latest"
    oldest = "" if p.oldest_waiting is None else f" (oldest {format_instant_short(p.oldest_waiting)})"
    since = "" if p.uncommitted_since is None else f"produced since {format_instant_short(p.uncommitted_since)}"
    if p.auto_offset_reset == "earliest":
        return f"{p.waiting_if_earliest:,} (auto.offset.reset earliest){oldest}"
    if p.auto_offset_reset == "latest":
        return f"{p.waiting_if_latest:,} (auto.offset.reset latest; {since})"
    return f"{p.waiting_if_earliest:,} if auto.offset.reset is earliest{oldest} · {p.waiting_if_latest:,} if latest ({since})"


# ------------------------------------------------------------------------------------------------ health


def job_health(
    alerts: Iterable[Alert],
    since: datetime | None = None,
    until: datetime | None = None,
    episodes: Iterable[FindingEpisode] = (),
) -> HealthFacts:
    """A job's health (:class:`monitor.facts.HealthFacts`): ``now`` is the worst severity of its firing
    alerts, ``period`` the worst of its finding ``episodes`` and of the alert episodes overlapping
    ``[since, until)`` (all of them when no period is given). The one definition of health (``report``, the
    scheduled report, the dashboard): Severity-based, the worst of the parts (Burrow's group status)."""
    now = Severity.OK
    worst = worst_episode(e for e in episodes if e.overlaps(since, until))
    period = Severity.OK if worst is None else worst.severity
    firing = pending = 0
    rule: str | None = None
    for a in alerts:
        if a.state is AlertState.FIRING:
            firing += 1
            if a.severity > now:
                now, rule = a.severity, a.rule
        elif a.state is AlertState.PENDING:
            pending += 1
        if a.state is AlertState.INACTIVE or (a.state is AlertState.RESOLVED and a.fired_at is None):
            continue  # never fired: not a finding of the period
        if a.state is AlertState.PENDING:
            continue
        end = a.resolved_at
        if since is not None and end is not None and end < since:
            continue
        if until is not None and a.active_at >= until:
            continue
        period = max(period, a.severity)
    return HealthFacts(now=now, period=max(period, now), firing=firing, pending=pending, worst_rule=rule,
                       worst_episode=worst)


# ------------------------------------------------------------------------------------------------ job


def _scope_label(job: JobRef, sample: Sample) -> str:
    if job.engine is Engine.FLINK and sample.scope.subtask is not None:
        vertex = sample.extra.get("vertex") or sample.scope.source or sample.scope.operator
        return f"vertex `{vertex}` subtask {sample.scope.subtask}"
    return scope_name(sample.scope)


def _holding(job: JobRef, series: dict[Scope, list[Sample]], scopes: Sequence[ScopeSeries],
             batches: Sequence[Sample]) -> HoldingMin | None:
    if not batches or not series:
        return None
    # the window the rules compare the inputs over: the newest batch back to the watermark's last move
    newest = batches[-1]
    start = len(batches) - 1
    while start > 0 and batches[start - 1].watermark == newest.watermark:
        start -= 1
    since = batches[start].observed_at
    scope = holding_input(series, since, job.engine)
    if scope is None:
        return None
    by_scope = {s.scope: s for s in scopes}
    found = by_scope.get(scope)
    name = found.name if found is not None else scope_name(scope)
    wm = found.points[-1].watermark if found is not None and found.points else None
    if job.engine is Engine.SPARK:
        reason = "no rows since the watermark last moved while the other inputs delivered: under the min policy it holds the watermark"
    elif wm is None:
        reason = "no watermark yet (Long.MIN_VALUE) while its siblings have one: the minimum over inputs holds the job"
    else:
        reason = "the lowest watermark of its siblings: the minimum over inputs holds the job"
    if found is not None and job.engine is Engine.FLINK:
        name = flink_scope_name(job.name or job.job_id, found.newest)
        split = holding_split(found.newest)  # Flink 2.1+: the partition within the subtask
        if split is not None:
            name += f", {split_name(split)}"
            reason += "; within the subtask, this split has the lowest watermark (split-level currentWatermark)"
    return HoldingMin(scope, name, wm, reason)


def _restarts(job: JobRef, batches: Sequence[Sample], runs: Sequence[tuple[str, datetime]] | None,
              samples: Sequence[Sample], since: datetime, until: datetime) -> tuple[datetime, ...]:
    if job.engine is Engine.FLINK:
        out: list[datetime] = []
        prev: int | None = None
        for b in batches:
            if b.restart_count is not None:
                if prev is not None and b.restart_count > prev:
                    out.extend([b.observed_at] * (b.restart_count - prev))
                prev = b.restart_count
        return tuple(out)
    if runs is None:
        firsts: dict[str, datetime] = {}
        for s in samples:
            if s.job.run_id is not None and s.job.run_id not in firsts:
                firsts[s.job.run_id] = s.observed_at
        runs = sorted(firsts.items(), key=lambda r: r[1])
    return tuple(first for _, first in list(runs)[1:] if since <= first < until)


def _lateness(batches: Sequence[Sample], skip: frozenset[int | None] = frozenset()) -> float | None:
    """p99.9 over batches of ``max real event time before the batch - its eventTime.min`` (seconds), the
    event-time maxima of the batches in ``skip`` (batch ids: mis-dated rows) left out; ``None`` when no
    batch gives one, or when that max is beyond the model's range (how late is then unknown)."""
    lateness: list[float] = []
    running: datetime | None = None
    for b in batches:
        low = b.event_time_min
        if running is not None and low is not None and not is_epoch(low):
            late = seconds_between(running, low)
            if late is None:
                return None
            lateness.append(max(0.0, late))
        top = b.event_time_max
        value = None if not b.num_input_rows or top is None or is_epoch(top) or b.batch_id in skip else top
        if value is not None and (running is None or value > running):
            running = value
    return _rank(lateness, 0.999)


def _lateness_facts(batches: Sequence[Sample], drops: DropFacts) -> tuple[float | None, DropCause | None, float | None]:
    """(p99.9 lateness with every real event time, the earliest mis-dated row when the mis-dated rows change
    it (they drive it) else ``None``, the p99.9 without the mis-dated rows and unit mistakes)."""
    skip = frozenset(c.batch_id for c in drops.mis_dated) | frozenset(
        b.batch_id for b in batches if b.event_time_max is not None and b.event_time_max >= UNITS_HIGH
    )
    every, honest = _lateness(batches), _lateness(batches, skip)
    if every == honest or not drops.mis_dated:
        return every, None, honest
    return every, min(drops.mis_dated, key=lambda c: (c.batch_id is None, c.batch_id or 0)), honest


def job_facts(
    samples: Sequence[Sample],
    since: datetime,
    until: datetime,
    *,
    alerts: Iterable[Alert] = (),
    runs: Sequence[tuple[str, datetime]] | None = None,
    settings: FactsSettings | None = None,
    lag_params: LagParams | None = None,
    job: JobRef | None = None,
    episodes: Iterable[FindingEpisode] = (),
) -> JobFacts:
    """One job's facts over ``[since, until)`` (pure).

    Args:
        samples: the job's samples (one engine and job id), any order; those outside the period are
            ignored.
        since / until: the period, aware UTC. ``until`` is the time the Kafka lag statuses are judged at
            (Burrow's STOP compares it with the commits), never the wall clock: a recorded period is judged
            on its own clock.
        alerts: the job's stored alerts (health).
        runs: the job's runs as ``(run_id, first_seen)``, oldest first (a run after the first is a restart);
            ``None``: taken from the samples' run ids.
        settings: targets (:class:`monitor.facts.FactsSettings`).
        lag_params: the ``consumer_lag`` rule's parameters (its defaults when ``None``).
        job: the job, when it may have no sample in the period (a job known by its alerts only).
        episodes: the job's stored finding episodes (those overlapping the period are kept).

    Raises:
        ValueError: no sample in the period and no ``job``, a naive time, or samples of several jobs.
    """
    start = ensure_utc(since, "since")
    end = ensure_utc(until, "until")
    assert start is not None and end is not None
    cfg = settings or FactsSettings()
    inside = [s for s in samples if start <= s.observed_at < end]
    keys = {(s.job.engine, s.job.job_id) for s in inside}
    if len(keys) > 1:
        raise ValueError(f"job_facts: samples of {len(keys)} jobs given, one expected")
    history = job_history(inside)
    if history is None:
        if job is None:
            raise ValueError("job_facts: no sample of the job in the period")
        history = JobHistory(job=job)
    job = history.job
    name = next((s.job.name for s in reversed(inside) if s.job.name), job.name)
    batches = history.batches
    points = tuple(
        BatchPoint(
            observed_at=b.observed_at, batch_id=b.batch_id, run_id=b.job.run_id, watermark=(wm := real_watermark(b)),
            event_time_max=b.event_time_max,
            # (none where no operator uses the watermark: the freshness rules do not judge it either)
            freshness_s=None if watermark_unused(b) else seconds_between(b.observed_at, wm),
            input_rows=b.num_input_rows, dropped_rows=b.dropped_by_watermark, state_rows=b.state_rows_total,
            state_bytes=b.state_memory_bytes, lag_offsets=b.lag_offsets, lag_seconds=b.lag_seconds,
        )
        for b in batches
    )
    scopes = tuple(
        ScopeSeries(
            scope=scope, name=_scope_label(job, group[-1]),
            points=tuple(
                ScopePoint(
                    observed_at=s.observed_at, watermark=real_watermark(s), input_rows=s.num_input_rows,
                    dropped_rows=s.dropped_by_watermark, idle_ms=s.idle_ms, lag_offsets=s.lag_offsets,
                    lag_seconds=s.lag_seconds, backpressure_ratio=s.backpressure_ratio,
                    end_of_input=bool(s.watermark_end_of_input),
                )
                for s in group
            ),
            newest=group[-1],
        )
        for scope, group in sorted(history.series.items(), key=lambda kv: _scope_key(kv[0]))
    )
    lag, lag_status = _lag_facts(job, history.series, scopes, inside, end, lag_params or LagParams())
    delay = inferred_delay(batches)
    kept = [e for e in episodes if e.overlaps(start, end)]
    spacing = [(b.observed_at - a.observed_at).total_seconds() * 1000 for a, b in pairwise(batches)]
    drops = drop_facts(batches, scopes, cfg)
    lateness, lateness_cause, lateness_without = _lateness_facts(batches, drops)
    return JobFacts(
        engine=job.engine, job_id=job.job_id, name=name, since=start, until=end, batches=points, scopes=scopes,
        drops=drops, state=state_facts(batches, job.engine, cfg), lag=lag,
        lag_status=lag_status, holding_min=_holding(job, history.series, scopes, batches),
        restarts=_restarts(job, batches, runs, inside, start, end),
        inferred_delay_s=None if delay is None else delay.total_seconds(), lateness_p999_s=lateness,
        freshness=freshness_facts(points, cfg, drops.mis_dated), health=job_health(alerts, start, end, kept),
        episodes=tuple(sorted(kept, key=lambda e: (e.first_at, e.id))), latest=batches[-1] if batches else None,
        batch_spacing_ms=median(spacing) if spacing else None, lateness_mis_dated=lateness_cause,
        lateness_without_mis_dated_s=lateness_without, slo=slo_facts(kept),
    )


def slo_facts(episodes: Iterable[FindingEpisode], rule: str = SLO_RULE) -> SloFacts | None:
    """The freshness SLO's burn from the newest stored episode of ``rule`` (``freshness_slo``, or a
    pipeline's ``pipeline_slo``) and its details (:meth:`rules.slo.Burn.details`, plus ``entry_job`` for a
    pipeline); ``None`` without one, or when its details lack a number (an episode stored by an older
    version)."""
    newest = max((e for e in episodes if e.rule == rule), key=lambda e: (e.last_at, e.id), default=None)
    if newest is None:
        return None
    d = newest.details
    keys = ("burn_rate", "burn_factor", "long_window_seconds", "short_window_seconds", "budget_left_share",
            "budget_measured_seconds", "objective", "target_seconds", "window_seconds")
    values = [d.get(k) for k in keys]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None
    n = [float(v) for v in values if isinstance(v, int | float)]
    return SloFacts(
        alert=str(d.get("alert", "page")), burn_rate=n[0], burn_factor=n[1], long_window_s=n[2],
        short_window_s=n[3], budget_left_share=n[4], budget_measured_s=n[5], objective=n[6], target_s=n[7],
        window_s=n[8], at=newest.last_at, open=newest.ended_by is None,
        entry=entry if isinstance(entry := d.get("entry_job"), str) else None,
    )


def slo_text(slo: SloFacts) -> str:
    """One line for every surface: ``page: burning 15.0x over 1 h and 5 min (above 14.4x); at most 98% of
    the error budget of 28 days left (99.5% of minutes within 5 min) · as of 2026-11-29 18:08 UTC``; a
    pipeline's adds ``; the staleness entered at `a``` (in most bad minutes) before the ``·``."""
    left = "spent" if slo.budget_left_share <= 0 else f"at most {slo.budget_left_share:.0%} left"
    state = "still burning" if slo.open else "ended"
    entry = "" if slo.entry is None else f"; the staleness entered at `{slo.entry}`"
    return (
        f"{slo.alert}: burning {slo.burn_rate:.1f}x over {format_duration(slo.long_window_s)} and "
        f"{format_duration(slo.short_window_s)} (above {slo.burn_factor:g}x); error budget of "
        f"{format_duration(slo.window_s)} {left} ({format_objective(slo.objective)} of minutes within "
        f"{format_duration(slo.target_s)}){entry} · {state} at {slo.at:%Y-%m-%d %H:%M} UTC"
    )


def _scope_key(scope: Scope) -> tuple[str, int, int, str]:
    return (scope.source or "", -1 if scope.partition is None else scope.partition,
            -1 if scope.subtask is None else scope.subtask, scope.operator or "")
