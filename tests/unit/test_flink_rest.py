"""The Flink REST collector over recorded Flink 2.3.0 responses (tests/fixtures/flink/real-2.3.0).

Expected values are read off the recorded files by hand (file and id named next to each).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from collectors.flink import FlinkRestCollector, parse_long, parse_watermark
from collectors.flink.responses import parse_checkpoints, parse_exceptions, select_metric_ids
from collectors.http import make_client
from monitor.errors import InputError
from monitor.model import Sample, SampleKind, ms_to_datetime
from tests.flink_replay import STANDALONE, load, mock_transport, route_key, standalone_routes

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JID = "5b6ac111339d82670de10f8487b2078c"
SOURCE = "34b448c3c08bfc000e8407a4adc6ed98"
PY_WINDOW = "48af1ce61e1b2efa209b2576415d3a74"
JAVA_WINDOW = "a8786f7ee408dd1aa8a282662b019c51"
FAILED = STANDALONE.parent / "standalone_failed"


# ------------------------------------------------------------------------------------------ values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1795952369440", 1795952369440),
        ("-9223372036854775808", -(2**63)),  # Long.MIN_VALUE, exact
        ("9223372036854775807", 2**63 - 1),  # Long.MAX_VALUE: float() would round it to 2**63
        ("9007199254740993", 9007199254740993),  # 2**53 + 1: not representable as a double
        ("263.0", 263),
        ("0.5", None),
        ("NaN", None),
        ("", None),
        (None, None),
        ("9223372036854775808", None),  # beyond int64
    ],
)
def test_parse_long_is_exact(text: str | None, expected: int | None) -> None:
    assert parse_long(text) == expected


def test_watermark_markers() -> None:
    assert parse_watermark("-9223372036854775808").epoch_ms is None  # no watermark, not a time
    assert not parse_watermark("-9223372036854775808").end_of_input
    end = parse_watermark("9223372036854775807")
    assert end.epoch_ms is None and end.end_of_input  # +infinity: end of input
    assert parse_watermark("NaN").epoch_ms is None
    assert parse_watermark(None).epoch_ms is None
    assert parse_watermark("0").epoch_ms == 0  # a real (if odd) watermark at the epoch stays a time


def test_select_metric_ids_keeps_only_listed_wanted_ids() -> None:
    ids = [m["id"] for m in load("v2_metrics_list.json")]
    chosen = select_metric_ids(ids)
    assert "0.java-window-10s.numLateRecordsDropped" in chosen
    assert "1.currentInputWatermark" in chosen
    assert "0.mailboxLatencyMs_p75" not in chosen
    assert "0.java-window-10s.currentInputWatermark" not in chosen  # the task-scope one is read
    assert set(chosen) <= set(ids)
    source_ids = [m["id"] for m in load("v0_metrics_list.json")]
    # split scope (Flink 2.1+): the four split-level watermark gauges, never the accumulated ones
    split_names = {i.rsplit(".", 1)[1] for i in select_metric_ids(source_ids) if ".split." in i}
    assert split_names == {"currentWatermark", "activeTimeMsPerSecond", "pausedTimeMsPerSecond", "idleTimeMsPerSecond"}


def test_checkpoints_and_exceptions_parse() -> None:
    stats = parse_checkpoints(load("checkpoints.json"), "/checkpoints")
    # counts: total 7, completed 6, failed 1 (the trigger before the tasks ran); latest completed id 6
    assert (stats.total, stats.completed, stats.failed, stats.in_progress) == (7, 6, 1, 0)
    assert (stats.latest_completed_id, stats.latest_state_size_bytes, stats.latest_duration_ms) == (
        6,
        12628,
        216,
    )
    entries = parse_exceptions(load("exceptions.json", FAILED), "/exceptions")
    assert entries[0].name == "org.apache.flink.runtime.JobException"
    assert entries[0].message.startswith("org.apache.flink.runtime.JobException: Recovery is suppressed")
    assert entries[0].root_cause.startswith("java.lang.RuntimeException: Error received from SDK harness")
    assert entries[1].task is not None and entries[1].task.startswith("Source: gen-source")
    with pytest.raises(InputError, match="/exceptions: field 'exceptionHistory' missing"):
        parse_exceptions({}, "/exceptions")


# --------------------------------------------------------------------------------------- collector


def _collector(routes: dict[str, Any], on_request: Any = None, **kwargs: Any) -> FlinkRestCollector:
    client = make_client(transport=mock_transport(routes, on_request))
    return FlinkRestCollector("http://jm:8081", client, **kwargs)


def _by_scope(samples: tuple[Sample, ...]) -> dict[tuple[str | None, int | None], Sample]:
    return {(s.scope.operator, s.scope.subtask): s for s in samples if s.kind is SampleKind.GAUGE}


def test_poll_of_the_recorded_job() -> None:
    result = _collector(standalone_routes()).poll(NOW)
    assert result.errors == ()
    got = _by_scope(result.samples)
    assert set(got) == {(None, None)} | {(v, i) for v in (SOURCE, PY_WINDOW, JAVA_WINDOW) for i in (0, 1)}
    job = got[(None, None)]
    assert job.job.job_id == "exp-event-time-job" and job.job.run_id == JID
    # the job watermark: min input watermark of the last vertex (v2 `1.currentInputWatermark` 1795952365175)
    assert job.watermark == ms_to_datetime(1795952365175)
    assert job.restart_count == 0  # job_metrics_values.json numRestarts "0"
    assert job.state_memory_bytes == 12628  # checkpoints.json latest.completed.state_size
    assert job.checkpoints_failed == 1  # counts.failed: the trigger before the tasks ran
    assert job.num_input_rows is None and job.dropped_by_watermark is None  # one poll: no deltas yet
    # source vertex: output watermark of its last chained operator (_stream_key_by_map_operator)
    s0, s1 = got[(SOURCE, 0)], got[(SOURCE, 1)]
    assert s0.scope.source is not None and s0.scope.source.startswith("Source: gen-source")
    assert s0.watermark == ms_to_datetime(1795952369440)
    assert s1.watermark is None  # "-9223372036854775808": no watermark, never 1970
    assert s1.extra["output_watermark_ms"] is None and s1.extra["input_watermark_ms"] is None
    assert (s0.idle_ms, s1.idle_ms) == (28, 38)  # Source__gen-source.sourceIdleTime
    assert s0.backpressure_ratio == 0.0
    # window vertices: input watermark of each subtask; cumulative late drops kept for display
    w = got[(JAVA_WINDOW, 0)]
    assert w.scope.source is None and w.watermark == ms_to_datetime(1795952365175)
    assert w.extra["late_records_dropped"] == 14  # 0.java-window-10s.numLateRecordsDropped
    assert got[(PY_WINDOW, 1)].extra["late_records_dropped"] == 2
    assert w.dropped_by_watermark is None  # first poll


def test_flink_version_is_read_from_config_after_the_jobs_and_carried_by_that_poll_s_job_samples() -> None:
    asked: list[str] = []
    collector = _collector(standalone_routes(), on_request=lambda r: asked.append(r.url.path))
    first = _by_scope(collector.poll(NOW).samples)[(None, None)]
    # asked after the jobs (never taking their share of the deadline), given to the poll's job sample:
    # a one-poll check knows it
    assert first.extra["flink_version"] == "2.3.0" and asked.index("/config") > asked.index("/jobs/overview")
    second = _by_scope(collector.poll(NOW + timedelta(seconds=15)).samples)[(None, None)]
    assert second.extra["flink_version"] == "2.3.0"  # config.json "flink-version"
    assert asked.count("/config") == 1  # known: not asked again


def test_config_not_served_leaves_the_version_unknown_and_a_bad_one_is_an_error_naming_the_field() -> None:
    routes = standalone_routes()
    del routes["/config"]  # a proxy routing only /jobs: 404, no error entry
    collector = _collector(routes)
    assert collector.poll(NOW).errors == ()
    assert collector.flink_version is None
    routes["/config"] = {"flink-version": "1.20.1"}
    bad = _collector(routes)
    result = bad.poll(NOW)
    (error,) = result.errors
    assert "/config: field 'flink-version': flink version '1.20.1': tidegauge models Flink 2.x only" in error.message
    assert any(s.kind is SampleKind.GAUGE for s in result.samples)  # the jobs are still polled
    # a standing condition: said again at the next poll (a two-poll check reports the newest poll's errors)
    (again,) = bad.poll(NOW + timedelta(seconds=15)).errors
    assert again.message == error.message and again.observed_at == NOW + timedelta(seconds=15)


def test_second_poll_gives_deltas_and_quiet_counters() -> None:
    routes = standalone_routes()
    collector = _collector(routes)
    collector.poll(NOW)
    later = NOW + timedelta(seconds=30)
    # the py window's subtask 0 drops 4 more late records; everything else unchanged
    values = [dict(v) for v in routes[f"/jobs/{JID}/vertices/{PY_WINDOW}/metrics?get"]]
    for v in values:
        if v["id"] == "0.py-window-10s.numLateRecordsDropped":
            v["value"] = "10"
    routes[f"/jobs/{JID}/vertices/{PY_WINDOW}/metrics?get"] = values
    # and the source's reader on subtask 1 produced records its filter dropped (the store was refreshed:
    # a vertex serving exactly the same values would be a stale read, see the stale-store tests below)
    routes[f"/jobs/{JID}/vertices/{SOURCE}/metrics?get"] = _with_value(SOURCE, "1.Source__gen-source.numRecordsOut", "400")
    routes[f"/jobs/{JID}/vertices/{JAVA_WINDOW}/metrics?get"] = _with_value(JAVA_WINDOW, "1.currentInputWatermark", "1795952375175")
    got = _by_scope(collector.poll(later).samples)
    assert got[(PY_WINDOW, 0)].dropped_by_watermark == 4
    assert got[(PY_WINDOW, 1)].dropped_by_watermark == 0
    assert got[(None, None)].dropped_by_watermark == 4 + 0 + 0 + 0  # summed over the window subtasks
    assert got[(SOURCE, 0)].num_input_rows == 0
    # the counter did not move since the first poll, but the REST metric store may serve values fetched
    # around the previous poll: no quiet time is known yet, only sourceIdleTime (28 ms, recorded). (Counted
    # up to now, a CI run with polls 10 s apart read a store fetched ~1 s after the first poll's values and
    # took a running subtask of tg-idle for 10 s quiet: "every source subtask idle".)
    assert got[(SOURCE, 0)].idle_ms == 28
    # a third poll 30 s later, the store refreshed again (subtask 1 read more) and subtask 0's counter still
    # where it was: quiet from the first poll up to the second, 30 s (more than sourceIdleTime)
    routes[f"/jobs/{JID}/vertices/{SOURCE}/metrics?get"] = _with_value(SOURCE, "1.Source__gen-source.numRecordsOut", "500")
    got = _by_scope(collector.poll(later + timedelta(seconds=30)).samples)
    assert got[(SOURCE, 0)].num_input_rows == 0
    assert got[(SOURCE, 0)].idle_ms == 30_000


def _with_value(vertex: str, metric_id: str, value: str, routes: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """The recorded ``metrics?get`` answer of ``vertex`` with one value changed."""
    values = [dict(v) for v in (routes or standalone_routes())[f"/jobs/{JID}/vertices/{vertex}/metrics?get"]]
    assert any(v["id"] == metric_id for v in values), metric_id
    return [{**v, "value": value} if v["id"] == metric_id else v for v in values]


def test_unknown_metric_answer_is_unknown_not_zero() -> None:
    routes = standalone_routes()
    routes[f"/jobs/{JID}/vertices/{JAVA_WINDOW}/metrics?get"] = []  # Flink's answer when one id is unknown
    got = _by_scope(_collector(routes).poll(NOW).samples)
    w = got[(JAVA_WINDOW, 0)]
    assert w.watermark is None and w.extra["late_records_dropped"] is None and w.backpressure_ratio is None
    assert got[(None, None)].watermark is None  # the last vertex's watermark is unknown


def test_failing_vertex_is_an_error_entry_and_other_samples_stay() -> None:
    def fail_py_window(request: httpx.Request) -> httpx.Response | None:
        if PY_WINDOW in request.url.path:
            return httpx.Response(500, text="boom")
        return None

    result = _collector(standalone_routes(), fail_py_window).poll(NOW)
    assert len(result.errors) == 1
    err = result.errors[0]
    assert err.collector == "flink-rest" and err.retryable
    assert err.target == f"http://jm:8081/jobs/{JID}/vertices/{PY_WINDOW}/metrics"
    assert "HTTP 500" in err.message
    got = _by_scope(result.samples)
    assert (SOURCE, 1) in got and (JAVA_WINDOW, 1) in got and (PY_WINDOW, 0) not in got
    assert got[(None, None)].watermark is None  # not every vertex was read: unknown


def test_unreachable_jobmanager_is_one_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    result = FlinkRestCollector("http://user:secret@jm:8081", client).poll(NOW)
    assert result.samples == ()
    assert len(result.errors) == 1
    assert result.errors[0].message.startswith("cannot connect to http://jm:8081/jobs/overview")
    assert "secret" not in result.errors[0].message + result.errors[0].target


def test_bad_document_names_the_endpoint() -> None:
    routes = standalone_routes()
    routes[f"/jobs/{JID}"] = {"jid": JID, "name": "x", "state": "RUNNING"}  # no vertices
    result = _collector(routes).poll(NOW)
    assert [e.message for e in result.errors] == [f"/jobs/{JID}: field 'vertices' missing"]
    assert not result.errors[0].retryable


def _failed_routes() -> dict[str, Any]:
    job = load("job.json", FAILED)
    jid = job["jid"]
    return {
        "/jobs/overview": load("jobs_overview.json", FAILED),
        f"/jobs/{jid}": job,
        f"/jobs/{jid}/metrics?get": load("metrics.json", FAILED),
        f"/jobs/{jid}/checkpoints": load("checkpoints.json", FAILED),
        f"/jobs/{jid}/exceptions": load("exceptions.json", FAILED),
    }


def test_failed_job_gives_a_terminated_sample_with_the_root_cause() -> None:
    asked: list[str] = []

    def record(request: httpx.Request) -> None:
        asked.append(route_key(request))

    result = _collector(_failed_routes(), record).poll(NOW)
    # two jobs named exp-failing-job: the newest (c258..., started 1795952705582) is followed;
    # exp-idle-source-job and exp-event-time-job are other names (their documents are not recorded here)
    failing = [s for s in result.samples if s.job.job_id == "exp-failing-job"]
    assert {s.job.run_id for s in failing} == {"c258fcb444be645a1a2b1689b2b6306d"}
    assert not any("/jobs/122ae7c20114ebfbc6c2dbd7e9c36e34" in a for a in asked)
    terminated = [s for s in failing if s.kind is SampleKind.TERMINATED]
    assert len(terminated) == 1
    assert terminated[0].observed_at == ms_to_datetime(1795952726634)  # the job's end-time
    assert terminated[0].extra["exception"].startswith("java.lang.RuntimeException: Error received from SDK")
    gauge = next(s for s in failing if s.kind is SampleKind.GAUGE)
    assert gauge.restart_count == 1 and gauge.extra["state"] == "FAILED"  # metrics.json numRestarts "1"
    # the other jobs' documents are missing: one error entry each, not a failed poll
    assert {e.target.rsplit("/", 1)[-1] for e in result.errors} == {
        "79ffec0d22205ee8fe7acb74b7783f1f",
        "5b6ac111339d82670de10f8487b2078c",
    }


def test_resubmitted_job_keeps_its_name_as_identity() -> None:
    routes = standalone_routes()
    collector = _collector(routes)
    first = collector.poll(NOW)
    overview = load("jobs_overview.json")
    new_jid = "f" * 32
    resubmitted = dict(overview["jobs"][0], jid=new_jid, **{"start-time": 1795952400000})
    old = dict(overview["jobs"][0], state="CANCELED")
    routes["/jobs/overview"] = {"jobs": [old, resubmitted]}
    for key in list(routes):
        if JID in key and key != "/jobs/overview":
            doc = routes.pop(key)
            routes[key.replace(JID, new_jid)] = dict(doc, jid=new_jid) if key == f"/jobs/{JID}" else doc
    second = collector.poll(NOW + timedelta(seconds=15))
    job_ids = {s.job.job_id for s in first.samples} | {s.job.job_id for s in second.samples}
    assert job_ids == {"exp-event-time-job"}
    assert {s.job.run_id for s in second.samples} == {new_jid}


def test_long_max_watermark_is_end_of_input_not_a_time() -> None:
    routes = standalone_routes()
    key = f"/jobs/{JID}/vertices/{SOURCE}/metrics?get"
    values = [dict(v) for v in routes[key]]
    for v in values:
        if v["id"] == "1._stream_key_by_map_operator.currentOutputWatermark":
            v["value"] = "9223372036854775807"  # Long.MAX_VALUE, as a subtask without splits reports
    routes[key] = values
    got = _by_scope(_collector(routes).poll(NOW).samples)
    s1 = got[(SOURCE, 1)]
    assert s1.watermark is None and s1.watermark_end_of_input is True
    assert got[(SOURCE, 0)].watermark_end_of_input is None


def test_job_detail_is_read_again_only_when_the_job_changed() -> None:
    routes = standalone_routes()
    asked: list[str] = []

    def record(request: httpx.Request) -> None:
        asked.append(route_key(request))

    collector = _collector(routes, record, metric_list_every=10)
    detail, ids = f"/jobs/{JID}", f"/jobs/{JID}/vertices/{SOURCE}/metrics"
    collector.poll(NOW)
    collector.poll(NOW + timedelta(seconds=15))
    assert (asked.count(detail), asked.count(ids)) == (1, 1)  # steady: both cached
    restarted = [dict(v) for v in routes[f"/jobs/{JID}/metrics?get"]]
    for v in restarted:
        if v["id"] == "numRestarts":
            v["value"] = "1"
    routes[f"/jobs/{JID}/metrics?get"] = restarted
    got = _by_scope(collector.poll(NOW + timedelta(seconds=30)).samples)
    assert asked.count(detail) == 2  # a restart: new status timestamps
    assert got[(None, None)].restart_count == 1
    assert asked.count(f"/jobs/{JID}/exceptions") == 1  # read for the cause once it restarted


def test_a_job_without_window_operators_has_unknown_late_drops() -> None:
    routes = standalone_routes()
    for vertex in (PY_WINDOW, JAVA_WINDOW):
        key = f"/jobs/{JID}/vertices/{vertex}/metrics?get"
        routes[key] = [v for v in routes[key] if "numLateRecordsDropped" not in v["id"]]
    collector = _collector(routes)
    collector.poll(NOW)
    job = _by_scope(collector.poll(NOW + timedelta(seconds=15)).samples)[(None, None)]
    assert job.dropped_by_watermark is None  # no numLateRecordsDropped anywhere: unknown, never 0


def test_a_stale_metric_store_gives_unknown_deltas_not_zero() -> None:
    # Flink refreshes its REST metric store asynchronously: two polls serving exactly the same values
    # say nothing about the time between them (not "0 records", not "quiet for 15 s")
    collector = _collector(standalone_routes())
    collector.poll(NOW)
    got = _by_scope(collector.poll(NOW + timedelta(seconds=15)).samples)
    job = got[(None, None)]
    assert job.extra["stale_metrics"] is True
    assert (job.num_input_rows, job.dropped_by_watermark) == (None, None)
    assert got[(SOURCE, 0)].num_input_rows is None
    assert got[(SOURCE, 0)].idle_ms == 28  # sourceIdleTime only, no 15 s quiet clock


def test_a_vertex_served_from_the_old_fetch_gives_unknown_deltas_while_others_count() -> None:
    # One poll is one request per vertex, and Flink answers each from its metric store as it is while a
    # fetch runs in the background (MetricFetcherImpl), so the source vertex can be served the old fetch
    # and the window vertex the new one. Seen on a loaded machine against real Flink 2.3.0: the late
    # drops rose by 20 while the source "produced 0 records" and looked idle for the whole interval.
    routes = standalone_routes()
    collector = _collector(routes)
    collector.poll(NOW)
    routes[f"/jobs/{JID}/vertices/{JAVA_WINDOW}/metrics?get"] = _with_value(
        JAVA_WINDOW, "0.java-window-10s.numLateRecordsDropped", "34"  # recorded 14: 20 more
    )
    got = _by_scope(collector.poll(NOW + timedelta(seconds=15)).samples)
    assert got[(JAVA_WINDOW, 0)].dropped_by_watermark == 20
    assert got[(SOURCE, 0)].num_input_rows is None  # not 0: the source's values are from the old fetch
    assert got[(SOURCE, 0)].idle_ms == 28  # sourceIdleTime only, no 15 s quiet clock
    job = got[(None, None)]
    assert job.num_input_rows is None and job.dropped_by_watermark is None  # the py window: stale too
    assert "stale_metrics" not in job.extra
    assert job.extra["stale_vertices"] == [v["name"] for v in load("job.json")["vertices"] if v["id"] != JAVA_WINDOW]
    # the next fresh read of the source counts from the values before the stale one
    routes[f"/jobs/{JID}/vertices/{SOURCE}/metrics?get"] = _with_value(SOURCE, "0.numRecordsOut", "600")
    again = _by_scope(collector.poll(NOW + timedelta(seconds=30)).samples)
    assert again[(SOURCE, 0)].num_input_rows == 600 - 519  # recorded task counter 0.numRecordsOut 519
