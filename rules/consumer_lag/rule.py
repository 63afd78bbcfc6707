"""Consumer lag: Burrow's partition evaluation (:mod:`rules.consumer_lag.burrow`) over Kafka lag samples.

Follows LinkedIn Burrow's evaluator (``core/internal/evaluator/caching.go``), whose pure port
:func:`rules.consumer_lag.burrow.evaluate_partition` is wrapped here unchanged. A Kafka lag sample
(``Engine.KAFKA``, ``scope.source`` = topic, ``scope.partition``) is one observation of a consumer group's
committed offset (:attr:`Sample.committed_offset`) and the partition's log-end offset
(:attr:`Sample.log_end_offset`); Burrow's window of commits is the partition's last ``window_samples``
observations with a known committed offset, each stamped with its ``observed_at`` (a monitor that polls sees
an unchanged commit again on each poll, as Burrow sees a consumer re-committing the same offset).

A partition a live member owns but the group never committed (``OffsetFetch`` answers ``-1``) has no such
window; when records wait on it (the collector's ``uncommitted_*`` sample fields,
:class:`collectors.kafka.lag.Uncommitted`) it is ``NEVER_COMMITTED``: both readings of the group's
``auto.offset.reset`` (Kafka ``ConsumerConfig``; the broker does not publish it) unless the target gives it.
``WARNING`` once records wait under the reading(s) that apply for longer than ``never_committed_after``
(with the setting unknown: the ``latest`` reading, the records produced since the partition was first seen
owned and uncommitted, which wait under both); ``INFO`` before that, or when records wait only if
``earliest``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta
from itertools import islice

from pydantic import Field

from monitor.model import Engine, Finding, Sample, Scope, Severity, datetime_to_ms, ms_to_datetime
from monitor.timefmt import format_duration, format_instant_short
from rules.common import scope_name
from rules.consumer_lag.burrow import (
    CommitObservation,
    LagStatus,
    PartitionLagEvaluation,
    compute_lag,
    evaluate_partition,
    surely_ok,
)
from rules.history import JobHistory, kept_state, unread_from
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

__all__ = ["RULE", "SEVERITY", "LagParams", "evaluate_lag", "sample_instant"]

RULE = "consumer_lag"

#: Burrow status -> severity (OK and UNKNOWN give no finding).
SEVERITY = {
    LagStatus.WARN: Severity.WARNING,
    LagStatus.STALL: Severity.CRITICAL,
    LagStatus.STOP: Severity.CRITICAL,
    LagStatus.REWIND: Severity.CRITICAL,
}


class LagParams(RuleParams):
    """``consumer_lag`` parameters.

    Attributes:
        window_samples: observations per partition window (Burrow ``intervals``, default 10).
        allowed_lag: lag at or below which a partition is never in error (Burrow ``allowed-lag``).
        max_age: observations older than this before the group's newest one are not in the window
            (default 15m; with 15 s polls the 10-observation window spans 2.5 min).
        never_committed_after: records waiting longer than this on a partition a live member owns but the
            group never committed make a ``WARNING`` (default 5m; before that the finding is ``INFO``).
    """

    window_samples: int = Field(10, ge=2)
    allowed_lag: int = Field(0, ge=0)
    max_age: Duration = timedelta(minutes=15)
    never_committed_after: Duration = timedelta(minutes=5)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """``max_age`` of per-partition observations."""
        return timedelta(0), self.max_age


def _lag(sample: Sample) -> int | None:
    lag = compute_lag(sample.log_end_offset, sample.committed_offset)
    if lag is None and sample.committed_offset is not None and sample.committed_offset >= 0:
        return None if sample.lag_offsets is None else max(0, sample.lag_offsets)
    return lag


def _owned(sample: Sample) -> bool:
    """Whether a live group member owned the partition at this observation (``extra["assigned"]`` from
    :mod:`collectors.kafka`; samples without it, e.g. from other exporters, count as owned)."""
    return sample.extra.get("assigned", True) is not False


def _commits_only(window: list[Sample]) -> list[Sample]:
    """A poll sees a commit again on every poll; Burrow sees only the commits a consumer makes. While a
    live member owns the partition an unchanged offset is taken as re-committed (Burrow's STALL: alive,
    not progressing). Once no member owns it, nothing can commit: the newest run of unchanged offsets is
    kept at its *first* observation, so the window ends when the last commit was made and Burrow's STOP
    (``now - last commit > window span``) can hold."""
    if len(window) < 2 or _owned(window[-1]):
        return window
    first = len(window) - 1
    while first > 0 and window[first - 1].committed_offset == window[-1].committed_offset:
        first -= 1
    return window[: first + 1]


def _message(scope: Scope, result: PartitionLagEvaluation, window: list[Sample]) -> str:
    where = scope_name(scope)
    lag = result.current_lag
    first, last = window[0], window[-1]
    span = f"{len(window)} observations from {format_instant_short(first.observed_at)} to {format_instant_short(last.observed_at)}"
    if result.status is LagStatus.WARN:
        return (
            f"{where}: lag {lag} has not decreased over {span}: the consumer is falling behind the producers. "
            + remedy(Engine.KAFKA, Cause.LAG_GROWING)
        )
    if result.status is LagStatus.STALL:
        return (
            f"{where}: committed offset stuck at {last.committed_offset} over {span} while lag is {lag}: the "
            "consumer is alive but not progressing (a poison record, a blocked call, or an endless retry). "
            + remedy(Engine.KAFKA, Cause.CONSUMER_STALLED)
        )
    if result.status is LagStatus.STOP:
        return (
            f"{where}: no commit observed since {format_instant_short(last.observed_at)} (longer than the window's own "
            f"span) and the consumer was not caught up (lag {lag}): it stopped committing — crashed, lost "
            "its partitions in a rebalance, or the lag collector lost sight of it. "
            + remedy(Engine.KAFKA, Cause.CONSUMER_STOPPED)
        )
    rewind = result.checks.get("checkIfOffsetsRewind")
    before = window[rewind - 1].committed_offset if isinstance(rewind, int) and rewind > 0 else None
    after = window[rewind].committed_offset if isinstance(rewind, int) and rewind > 0 else None
    return (
        f"{where}: committed offset went back from {before} to {after} and has not recovered (lag {lag}): "
        "the group's offsets were reset (auto.offset.reset, a manual reset, or a restore), so records are "
        "being re-processed. " + remedy(Engine.KAFKA, Cause.OFFSETS_REWOUND)
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def sample_instant(value: object) -> datetime | None:
    """An epoch-ms value of a sample's ``extra`` (``uncommitted_since_ms``, ``oldest_waiting_ms``) as an aware
    UTC datetime; ``None`` when it is not an integer or is outside the model's time range (a record
    timestamp can be anything a producer set)."""
    count = _count(value)
    try:
        return ms_to_datetime(count)
    except ValueError:
        return None


#: ``JobHistory.rule_state`` key (:func:`rules.history.kept_state`): each partition's :class:`_Commits`, kept
#: across the instants and ticks of a rolling history
_WINDOWS = f"{RULE}.windows"


def _committed(sample: Sample) -> bool:
    return sample.committed_offset is not None and sample.committed_offset >= 0


class _Commits:
    """A partition's newest ``size`` observations with a committed offset, each with its Burrow
    :class:`CommitObservation` (offset, commit time in epoch ms, lag), kept as the partition's samples arrive
    (:func:`rules.history.unread_from`): each observation is built once, not at every instant."""

    __slots__ = ("entries", "last", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: deque[tuple[Sample, CommitObservation]] = deque(maxlen=size)
        self.last: Sample | None = None

    def catch_up(self, samples: list[Sample]) -> None:
        """Take the samples after :attr:`last` (rebuilt from the newest of ``samples`` when it is gone)."""
        start = unread_from(samples, self.last)
        if start is None:
            self.entries.clear()
            picked: list[Sample] = []
            for sample in reversed(samples):
                if _committed(sample):
                    picked.append(sample)
                    if len(picked) == self.size:
                        break
            new: Iterable[Sample] = reversed(picked)
        else:
            new = (sample for sample in islice(samples, start, None) if _committed(sample))
        for sample in new:
            assert sample.committed_offset is not None
            observation = CommitObservation(
                sample.committed_offset, round(sample.observed_at.timestamp() * 1000), _lag(sample)
            )
            self.entries.append((sample, observation))
        self.last = samples[-1]

    def window(self, oldest: datetime) -> tuple[list[Sample], list[CommitObservation]]:
        """Burrow's window: the kept observations observed at or after ``oldest``, cut by
        :func:`_commits_only`, and their commit observations."""
        entries = self.entries
        first = 0
        while first < len(entries) and entries[first][0].observed_at < oldest:
            first += 1
        kept = list(islice(entries, first, None)) if first else list(entries)
        window = _commits_only([sample for sample, _ in kept])
        return window, [observation for _, observation in kept[: len(window)]]


def _commits(store: dict[Scope, _Commits] | None, scope: Scope, size: int) -> _Commits:
    """The partition's kept :class:`_Commits` (a new one when the history keeps none, or the size changed)."""
    commits = None if store is None else store.get(scope)
    if commits is None or commits.size != size:
        commits = _Commits(size)
        if store is not None:
            store[scope] = commits
    return commits


