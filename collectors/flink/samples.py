"""Flink samples from parsed subtask metrics: shared by the REST collector and the Prometheus-reporter
collector, so both emit the same samples for the same job (one implementation of the counters between
polls, the idle clock and the job aggregate).

:func:`running_job_samples` turns one poll of a running job (its vertices and each subtask's
:class:`~collectors.flink.responses.SubtaskMetrics`) into the per-subtask and job samples described in
:mod:`collectors.flink.collector`; :class:`Counters` carries a job's counters from poll to poll.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from collectors.flink.responses import SplitMetrics, SubtaskMetrics, VertexInfo, kafka_split_of
from monitor.model import (
    INT64_MAX,
    INT64_MIN,
    JobRef,
    Sample,
    SampleKind,
    Scope,
    datetime_to_ms,
    ms_to_datetime,
)

__all__ = ["Counters", "JobFigures", "is_source_vertex", "running_job_samples", "subtask_sample"]


@dataclass(slots=True)
class _Counter:
    value: int
    changed_at_ms: int | None  # None: unknown


@dataclass(slots=True)
class Counters:
    """A job's record and late-drop counters from the previous poll, by (vertex id, subtask)."""

    activity: dict[tuple[str, int], _Counter] = field(default_factory=dict)
    late: dict[tuple[str, int], int] = field(default_factory=dict)
    #: every value each vertex served at the previous poll (by vertex id), to tell a stale metric store
    previous: dict[str, dict[int, SubtaskMetrics]] = field(default_factory=dict)
    #: when the previous poll was made (epoch ms), ``None`` before the first
    polled_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class JobFigures:
    """Job-level figures of one poll: ``numRestarts``, failed checkpoints, the latest checkpoint's state
    size (bytes), when the current attempt began running (epoch ms) and the job sample's ``extra``."""

    restarts: int | None = None
    checkpoints_failed: int | None = None
    state_bytes: int | None = None
    running_since_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def running_job_samples(
    ref: JobRef,
    per_vertex: list[tuple[VertexInfo, dict[int, SubtaskMetrics]]],
    complete: bool,
    counters: Counters,
    figures: JobFigures,
    now: datetime,
    collector: str,
    store_lags: bool = False,
) -> list[Sample]:
    """The subtask samples of every vertex, then the job sample (``complete``: every vertex was read, so
    the job watermark can be known).

    ``store_lags``: the values come from a store refreshed in the background of the requests that read it
    (the REST API's ``MetricStore``, fetched by ``MetricFetcherImpl`` at most every
    ``metrics.fetcher.update-interval``), so a poll may read values fetched around the previous poll. A
    counter unchanged since it was last seen moving is then known quiet only up to the previous poll (the
    fetch its requests triggered has landed by now), not up to this one: the quiet time lags one poll and
    is never longer than it was. Without it (a reporter scraped live) it counts up to ``now``.
    """
    out: list[Sample] = []
    now_ms = datetime_to_ms(now)
    assert now_ms is not None
    quiet_until_ms = counters.polled_at_ms if store_lags and counters.polled_at_ms is not None else now_ms
    counters.polled_at_ms = now_ms
    # Flink's REST metric store refreshes asynchronously (MetricFetcherImpl: a request triggers a fetch
    # in the background and is answered from the store as it is), and each vertex is a request of its own,
    # so within one poll one vertex can be served the new fetch and another the old one. A vertex of which
    # not one value changed since the previous poll was not refreshed in between: nothing is known about
    # that time for it (its record and late-drop deltas and its quiet clock stay unknown, its counters are
    # kept as they were). A source that truly has no records still moves: its sourceIdleTime grows.
    stale_vertices: set[str] = set()
    for vertex, subs in per_vertex:
        if subs and counters.previous.get(vertex.id) == subs:
            stale_vertices.add(vertex.id)
        counters.previous[vertex.id] = subs
    stale = bool(per_vertex) and len(stale_vertices) == len(per_vertex)
    unknown = Counters()  # a throw-away for stale vertices: first-sight rules (a counter at 0 since the attempt began)
    rows_total: int | None = 0
    late_total: int | None = 0
    late_known = False  # no window operator anywhere: the job's late drops are unknown, not 0
    rate_total: float | None = 0.0
    seen_any_source = False
    for vertex, subs in per_vertex:
        is_source = is_source_vertex(vertex, subs)
        for sub in subs.values():
            state = unknown if vertex.id in stale_vertices else counters
            sample = subtask_sample(
                ref, vertex, sub, is_source, state, now, quiet_until_ms, figures.running_since_ms, collector
            )
            out.append(sample)
            if sub.late_records_dropped is not None:
                late_known = True
            if sample.dropped_by_watermark is not None and late_total is not None:
                late_total += sample.dropped_by_watermark
            elif sub.late_records_dropped is not None:
                late_total = None
            if is_source:
                seen_any_source = True
                rows_total = (
                    None
                    if rows_total is None or sample.num_input_rows is None
                    else (rows_total + sample.num_input_rows)
                )
                rate_total = (
                    None
                    if rate_total is None or sample.input_rows_per_second is None
                    else (rate_total + sample.input_rows_per_second)
                )
    # sums of values each in bounds may not be (two rates of 1e308, deltas near int64's maximum): unknown
    rows_total = _int64_or_none(rows_total)
    late_total = _int64_or_none(late_total)
    if rate_total is not None and not math.isfinite(rate_total):
        rate_total = None
    job_wm = None
    if per_vertex and complete:
        last_vertex, last_subs = per_vertex[-1]
        marks = [s.input_watermark.epoch_ms for s in last_subs.values()]
        if not is_source_vertex(last_vertex, last_subs) and marks and all(m is not None for m in marks):
            job_wm = ms_to_datetime(min(m for m in marks if m is not None))
    out.append(
        Sample(
            ref,
            now,
            SampleKind.GAUGE,
            collector,
            watermark=job_wm,
            num_input_rows=rows_total if seen_any_source else None,
            input_rows_per_second=rate_total if seen_any_source else None,
            dropped_by_watermark=late_total if late_known else None,
            restart_count=figures.restarts,
            checkpoints_failed=figures.checkpoints_failed,
            state_memory_bytes=figures.state_bytes,
            extra=_job_extra(figures.extra, stale, [v.name for v, _ in per_vertex if v.id in stale_vertices]),
        )
    )
    return out


