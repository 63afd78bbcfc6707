"""Pipelines: jobs chained through topics, files or tables, and where their staleness enters
(:func:`dashboard.data.pipelines`, from the pipeline facts and the stored ``pipeline_freshness`` findings).

Per pipeline: whether its end is stale and which job the staleness enters at; its freshness SLO (error
budget left, burn rate: the stored ``pipeline_slo`` findings); the graph with each job's
local lag (what it adds) and global lag (how far behind the sources it is) now; both over the period; the
job that adds the most; the stored findings.
"""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data
from dashboard.views._slo import render_slo

st.title("Pipelines")
views, problem = data.pipelines()
if problem:
    st.error(f"The pipelines' configuration could not be read: {problem}. Showing what the jobs report only.")
if not views:
    st.info(
        "No pipeline: no two jobs are linked by what they report (a Spark query's sources and sink, a Flink job's "
        "source and sink vertices, a Kafka group's topics). Spark's Kafka sink does not name its topic: say which "
        "topics a job writes in the config's `pipelines:` section and start the dashboard with `-c FILE`."
    )
    st.stop()

names = [v.name for v in views]
wanted = st.query_params.get("pipeline", "")
choice = st.selectbox("pipeline", names, index=names.index(wanted) if wanted in names else 0)
if choice != wanted:
    st.query_params.update({"pipeline": choice})
view = next(v for v in views if v.name == choice)

source = "configured in `pipelines:`" if view.configured else "inferred from what the jobs report"
at = "no observation yet" if view.at is None else f"as of {view.at:%Y-%m-%d %H:%M:%S} UTC (its newest observation)"
target = "no target (rules.pipeline_freshness.target is not set)" if view.target_s is None else (
    f"target {data.human_lag(view.target_s)} behind the sources")
st.caption(f"{len(view.nodes)} jobs, {source} · {target} · {at}")

if view.stale:
    for s in view.stale:
        st.error(
            f"**Stale:** the end `{s['end']}` is {data.human_lag(s['end_lag_s'])} behind its sources. The staleness "
            f"**enters at `{s['entry']}`**, which adds {data.human_lag(s['entry_adds_s'])} of it. Start with "
            f"`{s['entry']}` (its findings on the Job page): the jobs after it only pass the delay on."
        )
elif view.target_s is not None:
    st.success(f"Fresh: every end is within {data.human_lag(view.target_s)} of its sources.")

st.subheader("Freshness SLO")
if view.slo is not None:
    # the newest stored pipeline_slo finding (rules.pipeline_slo): nothing computed here
    if view.slo["entry"]:
        st.markdown(f"In the SLO's bad minutes (the end too far behind its sources) the staleness entered at "
                    f"**`{view.slo['entry']}`**: start there.")
    render_slo(view.slo)
else:
    st.caption("No freshness-SLO burn-rate alert for this pipeline in the period (an SLO is set per pipeline: "
               "`slo: {freshness: 5m, objective: 99.5%, window: 28d}` on its `pipelines:` entry).")

m1, m2 = st.columns(2)
m1.metric("adds the most now", view.most_now or "unknown",
          help="the job with the largest local lag (its own delay, beyond what it reads) at the newest observation")
m2.metric("adds the most over the period", view.most_period or "unknown",
          help="the job with the largest mean local lag over the period shown")

st.subheader("Graph")
st.graphviz_chart(charts.pipeline_dot(view.nodes, view.edges, view.target_s, view.most_now))
st.caption("Each box: **adds** = local lag (its own delay: processing time − its watermark beyond the jobs it "
           "reads, or its consumer lag in seconds); **behind sources** = global lag (event-time freshness from the "
           "pipeline's sources). Dashed: the pipeline's external inputs and outputs.")

table = view.nodes.assign(
    **{
        "adds now": view.nodes["local_now_s"].map(data.human_lag),
        "behind sources now": view.nodes["global_now_s"].map(data.human_lag),
        "adds on average": view.nodes["mean_local_s"].map(data.human_lag),
        "most behind": view.nodes["max_global_s"].map(data.human_lag),
    }
)[["job", "engine", "reads", "writes", "adds now", "behind sources now", "adds on average", "most behind", "basis",
   "last_seen", "role"]]
st.dataframe(table, hide_index=True, width="stretch",
             column_config={"last_seen": st.column_config.DatetimeColumn("last seen (UTC)", format="YYYY-MM-DD HH:mm:ss")})

jobs = [c for c in view.global_lag.columns if c != "at"]
if not view.global_lag.empty:
    st.subheader("Over the period")
    left, right = st.columns(2)
    with left:
        st.markdown("**Behind the sources (global lag)**")
        behind = charts.lines_over_time(view.global_lag, jobs, y_title="seconds behind sources", time_field="at",
                                        value_format=",.1f")
        if view.target_s is not None:
            behind = behind + charts.rule_line(view.target_s, f"target {data.human_lag(view.target_s)}")
        st.altair_chart(behind, width="stretch")
    with right:
        st.markdown("**Added by each job (local lag)**")
        st.altair_chart(charts.lines_over_time(view.local_lag, jobs, y_title="seconds added",
                                               time_field="at", value_format=",.1f"), width="stretch")

st.subheader("Findings")
if view.episodes.empty:
    st.caption("No pipeline_freshness finding in the period.")
else:
    jobs_by_episode = dict(zip(view.episodes["id"], view.episodes["job_name"], strict=True))
    shown = view.episodes.assign(**{
        "caused by": view.episodes["caused_by"].map(lambda ids: ", ".join(jobs_by_episode.get(i, i) for i in ids)),
    })[["job_name", "severity", "first_at", "last_at", "ended_by", "caused by", "message"]]
    st.caption("A warning is on the job where the staleness enters; the jobs after it get an info finding linked to "
               "it (caused by).")
    st.dataframe(shown, hide_index=True, width="stretch",
                 column_config={"message": st.column_config.TextColumn("message", width="large")})
