"""Split-level watermarks (Flink 2.1+): which source split (Kafka partition) holds the watermark, and splits
paused by watermark alignment.

Semantics followed:

* FLIP-513 / FLINK-37410 (Flink 2.1): ``SourceOperator`` registers per split, under
  ``<source>.split.<split id>.watermark``, ``currentWatermark`` (the split's last watermark) and the ms of
  each second the split was reading (``activeTimeMsPerSecond``), paused by watermark alignment
  (``pausedTimeMsPerSecond``) or marked idle by idleness detection (``idleTimeMsPerSecond``); the REST
  collector keeps them in ``Sample.extra["splits"]`` (:func:`collectors.flink.samples.split_extra`). A Kafka
  split is one topic partition, its id ``<topic>-<partition>`` (``KafkaPartitionSplit.splitId()``).
* A source subtask's watermark is the minimum over its splits not marked idle (``WatermarkOutputMultiplexer``
  per split, FLIP-27 ``SourceOperator``), and the operators downstream take the minimum over the subtasks
  (``StatusWatermarkValve``): the split with the lowest watermark of a source vertex holds the job's event
  time (:func:`rules.common.holding_split` names it per subtask).
* Watermark alignment (``WatermarkStrategy.withWatermarkAlignment(group, maxAllowedWatermarkDrift,
  updateInterval)``, FLIP-182; per split FLIP-217, ``SourceReader.pauseOrResumeSplits``): a split whose
  watermark is more than ``maxAllowedWatermarkDrift`` ahead of the group's minimum is paused (not read)
  until the slowest split catches up. A paused split has records waiting; it is not idle, and
  ``idle_source`` does not report it (:func:`rules.common.paused_by_alignment`).

Findings (``Engine.FLINK`` only; nothing without split metrics, i.e. on Flink before 2.1), one per source
vertex, scope ``Scope(source=<vertex name>, operator=<vertex id>)``, judged at the newest poll:

* ``labels.check = alignment_paused`` (``WARNING``): splits paused by alignment at the newest poll (and at
  the one before, when the history has it): names the paused partitions and subtasks (a subtask whose
  splits are all paused reads nothing), the split that trails (the lowest watermark of the vertex's splits
  still read) and by how much; the remedy is about the trailing partition or the group's max drift.
* ``labels.check = split_behind`` (``WARNING``): no split is paused, and the lowest split watermark of the
  vertex trails the highest by at least ``skew``: names that partition, its subtask and the lag (the
  windows downstream fire that much later and hold that much of the other partitions' records in state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.model import Engine, Finding, Sample, Scope, Severity, ms_to_datetime
from monitor.timefmt import format_duration, format_instant_short
from rules.common import SPLIT_STATE_MS_PER_S, split_name
from rules.history import JobHistory
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

__all__ = ["RULE", "SplitParams", "evaluate_splits"]

RULE = "split_watermark"


class SplitParams(RuleParams):
    """``split_watermark`` parameters: ``skew`` (default 5m) is how far the lowest split watermark of a
    source vertex may trail its highest before the trailing partition is reported (``split_behind``)."""

    skew: Duration = timedelta(minutes=5)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """Only the newest two polls are read."""
        return timedelta(minutes=5), timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class _Split:
    """One split of a subtask's newest sample."""

    subtask: int | None
    doc: dict[str, Any]

    @property
    def watermark_ms(self) -> int | None:
        value = self.doc.get("watermark_ms")
        return value if isinstance(value, int) else None

    def ms_per_s(self, key: str) -> float:
        value = self.doc.get(key)
        return float(value) if isinstance(value, (int, float)) else 0.0

    @property
    def paused(self) -> bool:
        return self.ms_per_s("paused_ms_per_s") >= SPLIT_STATE_MS_PER_S

    @property
    def idle(self) -> bool:
        return self.ms_per_s("idle_ms_per_s") >= SPLIT_STATE_MS_PER_S

    def name(self) -> str:
        return f"{split_name(self.doc)}, subtask {self.subtask}"


def _splits(sample: Sample) -> list[dict[str, Any]]:
    found = sample.extra.get("splits")
    return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []


