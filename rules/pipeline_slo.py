"""A freshness SLO per pipeline, with the SRE workbook's multiwindow, multi-burn-rate alerts
(``pipeline_slo``).

Configuration: an ``slo:`` on a ``pipelines:`` entry (:class:`rules.pipeline.PipelineSloConfig`); the rule
is on for every pipeline that has one (``rules.pipeline_slo: {enabled: false}`` turns it off)::

    pipelines:
      - name: clicks
        jobs: [{job: enrich, writes: [mid]}, {job: sessionize, writes: [out]}]
        slo: {freshness: 5m, objective: 99.5%, window: 28d}

**The SLI** is the share of whole UTC minutes in which the pipeline's end was fresh: at each minute ``m``,
the end's *global lag* (:func:`rules.pipeline.node_lags` at ``m``: how far it trails the pipeline's sources
in event time, from each job's newest report at or before ``m``) is at most ``freshness``. A pipeline with
several ends is fresh in a minute when all its ends are (the largest end lag counts); a minute in which no
end's lag is known is not counted. The minutes, the burn rates and the alert table are those of the job SLO
(:mod:`rules.slo`: :class:`rules.slo.MinuteLedger`, :func:`rules.slo.burn`, :data:`rules.slo.BURN_WINDOWS`):
page (``CRITICAL``) on 1h & 5m > 14.4x or 6h & 30m > 6x, ticket (``WARNING``) on 3d & 6h > 1x.

**The finding** is on the pipeline's end job (its identity does not move with the blame), labelled
``pipeline``, and names where the staleness enters: in each bad minute, the job on the path to the stale
end that adds the most (:func:`rules.pipeline.staleness`, as ``pipeline_freshness`` judges it); the finding
names the job that was the entry in most bad minutes of the alerting row's long window (the most recent of
equals). It is judged with ``pipeline_freshness`` on the one pipeline path
(:meth:`rules.registry.Evaluator.evaluate_pipelines`), on the data's clock: ``now`` is the pipeline's newest
observation, so a recorded history gives the alerts it would have given live.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from monitor.model import Finding
from monitor.timefmt import format_duration
from rules.history import JobHistory
from rules.pipeline import Pipeline, PipelineConfig, PipelineSloConfig, node_lags, staleness
from rules.slo import HISTORY_NEEDED, MINUTE, MinuteLedger, burn, first_minute, floor_minute

__all__ = ["RULE", "SloState", "end_minutes", "evaluate_pipeline_slo", "history_window", "slo_configs"]

RULE = "pipeline_slo"


def slo_configs(config: Sequence[PipelineConfig]) -> dict[str, PipelineSloConfig]:
    """Pipeline name -> its SLO, for the configured pipelines that have one."""
    return {p.name: p.slo for p in config if p.slo is not None}


def history_window(config: Sequence[PipelineConfig]) -> timedelta:
    """How much of each job's history the pipeline SLOs read: 3 days (the ticket's long window) when any
    configured pipeline has an SLO, else ``0`` (the daemon keeps at least this much in memory)."""
    return HISTORY_NEEDED if slo_configs(config) else timedelta(0)


def _first_at(pipeline: Pipeline, histories: Mapping[str, JobHistory]) -> datetime | None:
    firsts = [
        t for n in pipeline.nodes if (h := histories.get(n.key)) is not None
        for t in ([h.batches[0].observed_at] if h.batches else []) + [s[0].observed_at for s in h.series.values() if s]
    ]  # fmt: skip
    return min(firsts, default=None)


@dataclass(slots=True)
class SloState:
    """A pipeline's *settled* minutes, kept between evaluations (by :class:`rules.registry.Evaluator`, per
    pipeline name) so that each evaluation only judges the minutes added since: ``ledger`` (up to the newest
    minute every job of the pipeline has reported at or after) and the entry of each of its minutes. ``shape``
    (the nodes, their upstream jobs and the target) is what the minutes were judged for; another shape, or a
    ``now`` before the ledger's end (a replay started over), starts a new state."""

    shape: tuple[object, ...]
    ledger: MinuteLedger
    entries: list[str | None] = field(default_factory=list)


def _judge(
    pipeline: Pipeline, histories: Mapping[str, JobHistory], ledger: MinuteLedger, entries: list[str | None],
    minute: datetime, last: datetime,
) -> None:
    """Give each minute from ``minute`` to ``last`` its status on ``ledger`` and its entry in ``entries``."""
    target_s = ledger.target_seconds
    while minute <= last:
        lags = node_lags(pipeline, histories, minute)
        ends = [g for e in pipeline.ends if (g := lags[e].global_lag_s) is not None]
        delay = max(ends) if ends else None
        ledger.record(minute, delay)
        entry = None
        if delay is not None and delay > target_s:
            worst = max(staleness(pipeline, lags, target_s), key=lambda s: s.end_lag_s, default=None)
            entry = None if worst is None else worst.entry
        entries.append(entry)
        minute += MINUTE