def _job_extra(extra: dict[str, Any], stale: bool, stale_names: list[str]) -> dict[str, Any]:
    """The job sample's ``extra``: ``stale_metrics`` when no vertex was refreshed since the previous poll,
    else ``stale_vertices`` (names) when some were not."""
    if stale:
        return {**extra, "stale_metrics": True}
    if stale_names:
        return {**extra, "stale_vertices": stale_names}
    return extra


def subtask_sample(
    ref: JobRef,
    vertex: VertexInfo,
    sub: SubtaskMetrics,
    is_source: bool,
    state: Counters,
    now: datetime,
    quiet_until_ms: int,
    running_since_ms: int | None,
    collector: str,
) -> Sample:
    """One subtask's sample (see :mod:`collectors.flink.collector` for the fields); updates ``state``.

    ``quiet_until_ms`` (epoch ms): how far the values are known to be current: a record counter that has
    not moved is quiet from when it last moved until then (``now``, or the previous poll for a lagging
    store: :func:`running_job_samples`).
    """
    now_ms = datetime_to_ms(now)
    assert now_ms is not None
    key = (vertex.id, sub.subtask)
    activity = sub.records_out if is_source else sub.records_in
    rows_delta: int | None = None
    quiet_ms: int | None = None
    if activity is not None:
        prev = state.activity.get(key)
        if prev is None:
            # a counter still at 0 has not moved since the attempt started running; otherwise it moved
            # at some time up to now (a lower bound of the quiet time from here on)
            changed = running_since_ms if activity == 0 else now_ms
            state.activity[key] = _Counter(activity, changed)
        else:
            rows_delta = _int64_or_none(activity - prev.value if activity >= prev.value else activity)
            if rows_delta:
                prev.changed_at_ms = now_ms
            prev.value = activity
            changed = prev.changed_at_ms
        if changed is not None:
            quiet_ms = max(0, quiet_until_ms - changed)
    idle_ms = _max_known(sub.source_idle_ms, quiet_ms)
    late_delta: int | None = None
    if sub.late_records_dropped is not None:
        prev_late = state.late.get(key)
        if prev_late is not None:
            late_delta = _int64_or_none(
                sub.late_records_dropped - prev_late
                if sub.late_records_dropped >= prev_late
                else sub.late_records_dropped
            )
        state.late[key] = sub.late_records_dropped
    own = sub.output_watermark if is_source else sub.input_watermark
    rate = sub.records_out_per_second if is_source else sub.records_in_per_second
    extra: dict[str, Any] = {
        "vertex": vertex.name,
        "parallelism": vertex.parallelism,
        "input_watermark_ms": sub.input_watermark.epoch_ms,
        "output_watermark_ms": sub.output_watermark.epoch_ms,
        "source_idle_ms": sub.source_idle_ms,
        "late_records_dropped": sub.late_records_dropped,
        "records_in": sub.records_in,
        "records_out": sub.records_out,
    }
    if sub.watermark_lag_ms is not None:
        extra["watermark_lag_ms"] = sub.watermark_lag_ms
    if sub.kafka_offsets:
        # the Kafka source reader's position: ``rules.future`` takes the offsets read between two polls
        extra["kafka_offsets"] = [
            {"topic": topic, "partition": part, "offset": offset}
            for (topic, part), offset in sorted(sub.kafka_offsets.items())
        ]
    if sub.splits:
        extra["splits"] = [split_extra(split) for _, split in sorted(sub.splits.items())]
    return Sample(
        ref,
        now,
        SampleKind.GAUGE,
        collector,
        scope=Scope(source=vertex.name if is_source else None, subtask=sub.subtask, operator=vertex.id),
        watermark=ms_to_datetime(own.epoch_ms),
        watermark_end_of_input=True if own.end_of_input else None,
        num_input_rows=rows_delta,
        input_rows_per_second=rate,
        dropped_by_watermark=late_delta,
        lag_offsets=sub.pending_records,
        idle_ms=idle_ms,
        backpressure_ratio=sub.backpressure_ratio,
        extra=extra,
    )


