"""The job facts' records: plain frozen dataclasses (no pandas; the dashboard converts them).

Conventions (DESIGN.md): times are aware UTC :class:`datetime`; durations are seconds in fields ending
``_s``; ``None`` is *unknown*, never zero; a watermark is ``None`` when the engine reports none or Spark's
"no watermark yet" value (:func:`rules.common.is_epoch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from monitor.model import Engine, FindingEpisode, Sample, Scope, Severity
from rules.pipeline import PipelineConfig

__all__ = [
    "BatchPoint",
    "DropCause",
    "DropFacts",
    "FactsSettings",
    "FreshnessFacts",
    "HealthFacts",
    "HoldingMin",
    "JobFacts",
    "LagStatus",
    "PartitionLagFacts",
    "ScopePoint",
    "ScopeSeries",
    "SloFacts",
    "StateFacts",
]

#: Burrow's partition statuses plus ``UNKNOWN`` and ``NEVER_COMMITTED`` (:class:`rules.consumer_lag.burrow.LagStatus`
#: values).
LagStatus = Literal["UNKNOWN", "OK", "NEVER_COMMITTED", "WARN", "STALL", "STOP", "REWIND"]


@dataclass(frozen=True, slots=True)
class FactsSettings:
    """What the facts are measured against.

    Attributes:
        freshness_target: the freshness SLO (the config's ``rules.freshness.target``; 15 min by default).
        future_skew: an event time this far ahead of its batch's processing time is a future-dated row
            (``future_timestamp``'s ``skew``).
        min_jump / jump_factor: what counts as a leap of the event time beyond the data's own progression
            (``future_timestamp``'s; :func:`rules.leaps.find_leap`).
        state_limit_rows / state_limit_bytes: ``rules.state_growth.limit_rows`` / ``limit_bytes``, for the
            time-to-limit projection.
        pipelines / pipeline_target: the config's ``pipelines:`` section and ``rules.pipeline_freshness.target``
            (``None``: off), for the reports' pipeline section (:func:`monitor.facts.source.load_pipeline_facts`).
    """

    freshness_target: timedelta = timedelta(minutes=15)
    future_skew: timedelta = timedelta(hours=1)
    min_jump: timedelta = timedelta(hours=1)
    jump_factor: float = 50.0
    state_limit_rows: int | None = None
    state_limit_bytes: int | None = None
    pipelines: tuple[PipelineConfig, ...] = ()
    pipeline_target: timedelta | None = None


@dataclass(frozen=True, slots=True)
class BatchPoint:
    """One job-scope observation: a Spark micro-batch's progress, or one poll of a Flink job / Kafka group.

    Attributes:
        observed_at: the batch's processing time (Spark progress ``timestamp``) or the poll time.
        batch_id / run_id: Spark's batch id and ``runId`` (``None`` for polls).
        watermark: the watermark the batch ran with (``None``: none, or Spark's "no watermark yet").
        event_time_max: the batch's ``eventTime.max`` (Spark; ``None`` elsewhere).
        freshness_s: ``observed_at - watermark`` on the data's own clock (negative: the watermark is ahead);
            ``None`` without a watermark or where no operator uses it (:func:`rules.common.watermark_unused`).
        input_rows / dropped_rows: rows read / dropped as late by the watermark in this batch or poll.
        state_rows / state_bytes: Spark ``numRowsTotal`` / ``memoryUsedBytes`` summed; Flink the latest
            completed checkpoint's state size (bytes).
        lag_offsets / lag_seconds: the job's consumer lag (Kafka group total; Spark
            ``maxOffsetsBehindLatest``).
    """

    observed_at: datetime
    batch_id: int | None
    run_id: str | None
    watermark: datetime | None
    event_time_max: datetime | None
    freshness_s: float | None
    input_rows: int | None
    dropped_rows: int | None
    state_rows: int | None
    state_bytes: int | None
    lag_offsets: int | None
    lag_seconds: float | None


@dataclass(frozen=True, slots=True)
class ScopePoint:
    """One observation of a narrower scope (a Spark source, a Flink vertex subtask, a Kafka partition)."""

    observed_at: datetime
    watermark: datetime | None
    input_rows: int | None
    dropped_rows: int | None
    idle_ms: int | None
    lag_offsets: int | None
    lag_seconds: float | None
    backpressure_ratio: float | None
    end_of_input: bool


@dataclass(frozen=True, slots=True)
class ScopeSeries:
    """A scope's observations in the period, oldest first, and its newest sample (the collector's whole
    record, for the engine-specific columns ``check flink`` prints).

    ``name`` is how messages name it (:func:`rules.common.scope_name`; Flink: the vertex name and subtask).
    """

    scope: Scope
    name: str
    points: tuple[ScopePoint, ...]
    newest: Sample


@dataclass(frozen=True, slots=True)
class DropCause:
    """Rows dropped against the watermark that batch ``batch_id``'s event-time max set (Spark's watermark
    is the max event time seen minus the delay, ``WatermarkTracker``).

    Attributes:
        batch_id / observed_at / event_time_max: the batch whose event time set that watermark (all
            ``None`` when no earlier event time is known, e.g. Flink polls).
        dropped_rows: the rows dropped against it.
        first_dropped_batch / last_dropped_batch: the batches that dropped them.
        mis_dated: the event time was a mis-dated row: a unit mistake (``units``: year 2200 or later,
            e.g. milliseconds read as seconds), ahead of its batch's processing time by more than
            ``future_skew`` (``future``), or a leap beyond the data's own progression (``leap``,
            :func:`rules.leaps.find_leap`: a backfill's mis-dated row). ``None``: a real event time — the
            rows were simply later than the delay allows.
        ahead_s: for ``mis_dated``: how far the event time was beyond the data (``leap``: beyond the
            previous maximum; ``future``/``units``: beyond processing time), seconds.
    """

    batch_id: int | None
    observed_at: datetime | None
    event_time_max: datetime | None
    dropped_rows: int
    first_dropped_batch: int | None
    last_dropped_batch: int | None
    mis_dated: Literal["future", "leap", "units"] | None
    ahead_s: float | None


@dataclass(frozen=True, slots=True)
class DropFacts:
    """Rows dropped by the watermark in the period.

    ``dropped_rows``/``input_rows`` sum the known counts (``None``: no batch reports one);
    ``share_pct`` is ``100 * dropped / input``; ``causes`` most rows first; ``by_scope``: Flink's drops per
    window-vertex subtask (name, rows), most first.
    """

    input_rows: int | None
    dropped_rows: int | None
    share_pct: float | None
    causes: tuple[DropCause, ...]
    by_scope: tuple[tuple[str, int], ...]

    @property
    def mis_dated(self) -> tuple[DropCause, ...]:
        """The causes that were mis-dated rows (no delay keeps rows dropped behind one)."""
        return tuple(c for c in self.causes if c.mis_dated is not None)


@dataclass(frozen=True, slots=True)
class StateFacts:
    """The state's size and trend.

    Attributes:
        unit: ``rows`` (Spark ``numRowsTotal``) or ``bytes`` (Flink's checkpointed state size; Spark's
            ``memoryUsedBytes`` when no rows are reported).
        first / last: the first and newest known size in the period.
        slope_per_h: the Theil-Sen trend (:func:`rules.state_growth.theil_sen_slope`, the rule's
            estimator), units per hour; ``None`` with fewer than 3 points.
        growing: the trend is positive. When it is flat or falling there is "no growth" and nothing is
            projected.
        projected_24h: the size 24 h after the newest point at that trend (``None`` unless growing; never
            negative).
        hours_to_limit: hours until the configured limit at that trend (``None``: no limit or not growing;
            0 when already above it).
        rows_removed: state rows evicted in the period (Spark ``numRowsRemoved`` summed; ``None``: unknown).
        watermark_advances: how often the watermark moved forward in the period (eviction needs it to).
    """

    unit: Literal["rows", "bytes"]
    first: int | None
    last: int | None
    slope_per_h: float | None
    growing: bool
    projected_24h: float | None
    hours_to_limit: float | None
    rows_removed: int | None
    watermark_advances: int


@dataclass(frozen=True, slots=True)
class FreshnessFacts:
    """Freshness on the data's own clock: per batch, its processing time minus its watermark (seconds),
    never the wall clock's ``now - watermark`` (a recorded period is judged by its own times).

    ``attainment_pct``: share of batches within ``[-future_skew, target]`` (a watermark further ahead was
    moved by a future-dated row: not fresh; a watermark beyond the model's range is not fresh either);
    ``p50_s``/``p95_s``/``max_s``: nearest-rank statistics of the signed values (negative: ahead), so
    ``p50 <= p95 <= max``; ``last_s``: the newest batch's; ``None`` without a watermark, or when it is beyond
    the model's range (:func:`monitor.timefmt.is_beyond_range`: no duration is computed from it).

    The watermark ahead of processing time, separately: ``ahead_batches`` batches (of ``batches`` with a
    watermark), the first ``first_ahead_batch``; ``ahead_max_s`` the most it was ahead (seconds, positive;
    ``None`` when none, or when only beyond the model's range is known); ``beyond_range_batches`` of them had
    a watermark beyond the model's range (year 8999; how far is unknown); ``last_beyond_range`` the newest
    batch's was; ``ahead_cause``: the mis-dated row that moved it there (``None``: not known).
    """

    target_s: float
    attainment_pct: float | None
    p50_s: float | None
    p95_s: float | None
    max_s: float | None
    last_s: float | None
    last_at: datetime | None
    batches: int = 0
    ahead_batches: int = 0
    first_ahead_batch: int | None = None
    ahead_max_s: float | None = None
    beyond_range_batches: int = 0
    last_beyond_range: bool = False
    ahead_cause: DropCause | None = None


@dataclass(frozen=True, slots=True)
class PartitionLagFacts:
    """One Kafka partition's lag: newest and largest in offsets and seconds, Burrow's status
    (:mod:`rules.consumer_lag.burrow`) and the series.

    ``waiting_if_earliest`` / ``waiting_if_latest``: on a partition a live member owns but the group never
    committed, the records waiting under each reading of the group's ``auto.offset.reset`` as the newest poll
    counted them (:class:`collectors.kafka.lag.Uncommitted`), ``auto_offset_reset`` the reading the target
    gives (``None``: unknown, both apply), ``uncommitted_since`` when it was first seen so and
    ``oldest_waiting`` the timestamp of the record at the log start; all ``None`` otherwise."""

    topic: str
    partition: int
    lag_offsets: int | None
    lag_offsets_max: int | None
    lag_seconds: float | None
    lag_seconds_max: float | None
    status: LagStatus
    points: tuple[ScopePoint, ...]
    waiting_if_earliest: int | None = None
    waiting_if_latest: int | None = None
    auto_offset_reset: str | None = None
    uncommitted_since: datetime | None = None
    oldest_waiting: datetime | None = None


@dataclass(frozen=True, slots=True)
class HoldingMin:
    """The input / partition / subtask holding the job's minimum watermark (:func:`rules.common.holding_input`),
    its newest watermark and why."""

    scope: Scope
    name: str
    watermark: datetime | None
    reason: str


@dataclass(frozen=True, slots=True)
class HealthFacts:
    """A job's health, Severity-based (Burrow's group status: the worst of its parts).

    Attributes:
        now: the worst severity of the job's firing alerts (``OK`` without any; pending ones have not held
            for their ``for`` and do not count, as they are not notified).
        period: the worst severity of the findings of the period: the stored finding episodes overlapping
            it and the alert episodes overlapping it (a scanned history has episodes and no alert); never
            better than ``now``.
        firing / pending: how many alerts fire / are pending now.
        worst_rule: the rule of the worst firing alert (``None``: none fires).
        worst_episode: the worst finding episode of the period (:func:`monitor.model.worst_episode`).
    """

    now: Severity
    period: Severity
    firing: int
    pending: int
    worst_rule: str | None
    worst_episode: FindingEpisode | None = None


@dataclass(frozen=True, slots=True)
class SloFacts:
    """The freshness SLO's burn as the newest stored ``freshness_slo`` finding episode says it
    (:mod:`rules.slo`): nothing is recomputed here.

    Attributes:
        alert: ``"page"`` or ``"ticket"`` (the workbook row that held last).
        burn_rate: the long window's burn rate (1.0 spends exactly the budget over the SLO window).
        burn_factor: the row's threshold (14.4, 6 or 1).
        long_window_s / short_window_s: the row's windows, seconds.
        budget_left_share: the error budget left (``1.0`` whole; ``<= 0`` spent), judged on
            ``budget_measured_s`` seconds of history (at most 3 days: an upper bound for a longer window).
        objective: the promised share of fresh minutes (``0.995``); ``target_s``: the freshness target;
            ``window_s``: the SLO window, seconds.
        at: the episode's last instant (the data's clock); ``open``: the episode had not ended then.
        entry: for a pipeline's SLO (``pipeline_slo``), the job where the staleness entered in most bad
            minutes (its name; ``None``: unknown, or a job's SLO).
    """

    alert: str
    burn_rate: float
    burn_factor: float
    long_window_s: float
    short_window_s: float
    budget_left_share: float
    budget_measured_s: float
    objective: float
    target_s: float
    window_s: float
    at: datetime
    open: bool
    entry: str | None = None


@dataclass(frozen=True, slots=True)
class JobFacts:
    """Everything every surface shows about one job over ``[since, until)``.

    Attributes:
        engine / job_id / name: the job.
        batches: the job-scope observations, oldest first (watermark / event-time max / processing-time
            series and the per-batch numbers).
        scopes: per source / subtask / partition series (input rows per input, watermarks per vertex and
            subtask, lag per partition).
        drops: rows dropped and what dropped them.
        state: state size and projection.
        lag: per partition (Kafka), worst status first; ``lag_status`` the group's (the worst known,
            ``UNKNOWN`` without one).
        holding_min: who holds the minimum watermark now (``None``: nobody / unknown).
        restarts: when the job restarted in the period (a Spark run after the first; a rise of Flink's
            ``numRestarts``).
        inferred_delay_s: the watermark delay inferred from the batches (:func:`rules.batches.inferred_delay`).
        lateness_p999_s: p99.9 over batches of ``max event time seen before the batch - its eventTime.min``
            (an upper bound of how late its rows were), every real event time counted; ``None`` (unknown) when
            that max is beyond the model's range (a unit mistake).
        lateness_mis_dated: the mis-dated row (:attr:`DropFacts.mis_dated`) that drives ``lateness_p999_s``
            (rows behind it look late); ``None`` when none does. ``lateness_without_mis_dated_s``: the same
            p99.9 with the mis-dated rows left out (equal to ``lateness_p999_s`` when none drives it).
        freshness: see :class:`FreshnessFacts`.
        health: see :class:`HealthFacts`.
        episodes: the stored finding episodes overlapping the period, oldest first.
        latest: the newest job-scope sample (the collector's whole record: Flink's job state, exception,
            ``numRestarts``), ``None`` without one.
        batch_spacing_ms: the median time between batches (the trigger interval as observed).
        slo: the freshness SLO's newest burn-rate finding in the period (``None``: none; see
            :class:`SloFacts`).
    """

    engine: Engine
    job_id: str
    name: str | None
    since: datetime
    until: datetime
    batches: tuple[BatchPoint, ...]
    scopes: tuple[ScopeSeries, ...]
    drops: DropFacts
    state: StateFacts
    lag: tuple[PartitionLagFacts, ...]
    lag_status: LagStatus
    holding_min: HoldingMin | None
    restarts: tuple[datetime, ...]
    inferred_delay_s: float | None
    lateness_p999_s: float | None
    freshness: FreshnessFacts
    health: HealthFacts
    episodes: tuple[FindingEpisode, ...]
    latest: Sample | None
    batch_spacing_ms: float | None
    lateness_mis_dated: DropCause | None = None
    lateness_without_mis_dated_s: float | None = None
    slo: SloFacts | None = None

    @property
    def last_input_rows(self) -> int | None:
        """The newest batch's (or poll's) input rows (Spark ``numInputRows``); ``None``: unknown or no batch.
        A terminal event (Spark ``QueryTerminatedEvent``) is no batch: it never hides the last batch's rows."""
        return self.batches[-1].input_rows if self.batches else None
