"""Job: one job's story: watermark vs event-time max vs processing time, per-input rows (the input holding
the minimum named), rows dropped with the batch that caused them, state with its trend, consumer lag,
batch durations against the trigger, its findings (explanation, remedy, batch) and its restarts."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data

st.title("Job")
jobs = data.fleet()
if jobs.empty:
    st.info("No jobs yet: add a target to the config and start `tidegauge run -c FILE` (or try `tidegauge demo`).")
    st.stop()

params = st.query_params
keys = list(zip(jobs["engine"], jobs["job_id"], strict=True))
labels = {k: f"{n} ({k[0]})" for k, n in zip(keys, jobs["name"], strict=True)}
wanted = (params.get("engine", ""), params.get("job_id", ""))
index = keys.index(wanted) if wanted in keys else 0
choice = st.selectbox("job", keys, index=index, format_func=lambda k: labels[k])
if choice != wanted:
    st.query_params.update({"engine": choice[0], "job_id": choice[1]})
detail = data.job_detail(choice[0], choice[1])
if detail is None:
    st.warning("This job is no longer in the database.")
    st.stop()

s = detail.summary
st.subheader(s["name"])
st.caption(f"{s['engine']} job `{s['job_id']}` · {s['runs']} run(s) · health **{s['health']}** now, "
           f"**{s['period_health']}** over the last {data.PERIOD.days} days"
           + (" · **stopped reporting**" if s["stale"] else ""))
m1, m2, m3, m4 = st.columns(4)
m1.metric("freshness", data.human_lag(s["freshness_s"]), help="processing time minus watermark")
m2.metric("firing alerts", int(s["firing"]))
m3.metric("state rows", "unknown" if pd.isna(s["state_rows"]) else f"{int(s['state_rows']):,}")
m4.metric("rows (last batch)", "unknown" if pd.isna(s["num_input_rows"]) else f"{int(s['num_input_rows']):,}")

st.header("Findings")
open_alerts = detail.alerts[detail.alerts["state"].isin(["firing", "pending"])]
if open_alerts.empty and detail.episodes.empty:
    st.success(f"No open alerts and no findings in the last {data.PERIOD.days} days for this job.")
elif open_alerts.empty:
    st.info(f"No open alerts now; {len(detail.episodes)} finding(s) in the period, the worst "
            f"{s['period_health']}: {s['worst_episode']} (below).")
for _, a in open_alerts.iterrows():
    box = st.error if a["severity"] == "critical" else st.warning if a["severity"] == "warning" else st.info
    where = f" · {a['scope']}" if a["scope"] else ""
    batch = f" · batch {a['batch_id']}" if a["batch_id"] else ""
    box(f"**{a['rule']}** ({a['severity']}, {a['state']} since {a['active_at']:%H:%M:%S} UTC{where}{batch})\n\n{a['message']}")
done = detail.alerts[~detail.alerts["state"].isin(["firing", "pending"])]
if not done.empty:
    with st.expander(f"{len(done)} resolved finding(s)"):
        for _, a in done.iterrows():
            st.markdown(f"- **{a['rule']}** ({a['severity']}), {a['duration_s']:.0f} s: {a['message']}")

if not detail.episodes.empty:
    st.subheader(f"Findings in the last {data.PERIOD.days} days")
    st.altair_chart(charts.episode_timeline(detail.episodes), width="stretch")
    st.dataframe(
        detail.episodes[["severity", "rule", "scope", "batches", "first_at", "last_at", "ended_by", "notified", "message"]],
        hide_index=True, width="stretch",
        column_config={
            "first_at": st.column_config.DatetimeColumn("from (UTC)", format="YYYY-MM-DD HH:mm:ss", timezone="UTC"),
            "last_at": st.column_config.DatetimeColumn("to (UTC)", format="YYYY-MM-DD HH:mm:ss", timezone="UTC"),
        },
    )

b = detail.batches
if b.empty:
    st.info("No samples in the last two hours for this job.")
    st.stop()
progress = b[b["kind"] == "progress"].copy()

st.header("Watermark, event time and processing time")
st.caption("The gap between processing time and the watermark is how late results are; an event-time max "
           "above processing time is a row from the future.")
lines = progress[["observed_at", "watermark", "event_time_max"]].copy()
lines["processing_time"] = lines["observed_at"]
horizon = lines["observed_at"] + pd.Timedelta(hours=1)
future = lines[lines["event_time_max"] > horizon]
if not future.empty:
    first = progress.loc[future.index[0]]
    st.error(f"Batch {int(first['batch_id'])} at {first['observed_at']:%H:%M:%S} UTC carried an event time of "
             f"{first['event_time_max']:%Y-%m-%d %H:%M:%S} UTC, far ahead of processing time (off the chart).")
for col in ("watermark", "event_time_max"):
    lines[col] = lines[col].where(lines[col] <= horizon)
chart: charts.AnyChart = charts.lines_over_time(
    lines, ["processing_time", "event_time_max", "watermark"], y_title="time (UTC)", y_type="temporal",
    labels={"processing_time": "processing time", "event_time_max": "event-time max", "watermark": "watermark"},
)
restarts = detail.runs.iloc[1:].copy() if len(detail.runs) > 1 else pd.DataFrame()
if not restarts.empty:
    restarts["what"] = ["restart: run " + r[:8] for r in restarts["run_id"]]
    chart = chart + charts.time_marks(restarts, "first_seen", "what")
st.altair_chart(chart, width="stretch")

st.header("Inputs")
if detail.holding_min:
    st.warning(f"Holding the minimum watermark: **{detail.holding_min}**")
if detail.scopes.empty:
    st.caption("This job reports no per-input samples.")
else:
    per = detail.scopes.pivot_table(index="observed_at", columns="scope", values="num_input_rows", aggfunc="sum").reset_index()
    st.altair_chart(
        charts.lines_over_time(per, [c for c in per.columns if c != "observed_at"], y_title="input rows per batch"),
        width="stretch",
    )

st.header("Rows dropped by the watermark")
if detail.drops.empty:
    st.caption("No rows were dropped as late in this window.")
else:
    total = int(detail.drops["dropped_by_watermark"].sum())
    causes = detail.drops.dropna(subset=["cause_batch_id"]).groupby("cause_batch_id")["dropped_by_watermark"].sum()
    st.markdown(f"**{total:,}** rows dropped in {len(detail.drops)} batches.")
    for cause, n in causes.sort_values(ascending=False).head(3).items():
        row = detail.drops[detail.drops["cause_batch_id"] == cause].iloc[0]
        st.markdown(f"- {int(n):,} dropped against the watermark set by **batch {int(cause)}** "
                    f"(event-time max {row['cause_event_time_max']:%Y-%m-%d %H:%M:%S} UTC)")
    st.altair_chart(
        charts.bars_over_time(detail.drops, "dropped_by_watermark", y_title="rows dropped",
                              extra_tooltips=["batch_id:Q", "cause_batch_id:Q"]),
        width="stretch",
    )

st.header("State")
state = progress[["observed_at", "state_rows_total"]].dropna()
if state.empty:
    st.caption("This job reports no state (stateless, or a source without state metrics).")
else:
    trend = ""
    if detail.state_slope_per_h is not None:
        trend = f"trend {detail.state_slope_per_h:,.0f} rows/h"
        removed = progress["state_rows_removed"].fillna(0).sum()
        if detail.state_slope_per_h > 0 and removed == 0:
            trend += " and nothing removed: at this rate it never stops growing"
    st.caption(trend)
    chart = charts.lines_over_time(state, ["state_rows_total"], y_title="state rows", labels={"state_rows_total": "state rows"})
    if not detail.state_projection.empty and (detail.state_slope_per_h or 0) > 0:
        chart = chart + alt.Chart(detail.state_projection).mark_line(strokeDash=[6, 4], color="#999").encode(
            x=charts.time_x(), y="state_rows:Q"
        )
    st.altair_chart(chart, width="stretch")

st.header("Consumer lag and batch durations")
c1, c2 = st.columns(2)
lag = progress[["observed_at", "lag_offsets"]].dropna()
lag_time = progress[["observed_at", "lag_seconds"]].dropna()
if lag.empty and lag_time.empty:
    c1.caption("No consumer lag reported (not a Kafka source, or no lag collector).")
if not lag.empty:
    c1.altair_chart(charts.lines_over_time(lag, ["lag_offsets"], y_title="offsets behind latest",
                                           labels={"lag_offsets": "offsets behind"}), width="stretch")
if not lag_time.empty:
    c1.altair_chart(charts.lines_over_time(lag_time, ["lag_seconds"], y_title="lag (s)",
                                           labels={"lag_seconds": "consumer lag (time)"}), width="stretch")
dur = progress[["observed_at", "batch_duration_ms", "batch_id"]].dropna()
if dur.empty:
    c2.caption("No batch durations reported.")
else:
    durations: charts.AnyChart = charts.bars_over_time(dur, "batch_duration_ms", y_title="batch duration (ms)", color="#2980b9",
                                  extra_tooltips=["batch_id:Q"])
    if detail.trigger_ms:
        durations = durations + charts.rule_line(detail.trigger_ms, f"trigger ≈ {detail.trigger_ms / 1000:.1f} s")
    c2.altair_chart(durations, width="stretch")

st.header("Runs")
if len(detail.runs) <= 1:
    st.caption("No restart in the stored history.")
else:
    st.markdown(f"**{len(detail.runs) - 1} restart(s)**: each new run id is a restart from the checkpoint.")
st.dataframe(detail.runs, hide_index=True, width="stretch")