def _never_committed(params: LagParams, history: JobHistory, scope: Scope, sample: Sample, now: datetime) -> Finding | None:
    """The ``NEVER_COMMITTED`` finding of a partition's newest observation (the module docstring), or ``None``
    when it was committed, no live member owns it, or no record waits under the reading(s) that apply."""
    if sample.committed_offset is not None:
        return None  # (the common case, checked first)
    extra = sample.extra
    earliest, latest = _count(extra.get("uncommitted_if_earliest")), _count(extra.get("uncommitted_if_latest"))
    since = sample_instant(extra.get("uncommitted_since_ms"))
    if sample.committed_offset is not None or not _owned(sample) or not earliest or latest is None or since is None:
        return None
    reset = extra.get("auto_offset_reset")
    oldest = sample_instant(extra.get("oldest_waiting_ms"))
    seen = f"first seen owned and uncommitted at {format_instant_short(since)}"
    if_earliest = f"{earliest:,} record(s) wait from the log start" + (
        f" (the oldest written {format_instant_short(oldest)})" if oldest is not None else ""
    )
    if_latest = (
        f"{latest:,} record(s) produced since it was {seen} wait" if latest else f"no record was produced since it was {seen}"
    )
    if reset == "earliest":
        count, start, readings = earliest, oldest or since, f"auto.offset.reset=earliest: {if_earliest}"
    elif reset == "latest":
        if not latest:
            return None
        count, start, readings = latest, since, f"auto.offset.reset=latest: {if_latest}"
    else:
        count, start = latest, since  # the records that wait under both readings
        readings = (
            f"if the group's auto.offset.reset is earliest, {if_earliest}; if latest, {if_latest} "
            "(tidegauge cannot see the setting: give it as auto_offset_reset on the Kafka target, or as "
            "--auto-offset-reset to check kafka, for one reading)"
        )
    waited = max(timedelta(0), now - start)
    warn = count > 0 and waited > params.never_committed_after
    tail = (
        f"records have waited {format_duration(waited)}, longer than {format_duration(params.never_committed_after)}"
        if warn else "records wait only if it reads from the earliest offset" if not count
        else f"records have waited {format_duration(waited)} so far"
    )
    message = (
        f"{scope_name(scope)}: never committed — a live member of the group owns this partition but the group has "
        f"no committed offset on it (OffsetFetch answers -1); {readings}; {tail}. "
        "Kafka shows commits, not reads: the member may have read these records, but no commit covers them. "
        + remedy(Engine.KAFKA, Cause.NEVER_COMMITTED)
    )
    return Finding(
        rule=RULE,
        severity=Severity.WARNING if warn else Severity.INFO,
        job=history.job,
        message=message,
        observed_at=now,
        scope=scope,
        details={
            "status": LagStatus.NEVER_COMMITTED.value, "lag": None, "waiting_if_earliest": earliest,
            "waiting_if_latest": latest, "auto_offset_reset": reset if reset in ("earliest", "latest") else None,
            "uncommitted_since": format_instant_short(since),
            "oldest_waiting": None if oldest is None else format_instant_short(oldest),
            "waited_seconds": max(0.0, waited.total_seconds()),
        },
    )


