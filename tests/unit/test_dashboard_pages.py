"""Every dashboard page under Streamlit's ``AppTest``, against a database seeded by the real daemon pipeline
(tests/dashboard_seed.py): no exception, the expected elements, and numbers that match what the test reads
from the database itself (through the store, not through the dashboard's code)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dashboard import charts, data
from monitor.model import AlertState
from monitor.store import list_jobs, load_episodes, load_samples, open_store
from monitor.store.alert_repo import list_silences, load_alerts
from tests.dashboard_seed import Seeded, seed

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TOKEN = "dashboard-test-token-0123"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed(tmp_path_factory.mktemp("seeded"), 90)


@pytest.fixture
def app_env(seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> Iterator[Seeded]:
    monkeypatch.setenv(data.DB_ENV, seeded.url)
    monkeypatch.setenv(data.TOKEN_ENV, TOKEN)
    monkeypatch.setenv(data.REPORTS_ENV, str(seeded.root / "reports"))
    monkeypatch.setattr(data, "now", lambda: seeded.end + timedelta(seconds=5))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield seeded
    st.cache_resource.clear()


def run(page: str | None = None, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def stored(seeded: Seeded):  # type: ignore[no-untyped-def]
    store = open_store(seeded.url)
    try:
        with store.sessions() as s:
            return list_jobs(s), list(load_alerts(s).values()), list_silences(s), load_samples(s)
    finally:
        store.dispose()


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_fleet_counts_and_findings_match_the_database(app_env: Seeded) -> None:
    jobs, alerts, _, _ = stored(app_env)
    at = run()
    assert at.title[0].value == "Fleet"
    firing = [a for a in alerts if a.state is AlertState.FIRING]
    assert metric(at, "jobs") == str(len(jobs))
    assert metric(at, "firing alerts") == str(len(firing))
    assert metric(at, "unhealthy jobs") == str(len({a.labels["job_id"] for a in firing}))
    text = " ".join(m.value for m in at.markdown)
    for a in firing:  # every firing finding is listed with its job and rule
        assert f"**{a.annotations['job_name']}** · **{a.rule}**" in text
    table = at.dataframe[0].value
    assert sorted(table["job"]) == sorted(j.name for j in jobs)
    by_name = dict(zip(table["job"], table["firing"], strict=True))
    for j in jobs:
        assert by_name[j.name] == sum(1 for a in firing if a.labels["job_id"] == j.job_id)


def test_fleet_marks_jobs_that_stopped_reporting(app_env: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs, _, _, _ = stored(app_env)
    monkeypatch.setattr(data, "now", lambda: app_env.end + timedelta(minutes=10))
    at = run()
    assert len(jobs) == 9  # six Spark queries, the Flink job, two Kafka groups: none reported since
    assert metric(at, "stopped reporting") == str(len(jobs))
    assert "Stopped reporting" in at.warning[0].value


@pytest.mark.parametrize("engine", ["flink", "kafka"])
def test_fleet_engine_filter_shows_the_flink_job_and_the_kafka_groups(app_env: Seeded, engine: str) -> None:
    jobs, alerts, _, _ = stored(app_env)
    mine = sorted(j.name for j in jobs if j.engine.value == engine)
    assert mine == {"flink": ["device-telemetry-windows"], "kafka": ["audit-archiver", "ledger-writer"]}[engine]
    at = run()
    assert engine in at.multiselect[0].options
    at.multiselect[0].select(engine).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert sorted(table["job"]) == mine and set(table["engine"]) == {engine}
    text = " ".join(m.value for m in at.markdown)
    firing = [a for a in alerts if a.state is AlertState.FIRING and a.labels["engine"] == engine]
    assert firing  # the seeded 90 s hold the faults of both (idle_source at ~28 s, consumer_lag at ~30 s)
    for a in firing:
        assert f"**{a.annotations['job_name']}** · **{a.rule}**" in text
    assert "clicks_per_window" not in text  # the Spark jobs are filtered out
    assert not any("more firing findings" in c.value for c in at.caption)  # nor counted as "more"


@pytest.mark.parametrize(("engine", "name", "rule"), [("flink", "device-telemetry-windows", "idle_source"),
                                                    ("kafka", "ledger-writer", "consumer_lag")])
def test_job_page_of_the_flink_job_and_the_kafka_group(app_env: Seeded, engine: str, name: str, rule: str) -> None:
    jobs, alerts, _, _ = stored(app_env)
    job = next(j for j in jobs if j.name == name)
    at = run("views/job.py", engine=engine, job_id=job.job_id)  # asserts no exception
    assert at.subheader[0].value == name
    boxes = " ".join(e.value for e in [*at.error, *at.warning])
    mine = [a for a in alerts if a.labels["job_id"] == job.job_id and a.state is AlertState.FIRING and a.rule == rule]
    assert mine and all(a.message in boxes for a in mine)


def test_job_page_shows_the_findings_and_the_dropped_rows_of_the_database(app_env: Seeded) -> None:
    jobs, alerts, _, samples = stored(app_env)
    job = next(j for j in jobs if j.name == "clicks_per_window")
    at = run("views/job.py", engine="spark", job_id=job.job_id)
    assert at.subheader[0].value == "clicks_per_window"
    boxes = " ".join(e.value for e in [*at.error, *at.warning])
    mine = [a for a in alerts if a.labels["job_id"] == job.job_id and a.state is AlertState.FIRING]
    assert mine
    for a in mine:
        assert f"**{a.rule}**" in boxes and a.message in boxes
    since = max(s.observed_at for s in samples if s.job.job_id == job.job_id) - data.JOB_WINDOW
    dropped = sum(s.dropped_by_watermark or 0 for s in samples
                  if s.job.job_id == job.job_id and s.scope.is_job() and s.observed_at >= since)
    assert dropped > 0
    assert any(m.value.startswith(f"**{dropped:,} rows** dropped") for m in at.markdown)
    # the drops are attributed to the batch carrying the future-dated row (the one the rule names)
    future = next(a for a in mine if a.rule == "future_timestamp")
    assert any(f"set by **batch {future.annotations['batch_id']}**" in m.value for m in at.markdown)
    # the 2028 row (dashboard_seed: 400 days ahead) put the watermark ahead of processing time: the figure
    # alone in the metric (never cut to "1.1 years ah..."), what it means said below it
    fresh = next(m for m in at.metric if m.label == "freshness")
    assert (fresh.value, fresh.delta) == ("1.1 years", "watermark ahead of processing time")


def test_job_page_names_the_input_holding_the_watermark(app_env: Seeded) -> None:
    jobs, _, _, _ = stored(app_env)
    job = next(j for j in jobs if j.name == "orders_payments")
    at = run("views/job.py", engine="spark", job_id=job.job_id)
    assert any("Holding the minimum watermark: **source KafkaV2[Subscribe[payments]]**" in w.value for w in at.warning)


def test_job_page_counts_the_restart(app_env: Seeded) -> None:
    jobs, _, _, samples = stored(app_env)
    job = next(j for j in jobs if j.name == "inventory_updates")
    runs = {s.job.run_id for s in samples if s.job.job_id == job.job_id}
    at = run("views/job.py", engine="spark", job_id=job.job_id)
    assert len(runs) == 2  # one restart: "1 restart", not "1 restart(s)"
    assert any(m.value.startswith("**1 restart**: each new run id") for m in at.markdown)


def test_alerts_page_counts_and_silences_with_the_token(app_env: Seeded) -> None:
    _, alerts, silences, _ = stored(app_env)
    assert not silences
    at = run("views/alerts.py")
    for state in ("firing", "pending", "resolved"):
        assert metric(at, state) == str(sum(1 for a in alerts if a.state.value == state))
    token = next(t for t in at.text_input if t.label == "dashboard token")
    token.set_value(TOKEN)
    next(t for t in at.text_input if t.label == "matchers").set_value("job_id=abc alertname=~watermark.*")
    next(t for t in at.text_input if t.label == "comment").set_value("backfill")
    next(b for b in at.button if b.label == "Add silence").click()
    at.run()
    assert not at.exception
    assert any("added" in s.value for s in at.success)
    _, _, silences, _ = stored(app_env)
    assert [s.comment for s in silences] == ["backfill"]
    assert [str(m) for m in silences[0].matchers] == ["job_id=abc", "alertname=~watermark.*"]


def test_alerts_page_refuses_a_wrong_token(app_env: Seeded) -> None:
    at = run("views/alerts.py")
    next(t for t in at.text_input if t.label == "dashboard token").set_value("wrong")
    next(t for t in at.text_input if t.label == "matchers").set_value("job_id=zzz")
    next(b for b in at.button if b.label == "Add silence").click()
    at.run()
    assert any("read-only" in e.value for e in at.error)
    assert all([str(m) for m in s.matchers] != ["job_id=zzz"] for s in stored(app_env)[2])


def test_alerts_page_is_read_only_without_a_token(app_env: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(data.TOKEN_ENV)
    at = run("views/alerts.py")
    assert any("Read-only" in i.value for i in at.info)
    assert not [b for b in at.button if b.label == "Add silence"]


def test_reports_page_lists_the_scheduled_report(app_env: Seeded) -> None:
    jobs, _, _, _ = stored(app_env)  # every job had reported by the report's time (60 s)
    at = run("views/reports.py")
    assert at.title[0].value == "Reports"
    labels = [e.label for e in at.expander]
    assert len(labels) == 1 and labels[0].startswith("demo-5min")
    assert f"{len(jobs)} jobs" in labels[0]


def test_whatif_lab_replays_the_stored_sample(app_env: Seeded) -> None:
    at = run("views/whatif.py")
    assert not at.error, [e.value for e in at.error]
    # dashboard/samples/sensor_future_row.csv (the default), counted in the file: 2,000 rows, ~one every
    # 300 ms from 08:00:00; row 700 (arriving 08:03:30.034) is dated 2099-01-01. The lab's defaults: 30 s
    # delay, 60 s tumbling windows, a 10 s trigger. The batch at tick 08:03:40 reads row 700, so the watermark
    # jumps to 2099 minus 30 s; the next batch (tick 08:03:50, the 32 rows arriving 08:03:40-08:03:50) still
    # filters late rows with the watermark before it (Spark >= 3.4 drops late rows against the previous
    # batch's watermark), and every row arriving from 08:03:50 on is dropped:
    #   awk -F, 'NR>1 && $2 >= "2026-11-30T08:03:50"' dashboard/samples/sensor_future_row.csv | wc -l  -> 1234
    assert at.selectbox[0].value == "sensor_future_row.csv"
    assert metric(at, "dropped as late") == "1,234"
    assert metric(at, "rows") == "2,000"
    assert any("moved most in **batch" in m.value for m in at.markdown)
    assert at.success or at.warning  # the recommendation (or why there is none)


def _delay_s(text: str) -> float:
    """The bold delay of a recommendation (``**20 s**``, ``**1.5 min**``) in seconds."""
    value, unit = text.split("**")[1].split()
    return float(value) * {"s": 1, "min": 60, "h": 3600}[unit]


# dashboard/samples/sensor_future_row.csv (generate.py): rows arrive 0-20 s after their event time, except
# line 702 (row 700 + header), dated 2099-01-01 (72.1 years after 2026-11-30). With the row filtered out, a
# delay of 30 s keeps every row under Spark's rules (a batch's rows are at most 20 s + one 10 s trigger
# behind the newest event time before it) and under Flink's (an element is at most 20 s behind the newest
# timestamp, inside a window that has not ended 30 s before it): the recommendation is at most 30 s. With the
# row kept, the target needs the 72.1 years the lab used to open on.


def test_whatif_lab_default_sample_leads_with_the_misdated_row_spark(app_env: Seeded) -> None:
    at = run("views/whatif.py")
    assert at.selectbox(key="sample").value == "sensor_future_row.csv"  # the default sample
    assert not at.error and not at.exception
    (row,) = [w.value for w in at.warning if "Mis-dated row" in w.value]
    assert row.startswith("**Mis-dated row**: line 702 (batch ") and "event time 2099-01-01T00:00:00Z" in row
    recommended = at.success[0].value
    assert recommended.startswith("Recommended delay without the mis-dated row: **")
    assert "filter it out before withWatermark" in recommended
    assert _delay_s(recommended) <= 30
    kept = next(i.value for i in at.info if "kept" in i.value)
    assert kept.startswith("With the mis-dated row kept: 72 years. For comparison only, not a fix")
    # never a recommendation of decades
    assert not any(" y**" in s.value for s in at.success)


def test_whatif_lab_default_sample_works_under_flink_too(app_env: Seeded) -> None:
    at = run("views/whatif.py")
    at.radio(key="engine").set_value("Flink DataStream")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    (row,) = [w.value for w in at.warning if "Mis-dated row" in w.value]
    assert row.startswith("**Mis-dated row**: line 702, event time 2099-01-01 00:00:00 UTC")
    recommended = at.success[0].value
    assert recommended.startswith("Recommended delay without the mis-dated row: **")
    assert "filter it out before the WatermarkStrategy" in recommended
    assert _delay_s(recommended) <= 30
    # with the row kept every later element is late at any delay of the sweep (up to 30 min)
    assert any(i.value.startswith("With the mis-dated row kept: more than any delay in the sweep") for i in at.info)


def test_whatif_lab_spark_path_keeps_its_controls(app_env: Seeded) -> None:
    at = run("views/whatif.py")
    assert at.radio(key="engine").value == "Spark Structured Streaming"  # the default engine is unchanged
    labels = {s.label for s in at.selectbox} | {n.label for n in at.number_input}
    assert {"multiple-watermark policy", "trigger (s; 0 = the file's own batches)", "delay threshold (s)"} <= labels
    assert "batches" in {m.label for m in at.metric}


def flink_lab(**controls: float | bool | str) -> AppTest:
    """The What-if lab with Flink chosen on the hand-written sample and ``controls`` set (by widget key)."""
    at = run("views/whatif.py")
    at.selectbox(key="sample").set_value("flink_two_splits.csv")
    at.radio(key="engine").set_value("Flink DataStream")
    at.run()
    for key, value in controls.items():
        if isinstance(value, str):
            at.selectbox(key=key).set_value(value)
        elif isinstance(value, bool):
            at.checkbox(key=key).set_value(value)
        else:
            at.number_input(key=key).set_value(value)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


# dashboard/samples/flink_two_splits.csv, counted by hand (times in s after 08:00:00; arrivals 1 s apart
# from 08:00:10, so each 200 ms tick after an element sees it; split p's watermark = its max - 5 - 0.001):
#   line  2  p0 e1 | 3 p1 e2 | 4 p0 e8 | 5 p1 e9 | 6 p0 e14 | 7 p1 e16  -> min(14, 16) - 5.001 = 8.999
#   line  8  p0 e7   : [0,10) ends at 9.999 > 8.999, added (not late)
#   line  9  p1 e22  : p1 16.999, the min stays 8.999
#   line 10  p0 e21  : p0 15.999 -> watermark 15.999 (+7 s), fires [0,10) with lines 2-5 and 8 (5 elements)
#   line 11  p1 e6   : [0,10) ended (9.999 <= 15.999): LATE (1)
#   line 12  p0 e12  : [10,20) open | line 13 p1 e30: p1 24.999, min stays 15.999
#   line 14  p0 e33  : p0 27.999 -> watermark min(27.999, 24.999) = 24.999 (+9 s, the largest step; the
#                      value is line 13's e30 - 5.001), fires [10,20) (lines 6, 7, 12: 3 elements)
#   line 15  p1 e18  : [10,20) ended: LATE (2)   | line 16 p0 e24: [20,30) open
# So 2 late elements of 15, 2 on-time firings, open at the end [20,30) and [30,40); in state at most 2
# windows ([0,10) + [10,20), then [10,20) + [20,30), then [20,30) + [30,40)).
# Emission latency: [0,10) fires at the tick at 08:00:18.000 (8 s after its end), [10,20) at 08:00:22 (2 s).


def test_whatif_lab_flink_replays_the_hand_counted_sample(app_env: Seeded) -> None:
    at = flink_lab(flink_delay=5.0, flink_size=10.0)
    labels = {n.label for n in at.number_input} | {s.label for s in at.selectbox}
    assert "multiple-watermark policy" not in labels and not any("trigger" in x for x in labels)
    assert any("No trigger" in c.value for c in at.caption)
    assert metric(at, "rows") == "15"
    assert metric(at, "late elements") == "2"
    assert metric(at, "window firings") == "2"
    assert metric(at, "peak windows in state") == "2"
    assert any("0 late firings; 2 windows still open at the end" in c.value for c in at.caption)
    assert any("p50 8.0 s" in c.value and "max 8.0 s" in c.value for c in at.caption)
    mover = next(m.value for m in at.markdown if "moved most" in m.value)
    assert "(+9 s)" in mover and "line 13" in mover and "08:00:30" in mover, mover
    # the sweep at 10 s: after line 10 the watermark is min(21, 22) - 10.001 = 10.999, so line 11 (e6, [0,10))
    # is late; after line 14 it is min(33, 30) - 10.001 = 19.999 >= 19.999, so line 15 (e18) is too: 2.
    # At 30 s it never passes 33 - 30.001 - no window ends before it: 0 late.
    sweep = at.dataframe[0].value
    late_by_delay = dict(zip(sweep["delay_s"], sweep["late_elements"], strict=True))
    assert (late_by_delay[5.0], late_by_delay[10.0], late_by_delay[30.0]) == (2, 2, 0)
    # 99.9 % of 15 rows allows 0 late elements: the smallest such delay of the sweep is 30 s
    assert at.success and "Recommended delay: **30 s**" in at.success[0].value


def test_whatif_lab_flink_allowed_lateness_is_judged_per_element(app_env: Seeded) -> None:
    # allowed lateness 6 s (same sample, derivation above): line 11 (e6) meets watermark 15.999 and
    # [0,10)'s cleanup 9.999 + 6 = 15.999 <= 15.999: still late; line 15 (e18) meets 24.999 and [10,20)'s
    # cleanup 25.999 is ahead: added, a late firing of [10,20). Side output on: the element goes there.
    at = flink_lab(flink_delay=5.0, flink_size=10.0, flink_lateness=6.0, flink_side=True)
    assert metric(at, "late elements") == "1"
    assert metric(at, "window firings") == "3"
    assert any("1 late firing;" in c.value for c in at.caption)


def test_whatif_lab_flink_sessions_say_state_is_not_tracked(app_env: Seeded) -> None:
    at = flink_lab(flink_delay=5.0, flink_window="session", flink_size=3.0)
    assert metric(at, "peak windows in state") == "n/a"
    assert any("Not available for session windows" in i.value for i in at.info)


def test_whatif_lab_flink_refuses_a_sample_with_several_sources(app_env: Seeded) -> None:
    at = run("views/whatif.py")
    at.selectbox(key="sample").set_value("orders_backlog.csv")
    at.radio(key="engine").set_value("Flink DataStream")
    at.run()
    assert at.error and "orders_backlog.csv has a 'source' column" in at.error[0].value


def test_pages_say_what_to_do_on_an_empty_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.store import upgrade

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade(url)
    monkeypatch.setenv(data.DB_ENV, url)
    monkeypatch.delenv(data.REPORTS_ENV, raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        assert "No jobs yet" in run().info[0].value
        assert "No jobs yet" in run("views/job.py").info[0].value
        assert "No reports yet" in run("views/reports.py").info[0].value
        assert any("No alerts yet" in i.value for i in run("views/alerts.py").info)
    finally:
        st.cache_resource.clear()


def page_text(at: AppTest) -> str:
    """Every text the page shows (markdown, boxes, captions, metrics, table cells)."""
    parts = [e.value for e in [*at.markdown, *at.caption, *at.error, *at.warning, *at.info, *at.success]]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    parts += [d.value.to_string() for d in at.dataframe]
    return "\n".join(str(p) for p in parts)


def chart_series(at: AppTest, y_title: str) -> set[str]:
    """The series names (legend entries) of the page's charts whose spec names ``y_title``."""
    import pyarrow as pa

    out: set[str] = set()
    for chart in at.get("vega_lite_chart"):
        if y_title not in chart.proto.spec:
            continue
        for ds in chart.proto.datasets:
            frame = pa.ipc.open_stream(ds.data.data).read_all().to_pandas()
            if "series" in frame:
                out |= set(frame["series"])
    return out


