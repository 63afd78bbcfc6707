"""Spark driver PrometheusServlet collector, over recorded real scrapes (tests/fixtures/spark/real-4.3.0).

Expected values are read off the fixture files by hand; epoch-ms -> UTC conversions are worked out in
the comments (1704067200000 ms = 2024-01-01T00:00:00Z; 4070908800000 ms = 2099-01-01T00:00:00Z).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from collectors.http import make_client
from collectors.spark.prometheus import (
    COLLECTOR_NAME,
    RAW_KIND,
    SparkPrometheusCollector,
    parse_streaming_gauges,
)
from monitor.errors import InputError
from monitor.model import Engine, SampleKind
from tests.servers import refused_port

NOW = datetime(2026, 11, 29, 11, 36, 0, tzinfo=UTC)
URL = "http://driver.example:4040/metrics/prometheus"


def _timeline(spark_fixtures: Path) -> dict[str, str]:
    """Split the timeline file at its ``## <label> status=200 bytes=N`` lines into one scrape per label."""
    scrapes: dict[str, list[str]] = {}
    label = None
    for line in (spark_fixtures / "prometheus_streaming_gauges_timeline.txt").read_text().splitlines():
        if line.startswith("## "):
            label = line.split()[1]
            scrapes[label] = []
        elif label is not None:
            scrapes[label].append(line)
    return {k: "\n".join(v) + "\n" for k, v in scrapes.items()}


def _collector(body: str, status: int = 200, **kwargs: object) -> SparkPrometheusCollector:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/metrics/prometheus"
        return httpx.Response(status, text=body)

    client = make_client(transport=httpx.MockTransport(handler))
    return SparkPrometheusCollector(URL, client, **kwargs)  # type: ignore[arg-type]


def test_full_driver_scrape_maps_the_six_gauges(spark_fixtures: Path) -> None:
    # prometheus_full_driver_step3_after_data_batch.txt lines 117-128: query wm_metrics, namespace = app id
    # local-1795952122245 sanitized to local_1795952122245; ~340 other driver metrics must be ignored.
    body = (spark_fixtures / "prometheus_full_driver_step3_after_data_batch.txt").read_text()
    result = _collector(body, app_id="local-1795952122245").poll(NOW)
    assert result.errors == ()
    assert len(result.samples) == 1
    s = result.samples[0]
    assert s.job.engine is Engine.SPARK
    assert s.job.job_id == "wm_metrics" and s.job.name == "wm_metrics"
    assert s.job.app_id == "local-1795952122245"
    assert s.kind is SampleKind.GAUGE and s.collector == COLLECTOR_NAME
    assert s.observed_at == NOW
    # eventTime_watermark 1704111000000 ms = 2024-01-01T00:00Z + 43800 s = 2024-01-01T12:10:00Z
    assert s.watermark == datetime(2024, 1, 1, 12, 10, tzinfo=UTC)
    assert s.input_rows_per_second == pytest.approx(1.5007503751875937)
    assert s.processed_rows_per_second == pytest.approx(6.41025641025641)
    assert s.batch_duration_ms == 468  # latency
    assert s.state_rows_total == 4
    assert s.state_memory_bytes == 2096
    # Not available from this source: stay unknown.
    assert s.batch_id is None and s.dropped_by_watermark is None and s.num_input_rows is None
    assert s.event_time_max is None
    assert s.extra["metrics_namespace"] == "local_1795952122245"
    # The raw document keeps the six streaming gauges with their full names (not the 40 KB scrape).
    assert len(result.raw) == 1
    job, when, kind, doc = result.raw[0]
    assert (job, when, kind) == (s.job, NOW, RAW_KIND)
    assert doc["url"] == URL
    assert doc["gauges"]["metrics_local_1795952122245_driver_spark_streaming_wm_metrics_latency_Value"] == 468


def test_namespace_set_to_app_name(spark_fixtures: Path) -> None:
    # spark.metrics.namespace=${spark.app.name} = 'exp-metrics' -> 'exp_metrics'; values after data batch 6.
    text = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_text()
    for namespace in (None, "exp-metrics"):
        found = parse_streaming_gauges(text, namespace=namespace)
        assert [(g.namespace, g.query) for g in found] == [("exp_metrics", "wm_metrics")]
        assert found[0].values == {
            "eventTime_watermark": 1704111000000.0,
            "inputRate_total": 1.5,
            "latency": 632.0,
            "processingRate_total": 4.746835443037974,
            "states_rowsTotal": 4.0,
            "states_usedBytes": 2096.0,
        }
    # A namespace that is not the one in the names finds nothing.
    assert parse_streaming_gauges(text, namespace="local-1795952122245") == []


