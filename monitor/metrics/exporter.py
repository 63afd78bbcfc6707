"""Prometheus exporter: tidegauge's view of every job as metrics on ``/metrics``.

A custom ``prometheus_client`` collector renders the current state at scrape time (no background
updates, no stale label sets left behind). Metric names follow Prometheus conventions: base units
(seconds, bytes), ``_total`` for counters, ``_timestamp_seconds`` for points in time. Labels on every
job series: ``engine``, ``job_id``, ``job_name``, ``source``, ``partition``, ``subtask``, ``operator`` (empty
string where not applicable). No label or value ever contains a secret.

Metrics (the names :mod:`monitor.metrics.promrules` writes PromQL against):

==========================================================  =======  ==========================================
``tidegauge_watermark_timestamp_seconds``                    gauge    watermark in effect (absent when unknown)
``tidegauge_watermark_lag_seconds``                          gauge    scrape time minus watermark
``tidegauge_event_time_max_timestamp_seconds``               gauge    newest event time seen in the last batch
``tidegauge_input_rows_per_second``                          gauge    input rate of the last batch/poll
``tidegauge_input_rows_total``                               counter  rows read, summed over batches
``tidegauge_dropped_by_watermark_rows_total``                counter  rows dropped as late, summed over batches
``tidegauge_state_rows``                                     gauge    rows in state stores
``tidegauge_state_memory_bytes``                             gauge    state store memory
``tidegauge_batch_duration_seconds``                         gauge    last micro-batch duration
``tidegauge_consumer_lag_offsets``                           gauge    consumer lag in records
``tidegauge_consumer_lag_seconds``                           gauge    consumer lag as time
``tidegauge_source_idle_seconds``                            gauge    time the source/subtask has had no data
``tidegauge_backpressure_ratio``                             gauge    share of time back-pressured (Flink subtask)
``tidegauge_job_restarts_total``                             counter  restarts of the job (Flink ``numRestarts``)
``tidegauge_vertex_info``                                    gauge    1 per Flink vertex: ``operator`` (vertex id)
                                                                      -> ``vertex`` (its name)
``tidegauge_last_sample_timestamp_seconds``                  gauge    observation time of the newest sample
``tidegauge_alerts``                                         gauge    alerts by ``rule``, ``severity``, ``state``
``tidegauge_collector_poll_duration_seconds``                gauge    last poll duration by ``collector``/``target``
``tidegauge_collector_errors_total``                         counter  poll errors by ``collector``/``target``/``kind``
``tidegauge_target_up``                                      gauge    1 unless the last poll could not read the target at all
``tidegauge_notifications_sent_total``                       counter  notifications delivered, by ``receiver``
``tidegauge_notifications_failed_total``                     counter  notifications in a failed send
``tidegauge_notifications_retried_total``                    counter  failed notifications scheduled again
``tidegauge_notifications_given_up_total``                   counter  notifications given up
``tidegauge_outbox_depth``                                   gauge    notifications waiting, by ``receiver``
``tidegauge_outbox_oldest_age_seconds``                      gauge    age of the oldest waiting one (0: none)
``tidegauge_receiver_consecutive_failures``                  gauge    failed sends since the last success
``tidegauge_fleet_targets_held``                             gauge    targets this ``instance`` holds (a fleet)
==========================================================  =======  ==========================================

Delivery counters count since the process started (Prometheus's ``rate()`` handles restarts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from monitor.metrics.latest import LatestSamples, SeriesKey
from monitor.model import ErrorKind, Sample

__all__ = ["JOB_LABELS", "AlertCount", "CollectorStat", "DeliveryStat", "TidegaugeCollector"]

JOB_LABELS = ("engine", "job_id", "job_name", "source", "partition", "subtask", "operator")


@dataclass(frozen=True, slots=True)
class AlertCount:
    """Number of alerts of one rule in one severity and state."""

    rule: str
    severity: str
    state: str
    count: int


@dataclass(frozen=True, slots=True)
class CollectorStat:
    """Health of one polled target.

    Attributes:
        errors_total: all collector errors since start.
        errors_by_kind: the same by :class:`monitor.model.ErrorKind` value (``line``, ``field``, ``file``,
            ``unreachable``, ...): the ``kind`` label of ``tidegauge_collector_errors_total`` (every kind is
            exported, from 0).
    """

    collector: str
    target: str
    up: bool
    last_poll_duration_seconds: float
    errors_total: int
    errors_by_kind: Mapping[str, int] = field(default_factory=dict)


_ERROR_KINDS = tuple(kind.value for kind in ErrorKind)


@dataclass(frozen=True, slots=True)
class DeliveryStat:
    """Delivery to one receiver: counters since start (notifications), the outbox backlog, failures in a row.

    Attributes:
        oldest_pending_at: creation time of the oldest waiting notification (``None``: nothing waits).
    """

    receiver: str
    sent: int
    failed: int
    retried: int
    given_up: int
    depth: int
    oldest_pending_at: datetime | None
    consecutive_failures: int


def _labels(key: SeriesKey, s: Sample) -> list[str]:
    sc = key.scope
    return [
        key.engine.value,
        key.job_id,
        s.job.name or "",
        sc.source or "",
        "" if sc.partition is None else str(sc.partition),
        "" if sc.subtask is None else str(sc.subtask),
        sc.operator or "",
    ]


class TidegaugeCollector(Collector):
    """Renders :class:`LatestSamples`, alert counts and collector stats at scrape time.

    Args:
        latest: the daemon's newest-sample registry.
        now: clock callable giving aware UTC "now" (injected by the composition root).
        alerts: callable returning the current alert counts.
        collectors: callable returning the health of each target.
        deliveries: callable returning the delivery state of each receiver.
    """

    def __init__(
        self,
        latest: LatestSamples,
        now: Callable[[], datetime],
        alerts: Callable[[], Iterable[AlertCount]] = lambda: (),
        collectors: Callable[[], Iterable[CollectorStat]] = lambda: (),
        deliveries: Callable[[], Iterable[DeliveryStat]] = lambda: (),
        held: Callable[[], Mapping[str, int]] = lambda: {},
    ) -> None:
        self._held = held
        self._latest = latest
        self._now = now
        self._alerts = alerts
        self._collectors = collectors
        self._deliveries = deliveries

    def describe(self) -> list[Metric]:
        """Empty: metrics are only known at scrape time (avoids a collect() at registration)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield every metric family (see the module docstring)."""
        now_s = self._now().timestamp()

        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=JOB_LABELS)

        wm = gauge("tidegauge_watermark_timestamp_seconds", "Event-time watermark in effect, Unix seconds.")
        wm_lag = gauge("tidegauge_watermark_lag_seconds", "Scrape time minus the watermark, seconds.")
        et_max = gauge("tidegauge_event_time_max_timestamp_seconds", "Newest event time in the last batch.")
        rate = gauge("tidegauge_input_rows_per_second", "Input rows per second of the last batch or poll.")
        rows_total = CounterMetricFamily(
            "tidegauge_input_rows", "Input rows read, summed over batches.", labels=JOB_LABELS
        )
        dropped_total = CounterMetricFamily(
            "tidegauge_dropped_by_watermark_rows",
            "Rows dropped as later than the watermark.",
            labels=JOB_LABELS,
        )
        state_rows = gauge("tidegauge_state_rows", "Rows held in state stores.")
        state_bytes = gauge("tidegauge_state_memory_bytes", "Memory used by state stores, bytes.")
        batch_s = gauge("tidegauge_batch_duration_seconds", "Duration of the last micro-batch, seconds.")
        lag_off = gauge("tidegauge_consumer_lag_offsets", "Consumer lag in records (offsets).")
        lag_s = gauge("tidegauge_consumer_lag_seconds", "Consumer lag as time, seconds.")
        idle = gauge("tidegauge_source_idle_seconds", "Time the source or subtask has had no data, seconds.")
        last = gauge("tidegauge_last_sample_timestamp_seconds", "Observation time of the newest sample.")
        pressure = gauge("tidegauge_backpressure_ratio", "Share of time the subtask was back-pressured, 0-1.")
        restarts = CounterMetricFamily(
            "tidegauge_job_restarts", "Restarts of the job (Flink numRestarts).", labels=JOB_LABELS
        )
        vertex_info = GaugeMetricFamily(
            "tidegauge_vertex_info",
            "1 per Flink job vertex: its id (operator label) and name (vertex label).",
            labels=("engine", "job_id", "job_name", "operator", "vertex"),
        )
        vertices_seen: set[tuple[str, str]] = set()

        for key, st in self._latest.snapshot():
            s = st.latest
            lv = _labels(key, s)
            last.add_metric(lv, s.observed_at.timestamp())
            if s.watermark is not None:
                wm.add_metric(lv, s.watermark.timestamp())
                wm_lag.add_metric(lv, now_s - s.watermark.timestamp())
            if s.event_time_max is not None:
                et_max.add_metric(lv, s.event_time_max.timestamp())
            if s.input_rows_per_second is not None:
                rate.add_metric(lv, s.input_rows_per_second)
            if s.num_input_rows is not None or st.input_rows_total:
                rows_total.add_metric(lv, st.input_rows_total)
            if s.dropped_by_watermark is not None or st.dropped_by_watermark_total:
                dropped_total.add_metric(lv, st.dropped_by_watermark_total)
            if s.state_rows_total is not None:
                state_rows.add_metric(lv, s.state_rows_total)
            if s.state_memory_bytes is not None:
                state_bytes.add_metric(lv, s.state_memory_bytes)
            if s.batch_duration_ms is not None:
                batch_s.add_metric(lv, s.batch_duration_ms / 1000.0)
            if s.lag_offsets is not None:
                lag_off.add_metric(lv, s.lag_offsets)
            if s.lag_seconds is not None:
                lag_s.add_metric(lv, s.lag_seconds)
            if s.idle_ms is not None:
                idle.add_metric(lv, s.idle_ms / 1000.0)
            if s.backpressure_ratio is not None:
                pressure.add_metric(lv, s.backpressure_ratio)
            if s.restart_count is not None:
                restarts.add_metric(lv, s.restart_count)
            vertex = s.extra.get("vertex")
            if key.scope.operator is not None and isinstance(vertex, str):
                seen = (key.job_id, key.scope.operator)
                if seen not in vertices_seen:
                    vertices_seen.add(seen)
                    vertex_info.add_metric(
                        [key.engine.value, key.job_id, s.job.name or "", key.scope.operator, vertex], 1
                    )
        yield from (wm, wm_lag, et_max, rate, rows_total, dropped_total, state_rows, state_bytes, batch_s)
        yield from (lag_off, lag_s, idle, pressure, restarts, vertex_info, last)

        alerts = GaugeMetricFamily(
            "tidegauge_alerts", "Alerts by rule, severity and state.", labels=("rule", "severity", "state")
        )
        for a in self._alerts():
            alerts.add_metric([a.rule, a.severity, a.state], a.count)
        yield alerts

        up = GaugeMetricFamily(
            "tidegauge_target_up",
            "1 if the last poll of the target succeeded.",
            labels=("collector", "target"),
        )
        dur = GaugeMetricFamily(
            "tidegauge_collector_poll_duration_seconds",
            "Duration of the last poll.",
            labels=("collector", "target"),
        )
        errs = CounterMetricFamily(
            "tidegauge_collector_errors",
            "Collector errors (quarantined lines, documents, files; unreadable targets) by kind.",
            labels=("collector", "target", "kind"),
        )
        for c in self._collectors():
            up.add_metric([c.collector, c.target], 1.0 if c.up else 0.0)
            dur.add_metric([c.collector, c.target], c.last_poll_duration_seconds)
            for kind in _ERROR_KINDS:  # every kind, from 0 (Prometheus: initialise known label values)
                count = c.errors_by_kind.get(kind, 0)
                errs.add_metric([c.collector, c.target, kind], count)
        yield from (up, dur, errs)

        by = ("receiver",)
        counters = {
            "sent": CounterMetricFamily("tidegauge_notifications_sent", "Notifications delivered.", labels=by),
            "failed": CounterMetricFamily(
                "tidegauge_notifications_failed", "Notifications in a send that failed.", labels=by
            ),
            "retried": CounterMetricFamily(
                "tidegauge_notifications_retried", "Failed notifications scheduled for another attempt.", labels=by
            ),
            "given_up": CounterMetricFamily("tidegauge_notifications_given_up", "Notifications given up.", labels=by),
        }
        depth = GaugeMetricFamily("tidegauge_outbox_depth", "Notifications waiting in the outbox.", labels=by)
        age = GaugeMetricFamily(
            "tidegauge_outbox_oldest_age_seconds", "Age of the oldest waiting notification (0: none).", labels=by
        )
        streak = GaugeMetricFamily(
            "tidegauge_receiver_consecutive_failures", "Failed sends since the last delivery.", labels=by
        )
        for d in self._deliveries():
            for name, family in counters.items():
                family.add_metric([d.receiver], getattr(d, name))
            depth.add_metric([d.receiver], d.depth)
            oldest = d.oldest_pending_at
            age.add_metric([d.receiver], max(0.0, now_s - oldest.timestamp()) if oldest is not None else 0.0)
            streak.add_metric([d.receiver], d.consecutive_failures)
        yield from counters.values()
        yield from (depth, age, streak)
        held = GaugeMetricFamily(
            "tidegauge_fleet_targets_held", "Targets whose lease this instance holds.", labels=("instance",)
        )
        for instance, count in sorted(self._held().items()):
            held.add_metric([instance], count)
        yield held