def test_kafka_job_page_shows_lag_per_partition_and_the_partition_with_the_most(app_env: Seeded) -> None:
    jobs, _, _, samples = stored(app_env)
    job = next(j for j in jobs if j.name == "ledger-writer")
    at = run("views/job.py", engine="kafka", job_id=job.job_id)
    newest: dict[int, int] = {}  # each partition's newest lag, read from the stored samples
    for s in samples:
        if s.job.job_id == job.job_id and s.scope.partition is not None and s.lag_offsets is not None:
            newest[s.scope.partition] = s.lag_offsets
    assert sorted(newest) == [0, 1, 2]
    assert chart_series(at, "offsets behind") == {f"settlements partition {p}" for p in newest}
    table = next(d.value for d in at.dataframe if "status (Burrow)" in d.value.columns)
    shown = dict(zip(table["partition"], table["lag (offsets)"], strict=True))
    assert shown == {p: f"{v:,}" for p, v in newest.items()}
    assert set(table["status (Burrow)"]) == {"WARN"}  # the consumer_lag rule's status on each partition
    top = max(newest, key=lambda p: newest[p])
    assert any(w.value.startswith(f"Most lag: **settlements partition {top}**: {newest[top]:,} offsets")
               for w in at.warning)
    assert metric(at, "lag (offsets)") == f"{sum(newest.values()):,}"
    assert metric(at, "members") != "unknown"
    assert "None" not in page_text(at) and "No consumer lag reported" not in page_text(at)