def test_query_name_with_gauge_like_underscores(spark_fixtures: Path) -> None:
    # Derived from the recorded namespace file by renaming the query 'wm_metrics' -> 'x_latency_Value'
    # (Spark sanitizes '-' and '.' to '_', so names full of '_' are normal); the gauge suffix must still be
    # matched from the right.
    text = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_text()
    renamed = text.replace("_wm_metrics_", "_x_latency_Value_")
    found = parse_streaming_gauges(renamed)
    assert [(g.namespace, g.query) for g in found] == [("exp_metrics", "x_latency_Value")]
    assert found[0].values["latency"] == 632.0
    assert found[0].values["eventTime_watermark"] == 1704111000000.0


# Timeline of one run (processingTime 2 s, 10-minute watermark delay), values read off the file.
# watermark_ms: 0 means "no watermark yet" -> None.  1704110220000 = 2024-01-01T11:57:00Z (+43020 s);
# 1704110700000 = 12:05:00Z; 4070908200000 = 2099-01-01T00:00Z - 600 s = 2098-12-31T23:50:00Z (the future
# row of 2099-01-01 minus the 10-minute delay); 4070909400000 = 2099-01-01T00:10:00Z.
TIMELINE = [
    # label, watermark, latency_ms, rows_total, used_bytes, input_rate
    ("01_query_started_idle", None, 24, 0, 0, 0.0),
    ("02_step0_after_data_batch", None, 4278, 2, 1040, 2.501250625312656),
    ("02_step0_after_nodata_batch", datetime(2024, 1, 1, 11, 57, tzinfo=UTC), 649, 2, 1512, 0.0),
    ("02_step1_after_nodata_batch", datetime(2024, 1, 1, 12, 5, tzinfo=UTC), 655, 3, 2216, 0.0),
    ("02_step3_after_data_batch", datetime(2024, 1, 1, 12, 10, tzinfo=UTC), 468, 4, 2096, 1.5007503751875937),
    ("02_step3_after_nodata_batch", datetime(2098, 12, 31, 23, 50, tzinfo=UTC), 454, 1, 1936, 0.0),
    ("02_step5_after_nodata_batch", datetime(2099, 1, 1, 0, 10, tzinfo=UTC), 445, 1, 1424, 0.0),
    ("03_idle_14s", datetime(2099, 1, 1, 0, 10, tzinfo=UTC), 7, 1, 1424, 0.0),
]


@pytest.mark.parametrize(("label", "watermark", "latency", "rows", "used", "rate"), TIMELINE)
def test_timeline(
    spark_fixtures: Path,
    label: str,
    watermark: datetime | None,
    latency: int,
    rows: int,
    used: int,
    rate: float,
) -> None:
    body = _timeline(spark_fixtures)[label]
    result = _collector(body).poll(NOW)
    assert result.errors == ()
    [s] = result.samples
    assert s.job.job_id == "wm_metrics"
    assert s.job.app_id is None  # not given to the collector; the namespace is only its sanitized form
    assert s.watermark == watermark
    assert s.batch_duration_ms == latency
    assert s.state_rows_total == rows
    assert s.state_memory_bytes == used
    assert s.input_rows_per_second == pytest.approx(rate)


@pytest.mark.parametrize("label", ["00_before_query", "04_after_stop"])
def test_no_query_running_gives_no_samples_and_no_error(spark_fixtures: Path, label: str) -> None:
    # Before the query starts and after it stops the streaming gauges are absent from the scrape
    # (the file lists no lines under these labels): "not running here", not zeros.
    result = _collector(_timeline(spark_fixtures)[label]).poll(NOW)
    assert result.samples == () and result.errors == () and result.raw == ()


def test_query_ids_map_names_to_query_ids(spark_fixtures: Path) -> None:
    # wm_metrics's query id from progress_pt_b7_memorysink_listener.json (same run as the scrapes).
    body = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_text()
    ids = {"wm_metrics": "92f2e0e5-46e5-49c6-98a8-cbd4e61d1c66"}
    [s] = _collector(body, query_ids=ids).poll(NOW).samples
    assert s.job.job_id == "92f2e0e5-46e5-49c6-98a8-cbd4e61d1c66" and s.job.name == "wm_metrics"