def end_minutes(
    pipeline: Pipeline, histories: Mapping[str, JobHistory], now: datetime, freshness: timedelta,
    state: dict[str, SloState] | None = None,
) -> tuple[MinuteLedger, list[str | None]]:
    """The pipeline's minute ledger up to ``now`` (each whole UTC minute of the last 3 days from its first
    observation: bad when its end's global lag is above ``freshness``, see the module docstring) and, per
    minute of the ledger (oldest first), the key of the job where the staleness entered in that minute
    (``None`` in a good or uncounted minute).

    With ``state`` (pipeline name -> :class:`SloState`, kept by the caller between evaluations in time
    order), the minutes up to the newest one every job has reported at or after are judged once and kept; the
    later ones (a job's report may still arrive for them) are judged again at each evaluation. Without it,
    every minute is judged (the same answer)."""
    ledger_now = floor_minute(now)
    shape = (tuple((n.key, n.upstream) for n in pipeline.nodes), freshness)
    cached = None if state is None else state.get(pipeline.name)
    if cached is None or cached.shape != shape or (cached.ledger.end is not None and cached.ledger.end > ledger_now):
        cached = SloState(shape, MinuteLedger(freshness.total_seconds()))
    if state is not None:
        state[pipeline.name] = cached
    base, entries = cached.ledger, cached.entries
    if base.end is None:
        first_at = _first_at(pipeline, histories)
        if first_at is None:
            return base, entries
        start = first_minute(first_at, now)
    else:
        start = base.end + MINUTE
    newest = [h.newest_at if h is not None else None for n in pipeline.nodes for h in (histories.get(n.key),)]
    settled = None if any(t is None for t in newest) else floor_minute(min(t for t in newest if t is not None))
    if state is not None and settled is not None:
        _judge(pipeline, histories, base, entries, start, min(settled, ledger_now))
        start = max(start, base.end + MINUTE) if base.end is not None else start
        if dropped := base.trim():
            del entries[:dropped]
    if start > ledger_now:
        return base, entries
    ledger, tail = base.copy(), list(entries)
    _judge(pipeline, histories, ledger, tail, start, ledger_now)
    return ledger, tail


def evaluate_pipeline_slo(
    slo: PipelineSloConfig, pipeline: Pipeline, histories: Mapping[str, JobHistory],
    state: dict[str, SloState] | None = None,
) -> list[Finding]:
    """The pipeline's ``pipeline_slo`` finding at its newest observation: ``CRITICAL`` (page) or ``WARNING``
    (ticket) when a row of :data:`rules.slo.BURN_WINDOWS` burns on both its windows; ``[]`` otherwise.

    The finding is on the pipeline's first end job, labelled ``pipeline``. ``details``: those of every SLO
    finding (:meth:`rules.slo.Burn.details`: ``alert``, ``burn_rate``, ``budget_left_share``, ...) plus
    ``pipeline``, ``end`` (node key), ``end_job``, ``entry`` (the node key where the staleness entered in
    most bad minutes of the row's long window, ``None`` when unknown), ``entry_job`` (its name),
    ``entry_minutes`` (in how many of them), ``bad_minutes`` (of the long window) and ``end_lag_s`` (the
    end's global lag now, when known). ``state``: as :func:`end_minutes`'s (evaluations in time order).
    """
    times = [t for n in pipeline.nodes if (h := histories.get(n.key)) is not None and (t := h.newest_at) is not None]
    if not times or not pipeline.ends:
        return []
    now = max(times)
    ledger, entries = end_minutes(pipeline, histories, now, slo.freshness, state)
    found = burn(ledger, slo.freshness, slo.objective, slo.window)
    if found is None:
        return []
    long_minutes = int(found.row.long / MINUTE)
    recent = entries[-long_minutes:]
    counts = Counter(e for e in recent if e is not None)
    bad_minutes, _ = ledger.window(found.row.long)
    entry = None
    if counts:
        top = max(counts.values())
        entry = next(e for e in reversed(recent) if e is not None and counts[e] == top)
    end = pipeline.node(pipeline.ends[0])
    lags_now = node_lags(pipeline, histories, now)
    end_lags = [g for e in pipeline.ends if (g := lags_now[e].global_lag_s) is not None]
    end_lag = max(end_lags) if end_lags else None
    target = format_duration(slo.freshness)
    ends = " and ".join(f"`{pipeline.node(e).name}`" for e in pipeline.ends)
    subject = f"pipeline `{pipeline.name}`: freshness SLO"
    behind = f"its end {ends} more than {target} behind the pipeline's sources"
    if entry is not None:
        enters = "enters" if end_lag is not None and end_lag > slo.freshness.total_seconds() else "entered"
        where = (
            f"The staleness {enters} at `{pipeline.node(entry).name}`: it added the most delay on the path to the "
            f"end in {counts[entry]} of the {bad_minutes} bad minutes of the last {format_duration(found.row.long)}. "
        )
    else:
        where = "Where the staleness enters is unknown (no job's lag was known in the bad minutes). "
    now_text = (
        f"The end is {format_duration(end_lag)} behind its sources now; "
        if end_lag is not None
        else "The end's lag now is unknown; "
    )
    advice = (
        f"start with `{pipeline.node(entry).name}` (its pipeline_freshness, watermark_stall, falling_behind and "
        "consumer_lag findings say why it is behind): the jobs after it only pass the delay on."
        if entry is not None
        else "look at each job's freshness findings."
    )
    details: dict[str, Any] = {
        **found.details(),
        "pipeline": pipeline.name,
        "end": end.key,
        "end_job": end.name,
        "entry": entry,
        "entry_job": None if entry is None else pipeline.node(entry).name,
        "entry_minutes": counts[entry] if entry is not None else 0,
        "bad_minutes": bad_minutes,
    }
    if end_lag is not None:
        details["end_lag_s"] = end_lag
    return [
        Finding(
            RULE, found.severity, end.job,
            found.rates_text(subject, behind) + where + found.meaning_text() + found.budget_text() + now_text + advice,
            now, labels={"pipeline": pipeline.name}, details=details,
        )
    ]  # fmt: skip