def _was_paused(samples: Sequence[Sample], split: str) -> bool:
    """Whether ``split`` was paused at the poll before the newest (``True`` when there is none to ask)."""
    if len(samples) < 2:
        return True
    before = [s for s in _splits(samples[-2]) if s.get("split") == split]
    return not before or _Split(None, before[0]).paused


def _instant(ms: int | None) -> str:
    at = ms_to_datetime(ms)
    return format_instant_short(at) if at is not None else "none (Long.MIN_VALUE)"


def _partitions_text(splits: Sequence[_Split]) -> str:
    """``Kafka partitions 0, 1 and 2 of topic `t``` (one topic), else the split names."""
    topics = {s.doc.get("topic") for s in splits}
    if len(topics) == 1 and None not in topics and all(s.doc.get("partition") is not None for s in splits):
        parts = sorted(int(s.doc["partition"]) for s in splits)
        listed = ", ".join(str(p) for p in parts[:-1]) + (" and " if len(parts) > 1 else "") + str(parts[-1])
        word = "partitions" if len(parts) > 1 else "partition"
        return f"Kafka {word} {listed} of topic `{next(iter(topics))}`"
    return ", ".join(split_name(s.doc) for s in splits[:8]) + (" ..." if len(splits) > 8 else "")


def _vertex_finding(
    params: SplitParams, history: JobHistory, subtasks: dict[Scope, list[Sample]], now: datetime
) -> Finding | None:
    newest = {scope: samples[-1] for scope, samples in subtasks.items()}
    splits = [_Split(scope.subtask, doc) for scope, sample in newest.items() for doc in _splits(sample)]
    if not splits:
        return None  # Flink before 2.1, or no split assigned yet
    any_sample = next(iter(newest.values()))
    vertex = any_sample.extra.get("vertex") or any_sample.scope.source
    job = history.job.name or history.job.job_id
    scope = Scope(source=any_sample.scope.source, operator=any_sample.scope.operator)
    paused = [
        s for s in splits if s.paused and _was_paused(subtasks[_scope_of(newest, s.subtask)], str(s.doc.get("split")))
    ]
    read = [s for s in splits if not s.paused and not s.idle and s.watermark_ms is not None]
    trailing = min(read, key=lambda s: (s.watermark_ms or 0, str(s.doc.get("split")))) if read else None
    if paused:
        return _alignment(history, scope, job, str(vertex), splits, paused, trailing, now)
    known = [s for s in splits if not s.idle and s.watermark_ms is not None]
    if trailing is None or len(known) < 2:
        return None
    ahead = max(known, key=lambda s: s.watermark_ms or 0)
    assert ahead.watermark_ms is not None and trailing.watermark_ms is not None
    lag = timedelta(milliseconds=ahead.watermark_ms - trailing.watermark_ms)
    if lag < params.skew:
        return None
    lag_text = format_duration(lag)
    same_topic = ahead.doc.get("topic") is not None and ahead.doc.get("topic") == trailing.doc.get("topic")
    ahead_name = f"partition {ahead.doc.get('partition')}" if same_topic else split_name(ahead.doc)
    message = (
        f"{split_name(trailing.doc)} holds the watermark of job `{job}` (vertex `{vertex}` subtask "
        f"{trailing.subtask}) at {_instant(trailing.watermark_ms)}, {lag_text} behind the other partitions (the "
        f"newest: {ahead_name} at {_instant(ahead.watermark_ms)}), though it is read (activeTimeMsPerSecond "
        f"{trailing.ms_per_s('active_ms_per_s'):.0f}, not idle). The source subtask takes the minimum over its "
        f"splits and the operators downstream the minimum over the subtasks, so every event-time window fires "
        f"{lag_text} late and keeps that much of the other partitions' records in state. "
        f"{remedy(Engine.FLINK, Cause.SPLIT_BEHIND)}"
    )
    return Finding(
        rule=RULE,
        severity=Severity.WARNING,
        job=history.job,
        message=message,
        observed_at=now,
        scope=scope,
        labels={"check": "split_behind"},
        details={
            "holding_split": _detail(trailing),
            "newest_split": _detail(ahead),
            "skew_seconds": lag.total_seconds(),
        },
    )


