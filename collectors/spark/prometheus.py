"""Spark driver ``/metrics/prometheus`` (PrometheusServlet) -> :class:`monitor.model.Sample` (kind ``GAUGE``).

With ``spark.sql.streaming.metricsEnabled=true`` every running streaming query registers a Dropwizard
source ``spark.streaming.<queryName>`` (Spark's ``MetricsReporter``) with six gauges computed from the
query's *last* ``StreamingQueryProgress``; the driver's PrometheusServlet
(``spark.metrics.conf.*.sink.prometheusServlet.class=org.apache.spark.metrics.sink.PrometheusServlet``)
exports each one twice, without ``# TYPE`` lines::

    metrics_<namespace>_driver_spark_streaming_<queryName>_<gauge>_Number{type="gauges"} <value>
    metrics_<namespace>_driver_spark_streaming_<queryName>_<gauge>_Value{type="gauges"} <value>

``<namespace>`` is ``spark.metrics.namespace`` or, by default, the application id; every character that is
not a letter or digit becomes ``_`` (``local-1795952122245`` -> ``local_1795952122245``, app name
``exp-metrics`` -> ``exp_metrics``), so neither the namespace nor the query name can be recovered exactly
and either may contain ``_``. The name is therefore split at the first ``_driver_spark_streaming_`` (or at
the namespace given to the collector) and the gauge is matched *from the right* against the six known
suffixes, so a query named ``wm_metrics`` or ``x_latency`` parses correctly.

Gauge -> sample field (``MetricsReporter`` in Spark's ``sql/core/.../streaming``):

==========================  ===================================  ==========================================
gauge                       Spark source                         sample field
==========================  ===================================  ==========================================
``eventTime_watermark``     ``eventTime["watermark"]`` as ms     ``watermark`` (``0`` -> unknown, see below)
``inputRate_total``         ``inputRowsPerSecond``               ``input_rows_per_second``
``processingRate_total``    ``processedRowsPerSecond``           ``processed_rows_per_second``
``latency``                 ``durationMs["triggerExecution"]``   ``batch_duration_ms`` (``0`` -> unknown)
``states_rowsTotal``        sum of ``numRowsTotal``              ``state_rows_total``
``states_usedBytes``        sum of ``memoryUsedBytes``           ``state_memory_bytes``
==========================  ===================================  ==========================================

``0`` handling: ``MetricsReporter`` answers ``0`` for the watermark when the progress has no watermark key
*and* the first batch of a watermarked query reports ``1970-01-01T00:00:00.000Z`` (see
``tests/fixtures/spark/real-4.3.0/prometheus_streaming_gauges_timeline.txt``: ``0`` in the idle scrape
and after data batch 0, a real watermark only after the following no-data batch). Epoch 0 is never a real
event-time watermark, so it is reported as unknown (``None``), not as 1970. Likewise ``latency`` is ``0``
when ``triggerExecution`` is missing from the progress (it disappears when the UI statistics page is
opened), so ``0`` -> unknown. The rates and state sizes are kept as reported (``0`` is a real value there,
though Spark also answers ``0`` before the first progress).

What this source cannot give (use the event log or the listener for these):
- rows dropped by the watermark (``numRowsDroppedByWatermark``): no gauge exists -> ``dropped_by_watermark``
  stays unknown;
- per-source detail (input rows and rates per source, Kafka ``maxOffsetsBehindLatest``): only totals;
- the batch id (``batch_id`` is ``None``), the input row count of a batch, event-time min/max/avg;
- the query id and run id: the metric names only carry the (sanitized) query *name*, so ``JobRef.job_id``
  is the query name unless the caller maps names to ids (``query_ids``); give queries a name;
- anything after the query stops: its gauges vanish from the scrape (the timeline's last scrape), so an
  absent query means "not running here", never zero;
- values between scrapes: a gauge shows the last progress only, batches in between are not seen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from collectors.base import PollsOnce
from collectors.http import DEFAULT_READ_LIMITS, HttpFailure, ReadLimits, check_url, get_text, safe_url
from monitor.errors import InputError
from monitor.model import (
    INT64_MAX,
    INT64_MIN,
    CollectorError,
    Engine,
    ErrorKind,
    JobRef,
    PollResult,
    Sample,
    SampleKind,
    ms_to_datetime,
)

__all__ = [
    "COLLECTOR_NAME",
    "GAUGES",
    "RAW_KIND",
    "QueryGauges",
    "SparkPrometheusCollector",
    "gauges_to_sample",
    "parse_streaming_gauges",
    "sanitize_metric_part",
]

#: ``Sample.collector`` of this collector's samples.
COLLECTOR_NAME = "spark-prometheus"
#: ``kind`` of the raw documents this collector keeps (the streaming gauges of one scrape).
RAW_KIND = "spark-prometheus-streaming-gauges"

#: The six gauges of Spark's ``MetricsReporter``, as they appear after sanitizing (``-`` -> ``_``).
GAUGES = (
    "eventTime_watermark",
    "inputRate_total",
    "processingRate_total",
    "latency",
    "states_rowsTotal",
    "states_usedBytes",
)

_SANITIZE_RE = re.compile(r"[^a-zA-Z0-9]")
_GAUGE_ALTERNATION = "|".join(GAUGES)


def sanitize_metric_part(text: str) -> str:
    """What Spark's PrometheusServlet makes of a metric-name part: every non-alphanumeric char -> ``_``."""
    return _SANITIZE_RE.sub("_", text)


