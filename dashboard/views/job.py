"""Job: one job's story, per engine, from the job facts (:func:`dashboard.data.job_detail`).

* Spark: watermark vs event-time max vs processing time, rows per input (the input holding the minimum, as
  the rules name it), rows dropped with the batch that set the watermark they were late against, state
  with its trend, batch durations against the trigger, restarts.
* Flink: input/output watermark per vertex and subtask, the subtask holding the minimum, idle subtasks,
  late drops per window vertex, checkpointed state, back pressure, restarts.
* Kafka consumer group: lag per partition in offsets and in time, Burrow's status per partition,
  members, the partition holding the most lag.

Every job: its findings (explanation, remedy, batch; silenced ones marked) first.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data
from dashboard.views._slo import render_slo
from monitor.text import POLLS, plural

st.title("Job")
jobs = data.fleet()
if jobs.empty:
    st.info("No jobs yet: add a target to the config and start `tidegauge run -c FILE` (or try `tidegauge demo`).")
    st.stop()

params = st.query_params
keys = list(zip(jobs["engine"], jobs["job_id"], strict=True))
labels = {k: f"{n} ({k[0]})" for k, n in zip(keys, jobs["name"], strict=True)}
wanted = (params.get("engine", ""), params.get("job_id", ""))
if wanted[1] and wanted not in keys:
    st.warning(f"The {wanted[0] or 'unknown-engine'} job `{wanted[1]}` is not in this database "
               f"(`{data.db_label()}`): the link comes from another database or the job's samples were "
               "deleted. Pick a job of this database below.")
index = keys.index(wanted) if wanted in keys else 0
choice = st.selectbox("job", keys, index=index, format_func=lambda k: labels[k])
if choice != wanted and (not wanted[1] or wanted in keys):
    st.query_params.update({"engine": choice[0], "job_id": choice[1]})
detail = data.job_detail(choice[0], choice[1])
if detail is None:
    st.warning("This job is no longer in this database.")
    st.stop()

job_data: data.JobDetail = detail
s = detail.summary
engine = s["engine"]
b = detail.batches
st.subheader(s["name"])
runs = "" if engine == "kafka" else f" · {plural(len(detail.restarts), 'restart')} in the window shown"
st.caption(f"{engine} job `{s['job_id']}`{runs} · health **{s['health']}** now, **{s['period_health']}** over the "
           f"last {data.PERIOD.days} days" + (" · **stopped reporting**" if s["stale"] else ""))
newest = b.iloc[-1] if not b.empty else None
m1, m2, m3, m4 = st.columns([1, 1, 2, 1] if engine == "kafka" else 4)  # a Burrow status can be long
if engine == "kafka":
    uncommitted = int((detail.lag["waiting"] != "").sum()) if not detail.lag.empty else 0
    m1.metric("lag (offsets)", data.count_text(None if newest is None else newest["lag_offsets"])
              + (f" + {uncommitted} never committed" if uncommitted else ""),
              help="the group's records behind the log end, summed over its committed partitions; a partition the "
                   "group never committed has no lag and is counted apart (its records waiting: see the table)")
    m2.metric("lag (time)", data.human_lag(None if newest is None else newest["lag_seconds"]),
              help="how far behind in time the slowest partition is (unknown when the lag source gives no times)")
    m3.metric("group status (Burrow)", detail.lag_status, help="the worst status of its partitions")
    m4.metric("members", data.count_text(detail.members))
else:
    freshness_s = s["freshness_s"]
    # the watermark ahead of processing time (a negative freshness): said below the figure, not cut off
    ahead = bool(pd.notna(freshness_s) and freshness_s < 0)
    m1.metric("freshness", data.human_lag(abs(freshness_s) if ahead else freshness_s),
              delta="watermark ahead of processing time" if ahead else None,
              delta_color="inverse", delta_arrow="off" if ahead else "auto",
              help="processing time minus watermark, newest batch")
    m2.metric("firing alerts", int(s["firing"]))
    m3.metric("checkpointed state" if engine == "flink" else "state", s["state"])
    if engine == "flink":
        m4.metric("restarts (window)", len(detail.restarts))
    else:
        m4.metric("rows (last batch)", data.count_text(s["num_input_rows"]))

slo = detail.slo
if slo is not None:
    # the freshness SLO's burn as its newest stored burn-rate finding says it (rules.slo); nothing computed here
    st.markdown("**Freshness SLO**")
    render_slo(slo)

st.header("Findings")
open_alerts = detail.alerts[detail.alerts["state"].isin(["firing", "pending"])]
if open_alerts.empty and detail.episodes.empty:
    st.success(f"No open alerts and no findings in the last {data.PERIOD.days} days for this job.")
elif open_alerts.empty:
    st.info(f"No open alerts now; {plural(len(detail.episodes), 'finding')} in the period, the worst "
            f"{s['period_health']}: {s['worst_episode']} (below).")
for _, a in open_alerts.iterrows():
    box = st.error if a["severity"] == "critical" else st.warning if a["severity"] == "warning" else st.info
    where = f" · {a['scope']}" if a["scope"] else ""
    batch = f" · batch {a['batch_id']}" if a["batch_id"] else ""
    muted = f" · **silenced** by {a['silenced_by']}: not notified" if a["silenced_by"] else ""
    box(f"**{a['rule']}** ({a['severity']}, {a['state']} since {a['active_at']:%H:%M:%S} UTC{where}{batch}{muted})"
        f"\n\n{a['message']}")
done = detail.alerts[~detail.alerts["state"].isin(["firing", "pending"])]
if not done.empty:
    with st.expander(f"{plural(len(done), 'resolved finding')}"):
        for _, a in done.iterrows():
            st.markdown(f"- **{a['rule']}** ({a['severity']}), lasted {data.human_lag(a['duration_s'])}: {a['message']}")

if not detail.episodes.empty:
    st.subheader(f"Findings in the last {data.PERIOD.days} days")
    st.altair_chart(charts.episode_timeline(detail.episodes), width="stretch")
    ep = detail.episodes
    st.dataframe(pd.DataFrame({
        "severity": ep["severity"], "rule": ep["rule"], "scope": [x or "whole job" for x in ep["scope"]],
        "batches": [x or POLLS for x in ep["batches"]],
        "from (UTC)": [f"{t:%Y-%m-%d %H:%M:%S}" for t in ep["first_at"]],
        "to (UTC)": [f"{t:%Y-%m-%d %H:%M:%S}" for t in ep["last_at"]],
        "ended": ep["ended_by"], "notified": ["yes" if n else "no" for n in ep["notified"]],
    }), hide_index=True, width="stretch")
    st.caption("What each finding found and what to do (click to read):")
    for _, e in ep.iterrows():
        where = f" · {e['scope']}" if e["scope"] else ""
        with st.expander(f"{e['severity']} · {e['rule']} · {e['batches'] or POLLS}{where} · "
                         f"{e['first_at']:%Y-%m-%d %H:%M:%S} UTC · {e['ended_by']}"):
            st.markdown(e["message"])

if b.empty:
    st.info("No samples in the last two hours for this job.")
    st.stop()
scopes = detail.scopes


#: A subtask without records for this long is listed as idle (Flink's sourceIdleTime / a still record counter).
IDLE_MS = 10_000


def restart_marks(chart: charts.AnyChart) -> charts.AnyChart:
    """``chart`` with a vertical mark at each restart of the window."""
    if not job_data.restarts:
        return chart
    marks = pd.DataFrame({"at": job_data.restarts, "what": ["restart"] * len(job_data.restarts)})
    return chart + charts.time_marks(marks, "at", "what")


def holding() -> None:
    if job_data.holding_min:
        st.warning(f"Holding the minimum watermark: **{job_data.holding_min['name']}**: {job_data.holding_min['reason']}")


def state_section(unit_label: str, column: str, empty: str) -> None:
    state = b[["observed_at", column]].dropna()
    if state.empty:
        st.caption(empty)
        return
    def fmt(value: object) -> str:
        return data.bytes_text(value) if job_data.state_unit == "bytes" else data.count_text(value, "rows")

    if job_data.state_slope_per_h is None:
        trend = "too few points for a trend"
    elif not job_data.state_growing:
        trend = "no growth (flat or falling)"
    else:
        trend = f"growing {fmt(job_data.state_slope_per_h)}/h; in 24 h about {fmt(job_data.state_projected_24h)}"
    st.caption(f"now {fmt(state[column].iloc[-1])} · {trend}")
    chart: charts.AnyChart = charts.lines_over_time(state, [column], y_title=unit_label, labels={column: unit_label})
    if not job_data.state_projection.empty:
        chart = chart + alt.Chart(job_data.state_projection).mark_line(strokeDash=[6, 4], color="#999").encode(
            x=charts.time_x(), y="state:Q")
    st.altair_chart(restart_marks(chart), width="stretch")


def drops_section() -> None:
    if not job_data.dropped_rows:
        st.caption("No rows were dropped as late in this window."
                   if job_data.dropped_rows == 0 else "The job reports no count of rows dropped as late.")
        return
    st.markdown(f"**{plural(job_data.dropped_rows, 'row')}** dropped as late in this window.")
    for _, c in job_data.drops.head(3).iterrows():
        if pd.isna(c["batch_id"]):
            continue
        why = ""
        if c["mis_dated"]:
            why = (f" — a **mis-dated row** ({data.human_lag(c['ahead_s'])} beyond the data): no watermark delay "
                   "keeps rows dropped behind it; fix or filter that row")
        st.markdown(f"- {plural(int(c['dropped_rows']), 'row')} dropped against the watermark set by **batch {int(c['batch_id'])}** "
                    f"(event-time max {c['event_time_max']:%Y-%m-%d %H:%M:%S} UTC){why}")
    st.altair_chart(charts.bars_over_time(b, "dropped_rows", y_title="rows dropped", extra_tooltips=["batch_id:Q"]),
                    width="stretch")


# ---------------------------------------------------------------------------------------------- Kafka
if engine == "kafka":
    st.header("Consumer lag per partition")
    lag = detail.lag
    if lag.empty:
        st.info("No partition lag stored for this group in the window shown.")
        st.stop()
    most = lag.sort_values("lag_offsets", ascending=False, na_position="last").iloc[0]
    if not pd.isna(most["lag_offsets"]) and most["lag_offsets"] > 0:
        behind = "" if pd.isna(most["lag_seconds"]) else f", {data.human_lag(most['lag_seconds'])} behind in time"
        st.warning(f"Most lag: **{most['topic']} partition {int(most['partition'])}**: "
                   f"{data.count_text(most['lag_offsets'])} offsets behind{behind}; status {most['status']}")
    never = lag[lag["waiting"] != ""]
    for _, row in never.iterrows():
        st.warning(f"**{row['topic']} partition {int(row['partition'])}** is owned by a live member but the group has "
                   f"never committed an offset on it: records waiting: {row['waiting']}. Until the consumer commits, "
                   "a restart or a rebalance starts it over from its auto.offset.reset (see the consumer_lag finding).")
    table = pd.DataFrame({
        "topic": lag["topic"], "partition": lag["partition"].astype(int), "status (Burrow)": lag["status"],
        "lag (offsets)": ["never committed" if w else data.count_text(v) for v, w in zip(lag["lag_offsets"], lag["waiting"],
                                                                                         strict=True)],
        "max in window": [data.count_text(v) for v in lag["lag_offsets_max"]],
        "lag (time)": [data.human_lag(v) for v in lag["lag_seconds"]],
        "max (time)": [data.human_lag(v) for v in lag["lag_seconds_max"]],
    })
    if (lag["owned"] == "yes").any():  # the lag source reports partition owners (the admin API, Burrow)
        table["owned by a live member"] = lag["owned"]
    if not never.empty:
        table["records waiting (never committed)"] = lag["waiting_short"]
    st.dataframe(table, hide_index=True, width="stretch")
    parts = scopes[scopes["partition"].notna()].copy()
    parts["series"] = parts["source"].astype(str) + " partition " + parts["partition"].astype(int).astype(str)
    c1, c2 = st.columns(2)
    offsets = parts.pivot_table(index="observed_at", columns="series", values="lag_offsets", aggfunc="max").reset_index()
    c1.altair_chart(charts.lines_over_time(offsets, [c for c in offsets.columns if c != "observed_at"],
                                           y_title="offsets behind"), width="stretch")
    seconds = parts.dropna(subset=["lag_seconds"])
    if seconds.empty:
        c2.info("Lag in time: unknown (the lag source reports no timestamps for these partitions).")
    else:
        wide = seconds.pivot_table(index="observed_at", columns="series", values="lag_seconds", aggfunc="max").reset_index()
        c2.altair_chart(charts.lines_over_time(wide, [c for c in wide.columns if c != "observed_at"],
                                               y_title="lag (s)", value_format=",.1f"), width="stretch")
    st.stop()

# ---------------------------------------------------------------------------------------------- Flink
if engine == "flink":
    st.header("Watermarks per vertex and subtask")
    st.caption("Each subtask's current input watermark (a source's: its output watermark). The job's watermark is "
               "the minimum of its inputs; an idle subtask without withIdleness holds it back.")
    holding()
    marks = scopes[scopes["subtask"].notna()]
    wide = marks.pivot_table(index="observed_at", columns="name", values="watermark", aggfunc="max")
    if wide.empty:
        st.info("No subtask has reported a watermark yet (Long.MIN_VALUE).")
    else:
        frame = wide.reset_index()
        frame["processing time"] = frame["observed_at"]
        clip = charts.clip_range(marks["watermark"], processing=frame["observed_at"])
        st.altair_chart(restart_marks(charts.lines_over_time(
            frame, ["processing time", *wide.columns], y_title="watermark (UTC)", y_type="temporal", clip=clip)),
            width="stretch")
    newest_idle = marks.sort_values("observed_at").groupby("name").tail(1)
    idle = newest_idle[newest_idle["idle_ms"].fillna(0) >= IDLE_MS]
    st.subheader("Idle subtasks")
    if idle.empty:
        st.caption(f"No subtask has been without records for {IDLE_MS // 1000} s or more.")
    else:
        st.dataframe(pd.DataFrame({"subtask": idle["name"], "idle for": [data.human_lag(v / 1000) for v in idle["idle_ms"]]}),
                     hide_index=True, width="stretch")
    st.subheader("Late records dropped per window vertex")
    if detail.drops_by_scope.empty:
        st.caption("No late record was dropped (numLateRecordsDropped did not rise) in this window.")
    else:
        st.dataframe(pd.DataFrame({"window vertex subtask": detail.drops_by_scope["name"],
                                   "late records dropped": [data.count_text(v) for v in detail.drops_by_scope["dropped_rows"]]}),
                     hide_index=True, width="stretch")
    st.subheader("Checkpointed state")
    state_section("checkpointed state (bytes)", "state_bytes",
                  "No completed checkpoint reports a state size (checkpointing off, or none completed yet).")
    st.subheader("Back pressure")
    bp = marks.pivot_table(index="observed_at", columns="name", values="backpressure_pct", aggfunc="max")
    if bp.empty:
        st.caption("No back-pressure measurement reported.")
    else:
        st.altair_chart(charts.lines_over_time(bp.reset_index(), list(bp.columns), y_title="back-pressured (% of time)",
                                               value_format=".0f"), width="stretch")
    st.subheader("Restarts")
    st.markdown(f"**{plural(len(detail.restarts), 'restart')}** in the window shown (Flink numRestarts)."
                if detail.restarts else "No restart in the window shown.")
    st.stop()

# ---------------------------------------------------------------------------------------------- Spark
st.header("Watermark, event time and processing time")
st.caption("The gap between processing time and the watermark is how late results are; an event-time max "
           "above processing time is a row from the future.")
lines = b[["observed_at", "watermark", "event_time_max"]].copy()
lines["processing_time"] = lines["observed_at"]
clip = charts.clip_range(b["event_time_max"], b["watermark"], processing=b["observed_at"])
st.altair_chart(restart_marks(charts.lines_over_time(
    lines, ["processing_time", "event_time_max", "watermark"], y_title="time (UTC)", y_type="temporal", clip=clip,
    labels={"processing_time": "processing time", "event_time_max": "event-time max", "watermark": "watermark"},
)), width="stretch")
if detail.inferred_delay_s is not None:
    st.caption(f"Inferred watermark delay: {data.human_lag(detail.inferred_delay_s)}.")

st.header("Inputs")
holding()
inputs = scopes[scopes["source"].notna() & scopes["input_rows"].notna()]
if inputs.empty:
    st.caption("This job reports no per-input samples.")
else:
    per = inputs.pivot_table(index="observed_at", columns="name", values="input_rows", aggfunc="sum").reset_index()
    st.altair_chart(charts.lines_over_time(per, [c for c in per.columns if c != "observed_at"],
                                           y_title="input rows per batch"), width="stretch")

st.header("Rows dropped by the watermark")
drops_section()

st.header("State")
state_section("state rows", "state_rows", "This job reports no state rows (stateless, or no state operator).")

st.header("Batch durations")
dur = b[["observed_at", "batch_duration_ms", "batch_id"]].dropna()
if dur.empty:
    st.caption("No batch durations reported.")
else:
    durations: charts.AnyChart = charts.bars_over_time(dur, "batch_duration_ms", y_title="batch duration (ms)",
                                                       color="#2980b9", extra_tooltips=["batch_id:Q"])
    if detail.trigger_ms:
        durations = durations + charts.rule_line(detail.trigger_ms, f"trigger ≈ {detail.trigger_ms / 1000:.1f} s")
    st.altair_chart(durations, width="stretch")

st.header("Runs")
if len(detail.runs) <= 1:
    st.caption("No restart in the stored history.")
else:
    st.markdown(f"**{plural(len(detail.runs) - 1, 'restart')}**: each new run id is a restart from the checkpoint.")
st.dataframe(pd.DataFrame({
    "run id": detail.runs["run_id"],
    "first sample (UTC)": [f"{t:%Y-%m-%d %H:%M:%S}" for t in detail.runs["first_seen"]],
    "last sample (UTC)": [f"{t:%Y-%m-%d %H:%M:%S}" for t in detail.runs["last_seen"]],
}), hide_index=True, width="stretch")
