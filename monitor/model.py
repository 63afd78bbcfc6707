"""The shared core: samples, findings, alerts and their enums.

Every subsystem talks through this module (collectors emit :class:`Sample`, rules turn sample histories
into :class:`Finding`, the alert lifecycle turns findings into :class:`Alert` transitions). It imports
nothing of ours, so collectors, rules, notifiers and the dashboard never import each other.

Time convention (see DESIGN.md): every ``datetime`` here is timezone-aware UTC; constructing a record with
a naive datetime raises :class:`ValueError`. Durations carry their unit in the field name (``_ms``,
``_seconds``). ``None`` always means *unknown*, which is kept distinct from zero: a Spark progress with
no ``eventTime.watermark`` key has ``watermark=None``, not the epoch.
"""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Iterable
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "JOIN_PLAN_EXTRA",
    "MAX_DESCRIPTION_CHARS",
    "MAX_ID_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_NAME_CHARS",
    "MAX_TIME",
    "MIN_TIME",
    "STREAM_JOIN_EXTRA",
    "TRANSFORM_WITH_STATE_EXTRA",
    "TRIGGER_EXTRA",
    "TWS_TIME_MODES_EXTRA",
    "UTC",
    "AlertState",
    "CollectorError",
    "Engine",
    "EpisodeEnd",
    "ErrorKind",
    "Finding",
    "FindingEpisode",
    "JobRef",
    "PollResult",
    "RuleTiming",
    "Sample",
    "SampleKind",
    "Scope",
    "Severity",
    "TriggerKind",
    "check_finite",
    "check_int64",
    "check_name",
    "check_text",
    "check_time",
    "datetime_to_ms",
    "ensure_utc",
    "episode_id",
    "fingerprint",
    "ms_to_datetime",
    "share_equal_parts",
    "storable_text",
    "worst_episode",
]

