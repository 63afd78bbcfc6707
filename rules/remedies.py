"""Every remedy a finding gives, in one table keyed by (cause, engine).

A rule names *what* it saw (the batch, the input, the numbers) and takes *what to do* from here, by the
finding's engine (:attr:`monitor.model.JobRef.engine`), so a Spark finding only names Spark settings, a
Flink finding only Flink's and a Kafka finding only the consumer group's. The settings each remedy
follows:

* Spark Structured Streaming: ``Dataset.withWatermark`` (``EventTimeWatermarkExec``: the watermark is
  ``max event time - delay`` and never goes back), ``WatermarkTracker`` with
  ``spark.sql.streaming.multipleWatermarkPolicy`` (``min`` by default: the slowest input holds the global
  watermark), ``dropDuplicatesWithinWatermark``, the processing-time trigger (``ProcessingTimeExecutor``)
  and the Kafka/file source caps ``maxOffsetsPerTrigger`` / ``maxFilesPerTrigger``; late rows are dropped
  silently (``StateOperatorProgress.numRowsDroppedByWatermark``).
* Flink DataStream: ``WatermarkStrategy.forBoundedOutOfOrderness`` (``BoundedOutOfOrdernessWatermarks``),
  ``WatermarkStrategy.withIdleness`` (``WatermarksWithIdleness``; ``StatusWatermarkValve`` takes the
  minimum over the channels that are not idle), ``WindowedStream.allowedLateness`` and
  ``sideOutputLateData`` (``WindowOperator``), the source parallelism against the number of
  partitions/splits, ``StateTtlConfig``, and savepoints/checkpoints to restart from.
* Kafka consumer groups (Burrow's evaluation): consumer instances up to the partition count, the
  partition count itself, committed offsets.

:func:`remedy` raises for a pair the table does not have: a rule never falls back to another engine's
text. Templates may take fields (``{before}``: where to restart from, ``{skew}``: the tolerated future
skew), filled by :func:`remedy`'s keyword arguments.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from monitor.model import Engine

__all__ = ["ENGINE_SETTINGS", "REMEDIES", "Cause", "MissingRemedyError", "remedy", "settings_of"]


class Cause(enum.StrEnum):
    """What a finding found, as far as the remedy is concerned."""

    HOLDING_INPUT = "holding_input"
    """One input (source, partition, subtask) does not advance and holds the minimum watermark."""
    NEVER_SEEN_INPUT = "never_seen_input"
    """An input has never produced data, so no watermark was ever computed."""
    NO_WATERMARK = "no_watermark"
    """Rows flow but the engine reports no watermark at all."""
    EVENT_TIMES_NULL = "event_times_null"
    """Rows arrive but every event time is null."""
    DELAY_EXCEEDS_SPAN = "delay_exceeds_span"
    """The arriving event times do not reach past watermark + delay (and no mis-dated row is to blame)."""
    STALL_UNKNOWN = "stall_unknown"
    """The watermark is flat for a reason the history does not show."""
    ALL_INPUTS_IDLE = "all_inputs_idle"
    """Every input is idle: event time is frozen."""
    END_OF_INPUT = "end_of_input"
    """A source subtask advertises the end of input while the job runs."""
    FUTURE_JUMP = "future_jump"
    """A mis-dated row moved the watermark far ahead; honest rows are dropped behind it."""
    SECONDS_AS_MILLIS = "seconds_as_millis"
    """Epoch seconds read as milliseconds (event times before 1971)."""
    MILLIS_AS_SECONDS = "millis_as_seconds"
    """Epoch milliseconds read as seconds (event times after 2200); the watermark jumps with them."""
    LATE_DROPS = "late_drops"
    """Honest rows arrive later than the watermark allows."""
    STATE_GROWTH = "state_growth"
    """State grows and nothing evicts it."""
    JOIN_STATE_UNBOUNDED = "join_state_unbounded"
    """A stream-stream join's condition has no event-time range: its state is never evicted."""
    SLOW_BATCHES = "slow_batches"
    """Micro-batches take longer than the trigger interval."""
    BACKPRESSURE = "backpressure"
    """A task is back-pressured by a slower operator downstream."""
    LAG_GROWING = "lag_growing"
    """A consumer falls behind its producers."""
    CONSUMER_STALLED = "consumer_stalled"
    """A consumer is alive but its committed offset does not move."""
    CONSUMER_STOPPED = "consumer_stopped"
    """A consumer stopped committing."""
    OFFSETS_REWOUND = "offsets_rewound"
    """A group's committed offsets went back."""
    NEVER_COMMITTED = "never_committed"
    """A live member owns a partition the group never committed while records wait."""
    REBALANCE_CHURN = "rebalance_churn"
    """A consumer group rebalances again and again."""
    FAILED = "failed"
    """The job failed."""
    RESTARTED = "restarted"
    """The job restarted."""
    UNREACHABLE = "unreachable"
    """The monitor cannot read the target."""
    NO_PROGRESS = "no_progress"
    """A running query stopped reporting."""
    BATCH_RUNNING = "batch_running"
    """A batch started and has not finished for much longer than the query's batches take."""
    CHECKPOINT_FAILURES = "checkpoint_failures"
    """Checkpoints fail while the job runs."""
    SPLIT_BEHIND = "split_behind"
    """One source split (a Kafka partition) reads records whose event times trail its siblings': it holds the
    minimum watermark though it is not idle."""
    ALIGNMENT_PAUSED = "alignment_paused"
    """Watermark alignment pauses splits that ran ahead of the group's slowest split."""