def split_extra(split: SplitMetrics) -> dict[str, Any]:
    """One split of ``Sample.extra["splits"]`` (what ``rules.splits`` reads): ``{"split": id, "topic",
    "partition"`` (Kafka splits; else ``None``), ``"watermark_ms"`` (epoch ms, ``None``: none yet),
    ``"active_ms_per_s"``, ``"paused_ms_per_s"``, ``"idle_ms_per_s"`` (0-1000, ``None``: not reported)}."""
    where = kafka_split_of(split.split)
    return {
        "split": split.split,
        "topic": where[0] if where else None,
        "partition": where[1] if where else None,
        "watermark_ms": split.watermark.epoch_ms,
        "active_ms_per_s": split.active_ms_per_s,
        "paused_ms_per_s": split.paused_ms_per_s,
        "idle_ms_per_s": split.idle_ms_per_s,
    }


def _int64_or_none(value: int | None) -> int | None:
    return value if value is None or INT64_MIN <= value <= INT64_MAX else None


def _max_known(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def is_source_vertex(vertex: VertexInfo, subs: dict[int, SubtaskMetrics]) -> bool:
    """A source vertex has no input channels: its tasks report no ``currentInputWatermark`` (the
    ``/watermarks`` endpoint answers ``[]``) and Flink names its first operator ``Source: ...``."""
    if vertex.name.startswith("Source:"):
        return True
    return (
        bool(subs)
        and all(
            s.input_watermark.epoch_ms is None
            and not s.input_watermark.end_of_input
            and s.records_in in (None, 0)
            for s in subs.values()
        )
        and all(s.source_idle_ms is not None for s in subs.values())
    )