def test_flink_job_page_shows_watermarks_per_subtask_and_checkpointed_state(app_env: Seeded) -> None:
    jobs, alerts, _, samples = stored(app_env)
    job = next(j for j in jobs if j.name == "device-telemetry-windows")
    at = run("views/job.py", engine="flink", job_id=job.job_id)
    headers = [h.value for h in at.header] + [h.value for h in at.subheader]
    assert "Watermarks per vertex and subtask" in headers and "Checkpointed state" in headers
    # the holder the page names is the one the idle_source alert names
    idle = next(a for a in alerts if a.labels["job_id"] == job.job_id and a.rule == "idle_source")
    holder = f"vertex {idle.labels['source']} subtask {idle.labels['subtask']}"  # plain text, no code quotes
    assert any("Holding the minimum watermark" in w.value and holder in w.value for w in at.warning)
    # the watermark chart has one line per subtask that reported a watermark (names as the page shows them)
    subtasks = {(s.scope.source or s.extra.get("vertex"), s.scope.subtask) for s in samples
                if s.job.job_id == job.job_id and s.scope.subtask is not None and s.watermark is not None}
    assert len(subtasks) == 4  # two vertices with two subtasks each
    lines = chart_series(at, "watermark (UTC)")
    assert {f"vertex {v} subtask {n}" for v, n in subtasks} | {"processing time"} == lines
    state = [s.state_memory_bytes for s in samples
             if s.job.job_id == job.job_id and s.scope.is_job() and s.state_memory_bytes is not None]
    assert state and metric(at, "checkpointed state") == data.bytes_text(state[-1])
    assert "This job reports no state" not in page_text(at) and "None" not in page_text(at)