_S, _F, _K = Engine.SPARK, Engine.FLINK, Engine.KAFKA

#: (cause -> engine -> remedy template). Only pairs that can occur are present.
REMEDIES: Mapping[Cause, Mapping[Engine, str]] = {
    Cause.HOLDING_INPUT: {
        _S: "Spark keeps the minimum watermark over its inputs (spark.sql.streaming.multipleWatermarkPolicy=min): "
        "feed this input or remove it from the query, or set spark.sql.streaming.multipleWatermarkPolicy=max if "
        "the other inputs may run ahead (rows of slower inputs older than the watermark are then dropped as late).",
        _F: "Declare idleness on the source so an input without records leaves the minimum: "
        "WatermarkStrategy.withIdleness(Duration.ofMinutes(...)); or give every source subtask data (source "
        "parallelism at most the number of partitions/splits).",
    },
    Cause.NEVER_SEEN_INPUT: {
        _S: "Spark's default is spark.sql.streaming.multipleWatermarkPolicy=min. Remedies: feed that input, or drop "
        "it from the query, or set "
        "spark.sql.streaming.multipleWatermarkPolicy=max (the fastest input then drives the watermark and rows of "
        "slower inputs older than it are dropped as late). Per-input watermarks are not checkpointed: with "
        "Trigger.AvailableNow or once, an input without data in a run pins it again in every run.",
        _F: "An input channel that never emitted a watermark pins the minimum at Long.MIN_VALUE: give the source "
        "WatermarkStrategy.withIdleness(...) so idle channels are skipped, or set the source parallelism to at "
        "most the number of partitions/splits.",
    },
    Cause.NO_WATERMARK: {
        _S: "The query reports no watermark: add withWatermark(eventTimeColumn, delay) before the stateful "
        "operator.",
        _F: "Give the source WatermarkStrategy.withIdleness(...) so idle channels are skipped, or check that the "
        "source assigns timestamps and watermarks (a WatermarkStrategy on fromSource, or "
        "assignTimestampsAndWatermarks before the window).",
    },
    Cause.EVENT_TIMES_NULL: {
        _S: "Fix the event-time column's parsing (to_timestamp format, time zone, field name): Spark filters rows "
        "with a null event time out of the watermark silently.",
        _F: "Fix the TimestampAssigner: records without a timestamp (Long.MIN_VALUE) never move the watermark.",
    },
    Cause.DELAY_EXCEEDS_SPAN: {
        _S: "Lower the withWatermark delay to what the data needs, or check the event-time column.",
        _F: "Lower the forBoundedOutOfOrderness delay to what the data needs, or check the TimestampAssigner.",
    },
    Cause.STALL_UNKNOWN: {
        _S: "Look for an input whose event time does not advance (under "
        "spark.sql.streaming.multipleWatermarkPolicy=min the slowest input holds the watermark) or for rows all "
        "older than the watermark (numRowsDroppedByWatermark).",
        _F: "Look for a source subtask whose watermark does not advance (the operator keeps the minimum over its "
        "input channels; the web UI's Watermarks tab shows each subtask's) or for records all older than the "
        "watermark (numLateRecordsDropped).",
    },
    Cause.ALL_INPUTS_IDLE: {
        _S: "Spark computes no watermark without rows: windows wait for data. If results must come out during "
        "quiet periods, send heartbeat rows.",
        _F: "withIdleness cannot help: with all input channels idle no watermark is emitted. If results must come "
        "out during quiet periods, advance the watermark on processing time (a custom WatermarkGenerator's "
        "onPeriodicEmit) or send heartbeat records.",
    },
    Cause.END_OF_INPUT: {
        _F: "Set the source parallelism to at most the number of partitions/splits (a subtask without a split "
        "emits Long.MAX_VALUE and hides idle partitions elsewhere).",
    },
    Cause.FUTURE_JUMP: {
        _S: "A longer delay does not help: filter rows whose event time is implausibly far ahead before "
        "withWatermark (beyond current_timestamp() + {skew}, or in a backfill beyond the range replayed), and "
        "restart from a checkpoint taken before {before} (the watermark never goes back).",
        _F: "A longer delay does not help: filter records whose timestamp is implausibly far ahead before the "
        "WatermarkStrategy (beyond the current time + {skew}, or in a backfill beyond the range replayed), and "
        "restart from a savepoint taken before {before} (the watermark never goes back).",
    },
    Cause.SECONDS_AS_MILLIS: {
        _S: "Convert the field with the right unit: timestamp_seconds(col).",
        _F: "Convert the field with the right unit: multiply by 1000 in the TimestampAssigner.",
    },
    Cause.MILLIS_AS_SECONDS: {
        _S: "A longer delay does not help: convert the field with the right unit (timestamp_millis(col)) and "
        "restart from a checkpoint taken before {before} (the watermark never goes back).",
        _F: "A longer delay does not help: return milliseconds from the TimestampAssigner and restart from a "
        "savepoint taken before {before} (the watermark never goes back).",
    },
    Cause.LATE_DROPS: {
        _S: "If they matter, raise the withWatermark delay to cover how late they arrive (it delays output and "
        "keeps more state); Spark drops late rows silently (numRowsDroppedByWatermark is the only trace), so rows "
        "that must never be lost need a query without a watermark over the same source.",
        _F: "If they matter, raise forBoundedOutOfOrderness or allowedLateness, or route them to a late side "
        "output (sideOutputLateData). Note what the counter does not show: with a late side output "
        "numLateRecordsDropped stays 0 (read the side output instead), and sliding windows silently skip the "
        "late windows of an element that still fits a later one, without counting it.",
    },
    Cause.STATE_GROWTH: {
        _S: "The state key does not include the event time, so the watermark cannot evict it (the classic: "
        "dropDuplicates without the event-time column). Add the event-time column to the key, use a window, "
        "dropDuplicatesWithinWatermark, or a state TTL (transformWithState).",
        _F: "Keyed state that nothing clears grows with every new key: give it a state TTL (StateTtlConfig), "
        "clear it from an event-time timer, or key windows so the watermark ends them.",
    },
    Cause.JOIN_STATE_UNBOUNDED: {
        _S: "Add a time-range condition between the two sides' event-time columns to the join, e.g. "
        "`{condition}`, with bounds from how far apart matching events really are, and give both sides "
        "withWatermark: Spark then drops a row once the other side's watermark passes its range. Start the "
        "fixed query from a new checkpoint (Spark's recovery from a checkpoint after a change of join condition "
        "is ill-defined) and keep the old one until the new query has caught up.",
    },
    Cause.SLOW_BATCHES: {
        _S: "Add executors or partitions, cap the batch size (maxOffsetsPerTrigger / maxFilesPerTrigger), or "
        "lengthen the trigger.",
    },
    Cause.BACKPRESSURE: {
        _F: "Find the first operator downstream that is busy but not back-pressured (the bottleneck) and raise "
        "its parallelism or make it cheaper (async I/O, less state access).",
    },
    Cause.LAG_GROWING: {
        _K: "Add consumer instances (up to the partition count; beyond it add partitions) or make processing "
        "faster.",
    },
    Cause.CONSUMER_STALLED: {
        _K: "Check the consumer's logs and thread dumps; skip or fix the record.",
    },
    Cause.CONSUMER_STOPPED: {
        _K: "Restart the consumer or check the collector.",
    },
    Cause.OFFSETS_REWOUND: {
        _K: "Confirm the reset was intended.",
    },
    Cause.NEVER_COMMITTED: {
        _K: "Make the consumer commit after it processes records (enable.auto.commit, or commitSync/commitAsync): "
        "until it does, a restart or a rebalance starts this partition over from auto.offset.reset, re-reading "
        "every record (earliest) or skipping the ones produced meanwhile (latest). If it keeps its offsets "
        "outside Kafka (seek() on assignment), this is expected: exclude the group from this target.",
    },
    Cause.REBALANCE_CHURN: {
        _K: "Find why members come and go: consumers whose processing of one poll's records exceeds "
        "max.poll.interval.ms (lower max.poll.records or process faster), missed heartbeats (session.timeout.ms, "
        "long GC pauses), crash-looping or autoscaled instances. Static membership (group.instance.id) keeps a "
        "restarting member's partitions; a cooperative assignor or the consumer protocol (group.protocol=consumer) "
        "pauses only the partitions that move.",
    },
    Cause.FAILED: {
        _S: "Fix the cause and restart the query: it resumes from its checkpoint.",
        _F: "Fix the cause and resubmit the job from its latest checkpoint or savepoint.",
    },
    Cause.RESTARTED: {
        _S: "Look at the previous run's failure (the driver log, lost executors, out-of-memory) and fix it: each "
        "restart replays from the checkpoint.",
        _F: "Look at the previous attempt's failure (/jobs/<jid>/exceptions, lost TaskManagers, out-of-memory) and "
        "fix it before the restart strategy gives up.",
    },
    Cause.UNREACHABLE: {
        _S: "Check that the event-log directory, listener endpoint or metrics endpoint is reachable (path, "
        "network, credentials, file permissions).",
        _F: "Check that the JobManager's REST endpoint (or the Prometheus reporter) is up and reachable (URL, "
        "network, credentials).",
        _K: "Check that the brokers or the lag exporter are up and reachable (bootstrap servers, network, "
        "credentials).",
    },
    Cause.NO_PROGRESS: {
        _S: "The driver may be hung in a batch, or gone without a clean stop (killed, lost host), or no longer "
        "writing its event log: check the driver and the streaming query's status.",
    },
    Cause.BATCH_RUNNING: {
        _S: "In the Spark UI's Jobs page open the running job of {batch} (its description names the query and "
        "`batch = <id>`) and its slowest stage: a task stuck on a slow or blocked sink or source, one skewed partition, or tasks "
        "waiting for lost executors. A thread dump of the driver (jstack) shows what the batch waits on.",
    },
    Cause.CHECKPOINT_FAILURES: {
        _F: "Look for back-pressure delaying the barriers (consider unaligned checkpoints), a checkpoint timeout "
        "(execution.checkpointing.timeout) shorter than the checkpoint duration, or failing checkpoint storage.",
    },
    Cause.SPLIT_BEHIND: {
        _F: "withIdleness does not help: the partition is read, its event times themselves trail. Find why that "
        "partition's records are older (a producer writing old timestamps, a backlog replayed into it, a hot "
        "key skewing it) and fix it there; if the skew is expected, bound how far the other partitions run ahead "
        "with WatermarkStrategy.withWatermarkAlignment(group, maxAllowedWatermarkDrift) so their window state "
        "stays small.",
    },
    Cause.ALIGNMENT_PAUSED: {
        _F: "This is watermark alignment doing its job, not idleness: fix the partition that trails (why its "
        "event times are {lag} behind: a slow producer, a backlog, a skewed key), or, if that skew is expected, "
        "raise maxAllowedWatermarkDrift of withWatermarkAlignment(group, maxAllowedWatermarkDrift, "
        "updateInterval) above it (the paused partitions then run further ahead and their window state grows "
        "by as much).",
    },
}