def evaluate_lag(params: LagParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``consumer_lag`` findings of one Kafka consumer group: one per partition whose Burrow status
    is WARN (``WARNING``), STALL, STOP or REWIND (``CRITICAL``), judged at ``now`` (STOP compares ``now``
    with the window), or NEVER_COMMITTED (``WARNING`` or ``INFO``, the module docstring). Any other
    partition without a committed offset is UNKNOWN (no finding): unknown lag is not 0.
    """
    if history.engine is not Engine.KAFKA:
        return []
    now_ms = datetime_to_ms(now)
    assert now_ms is not None
    out: list[Finding] = []
    store = kept_state(history, _WINDOWS, dict[Scope, _Commits])
    if store is not None and len(store) > len(history.series):
        for gone in [scope for scope in store if scope not in history.series]:
            del store[gone]  # (a partition whose samples left the window)
    for scope, samples in history.series.items():
        if scope.partition is None:
            continue
        newest_poll = samples[-1].observed_at == history.batches[-1].observed_at if history.batches else True
        never = _never_committed(params, history, scope, samples[-1], now) if newest_poll else None
        if never is not None:
            out.append(never)
            continue
        kept = _commits(store, scope, params.window_samples)
        kept.catch_up(samples)
        # (a partition's samples trimmed off the job's series window leave its kept window too)
        window, commits = kept.window(max(samples[-1].observed_at - params.max_age, samples[0].observed_at))
        if len(window) < 2 and (not window or _owned(window[-1])):
            continue  # one observation is no trend (Burrow evaluates a window of commits)
        # Burrow keeps its own ring of recent broker offsets, refreshed independently of commits; here the
        # log-end offset arrives with the commit, so only the newest one is "recent" (older ones would
        # always look caught up compared with the newest commit, and STOP could never be reported)
        brokers = [samples[-1].log_end_offset] if samples[-1].log_end_offset is not None else []
        current = _lag(window[-1])
        if surely_ok(commits, brokers, current, now_ms, params.allowed_lag):
            continue  # OK or UNKNOWN: no finding (the common case, from the cheapest checks)
        result = evaluate_partition(commits, brokers, current, now_ms, params.allowed_lag)
        if len(commits) < 2 and result.status is not LagStatus.STOP:
            continue  # a single commit shows no trend; it can only be too old (STOP)
        severity = SEVERITY.get(result.status)
        if severity is None:
            continue
        out.append(
            Finding(
                rule=RULE,
                severity=severity,
                job=history.job,
                message=_message(scope, result, window),
                observed_at=now,
                scope=scope,
                details={"status": result.status.value, "lag": result.current_lag, "window": len(window)},
            )
        )
    return out
