"""Values that size an allocation or overflow a sample (issue 19), checked by the pull parsers before anything
is allocated: a Flink vertex's ``parallelism``, subtask indices in metric ids and reporter labels, the
number of jobs polled, exporter offsets and partition labels. Each is an error naming the endpoint or series
and the field or label; the rest of the poll is kept.

Good data is the recorded Flink 2.3.0 standalone job (``tests/flink_replay.py``: vertex 0 has parallelism 2)
and the recorded reporter scrapes; hostile values are written out here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from collectors.flink import FlinkRestCollector
from collectors.flink.prometheus import FlinkPrometheusCollector
from collectors.flink.responses import VertexInfo, parse_job_detail, select_metric_ids, subtask_metrics
from collectors.http import make_client
from collectors.kafka.exporter_scrape import ExporterScrapeCollector
from collectors.kafka.exporters import parse_burrow_response, parse_exporter_scrape
from monitor.config import parse_config
from monitor.errors import ConfigError, InputError
from monitor.model import ErrorKind
from tests.conftest import RECORDED_FIXTURES
from tests.flink_replay import load, mock_transport, standalone_routes

NOW = datetime(2026, 12, 1, 10, 42, tzinfo=UTC)
JID = "5b6ac111339d82670de10f8487b2078c"
REPORTER = RECORDED_FIXTURES / "flink" / "real-2.3.0" / "prometheus_reporter"


def _job(parallelism: Any) -> dict[str, Any]:
    job = load("job.json")
    job["vertices"][0]["parallelism"] = parallelism
    return job


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (10**12, "vertices[0]: parallelism 1000000000000 is not a Flink parallelism (1 to 32768)"),
        (0, "vertices[0]: parallelism 0 is not a Flink parallelism (1 to 32768)"),
        (10**400, "vertices[0]: parallelism a 401-digit number is not a Flink parallelism (1 to 32768)"),
        (5000, "vertices[0]: parallelism 5000 is over the limit of 4096 subtasks (the target's max_parallelism)"),
    ],
)
def test_a_parallelism_out_of_bounds_is_refused_naming_the_endpoint_and_field(value: int, expected: str) -> None:
    with pytest.raises(InputError) as info:
        parse_job_detail(_job(value), f"/jobs/{JID}")
    assert str(info.value) == f"/jobs/{JID}: {expected}"


def test_the_parallelism_limit_is_the_target_s() -> None:
    assert parse_job_detail(_job(5000), "/jobs/x", max_parallelism=8192).vertices[0].parallelism == 5000


def test_metric_ids_of_subtasks_the_vertex_has_not_are_not_read() -> None:
    vertex = VertexInfo("v", "Source: s", 2, "RUNNING")
    values = {
        "0.numRecordsOut": "5",
        "1.numRecordsOut": "6",
        "2.numRecordsOut": "7",  # the vertex has subtasks 0 and 1 only
        "99999999999991.numRecordsOut": "8",
        "9" * 5001 + ".numRecordsOut": "9",  # int() of it would raise
    }
    subs = subtask_metrics(values, vertex)
    assert {i: s.records_out for i, s in subs.items()} == {0: 5, 1: 6}
    assert select_metric_ids(["9" * 5001 + ".numRecordsOut", "0.numRecordsOut"]) == ["0.numRecordsOut"]
    listed = [f"{i}.numRecordsOut" for i in range(32768)]  # a list naming subtasks the vertex has not
    assert select_metric_ids(listed, vertex) == ["0.numRecordsOut", "1.numRecordsOut"]


def test_a_job_of_a_vertex_too_wide_is_one_error_and_the_other_jobs_are_read() -> None:
    routes = standalone_routes()
    overview = load("jobs_overview.json")
    evil = {**overview["jobs"][0], "jid": "e" * 32, "name": "evil"}
    routes["/jobs/overview"] = {"jobs": [*overview["jobs"], evil]}
    routes["/jobs/" + "e" * 32] = {**_job(10**12), "jid": "e" * 32, "name": "evil"}
    client = make_client(transport=mock_transport(routes))
    result = FlinkRestCollector("http://jm:8081", client).poll(NOW)
    (error,) = result.errors
    assert error.target == "http://jm:8081/jobs/" + "e" * 32 and error.kind is ErrorKind.UNREACHABLE
    assert "parallelism 1000000000000 is not a Flink parallelism" in error.message
    assert {s.job.job_id for s in result.samples} == {"exp-event-time-job"}
    assert len(result.samples) == 7  # 3 vertices x 2 subtasks + the job


def test_a_job_list_over_max_jobs_is_polled_in_part_and_says_so() -> None:
    jobs = [
        {"jid": f"{i:032x}", "name": f"job-{i}", "state": "FINISHED" if i == 4 else "RUNNING", "start-time": 1000 + i}
        for i in range(5)
    ]
    requested: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requested.append(request.url.path)
        if request.url.path == "/jobs/overview":
            return httpx.Response(200, json={"jobs": jobs})
        return httpx.Response(404, json={"errors": ["Not found"]})

    client = make_client(transport=httpx.MockTransport(answer))
    result = FlinkRestCollector("http://jm:8081", client, max_jobs=2, concurrency=1).poll(NOW)
    notice = result.errors[0]
    assert notice.kind is ErrorKind.FIELD and notice.retryable and notice.target == "http://jm:8081/jobs/overview"
    assert notice.message == (
        "/jobs/overview: field 'jobs': 5 jobs, over the limit of 2 (the target's max_jobs): polled 2 (running "
        "first, then the newest), 3 not polled"
    )
    # the two newest running jobs (job-3, job-2) are polled; the finished job-4 and the older ones are not
    assert sorted({p.split("/")[2] for p in requested if p.startswith("/jobs/") and p != "/jobs/overview"}) == [f"{2:032x}", f"{3:032x}"]


def _reporter(tm_extra: str, jm_extra: str = "", **kwargs: Any) -> Any:
    pages = {
        "/jm": (REPORTER / "jobmanager_metrics.txt").read_text() + jm_extra,
        "/tm": (REPORTER / "taskmanager_metrics.txt").read_text() + tm_extra,
    }
    client = make_client(transport=httpx.MockTransport(lambda r: httpx.Response(200, text=pages[r.url.path])))
    return FlinkPrometheusCollector(["http://jm:9249/jm", "http://tm:9249/tm"], client, **kwargs).poll(NOW)


def _reporter_line(index: str, task: str = "0123456789abcdef0123456789abcdef") -> str:
    return (
        f'flink_taskmanager_job_task_numRecordsIn{{job_id="6da2cf668e5773fae9aa106232b7676f",task_id="{task}",'
        f'task_name="evil",job_name="tg_idle",subtask_index="{index}",}} 5.0\n'
    )


@pytest.mark.parametrize(
    ("index", "limit", "expected"),
    [
        ("99999999999991", 4096, "'99999999999991' is not a Flink subtask index (0 to 32767)"),
        ("\u00b2", 4096, "'\u00b2' is not a Flink subtask index (0 to 32767)"),
        ("40000", 4096, "'40000' is not a Flink subtask index (0 to 32767)"),
        ("64", 64, "64 is over the limit of 64 subtasks (the target's max_parallelism)"),
    ],
)
def test_a_reporter_subtask_index_out_of_bounds_leaves_its_task_out(index: str, limit: int, expected: str) -> None:
    result = _reporter(_reporter_line("0") + _reporter_line(index), max_parallelism=limit)
    (error,) = result.errors
    assert error.kind is ErrorKind.FIELD and error.message == (
        "http://tm:9249/tm: flink_taskmanager_job_task_numRecordsIn{job_id='6da2cf668e5773fae9aa106232b7676f', "
        f"task_id='0123456789abcdef0123456789abcdef'}}: label subtask_index: {expected}"
    )
    # the task is left out whole (its subtask 0 too); the recorded tasks are all read
    operators = {s.scope.operator for s in result.samples}
    assert "0123456789abcdef0123456789abcdef" not in operators
    assert {"cbc357ccb763df2852fee8c4fc7d55f2", "f6dc7f4d2283f4605b127b9364e21148"} <= operators


def test_reporter_job_figures_that_are_not_int64_are_unknown() -> None:
    job = 'job_id="6da2cf668e5773fae9aa106232b7676f",host="h",job_name="tg_idle",'
    jm = (
        f"flink_jobmanager_job_numRestarts{{{job}}} +Inf\n"
        f"flink_jobmanager_job_lastCheckpointFullSize{{{job}}} 1e30\n"
        f"flink_jobmanager_job_runningTime{{{job}}} NaN\n"
    )
    pages = {"/jm": jm, "/tm": (REPORTER / "taskmanager_metrics.txt").read_text()}
    client = make_client(transport=httpx.MockTransport(lambda r: httpx.Response(200, text=pages[r.url.path])))
    result = FlinkPrometheusCollector(["http://jm:9249/jm", "http://tm:9249/tm"], client).poll(NOW)
    assert result.errors == ()
    (job_sample,) = [s for s in result.samples if s.job.job_id == "tg_idle" and s.scope.operator is None]
    assert (job_sample.restart_count, job_sample.state_memory_bytes) == (None, None)
    assert "running_since_ms" not in job_sample.extra


def test_exporter_offsets_beyond_64_bits_are_unknown_and_named() -> None:
    text = (
        'kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="t"} 18446744073709551616\n'
        'kafka_consumergroup_lag{consumergroup="g",partition="0",topic="t"} 1e30\n'
        'kafka_consumergroup_current_offset{consumergroup="g",partition="1",topic="t"} 100\n'
        'kafka_consumergroup_lag{consumergroup="g",partition="1",topic="t"} 7\n'
        'kafka_consumergroup_current_offset{consumergroup="g",partition="' + "9" * 5001 + '",topic="t"} 1\n'
        'kafka_consumergroup_members{consumergroup="g"} +Inf\n'
    )
    scrape = parse_exporter_scrape(text, "http://x/metrics")
    (group,) = scrape.groups
    rows = {p.partition: (p.committed, p.lag) for p in group.lag.partitions}
    assert rows == {0: (None, None), 1: (100, 7)}
    assert group.lag.lag == 7 and group.lag.members == 0
    assert scrape.problems[0] == (
        'http://x/metrics: kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="t"}: '
        "value 1.8446744073709552e+19 is beyond a 64-bit offset: left out"
    )
    assert scrape.problems[1].endswith("value 1e+30 is beyond a 64-bit offset: left out")
    assert "label partition is not a partition number (-1 to 2147483647): left out" in scrape.problems[2]
    assert len(scrape.problems) == 3


def test_the_exporter_collector_reports_them_as_field_errors_and_keeps_the_rest() -> None:
    text = (
        'kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="t"} 1e30\n'
        'kafka_consumergroup_lag{consumergroup="g",partition="1",topic="t"} 7\n'
    )
    client = make_client(transport=httpx.MockTransport(lambda r: httpx.Response(200, text=text)))
    result = ExporterScrapeCollector("http://x/metrics", client, "c").poll(NOW)
    (error,) = result.errors
    assert error.kind is ErrorKind.FIELD and error.retryable and "beyond a 64-bit offset" in error.message
    lags = {s.scope.partition: s.lag_offsets for s in result.samples if s.scope.partition is not None}
    assert lags == {0: None, 1: 7}


def test_many_partitions_near_int64_sum_to_int64_s_maximum_not_beyond() -> None:
    text = "".join(
        f'kafka_consumergroup_lag{{consumergroup="g",partition="{i}",topic="t"}} 4611686018427387904\n'
        for i in range(3)
    )
    (group,) = parse_exporter_scrape(text).groups
    assert group.lag.lag == 2**63 - 1 and group.lag.topic_lag() == {"t": 2**63 - 1}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ([1, 2], "burrow: expected a JSON object, got list"),
        ({"status": {"partitions": [{"topic": "t", "partition": 2**40}]}},
         "burrow: field status.partitions[0].partition: not a partition number (0 to 2147483647)"),
        ({"status": {"partitions": [7]}}, "burrow: field status.partitions[0]: needs topic and partition"),
    ],
)
def test_burrow_responses_out_of_shape_are_refused(doc: Any, expected: str) -> None:
    with pytest.raises(InputError) as info:
        parse_burrow_response(doc)
    assert str(info.value) == expected


def test_burrow_lags_and_offsets_beyond_64_bits_are_unknown() -> None:
    doc = json.loads(
        '{"status": {"group": "g", "totallag": 1' + "0" * 400 + ', "partitions": ['
        '{"topic": "t", "partition": 0, "current_lag": 1e300, "end": {"offset": 18446744073709551616}},'
        '{"topic": "t", "partition": 1, "current_lag": 3, "end": {"offset": 10}}]}}'
    )
    group = parse_burrow_response(doc)
    rows = {p.partition: (p.committed, p.lag, p.note) for p in group.lag.partitions}
    assert rows == {0: (None, None, "lag 1e+300 beyond a 64-bit offset"), 1: (10, 3, None)}
    assert group.reported_lag is None


@pytest.mark.parametrize(
    ("target", "where"),
    [
        ({"flink_rest": [{"name": "f", "url": "http://jm:8081", "max_parallelism": 40000}]},
         "targets.flink_rest.0.max_parallelism"),
        ({"flink_rest": [{"name": "f", "url": "http://jm:8081", "max_jobs": 0}]}, "targets.flink_rest.0.max_jobs"),
        ({"flink_prometheus": [{"name": "p", "urls": ["http://tm:9249"], "max_parallelism": 0}]},
         "targets.flink_prometheus.0.max_parallelism"),
    ],
)
def test_limits_out_of_range_in_the_config_are_refused(target: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"targets": target})
    assert where in str(info.value).replace("[", ".").replace("]", "")


def test_times_and_watermarks_no_sample_can_hold_are_unknown() -> None:
    from collectors.flink.values import parse_watermark

    # -2.23e17 ms (year -7,000,000 or so; the reporter's -9.22e18 with a digit flipped): not a time
    assert parse_watermark("-223372036854776000").epoch_ms is None
    assert parse_watermark("1795952369440").epoch_ms == 1795952369440
    job = load("job.json")
    job["end-time"] = 10**17  # year ~3 million
    assert parse_job_detail(job, "/jobs/x").end_time_ms is None


def test_a_lone_surrogate_in_a_flink_identifier_is_refused_and_in_a_message_replaced() -> None:
    from collectors.flink.responses import parse_exceptions

    job = load("job.json")
    job["vertices"][1]["name"] = "window \ud800"
    with pytest.raises(InputError) as info:
        parse_job_detail(job, "/jobs/x")
    assert str(info.value).startswith("/jobs/x: vertices[1]: field 'name': not valid Unicode")
    doc = {"exceptionHistory": {"entries": [{"stacktrace": "E: a\ud800\nCaused by: b\udfff", "timestamp": 1}]}}
    (entry,) = parse_exceptions(doc, "/jobs/x/exceptions")
    assert (entry.message, entry.root_cause) == ("E: a?", "b?")


def test_job_sums_beyond_a_sample_s_bounds_are_unknown() -> None:
    from collectors.flink.responses import SubtaskMetrics
    from collectors.flink.samples import Counters, JobFigures, running_job_samples
    from monitor.model import Engine, JobRef

    vertex = VertexInfo("v", "Source: s", 2, "RUNNING")
    ref = JobRef(Engine.FLINK, "j", run_id="r", name="j", app_id="c")
    counters = Counters()

    def subs(out: int) -> dict[int, SubtaskMetrics]:
        return {i: SubtaskMetrics(i, records_out=out, records_out_per_second=1e308) for i in range(2)}

    running_job_samples(ref, [(vertex, subs(-(2**63)))], True, counters, JobFigures(), NOW, "flink-rest")
    *per_subtask, job = running_job_samples(
        ref, [(vertex, subs(2**63 - 1))], True, counters, JobFigures(), NOW, "flink-rest"
    )
    # each subtask's delta (2**64 - 1) and the summed rate (2e308) are beyond a sample: unknown
    assert [s.num_input_rows for s in per_subtask] == [None, None]
    assert (job.num_input_rows, job.input_rows_per_second) == (None, None)