def test_job_page_says_a_stale_link_is_not_in_this_database(app_env: Seeded) -> None:
    at = run("views/job.py", engine="spark", job_id="no-such-job-0000")
    assert any("`no-such-job-0000` is not in this database" in w.value for w in at.warning)


def test_spark_job_page_clips_the_future_row_and_shows_no_none(app_env: Seeded) -> None:
    jobs, _, _, samples = stored(app_env)
    job = next(j for j in jobs if j.name == "clicks_per_window")
    at = run("views/job.py", engine="spark", job_id=job.job_id)
    import pyarrow as pa

    future = max(s.event_time_max for s in samples if s.job.job_id == job.job_id and s.event_time_max is not None)
    assert future.year > 2026  # the demo's injected future-dated row

    labels = set()
    for chart in at.get("vega_lite_chart"):
        for ds in chart.proto.datasets:
            frame = pa.ipc.open_stream(ds.data.data).read_all().to_pandas()
            labels |= set(frame["real"]) if "real" in frame else set()
    # its event time is drawn at the chart's edge, with its real value
    assert f"{future:%Y-%m-%d %H:%M:%S} (off the chart)" in labels, labels
    assert "None" not in page_text(at)


def test_reports_page_shows_this_databases_report_as_html(app_env: Seeded, tmp_path: Path) -> None:
    import base64

    jobs, _, _, _ = stored(app_env)
    at = run("views/reports.py")
    frames = at.get("iframe")
    assert frames, "the report is not shown"
    html = base64.b64decode(frames[0].proto.src.split("base64,", 1)[1]).decode("utf-8")
    assert html.startswith("<!doctype html>") and "tidegauge health report" in html
    for j in jobs:
        assert f"id='job-{j.job_id}'" in html
    assert not at.json  # no JSON tree