def _scope_of(newest: dict[Scope, Sample], subtask: int | None) -> Scope:
    return next(scope for scope in newest if scope.subtask == subtask)


def _detail(split: _Split) -> dict[str, Any]:
    return {
        "split": split.doc.get("split"),
        "topic": split.doc.get("topic"),
        "partition": split.doc.get("partition"),
        "subtask": split.subtask,
        "watermark_ms": split.watermark_ms,
        "active_ms_per_s": split.doc.get("active_ms_per_s"),
        "paused_ms_per_s": split.doc.get("paused_ms_per_s"),
        "idle_ms_per_s": split.doc.get("idle_ms_per_s"),
    }


def _alignment(
    history: JobHistory,
    scope: Scope,
    job: str,
    vertex: str,
    splits: Sequence[_Split],
    paused: Sequence[_Split],
    trailing: _Split | None,
    now: datetime,
) -> Finding:
    by_subtask: dict[int | None, list[_Split]] = {}
    for s in splits:
        by_subtask.setdefault(s.subtask, []).append(s)
    stopped = sorted(
        (sub for sub, own in by_subtask.items() if all(s in paused or s.idle for s in own) and sub is not None)
    )
    lead_ms = max((s.watermark_ms for s in paused if s.watermark_ms is not None), default=None)
    stopped_text = ""
    if stopped:
        which = ", ".join(str(s) for s in stopped)
        stopped_text = (
            f"; subtask{'s' if len(stopped) > 1 else ''} {which} read{'' if len(stopped) > 1 else 's'} nothing "
            f"(every split paused), which is alignment, not idleness"
        )
    head = (
        f"watermark alignment has paused {len(paused)} of {len(splits)} splits of job `{job}` vertex `{vertex}`: "
        f"{_partitions_text(paused)} (pausedTimeMsPerSecond "
        f"{max(s.ms_per_s('paused_ms_per_s') for s in paused):.0f}){stopped_text}. "
    )
    lag_text = "the drift"
    if trailing is not None and trailing.watermark_ms is not None and lead_ms is not None:
        lag = timedelta(milliseconds=max(0, lead_ms - trailing.watermark_ms))
        lag_text = format_duration(lag)
        why = (
            f"Their watermarks (up to {_instant(lead_ms)}) ran more than the alignment group's "
            f"maxAllowedWatermarkDrift ahead of {trailing.name()}, which is read (activeTimeMsPerSecond "
            f"{trailing.ms_per_s('active_ms_per_s'):.0f}) but whose watermark {_instant(trailing.watermark_ms)} "
            f"trails them by {lag_text}: it holds the group's minimum, and the paused partitions' records wait in "
            "Kafka until it catches up. "
        )
    else:
        why = (
            "Their watermarks ran more than the alignment group's maxAllowedWatermarkDrift ahead of the group's "
            "slowest split, which is not in this vertex (another source of the same alignment group). "
        )
    details: dict[str, Any] = {
        "paused_splits": [_detail(s) for s in paused],
        "subtasks_fully_paused": stopped,
    }
    if trailing is not None:
        details["holding_split"] = _detail(trailing)
    return Finding(
        rule=RULE,
        severity=Severity.WARNING,
        job=history.job,
        message=head + why + remedy(Engine.FLINK, Cause.ALIGNMENT_PAUSED, lag=lag_text),
        observed_at=now,
        scope=scope,
        labels={"check": "alignment_paused"},
        details=details,
    )


def evaluate_splits(params: SplitParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``split_watermark`` findings of one Flink job (see the module docstring): at most one per
    source vertex, from the newest poll's split-level watermarks; ``[]`` for other engines and for samples
    without split metrics (Flink before 2.1). ``now`` only stamps the findings."""
    if history.engine is not Engine.FLINK:
        return []
    vertices: dict[str, dict[Scope, list[Sample]]] = {}
    for scope, samples in history.series.items():
        if scope.source is not None and scope.subtask is not None and samples:
            vertices.setdefault(scope.operator or scope.source, {})[scope] = samples
    out: list[Finding] = []
    for subtasks in vertices.values():
        finding = _vertex_finding(params, history, subtasks, now)
        if finding is not None:
            out.append(finding)
    return out
