"""Fleet: every monitored job with its health now and the worst finding of the period, freshness, firing
alerts, state, consumer lag and a freshness sparkline; filter by engine, health and name; jobs that stopped
reporting stand out."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data
from monitor.text import plural

st.title("Fleet")
jobs = data.fleet()
if jobs.empty:
    st.info(
        "No jobs yet: add a target to the config (`targets: spark_event_logs: [{name, path}]`) and start "
        "`tidegauge run -c FILE`, or try `tidegauge demo`."
    )
    st.stop()

firing = int(jobs["firing"].sum())
stale = jobs[jobs["stale"]]
c1, c2, c3, c4 = st.columns(4)
c1.metric("jobs", len(jobs))
worst = jobs[["severity", "period_severity"]].max(axis=1)
c2.metric("unhealthy jobs", int((worst > 0).sum()), help=f"a firing alert now, or a finding in the last {data.PERIOD.days} days")
c3.metric("firing alerts", firing)
c4.metric("stopped reporting", len(stale))

if not stale.empty:
    names = ", ".join(f"**{n}**" for n in stale["name"])
    st.warning(f"Stopped reporting (no sample for {int(data.STALE_AFTER.total_seconds() // 60)} min): {names}")

f1, f2, f3, f4 = st.columns([1, 1, 2, 1])
engines = f1.multiselect("engine", sorted(jobs["engine"].unique()), placeholder="all")
healths = f2.multiselect("health", ["critical", "warning", "info", "ok"], placeholder="all")
name = f3.text_input("name contains", "")
sort = f4.selectbox("sort by", ["health", "freshness", "name", "input rows"])

view = jobs.assign(worst=worst)
if engines:
    view = view[view["engine"].isin(engines)]
if healths:
    view = view[view["health"].isin(healths) | view["period_health"].isin(healths)]
if name:
    view = view[view["name"].str.contains(name, case=False, regex=False) | view["job_id"].str.contains(name, regex=False)]
order = {
    "health": (["worst", "severity", "firing", "name"], [False, False, False, True]),
    "freshness": (["freshness_s"], [False]),
    "name": (["name"], [True]),
    "input rows": (["num_input_rows"], [False]),
}[sort]
view = view.sort_values(order[0], ascending=order[1], na_position="last")

table = pd.DataFrame(
    {
        "health": list(view["health"]),
        "worst in period": [f"{h}: {w}" if w else h for h, w in zip(view["period_health"], view["worst_episode"], strict=True)],
        "job": view["name"],
        "engine": view["engine"],
        "freshness": [data.human_lag(v) for v in view["freshness_s"]],
        "firing": view["firing"],
        "firing now": [r or "nothing firing" for r in view["worst_rule"]],
        "rows (last batch)": [data.count_text(v) for v in view["num_input_rows"]],
        "state": view["state"],
        "consumer lag": [lag or "not a consumer group" for lag in view["lag"]],
        "freshness (last 10 min)": view["freshness_series"],
        "last sample (UTC)": [f"{t:%Y-%m-%d %H:%M:%S}" if not pd.isna(t) else "unknown" for t in view["observed_at"]],
        "status": ["stopped reporting" if s else "reporting" for s in view["stale"]],
        "open": [f"job?engine={e}&job_id={j}" for e, j in zip(view["engine"], view["job_id"], strict=True)],
    }
)
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config={
        "health": st.column_config.TextColumn("health now", help="the worst firing alert"),
        "firing": st.column_config.NumberColumn("firing alerts", help="alerts firing now"),
        "firing now": st.column_config.TextColumn(help="the rule of the worst alert firing now (the period's worst "
                                                  "finding, resolved or not, is under 'worst in period')"),
        "worst in period": st.column_config.TextColumn(help=f"the worst finding of the last {data.PERIOD.days} days of data"),
        "freshness": st.column_config.TextColumn(help="processing time minus watermark, at the newest batch"),
        "freshness (last 10 min)": st.column_config.LineChartColumn(
            help="processing time minus watermark per batch (seconds) over the job's last 10 minutes of samples"),
        "open": st.column_config.LinkColumn("page", display_text="open"),
    },
)

unhealthy = view[view["worst"] > 0]
if not unhealthy.empty:
    st.subheader("Findings")
    current = data.alerts()
    by_job: dict[tuple[str, str], list[dict[str, object]]] = {}
    for a in current[current["state"] == "firing"].to_dict("records"):
        by_job.setdefault((str(a["engine"]), str(a["job_id"])), []).append(a)
    shown = 0
    for job in unhealthy.to_dict("records"):
        if not by_job.get((job["engine"], job["job_id"])) and job["worst_episode"] and shown < 200:
            shown += 1  # nothing firing now: the worst finding of the period
            st.markdown(
                f"**{job['name']}** · **{job['worst_episode']}** ({job['period_health']}, in the period): "
                f"{job['worst_episode_message']} [open job](job?engine={job['engine']}&job_id={job['job_id']})"
            )
        for a in by_job.get((job["engine"], job["job_id"]), []):
            if shown == 200:
                break
            shown += 1
            st.markdown(
                f"**{job['name']}** · **{a['rule']}** ({a['severity']}): {a['message']} "
                f"[open job](job?engine={job['engine']}&job_id={job['job_id']})"
            )
    total = sum(len(by_job.get((j["engine"], j["job_id"]), [])) for j in unhealthy.to_dict("records"))
    if total > shown:
        st.caption(f"... and {plural(total - shown, 'more firing finding')}: see the Alerts page.")