def test_executor_endpoint_has_no_streaming_gauges(spark_fixtures: Path) -> None:
    # /metrics/executors/prometheus is a valid exposition with labels but no streaming gauges.
    body = (spark_fixtures / "prometheus_executors_endpoint.txt").read_text()
    result = _collector(body).poll(NOW)
    assert result.samples == () and result.errors == ()


def test_404_is_a_non_retryable_error_entry() -> None:
    # The PrometheusServlet sink not configured: Spark's UI answers 404 with an HTML page.
    result = _collector("<html><body>Error 404 Not Found</body></html>", status=404).poll(NOW)
    assert result.samples == ()
    [err] = result.errors
    assert err.collector == COLLECTOR_NAME and err.target == URL and err.observed_at == NOW
    assert err.message.startswith("HTTP 404") and not err.retryable


def test_non_prometheus_body_is_an_error_entry() -> None:
    result = _collector("<html><body>Spark Jobs</body></html>").poll(NOW)
    [err] = result.errors
    assert "not Prometheus text exposition format" in err.message
    assert not err.retryable


def test_parse_rejects_html() -> None:
    with pytest.raises(InputError, match="scrape: not Prometheus text"):
        parse_streaming_gauges("<html>oops</html>")


def test_connection_refused_is_a_retryable_error_entry() -> None:
    url = f"http://127.0.0.1:{refused_port()}/metrics/prometheus"
    with make_client(connect_timeout_s=1.0) as client:
        result = SparkPrometheusCollector(url, client).poll(NOW)
    [err] = result.errors
    assert err.message.startswith("cannot connect to") and err.retryable
    assert err.target == url


def test_credentials_never_reach_the_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="busy")

    client = make_client(transport=httpx.MockTransport(handler))
    url = "http://admin:s3cret@driver.example:4040/metrics/prometheus?token=abc"
    [err] = SparkPrometheusCollector(url, client).poll(NOW).errors
    assert "s3cret" not in err.message + err.target and "abc" not in err.message + err.target
    assert err.message == "HTTP 503 Service Unavailable from http://driver.example:4040/metrics/prometheus"
    assert err.retryable


@pytest.mark.parametrize(
    ("gauge", "value"),
    [
        ("eventTime_watermark", "1e20"),  # issue 11: raised OSError from datetime.fromtimestamp
        ("eventTime_watermark", "-1e20"),
        ("states_rowsTotal", "1e20"),  # beyond int64: would overflow the database column
        ("latency", "9.3e18"),
    ],
)
def test_a_gauge_the_model_cannot_hold_is_an_error_naming_the_metric(
    spark_fixtures: Path, gauge: str, value: str
) -> None:
    # the recorded namespace scrape plus a second query (renamed copy) whose gauge is out of range:
    # the collector promises never to raise; the bad query is one error entry, the good one a sample
    text = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_text()
    bad_lines = [
        line.replace("_wm_metrics_", "_bad_q_").rsplit(" ", 1)[0] + f" {value}"
        if f"_{gauge}_" in line
        else line.replace("_wm_metrics_", "_bad_q_")
        for line in text.splitlines()
        if line.startswith("metrics_")
    ]
    result = _collector(text + "\n".join(bad_lines) + "\n").poll(NOW)
    assert [s.job.job_id for s in result.samples] == ["wm_metrics"]
    [error] = result.errors
    assert error.kind.value == "field"
    assert f"metrics_exp_metrics_driver_spark_streaming_bad_q_{gauge}_Value" in error.message
    assert error.message.startswith(URL)


def test_nan_and_infinite_gauges_keep_the_raw_document_storable(spark_fixtures: Path) -> None:
    # found by make fuzz: a NaN gauge made the scrape's raw document unstorable (JSON has no NaN)
    from monitor.store.keys import canonical_json

    text = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_text()
    text = text.replace("inputRate_total_Value{type=\"gauges\"} 1.5", "inputRate_total_Value{type=\"gauges\"} NaN")
    text = text.replace("latency_Value{type=\"gauges\"} 632", "latency_Value{type=\"gauges\"} +Inf")
    result = _collector(text).poll(NOW)
    [sample] = result.samples
    assert sample.input_rows_per_second is None and sample.batch_duration_ms is None  # unknown
    [(_, _, _, document)] = result.raw
    gauges = document["gauges"]
    assert gauges["metrics_exp_metrics_driver_spark_streaming_wm_metrics_inputRate_total_Value"] == "NaN"
    assert gauges["metrics_exp_metrics_driver_spark_streaming_wm_metrics_latency_Value"] == "+Inf"
    canonical_json(document, "raw")