#: Settings (class, method or configuration key) that belong to one engine only. A remedy for one engine
#: names none of another's (checked by the tests over :data:`REMEDIES`).
ENGINE_SETTINGS: Mapping[Engine, tuple[str, ...]] = {
    _S: (
        "withWatermark",
        "multipleWatermarkPolicy",
        "dropDuplicates",
        "maxOffsetsPerTrigger",
        "maxFilesPerTrigger",
        "Trigger.",
        "timestamp_seconds",
        "timestamp_millis",
        "numRowsDroppedByWatermark",
        "executors",
    ),
    _F: (
        "forBoundedOutOfOrderness",
        "withIdleness",
        "allowedLateness",
        "sideOutputLateData",
        "WatermarkStrategy",
        "TimestampAssigner",
        "StateTtlConfig",
        "savepoint",
        "numLateRecordsDropped",
        "TaskManager",
        "Long.MIN_VALUE",
    ),
    _K: ("consumer instances", "partition count", "committed offset"),
}


class MissingRemedyError(LookupError):
    """No remedy for this (cause, engine): the rule asked for advice the engine has no setting for."""


def remedy(engine: Engine, cause: Cause, **fields: str) -> str:
    """The remedy text for ``cause`` on ``engine``, its ``{fields}`` filled.

    Args:
        engine: the finding's engine (``finding.job.engine``).
        cause: what was found.
        fields: template fields (``before``: ``"batch 4"`` / ``"the poll at <time>"``; ``skew``: ``"1 h"``).

    Raises:
        MissingRemedyError: the table has no remedy for ``(cause, engine)``, or a field is missing.
    """
    by_engine = REMEDIES.get(cause, {})
    template = by_engine.get(engine)
    if template is None:
        raise MissingRemedyError(f"no remedy for cause {cause.value!r} on engine {engine.value!r}")
    try:
        return template.format(**fields)
    except KeyError as exc:
        raise MissingRemedyError(f"remedy {cause.value!r} ({engine.value}) needs the field {exc.args[0]!r}") from None


def settings_of(engine: Engine) -> tuple[str, ...]:
    """The settings only ``engine`` has (see :data:`ENGINE_SETTINGS`): what another engine's finding must not name."""
    return ENGINE_SETTINGS[engine]