# ----------------------------------------------------------------------------------------------- bounds
#: What the model holds. Every collector's parser checks its values against these (through the
#: ``check_*`` functions below) and reports a value outside them as bad input naming the field, so nothing
#: beyond them is ever stored, compared or added to; :class:`Sample` checks them again on construction.
#: Integers are SQL ``BIGINT`` (Java's ``long``, what Spark, Flink and Kafka count in): int64.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: Times: aware UTC from year 1000 to year 8999, far beyond any real event time (tidegauge's own
#: ``event_time_units`` rule flags times before 1971 or from 2200) yet 1,000 years inside Python's datetime
#: range at each end, so a time plus or minus any duration tidegauge accepts (at most 100 years,
#: ``monitor.durations.MAX_DURATION_MS``) never leaves the calendar (``datetime.max + 1h`` raises).
MIN_TIME = datetime(1000, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(8999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MIN_MS = (MIN_TIME - _EPOCH) // timedelta(milliseconds=1)
_MAX_MS = (MAX_TIME - _EPOCH) // timedelta(milliseconds=1)


def check_int64(value: int, what: str) -> int:
    """``value`` if it fits a signed 64-bit integer.

    Raises:
        ValueError: it does not (``what`` names the field; a huge number is shown by its digit count).
    """
    if INT64_MIN <= value <= INT64_MAX:
        return value
    digits = len(str(abs(value))) if abs(value) < 10**300 else "300+"
    raise ValueError(f"{what}: integer out of range (a {digits}-digit number; the limit is a signed 64-bit integer)")


def check_finite(value: float, what: str) -> float:
    """``value`` if it is a finite float.

    Raises:
        ValueError: NaN or infinite (``what`` names the field).
    """
    if math.isfinite(value):
        return value
    raise ValueError(f"{what}: {value!r} is not a finite number")


def check_time(value: datetime, what: str) -> datetime:
    """``value`` in UTC if it is aware and within ``[MIN_TIME, MAX_TIME]``.

    Raises:
        ValueError: naive, or outside the range (also when converting its offset to UTC leaves the
            calendar, e.g. ``9999-12-31T23:59:59-23:59``); ``what`` names the field.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware UTC, got naive {value!r}")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not MIN_TIME <= utc <= MAX_TIME:
        raise ValueError(
            f"{what}: time {value.isoformat()} is outside the supported range "
            f"{MIN_TIME.date().isoformat()} .. {MAX_TIME.date().isoformat()} (UTC)"
        )
    return utc


def check_text(value: str, what: str) -> str:
    """``value`` if it can be stored as UTF-8 (no lone surrogate such as JSON's ``"\\ud800"``).

    Raises:
        ValueError: it cannot (``what`` names the field and the position).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what}: not valid Unicode (a lone surrogate at character {exc.start})") from None
    return value


#: Text the model holds as an identity or a label (ids, names, descriptions) is stored in text columns on
#: SQLite and PostgreSQL alike, so it is held to what both accept: valid Unicode, no NUL character
#: (PostgreSQL's ``text`` refuses U+0000; SQLite stores it), and a maximum length (PostgreSQL refuses a
#: B-tree index entry over about 2,700 bytes, SQLite has no limit). Checked by :func:`check_name`, in the
#: parsers with their field names first and again when a :class:`JobRef` or :class:`Scope` is made.
#:
#: Identifiers: a Spark query ``id`` / ``runId``, a Flink job id and the job name it is followed by, a
#: Kafka ``cluster/group``, an application id. Unique indexes cover them (``jobs``, ``runs``, alert groups),
#: so 512 characters, at most 2,048 UTF-8 bytes: under PostgreSQL's index entry limit with the engine.
MAX_ID_CHARS = 512
#: Names: a Spark query ``name`` (Flink's job name is also its identifier: :data:`MAX_ID_CHARS`).
MAX_NAME_CHARS = 1024
#: Descriptions: a Spark source ``description``, a Flink source vertex name, a Kafka topic, an operator
#: (:class:`Scope`'s ``source`` and ``operator``); a Kafka subscription to many topics is long, a page of
#: text is not a description.
MAX_DESCRIPTION_CHARS = 16 * 1024
#: Messages: a collector error's message and target (:class:`CollectorError`), cut to it (never refused).
MAX_MESSAGE_CHARS = 4 * 1024


def check_name(value: str, what: str, max_chars: int) -> str:
    """``value`` if it can be stored as an identifier, name or description on every database: at most
    ``max_chars`` characters (:data:`MAX_ID_CHARS`, :data:`MAX_NAME_CHARS`, :data:`MAX_DESCRIPTION_CHARS`),
    no NUL character, valid Unicode (:func:`check_text`).

    Raises:
        ValueError: it cannot; ``what`` names the field (``FILE: line 3: field progress.id: ...``).
    """
    if len(value) > max_chars:
        raise ValueError(f"{what}: {len(value):,} characters, more than the {max_chars:,} allowed")
    nul = value.find("\x00")
    if nul >= 0:
        raise ValueError(f"{what}: holds a NUL character (U+0000, at character {nul}), which cannot be stored")
    if value.isascii():
        return value
    return check_text(value, what)


def storable_text(value: str, max_chars: int) -> str:
    """``value`` made storable when it must never be refused (an error's message): NUL shown as ``\\x00``, a
    lone surrogate as ``?``, cut to ``max_chars`` characters (ending ``...``)."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    if not value.isascii():
        value = value.encode("utf-8", "replace").decode("utf-8")
    if len(value) > max_chars:
        value = value[: max_chars - 3] + "..."
    return value


def ensure_utc(value: datetime | None, what: str = "datetime") -> datetime | None:
    """Return ``value`` converted to UTC; ``None`` passes through.

    Raises:
        ValueError: ``value`` is naive (has no tzinfo), or its offset takes it out of the calendar.
            ``what`` names the field in the message.
    """
    if value is None:
        return None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware UTC, got naive {value!r}")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{what}: time {value.isoformat()} is outside the calendar in UTC") from None


def ms_to_datetime(epoch_ms: int | None, what: str = "epoch milliseconds") -> datetime | None:
    """Epoch milliseconds -> aware UTC datetime (``None`` stays ``None``).

    Raises:
        ValueError: outside ``[MIN_TIME, MAX_TIME]`` (``what`` names the field).
    """
    if epoch_ms is None:
        return None
    if not _MIN_MS <= epoch_ms <= _MAX_MS:
        raise ValueError(
            f"{what}: {epoch_ms} ms since the epoch is outside the supported range "
            f"{MIN_TIME.date().isoformat()} .. {MAX_TIME.date().isoformat()} (UTC)"
        )
    return _EPOCH + timedelta(milliseconds=epoch_ms)


def datetime_to_ms(value: datetime | None) -> int | None:
    """Aware datetime -> integer epoch milliseconds (``None`` stays ``None``).

    Raises:
        ValueError: ``value`` is naive.
    """
    value = ensure_utc(value)
    if value is None:
        return None
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400_000) + (delta.seconds * 1000) + (delta.microseconds // 1000)


class Engine(enum.StrEnum):
    """Which system a job runs on."""

    SPARK = "spark"
    FLINK = "flink"
    KAFKA = "kafka"


class TriggerKind(enum.StrEnum):
    """How a Spark query runs its batches (Spark's ``Trigger`` implementations), as a collector saw it in
    the batch's own report (:data:`TRIGGER_EXTRA`)."""

    MICRO_BATCH = "micro_batch"  # ProcessingTimeTrigger, AvailableNowTrigger, OneTimeTrigger
    REAL_TIME = "real_time"  # RealTimeTrigger (Spark 4.1+): long batches, one report at each batch's end


#: The :attr:`Sample.extra` key in which a Spark collector says which trigger ran the batch (a
#: :class:`TriggerKind` value), when what it read shows it.
TRIGGER_EXTRA = "trigger"

#: The :attr:`Sample.extra` key of a Spark batch's stream-stream join state (its ``StateOperatorProgress``
#: entries named ``symmetricHashJoin``, Spark's ``StreamingSymmetricHashJoinExec``): ``{"operators": n,
#: "rows_total": rows, "rows_removed": rows}`` (sums over the join operators; a count Spark did not report is
#: ``None``).
STREAM_JOIN_EXTRA = "stream_join"

#: The :attr:`Sample.extra` key in which the Spark event-log collector gives the stream-stream join of the
#: batch's physical plan (``SparkListenerSQLExecutionStart``'s ``StreamingSymmetricHashJoin`` node), as
#: :func:`collectors.spark.plans.join_plan` reads it: ``join_type``, ``left_keys``/``right_keys``,
#: ``left_time``/``right_time`` (the watermarked event-time column of each side, ``None`` when the side has
#: none), ``condition`` (the non-equi condition or ``None``), ``left_cleanup``/``right_cleanup`` (Spark planned
#: a state watermark predicate for that side: its state is evicted).
JOIN_PLAN_EXTRA = "join_plan"

#: The :attr:`Sample.extra` key of a Spark batch's ``transformWithState`` custom metrics (summed over its
#: ``transformWithState`` operators; see :func:`collectors.spark.progress.parse_progress`).
TRANSFORM_WITH_STATE_EXTRA = "transform_with_state"

#: The :attr:`Sample.extra` key in which the Spark event-log collector gives the time mode of each
#: ``transformWithState`` operator of the batch's physical plan (``["ProcessingTime"]``; ``EventTime``,
#: ``NoTime``), read by :func:`collectors.spark.plans.transform_with_state_time_modes`.
TWS_TIME_MODES_EXTRA = "tws_time_modes"


class SampleKind(enum.StrEnum):
    """What kind of observation a sample is.

    ``PROGRESS``: one micro-batch's progress (Spark ``QueryProgressEvent``) or one poll of a running job.
    ``IDLE``: Spark's ``QueryIdleEvent`` (the query ran no batch; ``batch_id`` repeats the last one).
    ``STARTED`` / ``TERMINATED``: lifecycle events (a new ``run_id`` for the same job id is a restart).
    ``BATCH_STARTED``: Spark 4.2+'s ``QueryExecutionStartEvent``, posted when a trigger (micro-batch) starts;
    ``observed_at`` is the trigger's start, the same instant the batch's progress later carries as its
    ``timestamp``; it names no batch id.
    ``GAUGE``: a scrape of instantaneous gauges (Spark PrometheusServlet, Flink metrics, Kafka lag).
    """

    PROGRESS = "progress"
    IDLE = "idle"
    STARTED = "started"
    TERMINATED = "terminated"
    BATCH_STARTED = "batch_started"
    GAUGE = "gauge"


class Severity(enum.IntEnum):
    """Ordered severity; a job's health is the worst (``max``) of its findings' severities."""

    OK = 0
    INFO = 1
    WARNING = 2
    CRITICAL = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        """Parse ``"warning"`` / ``"WARNING"`` etc. Raises ValueError naming the allowed values."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            allowed = ", ".join(m.name.lower() for m in cls)
            raise ValueError(f"unknown severity {text!r}; allowed: {allowed}") from None

    def label(self) -> str:
        """Lower-case name, as used in JSON output and labels."""
        return self.name.lower()


class AlertState(enum.StrEnum):
    """Alert lifecycle states (Prometheus rule manager): inactive -> pending -> firing -> resolved."""

    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class JobRef:
    """Identity of a streaming job.

    Attributes:
        engine: the system the job runs on.
        job_id: Spark streaming query ``id`` (stable across restarts), Flink job id, or Kafka consumer
            group (as ``cluster/group``).
        run_id: Spark query ``runId`` (new on every restart), Flink attempt/run marker, or ``None``.
        name: human name (Spark query ``name``, Flink job name) or ``None``.
        app_id: Spark application id / Flink cluster, where known.

    Raises:
        ValueError: an id, the run id or the app id longer than :data:`MAX_ID_CHARS`, a name longer than
            :data:`MAX_NAME_CHARS`, or any of them holding a NUL or a lone surrogate (:func:`check_name`).
    """

    engine: Engine
    job_id: str
    run_id: str | None = None
    name: str | None = None
    app_id: str | None = None

    def __post_init__(self) -> None:
        check_name(self.job_id, "JobRef.job_id", MAX_ID_CHARS)
        if self.run_id is not None:
            check_name(self.run_id, "JobRef.run_id", MAX_ID_CHARS)
        if self.name is not None:
            check_name(self.name, "JobRef.name", MAX_NAME_CHARS)
        if self.app_id is not None:
            check_name(self.app_id, "JobRef.app_id", MAX_ID_CHARS)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which part of a job a sample describes; all ``None`` means the whole job/query.

    ``source`` is a Spark source description or Flink source vertex name or Kafka topic; ``partition``
    a Kafka/topic partition; ``subtask`` a Flink subtask index; ``operator`` a Spark state operator name or
    Flink vertex id.

    Raises:
        ValueError: ``source`` or ``operator`` longer than :data:`MAX_DESCRIPTION_CHARS` or holding a NUL
            or a lone surrogate (:func:`check_name`).
    """

    source: str | None = None
    partition: int | None = None
    subtask: int | None = None
    operator: str | None = None

    def __post_init__(self) -> None:
        if self.source is not None:
            check_name(self.source, "Scope.source", MAX_DESCRIPTION_CHARS)
        if self.operator is not None:
            check_name(self.operator, "Scope.operator", MAX_DESCRIPTION_CHARS)

    def is_job(self) -> bool:
        """True when this scope is the whole job."""
        return (
            self.source is None and self.partition is None and self.subtask is None and self.operator is None
        )

    def labels(self) -> dict[str, str]:
        """The set fields as string labels (for metrics, fingerprints, messages)."""
        out: dict[str, str] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None:
                out[f.name] = str(v)
        return out


#: The whole-job scope, shared as :class:`Sample`'s default (a frozen, hence shareable, value).
_JOB_SCOPE = Scope()
_TIME_FIELDS = ("observed_at", "watermark", "event_time_min", "event_time_max", "event_time_avg")
_INT_FIELDS = (
    "batch_id",
    "num_input_rows",
    "batch_duration_ms",
    "dropped_by_watermark",
    "state_rows_total",
    "state_rows_updated",
    "state_rows_removed",
    "state_memory_bytes",
    "lag_offsets",
    "idle_ms",
    "committed_offset",
    "log_end_offset",
    "restart_count",
    "checkpoints_failed",
)
_FLOAT_FIELDS = ("input_rows_per_second", "processed_rows_per_second", "lag_seconds", "backpressure_ratio")


@dataclass(frozen=True, slots=True)
class Sample:
    """One normalized observation, emitted by every collector (Spark, Flink, Kafka).

    Engine-specific JSON never leaves its collector: this record is all that rules, storage and the
    dashboard see. Every quantity is optional; ``None`` is *unknown*, distinct from ``0``.

    Attributes:
        job: which job/query/run.
        observed_at: when the observation was made (Spark: the progress ``timestamp``, i.e. the trigger
            time of the batch; Flink/Kafka: the poll time). Aware UTC.
        kind: see :class:`SampleKind`.
        collector: which collector produced it, e.g. ``"spark-eventlog"``, ``"spark-listener"``,
            ``"spark-prometheus"``, ``"flink-rest"``, ``"kafka-lag"``.
        scope: which part of the job.
        batch_id: Spark micro-batch id (repeats on idle events); ``None`` where batches do not exist.
        watermark: the event-time watermark in effect (Spark: ``eventTime.watermark`` of the progress,
            the watermark the batch ran with; Flink: current (input) watermark). ``None`` when the engine
            reports none (Spark: no ``eventTime`` map; Flink: ``Long.MIN_VALUE``).
        event_time_min / event_time_max / event_time_avg: Spark ``eventTime`` stats of the batch's rows.
        num_input_rows: rows read in this batch (Spark) / since last poll.
        input_rows_per_second / processed_rows_per_second: rates as reported.
        batch_duration_ms: Spark ``batchDuration`` (ms).
        dropped_by_watermark: rows dropped as late by the watermark in this batch (Spark:
            sum of state operators' ``numRowsDroppedByWatermark``, older logs ``numLateInputs``; Flink: the
            rise of ``numLateRecordsDropped`` since the previous poll).
        state_rows_total / state_rows_updated / state_rows_removed: summed over state operators.
        state_memory_bytes: summed ``memoryUsedBytes`` (Flink: the latest completed checkpoint's
            ``state_size``).
        lag_offsets: consumer lag in records/offsets (Kafka) or Spark ``maxOffsetsBehindLatest``.
        lag_seconds: consumer lag as a time.
        idle_ms: how long the source/subtask has had no data (Flink: the larger of ``sourceIdleTime`` and
            the time its record counter has not moved), ms.
        committed_offset: the consumer group's committed offset of the partition (Kafka; ``-1``/absent
            from the broker is ``None``), used by the consumer-lag rule (Burrow's commit window).
        log_end_offset: the partition's log-end (high-water) offset seen by the collector (Kafka).
        backpressure_ratio: share of time the subtask/vertex was back-pressured, ``0.0``-``1.0`` (Flink
            ``backPressuredTimeMsPerSecond / 1000``, or the REST ``backpressure-level`` ratio).
        restart_count: how often the job has restarted (Flink ``numRestarts``), a counter.
        checkpoints_failed: failed checkpoints since the job was submitted (Flink ``/checkpoints``
            ``counts.failed``), a counter; every Flink job start counts one failed trigger before its tasks
            run, so only increases after the job is running mean failures.
        watermark_end_of_input: ``True`` when the engine reports the +infinity watermark (Flink
            ``Long.MAX_VALUE``: end of input, or a source subtask without splits); ``watermark`` is then
            ``None``. ``None``/``False`` otherwise.
        extra: small engine-specific extras (kept JSON-serializable). Rules read only these documented
            keys: from the Kafka lag collector ``assigned`` (a live group member owns the partition:
            ``consumer_lag`` tells STALL from STOP by it) and ``lag_seconds_min`` (a lower bound when
            ``lag_seconds`` is unknown: ``consumer_lag_seconds``); from the Spark event-log collector
            ``trigger`` (``"real_time"`` on the batches of a run whose plan has Spark's
            ``RealTimeStreamScanExec``: ``rules.cadence`` reads the trigger from it), ``stream_join`` and ``join_plan``
            (:data:`STREAM_JOIN_EXTRA`, :data:`JOIN_PLAN_EXTRA`: ``rules.join_state``), ``transform_with_state``
            (:data:`TRANSFORM_WITH_STATE_EXTRA`), ``tws_time_modes`` (:data:`TWS_TIME_MODES_EXTRA`:
            ``rules.common.watermark_unused``); for messages and lifecycle context
            ``exception`` (the failure of a terminated Spark query / the root cause of a Flink job's last
            failure), ``vertex`` (a Flink vertex's name), ``running_since_ms`` (when the Flink job's current
            attempt began running, epoch ms) and ``checkpoint_failure`` (Flink's latest checkpoint failure
            message).
    """

    job: JobRef
    observed_at: datetime
    kind: SampleKind = SampleKind.PROGRESS
    collector: str = "unknown"
    scope: Scope = field(default=_JOB_SCOPE)
    batch_id: int | None = None
    watermark: datetime | None = None
    event_time_min: datetime | None = None
    event_time_max: datetime | None = None
    event_time_avg: datetime | None = None
    num_input_rows: int | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    batch_duration_ms: int | None = None
    dropped_by_watermark: int | None = None
    state_rows_total: int | None = None
    state_rows_updated: int | None = None
    state_rows_removed: int | None = None
    state_memory_bytes: int | None = None
    lag_offsets: int | None = None
    lag_seconds: float | None = None
    idle_ms: int | None = None
    committed_offset: int | None = None
    log_end_offset: int | None = None
    backpressure_ratio: float | None = None
    restart_count: int | None = None
    checkpoints_failed: int | None = None
    watermark_end_of_input: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def _sample_init() -> Any:
    """The ``__init__`` of :class:`Sample`: the dataclass's signature (every field, in order, with its
    default), the bound checks (:func:`check_time`, :func:`check_int64`, :func:`check_finite`), then each
    field stored through its slot descriptor.

    Raises (from the made ``__init__``):
        ValueError: a missing ``observed_at``, a naive or out-of-range time, an integer beyond int64, a
            NaN/infinite float (naming ``Sample.<field>``). Parsers check with their own field names first;
            a time already in UTC and in range (what every parser and the store give) is kept as it is.

    Why generated: samples are made at every batch of every job (100,000 for a long event log); the
    dataclass-made ``__init__`` of a frozen class stores each of the 29 fields with ``object.__setattr__``,
    twice as slow as the slot descriptors, and a ``__post_init__`` pass re-reads every field. The code is
    built from :func:`dataclasses.fields` (as :mod:`dataclasses` builds its own), so a field added to
    :class:`Sample` is picked up here; ``tests/unit/test_model.py`` checks that defaults and checks hold.
    """
    env: dict[str, Any] = {
        "UTC": UTC,
        "MIN_TIME": MIN_TIME,
        "MAX_TIME": MAX_TIME,
        "INT64_MIN": INT64_MIN,
        "INT64_MAX": INT64_MAX,
        "_isfinite": math.isfinite,
        "check_time": check_time,
        "check_int64": check_int64,
        "check_finite": check_finite,
        "_MISSING": object(),
    }
    params: list[str] = []
    lines = ["    if observed_at is None:", '        raise ValueError("Sample.observed_at is required")']
    stores: list[str] = []
    for f in fields(Sample):
        name = f.name
        if f.default is not MISSING:
            env[f"_d_{name}"] = f.default
            params.append(f"{name}=_d_{name}")
        elif f.default_factory is not MISSING:
            env[f"_f_{name}"] = f.default_factory
            params.append(f"{name}=_MISSING")
            lines.append(f"    if {name} is _MISSING:\n        {name} = _f_{name}()")
        else:
            params.append(name)
        env[f"_set_{name}"] = Sample.__dict__[name].__set__
        stores.append(f"    _set_{name}(self, {name})")
    for name in _TIME_FIELDS:
        lines.append(
            f"    if {name} is not None and not ({name}.tzinfo is UTC and MIN_TIME <= {name} <= MAX_TIME):\n"
            f"        {name} = check_time({name}, 'Sample.{name}')"
        )
    for name in _INT_FIELDS:
        lines.append(
            f"    if {name} is not None and not (INT64_MIN <= {name} <= INT64_MAX):\n"
            f"        check_int64({name}, 'Sample.{name}')"
        )
    for name in _FLOAT_FIELDS:
        lines.append(f"    if {name} is not None and not _isfinite({name}):\n        check_finite({name}, 'Sample.{name}')")
    source = f"def __init__(self, {', '.join(params)}) -> None:\n" + "\n".join(lines + stores) + "\n"
    exec(source, env)  # noqa: S102 -- our own code, built from the dataclass's fields
    init = env["__init__"]
    init.__qualname__ = "Sample.__init__"
    init.__doc__ = "Make a sample; see :func:`_sample_init` for the checks and what they raise."
    return init


Sample.__init__ = _sample_init()  # type: ignore[method-assign]

#: The fields :func:`share_equal_parts` shares: those whose values repeat from one sample of a scope to the
#: next (the job, its scope, the collector's name, the ``extra`` dict, a watermark that did not move, event
#: times), each with its getter and its slot setter.
_SHARED_PARTS: tuple[tuple[str, Any, Any], ...] = tuple(
    (name, Sample.__dict__[name].__get__, Sample.__dict__[name].__set__)
    for name in ("job", "scope", "collector", "extra", "watermark", "event_time_min", "event_time_max",
                 "event_time_avg")
)


def share_equal_parts(sample: Sample, previous: Sample) -> None:
    """Make ``sample`` hold ``previous``'s objects wherever their values are equal, in place: its
    :class:`JobRef`, :class:`Scope`, ``collector`` text, ``extra`` dict and datetimes (see
    :data:`_SHARED_PARTS`). Nothing a reader can see changes (equal values, equality and hash unchanged);
    only identity does, and the memory of a long history drops: samples loaded from a store come with their
    own copy of every text, time and ``extra`` dict, about 970 bytes a Spark sample, of which these parts are
    more than half (``tests/benchmarks/bench_history_memory.py``).

    Only for a sample no one else has seen yet (fresh from a loader), since its attributes change identity.
    ``extra`` dicts are never mutated after a sample is made (a collector makes a new sample to add to one),
    which is what makes sharing them safe.

    Args:
        sample: the newer sample, of the same job and scope as ``previous`` (other pairs share less).
        previous: a sample kept in memory.
    """
    for _name, get, put in _SHARED_PARTS:
        mine = get(sample)
        theirs = get(previous)
        if mine is not theirs and mine == theirs:
            put(sample, theirs)


class ErrorKind(enum.StrEnum):
    """What a :class:`CollectorError` says about its target (the ``kind`` label of
    ``tidegauge_collector_errors_total``).

    ``UNREACHABLE`` means the target (or one of its HTTP endpoints) cannot be read at all, as do the kinds
    of an HTTP answer refused by a read bound (``BODY_TOO_LARGE``, ``DECOMPRESSED_TOO_LARGE``,
    ``DEADLINE_EXCEEDED``, ``TOO_DEEPLY_NESTED``, ``REDIRECT_OTHER_HOST``): the target is down and
    ``target_health`` counts it (:attr:`target_down`); every other kind is one quarantined piece (a file, a
    line, a document) while the rest of the target is still read.
    """

    UNREACHABLE = "unreachable"  # the target cannot be read at all: path missing, connection refused, HTTP error
    FILE = "file"  # one file cannot be read (corrupt or truncated compressed stream, permissions)
    CODEC = "codec"  # a file of unknown compression codec; set aside until it changes
    BOMB = "bomb"  # a file that decompresses (or, sparse, reads) to far more than it stores; set aside
    LINE = "line"  # a line or document that is not one (not a Spark event, invalid JSON, nested too deeply)
    LINE_TOO_LONG = "line_too_long"  # a line longer than the reader's limit; skipped in linear time
    FIELD = "field"  # a document with a missing, malformed or out-of-range field
    ROTATED = "rotated"  # a file was rewritten and is read again from its start (a notice)
    STORE = "store"  # the poll could not be stored (database); it is read again by the next poll
    UNSTORABLE = "unstorable"  # one sample or document the database refused as data; skipped
    INTERNAL = "internal"  # a bug met while parsing one document; the document was skipped
    CREDENTIALS = "credentials"  # a store refused the credentials (missing, expired, invalid, access denied)
    THROTTLED = "throttled"  # a store throttled the requests (503 SlowDown, 429) even after retries
    DELETED = "deleted"  # a file or object read before is gone (or listed, then gone before it was read)
    LISTING = "listing"  # a listing lags the writes (a rolled file missing between two listed ones): waited for
    # an HTTP answer refused by a bound of collectors.http.ReadLimits: nothing of that request was read
    BODY_TOO_LARGE = "body_too_large"  # more than max_body_bytes on the wire
    DECOMPRESSED_TOO_LARGE = "decompressed_too_large"  # a gzip/deflate body decoding to more than allowed
    DEADLINE_EXCEEDED = "deadline_exceeded"  # no complete answer within the request's or the poll's deadline
    TOO_DEEPLY_NESTED = "too_deeply_nested"  # a JSON answer nested deeper than the parser's limit
    REDIRECT_OTHER_HOST = "redirect_other_host"  # a redirect to another host (never followed)

    @property
    def target_down(self) -> bool:
        """True when an error of this kind means the target (or one of its endpoints) could not be read:
        unreachable, an HTTP answer refused by a read bound, or the poll could not be stored."""
        return self in _TARGET_DOWN


_TARGET_DOWN = frozenset(
    {
        ErrorKind.UNREACHABLE,
        ErrorKind.STORE,
        ErrorKind.CREDENTIALS,
        ErrorKind.BODY_TOO_LARGE,
        ErrorKind.DECOMPRESSED_TOO_LARGE,
        ErrorKind.DEADLINE_EXCEEDED,
        ErrorKind.TOO_DEEPLY_NESTED,
        ErrorKind.REDIRECT_OTHER_HOST,
    }
)


@dataclass(frozen=True, slots=True)
class CollectorError:
    """A partial failure of one poll, reported as data rather than raised (Telegraf's accumulator habit).

    Attributes:
        collector: collector name.
        target: what failed: a file path, URL or job id (never containing secrets).
        message: one line saying what is wrong (the file, line and field).
        observed_at: when (aware UTC).
        retryable: whether the next poll may succeed.
        kind: what failed (:class:`ErrorKind`); the default, ``UNREACHABLE``, marks the target down.

    ``target`` and ``message`` are made storable on construction (:func:`storable_text`: NUL escaped, cut
    to :data:`MAX_MESSAGE_CHARS`): reporting a problem never fails on the problem's own text.
    """

    collector: str
    target: str
    message: str
    observed_at: datetime
    retryable: bool = True
    kind: ErrorKind = ErrorKind.UNREACHABLE

    def __post_init__(self) -> None:
        # an error is always storable: its text is made so (storable_text), never refused
        for name in ("target", "message"):
            text = getattr(self, name)
            if len(text) > MAX_MESSAGE_CHARS or not text.isascii() or "\x00" in text:
                object.__setattr__(self, name, storable_text(text, MAX_MESSAGE_CHARS))


@dataclass(frozen=True, slots=True)
class PollResult:
    """What one collector poll returns: the samples it could read and the errors it met.

    ``raw`` holds the raw documents read (engine JSON as ``dict``), paired with the job they belong to,
    so the store can keep them for replay after a parser fix.
    """

    samples: tuple[Sample, ...] = ()
    errors: tuple[CollectorError, ...] = ()
    raw: tuple[tuple[JobRef, datetime, str, dict[str, Any]], ...] = ()

    def merged(self, other: PollResult) -> PollResult:
        """Concatenate two results."""
        return PollResult(self.samples + other.samples, self.errors + other.errors, self.raw + other.raw)


def fingerprint(rule: str, labels: dict[str, str]) -> str:
    """Stable alert identity from rule name + labels (never from message text).

    Returns a 16-hex-digit SHA-256 prefix of the rule and the sorted labels.
    """
    h = hashlib.sha256(rule.encode())
    for k in sorted(labels):
        h.update(b"\x00" + k.encode() + b"\x01" + labels[k].encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Finding:
    """What a rule concluded: something a person can act on.

    Attributes:
        rule: rule name, e.g. ``"watermark_stall"``, ``"future_timestamp"``, ``"late_drop_surge"``,
            ``"state_growth"``, ``"idle_source"``.
        severity: how bad.
        job: which job.
        message: the cause and the remedy, in one or two sentences.
        observed_at: the time the rule looked (the tick's ``now``) or the sample time it refers to.
        scope: which part of the job (source/partition/subtask), when the cause is narrower than the job.
        batch_id: the batch it names, if any.
        labels: extra identifying labels (part of the fingerprint).
        details: machine-readable numbers behind the message (not part of the identity).
    """

    rule: str
    severity: Severity
    job: JobRef
    message: str
    observed_at: datetime
    scope: Scope = field(default=_JOB_SCOPE)
    batch_id: int | None = None
    labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "observed_at", ensure_utc(self.observed_at, "Finding.observed_at"))

    def identity_labels(self) -> dict[str, str]:
        """Labels that identify the alert: engine, job id, scope fields and ``labels``."""
        out = {"engine": self.job.engine.value, "job_id": self.job.job_id}
        out.update(self.scope.labels())
        out.update(self.labels)
        return out

    def fingerprint(self) -> str:
        """Stable identity of the alert this finding raises."""
        return fingerprint(self.rule, self.identity_labels())


@dataclass(frozen=True, slots=True)
class RuleTiming:
    """A rule's ``for`` and ``keep_firing_for`` durations (Prometheus alerting-rule fields of those names).

    Raises:
        ValueError: a duration is negative.
    """

    for_duration: timedelta = timedelta(0)
    keep_firing_for: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        if self.for_duration < timedelta(0) or self.keep_firing_for < timedelta(0):
            raise ValueError("RuleTiming durations must not be negative")


class EpisodeEnd(enum.StrEnum):
    """Why a :class:`FindingEpisode` ended (``None`` while it is open: it held at the newest instant)."""

    RESOLVED = "resolved"  # a later instant of the job no longer had the finding
    TERMINATED = "terminated"  # the job terminated (Spark ``QueryTerminatedEvent``) while it held


def episode_id(fingerprint_: str, first_at: datetime) -> str:
    """The stable key of a finding episode: 32 hex digits of SHA-256 over the finding's fingerprint (rule,
    engine, job id, scope and extra labels: :meth:`Finding.fingerprint`) and the instant it first held
    (integer epoch microseconds), so the daemon and ``scan`` name the same episode alike and a re-scan
    finds it again.

    Raises:
        ValueError: ``first_at`` is naive.
    """
    at = ensure_utc(first_at, "first_at")
    assert at is not None
    delta = at - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return hashlib.sha256(f"episode-v1\x00{fingerprint_}\x00{micros}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class FindingEpisode:
    """One stretch of time during which one finding held without a break: what is stored as history.

    The rules make findings at instants (each batch's own time, or a poll's); consecutive instants with the
    same finding (the same :meth:`Finding.fingerprint`) are one episode (``rules.episodes`` folds them,
    for ``scan`` and the daemon alike).

    Attributes:
        id: the stable key, :func:`episode_id` of ``fingerprint`` and ``first_at``.
        fingerprint: the finding's (and its alert's) identity: rule + labels.
        rule: the rule's name, e.g. ``"watermark_stall"``.
        job: the job as the last finding named it (engine, job id, run id and name).
        scope: which input / partition / vertex / subtask (the whole job when empty).
        severity: the worst severity the finding had in the episode.
        first_at / last_at: the first and last instants it held (aware UTC, the data's own clock: a Spark
            batch's trigger time, a Flink/Kafka poll time).
        first_batch_id / last_batch_id: the job's newest Spark batch at those instants (``None`` where
            there are no batches: Flink, Kafka, or before the first batch).
        message: the finding's message as last seen (the fullest: how long, how many rows).
        cause / remedy: the cause and the remedy when the rule gives them apart from the message
            (``details["cause"]`` / ``details["remedy"]`` as text), else ``None``.
        caused_by: ids of the episodes that caused this one (a stall following a future jump names the
            jump's episode); causes: ids of the episodes this one caused.
        notified: an alert was raised for it that notifies (it held for the rule's ``for`` and was
            not history). ``scan`` notifies nobody: ``False``.
        history: its first instant was already older than the history horizon when it was first
            evaluated (a recorded log, a daemon catching up after a long stop): never notified.
        ended_by: :class:`EpisodeEnd` value, or ``None`` while open.
        labels: the finding's extra identifying labels (part of ``fingerprint``).
        details: the last finding's machine-readable numbers, plus ``batch_id``: the batch the finding
            named when it first held.

    Raises:
        ValueError: a naive time, or ``last_at`` before ``first_at``.
    """

    id: str
    fingerprint: str
    rule: str
    job: JobRef
    scope: Scope
    severity: Severity
    first_at: datetime
    last_at: datetime
    message: str
    first_batch_id: int | None = None
    last_batch_id: int | None = None
    cause: str | None = None
    remedy: str | None = None
    caused_by: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    notified: bool = False
    history: bool = False
    ended_by: EpisodeEnd | None = None
    labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "first_at", ensure_utc(self.first_at, "FindingEpisode.first_at"))
        object.__setattr__(self, "last_at", ensure_utc(self.last_at, "FindingEpisode.last_at"))
        if self.last_at < self.first_at:
            raise ValueError(
                f"FindingEpisode {self.id}: last_at {self.last_at.isoformat()} is before first_at "
                f"{self.first_at.isoformat()}"
            )

    @property
    def is_open(self) -> bool:
        """True while the finding held at the job's newest instant evaluated."""
        return self.ended_by is None

    def overlaps(self, since: datetime | None, until: datetime | None) -> bool:
        """Whether ``[first_at, last_at]`` meets ``[since, until)`` (``None``: unbounded)."""
        return (since is None or self.last_at >= since) and (until is None or self.first_at < until)


def worst_episode(episodes: Iterable[FindingEpisode]) -> FindingEpisode | None:
    """The worst of ``episodes``: the highest severity, then the earliest (``first_at``, then ``last_at``,
    then id): a rule's first occurrence is the one that names the cause (a job that restarts every two
    batches repeats a future_timestamp episode for the same row; the first is batch 6, not batches 10-11);
    ``None`` for none. A job's health over a period is this episode's severity (``OK`` without one), beside
    its health now (its firing alerts)."""
    return min(episodes, key=lambda e: (-int(e.severity), e.first_at, e.last_at, e.id), default=None)
