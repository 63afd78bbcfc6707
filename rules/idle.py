"""Idle source: one input of a job has had no data for ``for`` while its siblings advance.

Semantics followed:

* Flink (``SourceOperator`` / ``WatermarkStrategy.withIdleness``, metric ``sourceIdleTime`` — "the time in
  milliseconds the source has not processed any record", :data:`Sample.idle_ms`): a source subtask
  without records keeps its last watermark (or none at all: ``Long.MIN_VALUE``, which the collector maps to
  ``None``), and ``StatusWatermarkValve`` takes the minimum over input channels, so one idle channel
  holds every downstream event-time window unless the source is marked idle (``withIdleness``).
* Spark (``WatermarkTracker``, ``spark.sql.streaming.multipleWatermarkPolicy``, default ``min``): per-source
  progress has ``numInputRows`` but no watermark; a source bringing no rows while others do keeps the
  global (minimum) watermark where it was. With the ``max`` policy it does not.

Flink specifics (:func:`evaluate_idle` on ``Engine.FLINK`` histories, samples of
:class:`collectors.flink.FlinkRestCollector`): only *source* vertices' subtasks (``Scope.source`` set: they
generate the watermarks; an idle window subtask still forwards them) are judged, each against the other
subtasks of the same vertex, and findings name the job, the vertex and the subtask:

* an idle subtask with no watermark (``Long.MIN_VALUE``) while the job has none either, or with the lowest
  one while the job's watermark (the valve's minimum) is at or below it, pins the operator's minimum
  (``StatusWatermarkValve``): ``WARNING`` from the first poll it is found (even when the job's watermark rose
  to the subtask's level earlier in the idle time), naming the job watermark's flat stretch as
  ``watermark_stall`` does (:func:`rules.common.watermark_moves`); remedy ``withIdleness``;
* an idle subtask without a watermark while the job has one, or whose watermark the job's is past, has
  been marked idle (``WatermarksWithIdleness`` emits ``WatermarkStatus.IDLE``, and the valve leaves idle
  channels out of the minimum): ``INFO``; one whose watermark is not the lowest holds nothing: ``INFO``. (A
  subtask with no watermark that took part in the minimum would leave the job without one, so this needs
  no second poll.)
* a source subtask that *reads* records (its own ``sourceIdleTime`` below ``for``) but has no watermark
  (``Long.MIN_VALUE``) while a sibling subtask of the vertex has one (at the newest poll when the job has a
  watermark: the valve already leaves the channel out; else at the last two polls, as a subtask may not have
  emitted its first watermark yet): no record
  reaches its watermark assigner (a filter or flatMap chained in front of ``assignTimestampsAndWatermarks``
  drops them all), so ``TimestampsAndWatermarksOperator`` never emits a watermark for it; ``WARNING``
  (``labels.check = no_watermark``), judged without waiting ``for`` (the subtask is not idle as a source).
  With a job watermark, ``withIdleness`` is what keeps the windows moving (``WatermarksWithIdleness`` marks
  the channel ``WatermarkStatus.IDLE`` and ``StatusWatermarkValve`` leaves it out of the minimum); when
  records reach the assigner again the channel turns active with its own, lower watermark, which the valve
  does not let lower the operator's (an active channel rejoins the minimum only once it has caught up), so its
  records are judged against the advanced watermark and those behind it are dropped as late by
  ``WindowOperator`` (``numLateRecordsDropped``). Without a job watermark it pins the minimum and windows
  do not fire. This subtask gets no ``idle_source`` finding of the other kinds.
* every source subtask idle and the job's watermark flat: event time is frozen (``labels.check =
  all_inputs_idle``, ``WARNING``). ``withIdleness`` cannot help: with all channels idle the valve emits no
  watermark, so windows wait for data;
* a source subtask advertising ``Long.MAX_VALUE`` (+infinity, ``Sample.watermark_end_of_input``) while the job
  runs: ``WARNING`` (``labels.check = end_of_input``) — a subtask without splits/partitions (source
  parallelism above the partition count, the known Flink behaviour of ``SourceOperator`` with no splits)
  or a finished bounded source; it no longer holds the minimum, which hides idle partitions elsewhere.

* a source subtask whose splits are all paused by watermark alignment (Flink 2.1+ split metrics,
  ``pausedTimeMsPerSecond``; :func:`rules.common.paused_by_alignment`) reads nothing because it ran ahead of
  the alignment group's slowest split, not for lack of data: it is never reported as idle here (rule
  ``split_watermark``, :mod:`rules.splits`, reports the alignment and the partition that trails).

Unknown is not zero: a sample without ``num_input_rows``/``idle_ms`` (e.g. Flink's aggregated metrics
endpoint answering ``[]``) never makes a source idle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.model import Engine, Finding, Sample, Scope, Severity
from monitor.timefmt import format_duration, format_instant_short
from monitor.versions import flushes_when_all_idle
from rules.common import (
    flink_scope_name,
    flink_version,
    paused_by_alignment,
    scope_name,
    tail_since,
    watermark_moves,
)
from rules.history import JobHistory
from rules.params import RuleParams
from rules.remedies import Cause, remedy

__all__ = ["RULE", "IdleParams", "evaluate_idle"]

RULE = "idle_source"


class IdleParams(RuleParams):
    """``idle_source`` parameters: ``for`` (default 5m) is how long an input must have had no data."""

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """Twice ``for``: the idle stretch and when it began."""
        return 2 * self.idle_for(), 2 * self.idle_for()

    def idle_for(self) -> timedelta:
        """The ``for`` duration (default 5 minutes)."""
        return self.for_ if self.for_ is not None else timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class _Idle:
    since: datetime
    how: str


def _idle(samples: Sequence[Sample], idle_for: timedelta) -> _Idle | None:
    """When (and how we know) the scope went idle, if it has been idle for ``idle_for`` at its newest sample."""
    newest = samples[-1]
    if newest.idle_ms is not None:
        if newest.idle_ms >= idle_for.total_seconds() * 1000:
            return _Idle(newest.observed_at - timedelta(milliseconds=newest.idle_ms), "sourceIdleTime")
        return None
    cutoff = newest.observed_at - idle_for
    if samples[0].observed_at > cutoff:
        return None  # history shorter than `for`: cannot tell yet
    window = tail_since(samples, cutoff)
    if all(s.num_input_rows == 0 for s in window):
        start = len(samples) - len(window)
        while start > 0 and samples[start - 1].num_input_rows == 0:
            start -= 1
        return _Idle(samples[start].observed_at, "no input rows")
    if all(s.watermark is None and s.num_input_rows is None for s in window):
        return _Idle(window[0].observed_at, "no watermark")
    return None


def _advancing(samples: Sequence[Sample], since: datetime) -> bool:
    """Whether a sibling scope had data (rows, a moving watermark, a short idle time) since ``since``."""
    window = tail_since(samples, since)
    if not window:
        return False
    if any(s.num_input_rows for s in window):
        return True
    newest = window[-1]
    if newest.idle_ms is not None and newest.idle_ms < (newest.observed_at - since).total_seconds() * 1000:
        return True
    wms = [s.watermark for s in window if s.watermark is not None]
    return len(wms) >= 2 and wms[-1] > wms[0]


def _job_watermark_flat(history: JobHistory, since: datetime) -> bool | None:
    """Whether the job's watermark stayed flat since ``since`` (:func:`rules.common.watermark_moves`, the
    definition ``watermark_stall`` uses); ``None`` without job samples then."""
    window = tail_since(history.batches, since)
    if not window:
        return None
    return watermark_moves(window, max_steps=0).flat_start == 0


def _job_flat_text(history: JobHistory) -> str:
    """`` (the job's watermark has stayed at X since T)`` when the job's newest poll did not move its watermark:
    the flat stretch of :func:`rules.common.watermark_moves`, the one ``watermark_stall`` names; else ``""``."""
    batches = history.batches
    if len(batches) < 2 or batches[-1].watermark is None:
        return ""
    start = watermark_moves(batches, max_steps=0).flat_start
    if start >= len(batches) - 1:
        return ""
    return (
        f" (the job's watermark has stayed at {format_instant_short(batches[-1].watermark)} since "
        f"{format_instant_short(batches[start].observed_at)})"
    )


def _idle_finding(
    history: JobHistory,
    scope: Scope,
    message: str,
    idle_time: timedelta,
    holding: bool,
    now: datetime,
    extra_details: dict[str, object],
) -> Finding:
    """One idle source/subtask: a warning when it holds the job's watermark back, else info."""
    return Finding(
        rule=RULE,
        severity=Severity.WARNING if holding else Severity.INFO,
        job=history.job,
        message=message,
        observed_at=now,
        scope=scope,
        details={"idle_seconds": idle_time.total_seconds(), "holding_watermark": holding, **extra_details},
    )


def evaluate_idle(params: IdleParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``idle_source`` findings: one per idle source/subtask/partition scope of a Spark or Flink job.

    A scope is idle when its newest ``idle_ms`` is at least ``for``, or (``idle_ms`` unknown) every sample
    of its last ``for`` has ``num_input_rows == 0`` (known zero), or has neither rows nor a watermark
    while a sibling advances. It is reported only while a sibling scope advanced over the same time (a
    whole job without data is a quiet source, not an idle input). Severity ``WARNING`` when it holds the
    job's watermark back (Spark: the job watermark is flat, or absent, over the idle time; Flink: the idle
    subtask has the lowest watermark and the job's is at or below it, or both have none), else ``INFO``.
    """
    if history.engine is Engine.KAFKA:
        return []
    if history.engine is Engine.FLINK:
        return _evaluate_flink(params, history, now)
    if len(history.series) < 2:
        return []
    idle_for = params.idle_for()
    out: list[Finding] = []
    for scope, samples in history.series.items():
        idle = _idle(samples, idle_for)
        if idle is None:
            continue
        window_start = max(idle.since, samples[-1].observed_at - idle_for)
        siblings = [
            s for s, other in history.series.items() if s != scope and _advancing(other, window_start)
        ]
        if not siblings:
            continue
        flat = _job_watermark_flat(history, window_start)
        if flat is None:
            own = samples[-1].watermark
            others = [history.series[s][-1].watermark for s in siblings]
            holding = own is None or all(o is not None and o > own for o in others)
        else:
            holding = flat
        idle_time = samples[-1].observed_at - idle.since
        sibling_text = ", ".join(scope_name(s) for s in siblings[:3]) + (" ..." if len(siblings) > 3 else "")
        if holding:
            consequence = f"it holds the job's watermark back. {remedy(history.engine, Cause.HOLDING_INPUT)}"
        else:
            consequence = "the job's watermark still advances, so it is not holding it back."
        message = (
            f"{scope_name(scope)} has had no data for {format_duration(idle_time)} (since {format_instant_short(idle.since)}, "
            f"from {idle.how}) while {sibling_text} advanced; {consequence}"
        )
        out.append(_idle_finding(history, scope, message, idle_time, holding, now, {"evidence": idle.how}))
    return out


# ----------------------------------------------------------------------------------------------- Flink


def _flink_sources(history: JobHistory) -> dict[str, dict[Scope, list[Sample]]]:
    """Source-vertex series by vertex (id, or name where no id is known)."""
    out: dict[str, dict[Scope, list[Sample]]] = {}
    for scope, samples in history.series.items():
        if scope.source is not None and samples:
            out.setdefault(scope.operator or scope.source, {})[scope] = samples
    return out


def _evaluate_flink(params: IdleParams, history: JobHistory, now: datetime) -> list[Finding]:
    idle_for = params.idle_for()
    job = history.job.name or history.job.job_id
    out: list[Finding] = []
    all_idle: list[tuple[Scope, list[Sample], _Idle]] = []
    n_sources = 0
    job_wm = history.batches[-1].watermark if history.batches else None
    job_flat = _job_flat_text(history)
    for subtasks in _flink_sources(history).values():
        for scope, samples in subtasks.items():
            n_sources += 1
            newest = samples[-1]
            if newest.watermark_end_of_input:
                out.append(_end_of_input(history, scope, newest, job, now))
                continue
            unseen = _no_watermark(history, scope, samples, subtasks, idle_for, job, job_wm, now)
            if unseen is not None:
                out.append(unseen)
                continue
            if paused_by_alignment(newest):
                continue  # paused by watermark alignment, not idle: rule split_watermark says so
            idle = _idle(samples, idle_for)
            if idle is None:
                continue
            all_idle.append((scope, samples, idle))
            window_start = max(idle.since, newest.observed_at - idle_for)
            siblings = [s for s, other in subtasks.items() if s != scope and _advancing(other, window_start)]
            if not siblings:
                continue
            own = newest.watermark
            others = [subtasks[s][-1].watermark for s in siblings]
            if own is None:
                # no watermark at all: were it in the minimum, the job would have none either; a job
                # watermark means the valve left this channel out (marked idle)
                holding = job_wm is None
            else:
                # the lowest subtask pins the job when the job's watermark (the valve's minimum) is at or
                # below its level; a job watermark past it means the valve left this channel out
                lowest = all(o is not None and o > own for o in others)
                holding = lowest and (job_wm is None or job_wm <= own)
            idle_time = newest.observed_at - idle.since
            sibling_text = ", ".join(f"subtask {s.subtask}" for s in siblings[:5]) + (
                " ..." if len(siblings) > 5 else ""
            )
            wm_text = (
                "no watermark at all (Long.MIN_VALUE)"
                if own is None
                else f"watermark {format_instant_short(own)}"
            )
            if holding:
                consequence = (
                    f"it has {wm_text}, and the operator downstream takes the minimum over its input channels "
                    f"(StatusWatermarkValve), so this subtask pins the job's event time{job_flat}: windows do not "
                    f"fire. {remedy(Engine.FLINK, Cause.HOLDING_INPUT)}"
                )
            else:
                if job_wm is None or (own is not None and job_wm <= own):
                    why = "a sibling subtask's watermark is lower, so this one does not hold the job's watermark."
                else:
                    why = (
                        f"the job's watermark is past it ({format_instant_short(job_wm)}): the subtask is marked "
                        "idle (withIdleness) and left out of the minimum."
                    )
                consequence = (
                    f"it has {wm_text} but {why} If it should have data, check its partitions/splits (or the "
                    "filter in front of the watermark assigner)."
                )
            message = (
                f"{flink_scope_name(job, newest)} has had no records for {format_duration(idle_time)} (since "
                f"{format_instant_short(idle.since)}) while {sibling_text} of the same vertex advanced; {consequence}"
            )
            where = {"vertex": newest.extra.get("vertex"), "subtask": scope.subtask}
            out.append(_idle_finding(history, scope, message, idle_time, holding, now, where))
    if n_sources and len(all_idle) == n_sources and history.batches:
        since = max(i.since for _, _, i in all_idle)
        flat = _job_watermark_flat(history, max(since, history.batches[-1].observed_at - idle_for))
        if flat is None or flat:
            wm = history.batches[-1].watermark
            frozen = f"at {format_instant_short(wm)}" if wm is not None else "before its first watermark"
            out.append(
                Finding(
                    rule=RULE,
                    severity=Severity.WARNING,
                    job=history.job,
                    message=(
                        f"every source subtask of job `{job}` has had no records for at least "
                        f"{format_duration(idle_for)}: event time is frozen {frozen} and event-time windows do not "
                        f"fire.{_all_idle_by_version(history.batches[-1])} {remedy(Engine.FLINK, Cause.ALL_INPUTS_IDLE)}"
                    ),
                    observed_at=now,
                    labels={"check": "all_inputs_idle"},
                    details={"sources": n_sources},
                )
            )
    return out


def _all_idle_by_version(batch: Sample) -> str:
    """What the job's Flink release does with a source subtask whose splits all went idle (FLINK-38454,
    :func:`monitor.versions.flushes_when_all_idle`): before 2.2 it keeps the watermark of the split that went
    idle last, so event time can freeze below the most advanced partition; said only for those releases."""
    version = flink_version(batch)
    if version is None or flushes_when_all_idle(version):
        return ""
    return (
        f" On Flink {version[0]}.{version[1]} (this cluster's /config), a source subtask whose splits all went "
        "idle keeps the watermark of the split that went idle last, not the highest one (fixed in Flink 2.2, "
        "FLINK-38454): event time can freeze below its most advanced partition, and that partition's windows wait."
    )


def _no_watermark(
    history: JobHistory,
    scope: Scope,
    samples: list[Sample],
    subtasks: dict[Scope, list[Sample]],
    idle_for: timedelta,
    job: str,
    job_wm: datetime | None,
    now: datetime,
) -> Finding | None:
    """The ``no_watermark`` finding of a source subtask that reads records (raw ``sourceIdleTime``,
    ``extra["source_idle_ms"]``, known and below ``idle_for``) but has no watermark while a sibling has one
    (at the newest poll with a job watermark, else at the last two); else ``None``. Semantics: see the
    module docstring (``TimestampsAndWatermarksOperator``, ``WatermarksWithIdleness``,
    ``StatusWatermarkValve``, ``WindowOperator``)."""
    # with a job watermark one poll suffices (the valve already leaves the channel out: it has been marked
    # idle with no watermark); without one, a subtask may just not have emitted its first watermark yet
    polls = 1 if job_wm is not None else 2
    if samples[-1].watermark is not None or samples[-1].watermark_end_of_input:
        return None
    source_idle_ms = samples[-1].extra.get("source_idle_ms")
    if not isinstance(source_idle_ms, int) or source_idle_ms >= idle_for.total_seconds() * 1000:
        return None
    if len(samples) < polls:
        return None
    since = samples[-polls].observed_at
    marked: list[tuple[Scope, datetime]] = []
    for other, other_samples in subtasks.items():
        window = tail_since(other_samples, since)
        if other != scope and len(window) >= polls and all(s.watermark is not None for s in window):
            wm = window[-1].watermark
            assert wm is not None
            marked.append((other, wm))
    if not marked:
        return None
    newest = samples[-1]
    sibling_text = ", ".join(
        f"subtask {s.subtask} has {format_instant_short(wm)}"
        for s, wm in sorted(marked, key=lambda m: m[0].subtask or 0)[:5]
    )
    # how many of the newest polls in a row read the subtask (its sourceIdleTime known: a cold REST metric
    # store answers nothing at all) and found no watermark
    n_polls = 0
    for sample in reversed(samples):
        if sample.watermark is not None or not isinstance(sample.extra.get("source_idle_ms"), int):
            break
        n_polls += 1
    if n_polls < polls:
        return None
    seen = (
        f"at the last {n_polls} polls, since {format_instant_short(samples[-n_polls].observed_at)} at least"
        if n_polls > 1
        else "at the newest poll"
    )
    head = (
        f"{flink_scope_name(job, newest)} emits no watermark (Long.MIN_VALUE {seen}) while {sibling_text}, "
        f"though the source reads records (sourceIdleTime {source_idle_ms} ms): no record reaches its watermark "
        "assigner (a filter or flatMap chained in front of assignTimestampsAndWatermarks drops them all, or the "
        "split it reads holds nothing the job keeps). "
    )
    fix = (
        "Check the operators between the source and assignTimestampsAndWatermarks (or assign watermarks in the "
        "source with fromSource(source, strategy, ...)), and whether this subtask should receive these records."
    )
    if job_wm is not None:
        body = (
            f"The windows still advance (job watermark {format_instant_short(job_wm)}) only because withIdleness marks "
            "the subtask idle (WatermarksWithIdleness sends WatermarkStatus.IDLE and StatusWatermarkValve leaves idle "
            "channels out of the minimum). When records reach its assigner again, they are judged against that advanced "
            "watermark: the subtask's own watermark starts far behind and does not pull the windows back, so every "
            "record behind the job's watermark (beyond allowedLateness) is dropped as late by the windows "
            "(numLateRecordsDropped) or goes to the late side output. "
        )
    else:
        body = (
            "The job has no watermark either: the operator downstream takes the minimum over its input channels "
            "(StatusWatermarkValve) and this channel has none, so this subtask pins the job's event time: "
            "event-time windows never fire. "
            f"{remedy(Engine.FLINK, Cause.HOLDING_INPUT)} "
        )
    return Finding(
        rule=RULE,
        severity=Severity.WARNING,
        job=history.job,
        message=head + body + fix,
        observed_at=now,
        scope=scope,
        labels={"check": "no_watermark"},
        details={
            "vertex": newest.extra.get("vertex"),
            "subtask": scope.subtask,
            "source_idle_ms": source_idle_ms,
            "holding_watermark": job_wm is None,
            "marked_idle": job_wm is not None,
        },
    )


def _end_of_input(history: JobHistory, scope: Scope, newest: Sample, job: str, now: datetime) -> Finding:
    return Finding(
        rule=RULE,
        severity=Severity.WARNING,
        job=history.job,
        message=(
            f"{flink_scope_name(job, newest)} advertises the watermark Long.MAX_VALUE (+infinity) while the job "
            "runs: it has no split/partition to read (source parallelism above the number of partitions) or its "
            "bounded input ended. It no longer takes part in the minimum, so an idle partition elsewhere is "
            f"hidden. {remedy(Engine.FLINK, Cause.END_OF_INPUT)}"
        ),
        observed_at=now,
        scope=scope,
        labels={"check": "end_of_input"},
        details={"vertex": newest.extra.get("vertex"), "subtask": scope.subtask},
    )