def _name_re(namespace: str | None) -> re.Pattern[str]:
    ns = re.escape(sanitize_metric_part(namespace)) if namespace is not None else ".+?"
    return re.compile(
        rf"^metrics_(?P<ns>{ns})_driver_spark_streaming_(?P<query>.+)_(?P<gauge>{_GAUGE_ALTERNATION})"
        r"_(?P<suffix>Number|Value)$"
    )


@dataclass(frozen=True, slots=True)
class QueryGauges:
    """The streaming gauges of one query found in one scrape.

    Attributes:
        namespace: the sanitized metrics namespace (app id or ``spark.metrics.namespace``).
        query: the sanitized query name (as in the metric name).
        values: gauge name (one of :data:`GAUGES`) -> value as exported (``_Value`` preferred over
            ``_Number``; they are equal in every recorded scrape).
        metric_names: gauge name -> the full metric name the value came from (for raw documents).
    """

    namespace: str
    query: str
    values: dict[str, float] = field(default_factory=dict)
    metric_names: dict[str, str] = field(default_factory=dict)


def parse_streaming_gauges(text: str, *, namespace: str | None = None, where: str = "scrape") -> list[QueryGauges]:
    """Find the streaming-query gauges in a Prometheus exposition text.

    Args:
        text: the body of ``GET /metrics/prometheus`` on the Spark driver.
        namespace: ``spark.metrics.namespace`` / app id as configured (sanitized here); ``None`` splits at
            the first ``_driver_spark_streaming_``.
        where: names the input in error messages (a URL or file name).

    Returns:
        One :class:`QueryGauges` per (namespace, query), in order of first appearance; other metrics are
        ignored. A body without streaming gauges (no query running, or ``metricsEnabled`` off) gives ``[]``.

    Raises:
        InputError: the text is not Prometheus exposition format (e.g. an HTML error page), or a streaming
            gauge holds an integer too large for a float.
    """
    pattern = _name_re(namespace)
    found: dict[tuple[str, str], QueryGauges] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser library's own errors: ValueError, and others on odd input
        raise InputError(f"{where}: not Prometheus text exposition format: {_first_line(str(exc))}") from None
    for family in families:
        for sample in family.samples:
            match = pattern.match(sample.name)
            if match is None or sample.labels.get("type", "gauges") != "gauges":
                continue
            try:
                value = float(sample.value)  # the parser gives an int for a value written as one
            except OverflowError:
                raise InputError(
                    f"{where}: metric {sample.name}: value out of range ({len(str(sample.value))} digits)"
                ) from None
            key = (match["ns"], match["query"])
            entry = found.setdefault(key, QueryGauges(namespace=key[0], query=key[1]))
            gauge = match["gauge"]
            if match["suffix"] == "Value" or gauge not in entry.values:
                entry.values[gauge] = value
                entry.metric_names[gauge] = sample.name
    return list(found.values())


