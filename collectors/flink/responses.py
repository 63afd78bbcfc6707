"""Parsers of Flink 2.x JobManager REST responses (pure functions; no I/O, no clock).

Endpoints (``flink-runtime`` ``rest/handler``; shapes checked against recorded Flink 2.3.0 responses in
``tests/fixtures/flink/real-2.3.0``):

========================================================  ====================================================
endpoint                                                  parser
========================================================  ====================================================
``/jobs/overview``                                        :func:`parse_jobs_overview` (``JobsOverviewHandler``)
``/jobs/<jid>``                                           :func:`parse_job_detail` (``JobDetailsHandler``)
``/jobs/<jid>/vertices/<vid>/metrics``                    :func:`parse_metric_ids` (ids only, no values)
``.../metrics?get=a,b``, ``/jobs/<jid>/metrics?get=``     :func:`parse_metric_values`
``/jobs/<jid>/vertices/<vid>/watermarks``                 :func:`parse_metric_values` (``<i>.currentInputWatermark``)
``/jobs/<jid>/checkpoints``                               :func:`parse_checkpoints` (``CheckpointingStatisticsHandler``)
``/jobs/<jid>/exceptions``                                :func:`parse_exceptions` (``JobExceptionsHandler``)
``/jobs/<jid>/vertices/<vid>/backpressure``               :func:`parse_backpressure`
========================================================  ====================================================

Vertex metric ids are ``<subtask>.<metric>`` (task scope: ``0.numRecordsIn``, ``0.currentInputWatermark``,
``0.backPressuredTimeMsPerSecond``) or ``<subtask>.<operator>.<metric>`` (operator scope:
``0.window-2s.numLateRecordsDropped``, ``1.Source__seq.sourceIdleTime``); operator names are the metric
group's sanitized names (``Source: seq`` -> ``Source__seq``, at most 80 characters).

Split-scope ids (Flink 2.1+, FLIP-513 / FLINK-37410, ``SourceOperator``'s per-split
``split.<split id>.watermark`` group: ``0.Source__kafka-in.split.orders-3.watermark.currentWatermark``,
``.activeTimeMsPerSecond``, ``.pausedTimeMsPerSecond``, ``.idleTimeMsPerSecond``, and ``accumulated*TimeMs``,
not read): :func:`select_metric_ids` asks for the :data:`SPLIT_METRICS` of at most
:data:`MAX_SPLITS_PER_SUBTASK` splits per subtask and :data:`MAX_SPLITS_PER_VERTEX` per vertex, and
:func:`subtask_metrics` reads them into :attr:`SubtaskMetrics.splits`. A Flink before 2.1 lists none: nothing
more is asked, nothing changes.

A Kafka source (flink-connector-kafka ``KafkaSourceReaderMetrics``) adds, per topic partition its reader
was assigned, ``<subtask>.<source>.KafkaSourceReader.topic.<topic>.partition.<p>.currentOffset`` (the
offset of the last record the reader handed on, ``-1`` before the first) and ``.committedOffset``:
:func:`select_metric_ids` asks for the ``currentOffset`` ids, at most :data:`MAX_KAFKA_PARTITIONS` per
subtask (the first by topic and partition), and :func:`subtask_metrics` reads them into
:attr:`SubtaskMetrics.kafka_offsets` (the culprit of a future-timestamp jump lies between two polls' offsets).

Every parser raises :class:`monitor.errors.InputError` naming the endpoint when the document has the wrong
shape; the collector turns that into an error entry for the job or vertex.

Values that size what the collectors allocate are checked before anything is allocated: a vertex's
``parallelism`` (one :class:`SubtaskMetrics` and one sample per subtask) must lie within 1 and
:data:`FLINK_MAX_PARALLELISM` (Flink's own bound) and within the target's ``max_parallelism``
(:data:`DEFAULT_MAX_PARALLELISM`); a subtask index in a metric id must lie within the vertex's parallelism
(an id of a subtask the vertex does not have is not read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.flink.values import Watermark, parse_double, parse_epoch_ms, parse_long, parse_watermark
from collectors.jsontext import json_text
from monitor.errors import InputError
from monitor.model import check_text
from monitor.versions import FlinkVersionError, parse_flink_version

__all__ = [
    "DEFAULT_MAX_JOBS",
    "DEFAULT_MAX_PARALLELISM",
    "FLINK_MAX_PARALLELISM",
    "KAFKA_OFFSET_METRIC",
    "MAX_KAFKA_PARTITIONS",
    "MAX_SPLITS_PER_SUBTASK",
    "MAX_SPLITS_PER_VERTEX",
    "OPERATOR_METRICS",
    "SPLIT_METRICS",
    "TASK_METRICS",
    "CheckpointStats",
    "ExceptionEntry",
    "JobDetail",
    "JobOverview",
    "SplitMetrics",
    "SubtaskMetrics",
    "VertexInfo",
    "check_parallelism",
    "kafka_partition_of",
    "kafka_split_of",
    "parse_backpressure",
    "parse_checkpoints",
    "parse_exceptions",
    "parse_flink_version_of_config",
    "parse_job_detail",
    "parse_jobs_overview",
    "parse_metric_ids",
    "parse_metric_values",
    "select_metric_ids",
    "subtask_metrics",
]

#: The most subtasks a Flink vertex can have: ``KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM``
#: (``Short.MAX_VALUE + 1``); a larger ``parallelism`` or subtask index is not Flink's.
FLINK_MAX_PARALLELISM = 32768
#: Default per-target limit of a vertex's parallelism (config ``max_parallelism``): a vertex of more
#: subtasks is reported as an error rather than read (one sample per subtask and poll).
DEFAULT_MAX_PARALLELISM = 4096
#: Default per-target limit of the jobs polled (config ``max_jobs``): beyond it a poll reads part of the
#: list and says so.
DEFAULT_MAX_JOBS = 1000
#: Longest subtask index read from a metric id (``FLINK_MAX_PARALLELISM - 1`` has 5 digits): a longer one
#: is not converted at all (a 5,000-digit index would raise in ``int``).
_MAX_INDEX_DIGITS = 5

#: Task-scope metrics read per subtask (``TaskIOMetricGroup``, ``MetricNames``).
TASK_METRICS = frozenset(
    {
        "numRecordsIn",
        "numRecordsOut",
        "numRecordsInPerSecond",
        "numRecordsOutPerSecond",
        "currentInputWatermark",
        "backPressuredTimeMsPerSecond",
        "busyTimeMsPerSecond",
    }
)
#: Operator-scope metrics read per subtask: output watermarks (``WatermarkGauge``), records out (of the
#: source operator), and the source
#: (``SourceReaderMetricGroup``: ``sourceIdleTime``, ``watermarkLag``, ``pendingRecords``) and window
#: (``WindowOperator``: ``numLateRecordsDropped``) metrics.
OPERATOR_METRICS = frozenset(
    {
        "currentOutputWatermark",
        "numRecordsOut",
        "sourceIdleTime",
        "watermarkLag",
        "pendingRecords",
        "numLateRecordsDropped",
    }
)

#: The Kafka source reader's per-partition offset gauge (``KafkaSourceReaderMetrics.CURRENT_OFFSET_METRIC_GAUGE``).
KAFKA_OFFSET_METRIC = "currentOffset"
#: Partitions' ``currentOffset`` read per subtask at most (one id each in the ``?get=`` URLs: a source
#: reading thousands of partitions is read for its first ones, by topic and partition).
MAX_KAFKA_PARTITIONS = 64
#: ``KafkaSourceReaderMetrics.KAFKA_SOURCE_READER_METRIC_GROUP`` + ``TOPIC_GROUP`` (a key-value group).
_KAFKA_TOPIC_GROUP = ".KafkaSourceReader.topic."
_KAFKA_PARTITION_GROUP = ".partition."


#: Split-level watermark metrics read per split (Flink 2.1+, FLIP-513 / FLINK-37410; ``SourceOperator``
#: registers them under ``<operator>.split.<split id>.watermark``): the split's last watermark and the
#: share of each second it was reading, paused by watermark alignment, or marked idle (ms per second).
SPLIT_METRICS = frozenset({"currentWatermark", "activeTimeMsPerSecond", "pausedTimeMsPerSecond", "idleTimeMsPerSecond"})
#: Splits read per subtask at most (the first by split id: Kafka by topic and partition) ...
MAX_SPLITS_PER_SUBTASK = 16
#: ... and per vertex (lowest subtasks first): at most ``4 * 64`` ids, five ``?get=`` requests, whatever the
#: number of partitions. A Flink before 2.1 lists no split metric: nothing is asked.
MAX_SPLITS_PER_VERTEX = 64
_SPLIT_GROUP = ".split."
#: Longest split id read (a Kafka topic name is at most 249 characters, plus ``-<partition>``).
_MAX_SPLIT_ID_CHARS = 300
_SPLIT_WATERMARK_GROUP = ".watermark."


def _split_metric(metric_id: str) -> tuple[int, str, str] | None:
    """``"1.Source__in.split.orders-3.watermark.currentWatermark"`` -> ``(1, "orders-3",
    "currentWatermark")`` for the :data:`SPLIT_METRICS`; ``None`` for any other id, and for a split id longer
    than 300 characters or holding a control character (not read: it would reach the findings' text)."""
    head, dot, rest = metric_id.partition(".")
    if not dot or not head.isdigit() or not head.isascii() or len(head) > _MAX_INDEX_DIGITS:
        return None
    _, found, tail = rest.partition(_SPLIT_GROUP)
    if not found:
        return None
    split, found, name = tail.rpartition(_SPLIT_WATERMARK_GROUP)
    if not found or not split or name not in SPLIT_METRICS:
        return None
    if len(split) > _MAX_SPLIT_ID_CHARS or not split.isprintable():
        return None  # no Kafka split (topic <= 249 characters) is longer; messages never carry such text
    return int(head), split, name


def kafka_split_of(split: str) -> tuple[str, int] | None:
    """A Kafka source's split id (``KafkaPartitionSplit.splitId()``: ``<topic>-<partition>``) -> ``(topic,
    partition)``; ``None`` when it is not of that shape (another connector's split)."""
    topic, dash, part = split.rpartition("-")
    if not dash or not topic or not part.isascii() or not part.isdigit() or len(part) > 10:
        return None
    return topic, int(part)


def kafka_partition_of(operator: str) -> tuple[str, int] | None:
    """``"Source__in.KafkaSourceReader.topic.orders.v1.partition.3"`` -> ``("orders.v1", 3)``: the topic
    partition of a ``KafkaSourceReaderMetrics`` offset gauge's group (operator part of a vertex metric id);
    ``None`` for any other group. A topic may hold dots: the partition group is the last one."""
    _, found, rest = operator.partition(_KAFKA_TOPIC_GROUP)
    if not found:
        return None
    topic, found, part = rest.rpartition(_KAFKA_PARTITION_GROUP)
    if not found or not topic or not part.isascii() or not part.isdigit() or len(part) > 10:
        return None
    return topic, int(part)


def _expect(doc: Any, kind: type, endpoint: str, what: str = "response") -> Any:
    if not isinstance(doc, kind):
        raise InputError(f"{endpoint}: {what}: expected a JSON {kind.__name__}, got {type(doc).__name__}")
    return doc


def _field(obj: Mapping[str, Any], key: str, endpoint: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise InputError(f"{endpoint}: field {key!r} missing")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"{endpoint}: field {key!r}: unexpected {type(value).__name__}")
    if isinstance(value, str):
        try:
            check_text(value, f"{endpoint}: field {key!r}")
        except ValueError as exc:  # a lone surrogate ("\ud800"): no sample or database can hold it
            raise InputError(str(exc)) from None
    return value


def _display(text: str) -> str:
    """A message for display (a stack trace line, a checkpoint failure): a lone surrogate becomes ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _time_ms(value: Any) -> int | None:
    """Flink REST times are epoch ms; ``-1`` / ``0`` mean "not (yet) happened"; a time no sample can hold
    (beyond the year 8999) is unknown."""
    ms = parse_epoch_ms(value)
    return ms if ms is not None and ms > 0 else None


@dataclass(frozen=True, slots=True)
class JobOverview:
    """One entry of ``/jobs/overview``: id, name, state (``RUNNING``, ``FAILED``...) and times (epoch ms)."""

    jid: str
    name: str
    state: str
    start_time_ms: int | None
    end_time_ms: int | None


def parse_jobs_overview(doc: Any, endpoint: str = "/jobs/overview") -> list[JobOverview]:
    """``{"jobs": [{"jid", "name", "state", "start-time", "end-time", ...}]}`` -> entries, in order.

    Raises:
        InputError: not that shape (names ``endpoint`` and the field).
    """
    jobs = _field(_expect(doc, dict, endpoint), "jobs", endpoint, list)
    out: list[JobOverview] = []
    for i, job in enumerate(jobs):
        where = f"{endpoint}: jobs[{i}]"
        _expect(job, dict, where, "entry")
        out.append(
            JobOverview(
                jid=_field(job, "jid", where, str),
                name=_field(job, "name", where, str),
                state=_field(job, "state", where, str),
                start_time_ms=_time_ms(job.get("start-time")),
                end_time_ms=_time_ms(job.get("end-time")),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class VertexInfo:
    """A job vertex: a chain of operators run by ``parallelism`` subtasks (names joined by `` -> ``)."""

    id: str
    name: str
    parallelism: int
    status: str

    @property
    def operator_names(self) -> list[str]:
        """The chained operators' names, first (upstream) to last."""
        return [part.strip() for part in self.name.split(" -> ")]


@dataclass(frozen=True, slots=True)
class JobDetail:
    """``/jobs/<jid>``: the job's state, its status timestamps (``RUNNING``, ``RESTARTING``, ``FAILED``...,
    epoch ms, ``None`` when never entered) and its vertices in topological order (sources first)."""

    jid: str
    name: str
    state: str
    start_time_ms: int | None
    end_time_ms: int | None
    now_ms: int | None
    timestamps: dict[str, int | None]
    vertices: tuple[VertexInfo, ...]


def parse_flink_version_of_config(doc: Any, endpoint: str = "/config") -> str | None:
    """The ``flink-version`` of a JobManager's ``/config`` answer (``{"flink-version": "2.3.0", ...}``,
    ``DashboardConfiguration``), or ``None`` when absent. Only a version tidegauge can follow is kept.

    Raises:
        InputError: the answer is not an object, or its ``flink-version`` is not a Flink 2.x version
            string (naming ``endpoint`` and the field).
    """
    obj = _expect(doc, dict, endpoint)
    value = obj.get("flink-version")
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{endpoint}: field 'flink-version': expected a string, got {type(value).__name__}")
    try:
        parse_flink_version(value)
    except FlinkVersionError as exc:
        raise InputError(f"{endpoint}: field 'flink-version': {exc}") from None
    return value[:32]


def check_parallelism(value: int, where: str, limit: int = DEFAULT_MAX_PARALLELISM) -> int:
    """``value`` if it is a parallelism the collectors will allocate for: 1 to ``limit`` subtasks.

    Args:
        value: the ``parallelism`` of a vertex (``/jobs/<jid>``), or one more than the highest subtask index
            a reporter served.
        where: the endpoint and field, for the message.
        limit: the target's ``max_parallelism`` (at most :data:`FLINK_MAX_PARALLELISM`).

    Raises:
        InputError: below 1, above :data:`FLINK_MAX_PARALLELISM` (not a Flink vertex) or above ``limit``;
            the message names ``where``, the value and the limit.
    """
    if value < 1 or value > FLINK_MAX_PARALLELISM:
        raise InputError(
            f"{where}: parallelism {_short(value)} is not a Flink parallelism (1 to {FLINK_MAX_PARALLELISM})"
        )
    if value > limit:
        raise InputError(
            f"{where}: parallelism {value} is over the limit of {limit} subtasks (the target's max_parallelism)"
        )
    return value


def _short(value: int) -> str:
    """An integer for a message: whole up to 30 digits, else its sign, first digits and digit count."""
    text = str(value) if abs(value) < 10**30 else None
    if text is not None:
        return text
    digits = len(str(abs(value))) if value.bit_length() < 14_000 else round(value.bit_length() * 0.30103)
    return f"{'-' if value < 0 else ''}a {digits}-digit number"


def parse_job_detail(doc: Any, endpoint: str, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> JobDetail:
    """Parse ``/jobs/<jid>``.

    Args:
        doc: the decoded response.
        endpoint: the path, for messages.
        max_parallelism: the target's limit of a vertex's subtasks (:func:`check_parallelism`).

    Raises:
        InputError: a missing or mistyped ``jid``/``name``/``state``/``vertices`` field, or a vertex's
            ``parallelism`` out of bounds (``/jobs/<jid>: vertices[0]: parallelism ...``).
    """
    _expect(doc, dict, endpoint)
    vertices: list[VertexInfo] = []
    for i, v in enumerate(_field(doc, "vertices", endpoint, list)):
        where = f"{endpoint}: vertices[{i}]"
        _expect(v, dict, where, "entry")
        vertices.append(
            VertexInfo(
                id=_field(v, "id", where, str),
                name=_field(v, "name", where, str),
                parallelism=check_parallelism(_field(v, "parallelism", where, int), where, max_parallelism),
                status=json_text(v.get("status"), "UNKNOWN"),
            )
        )
    stamps = doc.get("timestamps") if isinstance(doc.get("timestamps"), dict) else {}
    return JobDetail(
        jid=_field(doc, "jid", endpoint, str),
        name=_field(doc, "name", endpoint, str),
        state=_field(doc, "state", endpoint, str),
        start_time_ms=_time_ms(doc.get("start-time")),
        end_time_ms=_time_ms(doc.get("end-time")),
        now_ms=_time_ms(doc.get("now")),
        timestamps={str(k): _time_ms(v) for k, v in stamps.items()},
        vertices=tuple(vertices),
    )


def parse_metric_ids(doc: Any, endpoint: str) -> list[str]:
    """A metric list (``[{"id": "0.numRecordsIn"}, ...]``) -> the ids.

    Raises:
        InputError: not a list of objects with a string ``id``.
    """
    out: list[str] = []
    for i, entry in enumerate(_expect(doc, list, endpoint)):
        _expect(entry, dict, f"{endpoint}: [{i}]", "entry")
        out.append(_field(entry, "id", f"{endpoint}: [{i}]", str))
    return out


def parse_metric_values(doc: Any, endpoint: str) -> dict[str, str]:
    """``[{"id": ..., "value": "..."}]`` -> ``{id: value string}``. Entries without a value are left out
    (unknown), as are values that are not a string or number; ``[]`` (Flink's answer when any requested id is unknown, or before the first metric fetch)
    gives ``{}``.

    Raises:
        InputError: not a list of objects with a string ``id``.
    """
    out: dict[str, str] = {}
    for i, entry in enumerate(_expect(doc, list, endpoint)):
        _expect(entry, dict, f"{endpoint}: [{i}]", "entry")
        key = _field(entry, "id", f"{endpoint}: [{i}]", str)
        value = entry.get("value")
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out[key] = str(value)  # a list or object as a value is unknown (never ``str()`` of a deep nesting)
    return out


def _split_id(metric_id: str) -> tuple[int, str | None, str] | None:
    """``"1.op.name"`` -> ``(1, "op", "name")``; ``"0.name"`` -> ``(0, None, "name")``; others ``None``."""
    head, dot, rest = metric_id.partition(".")
    if not dot or not head.isdigit() or not head.isascii() or len(head) > _MAX_INDEX_DIGITS or not rest:
        return None  # not ``<subtask>.``, or an index no Flink vertex has
    operator, dot, name = rest.rpartition(".")
    if not dot:
        return int(head), None, rest
    if ".split." in f".{operator}.":
        return None  # split-scope metric (``op.split.<n>.watermark.x``)
    return int(head), operator, name


def select_metric_ids(ids: Iterable[str], vertex: VertexInfo | None = None) -> list[str]:
    """The ids worth fetching (:data:`TASK_METRICS` at task scope, :data:`OPERATOR_METRICS` at operator
    scope), sorted. Only ids the vertex listed are asked for: an unknown id makes Flink drop them all.

    With ``vertex``, ids of subtask indices at or above its parallelism are left out, and operator ids are
    narrowed to what :func:`subtask_metrics` reads (shorter URLs: URL
    handling is most of a poll's cost): ``currentOutputWatermark`` of the chain's last operator (all
    operators' if none matches its name), ``numRecordsOut`` of the source operator, and the source and
    window metrics of any operator. Kafka sources' ``currentOffset`` gauges: at most
    :data:`MAX_KAFKA_PARTITIONS` per subtask. Split-level watermark metrics (:data:`SPLIT_METRICS`, Flink
    2.1+): at most :data:`MAX_SPLITS_PER_SUBTASK` splits per subtask and :data:`MAX_SPLITS_PER_VERTEX` per
    vertex.
    """
    chosen: list[tuple[str, str | None, str]] = []
    offsets: dict[int, list[tuple[str, str | None, str]]] = {}
    splits: dict[int, dict[str, list[str]]] = {}
    for metric_id in ids:
        parts = _split_id(metric_id)
        if parts is None:
            split_parts = _split_metric(metric_id)
            if split_parts is not None and (vertex is None or split_parts[0] < vertex.parallelism):
                splits.setdefault(split_parts[0], {}).setdefault(split_parts[1], []).append(metric_id)
            continue
        index, operator, name = parts
        if vertex is not None and index >= vertex.parallelism:
            continue  # a subtask the vertex has not: never asked for (a list of them would cost requests)
        if (operator is None and name in TASK_METRICS) or (operator is not None and name in OPERATOR_METRICS):
            chosen.append((metric_id, operator, name))
        elif operator is not None and name == KAFKA_OFFSET_METRIC and kafka_partition_of(operator) is not None:
            offsets.setdefault(index, []).append((metric_id, operator, name))
    for index_ids in offsets.values():  # the first partitions by topic and partition, per subtask
        chosen.extend(sorted(index_ids, key=lambda c: kafka_partition_of(c[1] or "") or ("", 0))[:MAX_KAFKA_PARTITIONS])
    split_ids: list[str] = []
    budget = MAX_SPLITS_PER_VERTEX
    for index in sorted(splits):
        by_split = splits[index]
        for split in sorted(by_split, key=lambda sid: (kafka_split_of(sid) or (sid, 0)))[: min(MAX_SPLITS_PER_SUBTASK, budget)]:
            split_ids.extend(by_split[split])
            budget -= 1
    if vertex is not None:
        last = _key(vertex.operator_names[-1])
        first = _key(vertex.operator_names[0])
        outputs = {op for _, op, name in chosen if op is not None and name == "currentOutputWatermark"}
        matched = {op for op in outputs if _key(op) == last} or {
            op for op in outputs if _key(op) and last.startswith(_key(op))
        }
        keep_outputs = matched or outputs
        chosen = [
            c
            for c in chosen
            if c[1] is None
            or (c[2] == "currentOutputWatermark" and c[1] in keep_outputs)
            or (c[2] == "numRecordsOut" and _key(c[1]) == first)
            or c[2] not in ("currentOutputWatermark", "numRecordsOut")
        ]
    return sorted([c[0] for c in chosen] + split_ids)


_SANITIZE = re.compile(r"[^0-9A-Za-z]+")


def _key(name: str) -> str:
    return _SANITIZE.sub("", name).lower()


@dataclass(slots=True)
class SplitMetrics:
    """One source split's watermark metrics (Flink 2.1+, FLIP-513; ``None`` = not reported).

    Attributes:
        split: the split id (Kafka: ``<topic>-<partition>``, ``KafkaPartitionSplit.splitId()``).
        watermark: ``currentWatermark``, the last watermark the split's generator emitted
            (``Long.MIN_VALUE`` before its first: unknown).
        active_ms_per_s / paused_ms_per_s / idle_ms_per_s: ms of the last second the split was reading,
            paused by watermark alignment (``pauseOrResumeSplits``, FLIP-182/217), or marked idle by the
            idleness detection (``withIdleness``), ``activeTimeMsPerSecond`` / ``pausedTimeMsPerSecond`` /
            ``idleTimeMsPerSecond``.
    """

    split: str
    watermark: Watermark = field(default_factory=lambda: Watermark(None))
    active_ms_per_s: float | None = None
    paused_ms_per_s: float | None = None
    idle_ms_per_s: float | None = None


@dataclass(slots=True)
class SubtaskMetrics:
    """One subtask's metrics, parsed (``None`` = not reported / unknown).

    Attributes:
        subtask: index.
        input_watermark: the task's ``currentInputWatermark`` (min over its input channels,
            ``StatusWatermarkValve``); unknown for source tasks, which have no input.
        output_watermark: ``currentOutputWatermark`` of the chain's last operator.
        records_in / records_out: task counters (``numRecordsIn``/``numRecordsOut``), cumulative since
            the attempt started.
        records_in_per_second / records_out_per_second: task rates (1-minute meters).
        source_records_out: the source operator's ``numRecordsOut`` (records the reader produced).
        source_idle_ms: ``sourceIdleTime`` (ms since the source reader last produced a record).
        watermark_lag_ms: ``watermarkLag`` (wall clock minus the source's watermark; negative = ahead).
        pending_records: ``pendingRecords`` (records the source has not fetched yet, e.g. Kafka lag).
        late_records_dropped: sum of ``numLateRecordsDropped`` over the window operators (cumulative).
        backpressure_ratio: ``backPressuredTimeMsPerSecond`` / 1000.
        operator_output_watermarks: each operator's ``currentOutputWatermark`` by metric name.
        kafka_offsets: a Kafka source reader's ``currentOffset`` per ``(topic, partition)``: the offset of
            the last record it handed on (``-1``: none yet; ``KafkaPartitionSplitRecords``).
        splits: the source's split-level watermark metrics by split id (Flink 2.1+; empty before).
    """

    subtask: int
    input_watermark: Watermark = field(default_factory=lambda: Watermark(None))
    output_watermark: Watermark = field(default_factory=lambda: Watermark(None))
    records_in: int | None = None
    records_out: int | None = None
    records_in_per_second: float | None = None
    records_out_per_second: float | None = None
    source_records_out: int | None = None
    source_idle_ms: int | None = None
    watermark_lag_ms: int | None = None
    pending_records: int | None = None
    late_records_dropped: int | None = None
    backpressure_ratio: float | None = None
    operator_output_watermarks: dict[str, Watermark] = field(default_factory=dict)
    kafka_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    splits: dict[str, SplitMetrics] = field(default_factory=dict)


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def subtask_metrics(values: Mapping[str, str], vertex: VertexInfo) -> dict[int, SubtaskMetrics]:
    """Group a vertex's ``?get=`` values by subtask (0 .. parallelism-1; every subtask appears, with
    unknowns where Flink reported nothing). An id of a subtask index at or above the parallelism is not
    read (the vertex has no such subtask); ``vertex.parallelism`` was checked when the vertex was parsed
    (:func:`check_parallelism`).

    The output watermark is the one of the operator matching the chain's last name (names compared on
    letters and digits, as the metric group sanitizes them); if no operator name matches, the output
    watermarks reported are all equal or it stays unknown.
    """
    out = {i: SubtaskMetrics(i) for i in range(vertex.parallelism)}
    source_key = _key(vertex.operator_names[0]) if vertex.name.startswith("Source:") else None
    for metric_id, raw in values.items():
        parts = _split_id(metric_id)
        if parts is None:
            _read_split_metric(out, metric_id, raw)
            continue
        index, operator, name = parts
        sub = out.get(index)
        if sub is None:
            continue
        if operator is None:
            if name == "numRecordsIn":
                sub.records_in = parse_long(raw)
            elif name == "numRecordsOut":
                sub.records_out = parse_long(raw)
            elif name == "numRecordsInPerSecond":
                sub.records_in_per_second = parse_double(raw)
            elif name == "numRecordsOutPerSecond":
                sub.records_out_per_second = parse_double(raw)
            elif name == "currentInputWatermark":
                sub.input_watermark = parse_watermark(raw)
            elif name == "backPressuredTimeMsPerSecond":
                ms = parse_double(raw)
                sub.backpressure_ratio = None if ms is None else min(max(ms / 1000.0, 0.0), 1.0)
            continue
        if name == "currentOutputWatermark":
            sub.operator_output_watermarks[operator] = parse_watermark(raw)
        elif name == "sourceIdleTime":
            sub.source_idle_ms = parse_long(raw)
        elif name == "watermarkLag":
            sub.watermark_lag_ms = parse_long(raw)
        elif name == "pendingRecords":
            pending = parse_long(raw)
            sub.pending_records = pending if pending is None or pending >= 0 else None
        elif name == "numLateRecordsDropped":
            sub.late_records_dropped = _add(sub.late_records_dropped, parse_long(raw))
        elif name == "numRecordsOut" and source_key is not None and _key(operator) == source_key:
            sub.source_records_out = parse_long(raw)
        elif name == KAFKA_OFFSET_METRIC and (where := kafka_partition_of(operator)) is not None:
            offset = parse_long(raw)
            if offset is not None and offset >= -1 and len(sub.kafka_offsets) < MAX_KAFKA_PARTITIONS:
                sub.kafka_offsets[where] = offset
    last = _key(vertex.operator_names[-1])
    for sub in out.values():
        marks = sub.operator_output_watermarks
        chosen = next((wm for op, wm in marks.items() if _key(op) == last), None)
        if chosen is None:
            chosen = next((wm for op, wm in marks.items() if last.startswith(_key(op)) and _key(op)), None)
        if chosen is None and marks and len(set(marks.values())) == 1:
            chosen = next(iter(marks.values()))
        if chosen is not None:
            sub.output_watermark = chosen
    return out


def _read_split_metric(out: dict[int, SubtaskMetrics], metric_id: str, raw: str) -> None:
    """Put one split-level watermark metric (:data:`SPLIT_METRICS`) into its subtask's ``splits`` (at most
    :data:`MAX_SPLITS_PER_SUBTASK` splits per subtask; other ids are left alone)."""
    parts = _split_metric(metric_id)
    if parts is None:
        return
    index, split, name = parts
    sub = out.get(index)
    if sub is None:
        return
    entry = sub.splits.get(split)
    if entry is None:
        if len(sub.splits) >= MAX_SPLITS_PER_SUBTASK:
            return
        entry = sub.splits[split] = SplitMetrics(split)
    if name == "currentWatermark":
        entry.watermark = parse_watermark(raw)
    else:
        ms = parse_double(raw)
        ms = None if ms is None else min(max(ms, 0.0), 1000.0)
        if name == "activeTimeMsPerSecond":
            entry.active_ms_per_s = ms
        elif name == "pausedTimeMsPerSecond":
            entry.paused_ms_per_s = ms
        else:
            entry.idle_ms_per_s = ms


@dataclass(frozen=True, slots=True)
class CheckpointStats:
    """``/jobs/<jid>/checkpoints`` (``CheckpointingStatistics``): counts since the job was submitted (every
    job start counts one failed trigger before the tasks run) and the latest completed/failed checkpoint.

    Attributes:
        total / completed / failed / in_progress / restored: the ``counts``.
        latest_completed_id / latest_state_size_bytes / latest_duration_ms / latest_completed_at_ms:
            the latest completed checkpoint (``state_size``, ``end_to_end_duration``,
            ``latest_ack_timestamp``), ``None`` before the first.
        latest_failed_at_ms / latest_failure_message: the latest failed checkpoint, if any.
    """

    total: int | None
    completed: int | None
    failed: int | None
    in_progress: int | None
    restored: int | None
    latest_completed_id: int | None = None
    latest_state_size_bytes: int | None = None
    latest_duration_ms: int | None = None
    latest_completed_at_ms: int | None = None
    latest_failed_at_ms: int | None = None
    latest_failure_message: str | None = None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_checkpoints(doc: Any, endpoint: str) -> CheckpointStats:
    """Parse ``/jobs/<jid>/checkpoints``.

    Raises:
        InputError: no ``counts`` object.
    """
    counts = _field(_expect(doc, dict, endpoint), "counts", endpoint, dict)
    latest = _obj(doc.get("latest"))
    completed = _obj(latest.get("completed"))
    failed = _obj(latest.get("failed"))
    message = failed.get("failure_message")
    return CheckpointStats(
        total=parse_long(counts.get("total")),
        completed=parse_long(counts.get("completed")),
        failed=parse_long(counts.get("failed")),
        in_progress=parse_long(counts.get("in_progress")),
        restored=parse_long(counts.get("restored")),
        latest_completed_id=parse_long(completed.get("id")),
        latest_state_size_bytes=parse_long(completed.get("state_size")),
        latest_duration_ms=parse_long(completed.get("end_to_end_duration")),
        latest_completed_at_ms=_time_ms(completed.get("latest_ack_timestamp")),
        latest_failed_at_ms=_time_ms(failed.get("failure_timestamp")),
        latest_failure_message=_display(str(message).strip().splitlines()[0][:300]) if str(message).strip() else None,
    )


@dataclass(frozen=True, slots=True)
class ExceptionEntry:
    """One root exception of ``/jobs/<jid>/exceptions`` (``exceptionHistory.entries``, newest first).

    Attributes:
        name: the exception class (``exceptionName``).
        message: the first line of the stack trace (class and message), at most 300 characters.
        timestamp_ms: when it happened (epoch ms), if given.
        task: the failing task (``taskName``), if given.
        root_cause: the innermost ``Caused by:`` line of the stack trace (what actually went wrong, e.g.
            the user function's exception under ``Recovery is suppressed by ...``), else ``message``.
    """

    name: str
    message: str
    timestamp_ms: int | None
    task: str | None
    root_cause: str = ""


def parse_exceptions(doc: Any, endpoint: str) -> list[ExceptionEntry]:
    """Parse ``/jobs/<jid>/exceptions`` into root exceptions, newest first.

    Raises:
        InputError: no ``exceptionHistory.entries`` list.
    """
    history = _field(_expect(doc, dict, endpoint), "exceptionHistory", endpoint, dict)
    entries = _field(history, "entries", f"{endpoint}: exceptionHistory", list)
    out: list[ExceptionEntry] = []
    for i, e in enumerate(entries):
        _expect(e, dict, f"{endpoint}: exceptionHistory.entries[{i}]", "entry")
        trace = _display(json_text(e.get("stacktrace")) or json_text(e.get("exceptionName")))
        first = trace.strip().splitlines()[0][:300] if trace.strip() else ""
        task = e.get("taskName")
        causes = [
            line.strip()[len("Caused by: ") :]
            for line in trace.splitlines()
            if line.strip().startswith("Caused by: ")
        ]
        out.append(
            ExceptionEntry(
                name=_display(json_text(e.get("exceptionName"))),
                message=first,
                timestamp_ms=_time_ms(e.get("timestamp")),
                task=_display(json_text(task)) or None,
                root_cause=(causes[-1] if causes else first)[:300],
            )
        )
    return out


def parse_backpressure(doc: Any, endpoint: str) -> dict[int, float]:
    """``/backpressure`` -> ``{subtask: ratio}`` (share of time back-pressured, 0-1); ``{}`` when Flink
    has no sample yet (``status`` ``deprecated``/``in-progress`` without subtasks).

    Raises:
        InputError: not a JSON object.
    """
    _expect(doc, dict, endpoint)
    out: dict[int, float] = {}
    subtasks: Sequence[Any] = doc.get("subtasks") or []
    for entry in subtasks:
        if isinstance(entry, dict):
            index, ratio = parse_long(entry.get("subtask")), parse_double(entry.get("ratio"))
            if index is not None and ratio is not None:
                out[index] = ratio
    return out