def test_reports_page_hides_report_files_of_another_database(app_env: Seeded, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    jobs, _, _, _ = stored(app_env)
    ours = next(j for j in jobs if j.name == "clicks_per_window")
    (tmp_path / "nightly-20261130T080000Z.html").write_text(
        f"<!doctype html><html><body><h2 id='job-{ours.job_id}'>clicks_per_window</h2></body></html>")
    (tmp_path / "other-20240101T000000Z.html").write_text(
        "<!doctype html><html><body><h2 id='job-from-elsewhere'>x</h2></body></html>")
    monkeypatch.setenv(data.REPORTS_ENV, str(tmp_path))
    at = run("views/reports.py")
    pick = at.selectbox(key="report_file")
    assert pick.options == ["nightly-20261130T080000Z"]
    assert any("not of this database (their jobs are not here, or they cover no job): 1 report of the reports"
               in c.value
               and "other-20240101T000000Z" in c.value for c in at.caption)


def test_alerts_page_marks_a_silenced_alert(app_env: Seeded) -> None:  # last: it adds a silence to the seeded DB
    jobs, alerts, _, _ = stored(app_env)
    job = next(j for j in jobs if j.name == "ledger-writer")
    at = run("views/alerts.py")
    next(t for t in at.text_input if t.label == "dashboard token").set_value(TOKEN)
    next(t for t in at.text_input if t.label == "matchers").set_value(f"job_id={job.job_id} alertname=consumer_lag")
    next(t for t in at.text_input if t.label == "comment").set_value("rebalancing")
    next(b for b in at.button if b.label == "Add silence").click()
    at.run()
    at.run()  # the counts are drawn above the form: the next run shows the silence
    firing = [a for a in alerts if a.labels["job_id"] == job.job_id and a.rule == "consumer_lag"
              and a.state is AlertState.FIRING]
    assert metric(at, "silenced") == str(len(firing))
    page = run("views/job.py", engine="kafka", job_id=job.job_id)
    marked = [w.value for w in page.warning if "**silenced** by" in w.value]
    assert len(marked) == len(firing) and all("rebalancing" in m for m in marked)


# ------------------------------------------------------------------ trial findings (issue 14): display


def _ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def test_clip_range_covers_a_backfills_event_times_and_its_one_day_jump() -> None:
    # the shape of tests/fixtures backfill_future_row (t.db): recorded 2026-12-01 09:43, event times of
    # 2024-03-01, one row of 2024-03-02 12:02 moving the watermark a day on, Spark's 1970 "no watermark yet"
    processing = pd.Series([_ts("2026-12-01 09:43:24"), _ts("2026-12-01 09:43:36"), _ts("2026-12-01 09:43:58")])
    event_max = pd.Series([_ts("2024-03-01 12:00:55"), _ts("2024-03-02 12:02:00"), _ts("2024-03-01 12:07:55")])
    watermark = pd.Series([_ts("1970-01-01 00:00:00"), _ts("2024-03-01 11:51:55"), _ts("2024-03-02 11:52:00")])
    lo, hi = charts.clip_range(event_max, watermark, processing=processing)  # type: ignore[misc]
    # 2024-03-01 11:51:55 .. 2024-03-02 12:02:00 (1 day 10 min 5 s), widened by 5 % (72 min 30.25 s) each side
    assert (lo, hi) == (_ts("2024-03-01 10:39:24.750"), _ts("2024-03-02 13:14:30.250"))


def test_clip_range_keeps_a_live_jobs_processing_time_and_clips_a_2099_row() -> None:
    processing = pd.Series([_ts("2026-11-30 08:00:00"), _ts("2026-11-30 08:10:00")])
    event_max = pd.Series([_ts("2026-11-30 07:59:50"), _ts("2099-01-01 00:00:00"), _ts("2026-11-30 08:09:50")])
    watermark = pd.Series([_ts("2026-11-30 07:59:40"), _ts("2098-12-31 23:59:50")])
    lo, hi = charts.clip_range(event_max, watermark, processing=processing)  # type: ignore[misc]
    # 07:59:40 .. 08:10:00 (620 s), widened by 31 s each side
    assert (lo, hi) == (_ts("2026-11-30 07:59:09"), _ts("2026-11-30 08:10:31"))


def test_clipped_points_are_named_above_the_plot_not_over_the_ticks() -> None:
    frame = pd.DataFrame({
        "observed_at": [_ts("2026-11-29 11:32:48"), _ts("2026-11-29 11:32:49")],
        "watermark": [_ts("2024-01-01 12:10:00"), _ts("2098-12-31 23:50:00")],
        "event_time_max": [_ts("2099-01-01 00:00:00"), _ts("2024-01-01 12:20:00")],
    })
    clip = (_ts("2024-01-01 12:00:00"), _ts("2024-01-01 12:30:00"))
    spec = charts.lines_over_time(frame, ["event_time_max", "watermark"], y_title="time (UTC)", y_type="temporal",
                                  clip=clip, labels={"event_time_max": "event-time max"}).to_dict()
    assert spec["title"]["text"] == [
        "event-time max: 1 point above the chart (▲ at the top edge), 2099-01-01 00:00:00",
        "watermark: 1 point above the chart (▲ at the top edge), 2098-12-31 23:50:00",
    ]
    assert not any(layer.get("mark", {}).get("type") == "text" for layer in spec["layer"])


def test_job_page_gives_every_findings_message_in_full(app_env: Seeded) -> None:
    jobs, _, _, _ = stored(app_env)
    job = next(j for j in jobs if j.name == "clicks_per_window")
    store = open_store(app_env.url)
    try:
        with store.sessions() as s:
            found = load_episodes(s, engine="spark", job_id=job.job_id)
    finally:
        store.dispose()
    at = run("views/job.py", engine="spark", job_id=job.job_id)
    shown = {m.value for ex in at.expander for m in ex.markdown}
    assert found and {e.message for e in found} <= shown
    # the table has no cut message column any more
    table = next(d.value for d in at.dataframe if "rule" in d.value.columns)
    assert list(table.columns) == ["severity", "rule", "scope", "batches", "from (UTC)", "to (UTC)", "ended", "notified"]


def test_flink_findings_say_polls_and_show_no_operator_id(app_env: Seeded) -> None:
    jobs, alerts, _, _ = stored(app_env)
    job = next(j for j in jobs if j.engine.value == "flink")
    at = run("views/job.py", engine="flink", job_id=job.job_id)
    table = next(d.value for d in at.dataframe if "rule" in d.value.columns)
    assert set(table["batches"]) == {"polls (no batch ids)"}
    idle = next(a for a in alerts if a.labels["job_id"] == job.job_id and a.rule == "idle_source")
    # what the page itself writes (the finding's own message is the rule's text): box headings, tables
    text = "\n".join([b.value.split("\n\n")[0] for b in [*at.warning, *at.error, *at.info]]
                     + [d.value.to_string() for d in at.dataframe])
    assert idle.labels["operator"] not in text  # the vertex is named by its name
    assert f"source={idle.labels['source']}, subtask={idle.labels['subtask']}" in text
    assert "`" not in "".join(d.value.to_string() for d in at.dataframe)


def test_fleet_separates_what_fires_now_from_the_worst_of_the_period(app_env: Seeded) -> None:
    at = run()
    table = at.dataframe[0].value
    assert "worst finding" not in table.columns
    assert {"firing now", "worst in period"} <= set(table.columns)
    quiet = table[table["firing"] == 0]
    assert set(quiet["firing now"]) <= {"nothing firing"}


def test_reports_page_defaults_to_the_clis_period_and_shows_a_runnable_command(app_env: Seeded) -> None:
    at = run("views/reports.py")
    assert at.selectbox(key="report_period").value == "last 7 days"
    caption = next(c.value for c in at.caption if "the same report as" in c.value)
    assert "--since ..." not in caption
    assert (f"`tidegauge report --db {app_env.url} --since 7d --name 'tidegauge (last 7 days)' --format html "
            "-o report.html`") in caption


def test_reports_page_freshness_chart_names_durations_and_leaves_out_the_future_row(app_env: Seeded) -> None:
    import base64

    at = run("views/reports.py")
    html = base64.b64decode(at.get("iframe")[0].proto.src.split("base64,", 1)[1]).decode("utf-8")
    # clicks_per_window's 2028 row makes its watermark 1.1 years ahead: left out of the axis, and named
    assert "far off the others, not drawn" in html
    assert "freshness (seconds)" in html or "freshness (minutes)" in html
    assert "-200,000" not in html


def test_whatif_lab_recommendation_is_a_row_of_the_sweep(app_env: Seeded) -> None:
    at = run("views/whatif.py")
    at.selectbox(key="sample").set_value("orders_backlog.csv")
    at.run()
    sweep = next(d.value for d in at.dataframe if "delay_s" in d.value.columns)
    assert list(sweep["delay_s"]) == [0.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0]
    recommended = next(s.value for s in at.success if s.value.startswith("Recommended delay"))
    assert _delay_s(recommended) in set(sweep["delay_s"])


def test_whatif_lab_says_what_decided_the_no_data_batches(app_env: Seeded) -> None:
    at = run("views/whatif.py")
    # the default sample has arrival_time and the lab's default 10 s trigger
    assert any(c.value.startswith("No-data batches: decided from arrival_time at each 10s trigger") for c in at.caption)


# three file batches, no arrival_time; each moves the watermark (delay 0)
BATCHES_ONLY = b"event_time,batch\n2026-01-01T00:00:10Z,0\n2026-01-01T00:00:20Z,1\n2026-01-01T00:00:30Z,2\n"


@pytest.mark.parametrize(("backlog", "no_data", "said"), [(False, 3, "ASSUMES a live query caught up"),
                                                          (True, 1, "ASSUMED a query started on this backlog")])
def test_whatif_lab_backlog_choice_decides_the_no_data_batches(backlog: bool, no_data: int, said: str) -> None:
    st.cache_data.clear()
    result = data.whatif(
        BATCHES_ONLY, ".csv", delay_s=0.0, window="tumbling", window_s=5.0, slide_s=None, trigger_s=None,
        policy="min", future_skew_s=None, sweep_s=(0.0,), target_pct=99.0, backlog=backlog,
    )
    assert result.file_batches and said in result.no_data_basis
    assert result.summary["no_data_batches"] == no_data