def _json_value(value: float) -> float | str:
    """A gauge value for the raw document: NaN and infinities (real Spark gauges, e.g. a rate before the
    first batch) as Prometheus spells them, ``"NaN"``/``"+Inf"``/``"-Inf"``, since JSON has no such numbers."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return value


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line[:200]


def _opt_float(values: Mapping[str, float], gauge: str) -> float | None:
    value = values.get(gauge)
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value


def _opt_int(gauges: QueryGauges, gauge: str, where: str, *, zero_is_unknown: bool = False) -> int | None:
    value = _opt_float(gauges.values, gauge)
    if value is None:
        return None
    if zero_is_unknown and value == 0:
        return None
    if not INT64_MIN <= value <= INT64_MAX:
        raise InputError(
            f"{where}: metric {gauges.metric_names.get(gauge, gauge)}: {value!r} is out of range "
            "(a signed 64-bit integer)"
        )
    return int(value)


def gauges_to_sample(
    gauges: QueryGauges,
    *,
    observed_at: datetime,
    collector: str = COLLECTOR_NAME,
    app_id: str | None = None,
    query_ids: Mapping[str, str] | None = None,
    where: str = "scrape",
) -> Sample:
    """One ``GAUGE`` sample for one query's gauges (mapping and ``0`` rules: see the module docstring).

    Args:
        gauges: from :func:`parse_streaming_gauges`.
        observed_at: the scrape time (aware UTC); the gauges carry no time of their own.
        collector: copied into ``Sample.collector``.
        app_id: the Spark application id, if the caller knows it (the namespace is only its sanitized form).
        query_ids: sanitized query name -> streaming query id; unmapped names use the name as ``job_id``.
        where: names the scrape in error messages (the URL without secrets).

    Raises:
        InputError: a gauge the model cannot hold (a count beyond int64, a watermark outside the supported
            time range, e.g. ``1e20`` ms); the message names the metric.
    """
    job_id = (query_ids or {}).get(gauges.query, gauges.query)
    values = gauges.values
    watermark_ms = _opt_int(gauges, "eventTime_watermark", where, zero_is_unknown=True)
    try:
        watermark = ms_to_datetime(watermark_ms, f"{where}: metric {gauges.metric_names.get('eventTime_watermark')}")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return Sample(
        job=JobRef(engine=Engine.SPARK, job_id=job_id, name=gauges.query, app_id=app_id),
        observed_at=observed_at,
        kind=SampleKind.GAUGE,
        collector=collector,
        watermark=watermark,
        input_rows_per_second=_opt_float(values, "inputRate_total"),
        processed_rows_per_second=_opt_float(values, "processingRate_total"),
        batch_duration_ms=_opt_int(gauges, "latency", where, zero_is_unknown=True),
        state_rows_total=_opt_int(gauges, "states_rowsTotal", where),
        state_memory_bytes=_opt_int(gauges, "states_usedBytes", where),
        extra={"metrics_namespace": gauges.namespace},
    )


class SparkPrometheusCollector(PollsOnce):
    """Polls one Spark driver's ``/metrics/prometheus`` and returns one ``GAUGE`` sample per running query.

    Implements :class:`collectors.base.Collector`. Every failure (connection refused, timeout, HTTP 404
    because the PrometheusServlet sink is not configured, a body that is not Prometheus text) is returned
    as a :class:`monitor.model.CollectorError` entry, never raised.

    Args:
        url: the full scrape URL, e.g. ``http://driver:4040/metrics/prometheus``.
        client: the HTTP client (built by :func:`collectors.http.make_client`; owned by the caller).
        namespace: ``spark.metrics.namespace`` when set (``None``: split at ``_driver_spark_streaming_``).
        app_id: Spark application id to put into ``JobRef.app_id``.
        query_ids: sanitized query name -> streaming query id (to join with event-log/listener samples).
        name: collector name (``Sample.collector``).
        limits: the bounds of the scrape (:class:`collectors.http.ReadLimits`).

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL.
    """

    def __init__(
        self,
        url: str,
        client: httpx.Client,
        *,
        namespace: str | None = None,
        app_id: str | None = None,
        query_ids: Mapping[str, str] | None = None,
        name: str = COLLECTOR_NAME,
        limits: ReadLimits = DEFAULT_READ_LIMITS,
    ) -> None:
        self.url = check_url(url, "Spark Prometheus scrape URL")
        self.name = name
        self._client = client
        self._namespace = namespace
        self._app_id = app_id
        self._query_ids = dict(query_ids or {})
        self._limits = limits

    def poll(self, now: datetime) -> PollResult:
        """Scrape once; ``now`` (aware UTC, the tick's time) becomes each sample's ``observed_at``."""
        body = get_text(self._client, self.url, self._limits, self._limits.poll_deadline())
        if isinstance(body, HttpFailure):
            return PollResult(errors=(body.to_error(self.name, safe_url(self.url), now),))
        return self.read_body(body, now)

    def read_body(self, body: str, now: datetime) -> PollResult:
        """What :meth:`poll` makes of a scrape body (never raises): one sample per query, an
        ``unreachable`` error for a body that is not Prometheus text, a ``field`` error per query with a
        gauge the model cannot hold."""
        target = safe_url(self.url)
        try:
            found = parse_streaming_gauges(body, namespace=self._namespace, where=target)
        except InputError as exc:
            error = CollectorError(self.name, target, str(exc), now, retryable=False, kind=ErrorKind.UNREACHABLE)
            return PollResult(errors=(error,))
        samples: list[Sample] = []
        errors: list[CollectorError] = []
        raw: list[tuple[JobRef, datetime, str, dict[str, Any]]] = []
        for gauges in found:
            try:
                sample = gauges_to_sample(
                    gauges,
                    observed_at=now,
                    collector=self.name,
                    app_id=self._app_id,
                    query_ids=self._query_ids,
                    where=target,
                )
            except (InputError, ValueError) as exc:  # one query's bad gauge: the other queries are kept
                errors.append(CollectorError(self.name, target, str(exc), now, retryable=True, kind=ErrorKind.FIELD))
                continue
            samples.append(sample)
            document = {gauges.metric_names[g]: _json_value(v) for g, v in gauges.values.items()}
            raw.append((sample.job, now, RAW_KIND, {"url": target, "gauges": document}))
        return PollResult(samples=tuple(samples), errors=tuple(errors), raw=tuple(raw))
