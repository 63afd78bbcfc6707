"""What-if lab: replay a stored event sample or an uploaded file through the reference watermark engine,
in its Spark Structured Streaming mode (this script) or its Flink mode (:mod:`dashboard.views._flink_lab`),
with other settings; the replay drawn (rows dropped, state, the watermark), the row that moved the
watermark marked, and the delay sweep with the recommended delay."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data
from monitor.text import plural

st.title("What-if lab")
st.caption("Replays events through tidegauge's reference watermark engine: Spark Structured Streaming's rules "
           "(per-input watermark = max event time − delay, min/max policy, late rows dropped against the "
           "previous batch's watermark) or a Flink DataStream job's (forBoundedOutOfOrderness, withIdleness, "
           "event-time windows with allowed lateness).")

source = st.radio("events", ["stored sample", "upload a file"], horizontal=True)
content: bytes | None = None
suffix = ".csv"
if source == "stored sample":
    names = data.sample_files()
    name = st.selectbox("sample", names, key="sample")
    content = data.sample_bytes(name)
    label = name
else:
    upload = st.file_uploader("CSV, JSON lines or Parquet with event_time (and arrival_time, source or partition, key)",
                              type=["csv", "jsonl", "json", "ndjson", "parquet"])
    if upload is None:
        st.info("Upload an events file to replay it, or choose a stored sample.")
        st.stop()
    content = upload.getvalue()
    label = upload.name
    suffix = "." + upload.name.rsplit(".", 1)[-1].lower()

assert content is not None
engine = st.radio("engine", ["Spark Structured Streaming", "Flink DataStream"], horizontal=True, key="engine")
if engine == "Flink DataStream":
    from dashboard.views import _flink_lab

    _flink_lab.render(content, suffix, label)
    st.stop()

c1, c2, c3, c4 = st.columns(4)
delay_s = c1.number_input("delay threshold (s)", min_value=0.0, value=30.0, step=5.0)
window = c2.selectbox("operator", ["tumbling", "sliding", "session", "dedup"],
                      format_func=lambda w: {"dedup": "dropDuplicatesWithinWatermark(key)"}.get(w, f"{w} window"))
window_s = c2.number_input("window size / session gap (s)", min_value=1.0, value=60.0, step=10.0)
slide_s = c2.number_input("slide (s)", min_value=1.0, value=30.0, step=5.0) if window == "sliding" else None
trigger = c3.number_input("trigger (s; 0 = the file's own batches)", min_value=0.0, value=10.0, step=5.0)
policy = c3.selectbox("multiple-watermark policy", ["min", "max"])
arrived = c3.radio(
    "a file with a batch column and no arrival_time was read", ["by a live query, caught up", "as a backlog"],
    help="Decides the no-data batches: a live query caught up between batches runs one after each batch that moves "
         "the watermark; a query started on the batches already waiting (one per trigger, maxFilesPerTrigger=1) "
         "runs one only after the last. With arrival_time the data decides.",
)
use_skew = c4.checkbox("drop rows from the future first", value=False,
                       help="filter(event_time <= current_timestamp() + skew) before withWatermark")
skew_s = c4.number_input("future skew (s)", min_value=0.0, value=3600.0, step=60.0) if use_skew else None
c4.caption("Idleness: Spark has no idle-input timeout (a silent input holds the min watermark); that is Flink's withIdleness.")
target = st.slider("target completeness for the recommendation (%)", 90.0, 100.0, 99.9, 0.1)
sweep = (0.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

try:
    result = data.whatif(
        content, suffix, delay_s=delay_s, window=window, window_s=window_s, slide_s=slide_s,
        trigger_s=trigger or None, policy=policy, future_skew_s=skew_s, sweep_s=sweep, target_pct=target,
        backlog=arrived == "as a backlog",
    )
except Exception as exc:  # the file or the settings do not fit: say why and keep the page
    st.error(f"Cannot replay: {exc}")
    st.stop()

s = result.summary
m1, m2, m3, m4 = st.columns(4)
m1.metric("rows", f"{s['input_rows']:,}")
m2.metric("dropped as late", f"{s['dropped_rows']:,}", f"{100 * s['dropped_share']:.2f}%", delta_color="inverse")
m3.metric("peak state rows", f"{s['peak_state_rows']:,}")
m4.metric("batches", f"{s['batches']:,}")
if result.no_data_basis:
    st.caption(f"No-data batches: {result.no_data_basis}")
if result.bad_rows:
    st.warning(f"{plural(result.bad_rows, 'row')} had an unreadable event time (skipped, as Spark skips null times).")

if result.misdated:  # the useful answer first: the row, the delay without it, then the delay with it
    from dashboard.views._lab_advice import render_lead

    render_lead([f"line {m['line']} (batch {m['batch_id']}), event time {m['event_time']}, moved the watermark "
                 f"+{data.human_lag(m['advance_s'])}" for m in result.misdated],
                result.recommended_delay_s, result.recommended_delay_with_s, target, "withWatermark")

mover = result.mover
if mover is not None:
    st.markdown(f"The watermark moved most in **batch {mover['batch_id']}** (+{data.human_lag(mover['advance_s'])}): "
                f"row {mover['row']} of the file, event time {mover['event_time']:%Y-%m-%d %H:%M:%S} UTC.")

b = result.batches
x = "processing_time" if b["processing_time"].notna().any() else "batch_id"
xenc = charts.time_x("processing_time", "processing time (UTC)") if x == "processing_time" else alt.X("batch_id:Q", title="batch")
base = alt.Chart(b).encode(x=xenc)
dropped = base.mark_bar(color="#c0392b").encode(y=alt.Y("late_rows:Q", title="rows dropped as late"),
                                               tooltip=["batch_id", "late_rows", "input_rows"])
state = base.mark_line(color="#2c3e50", interpolate="step-after").encode(y=alt.Y("state_rows:Q", title="state rows"),
                                                                         tooltip=["batch_id", "state_rows"])
layers_d: alt.LayerChart | alt.Chart = dropped
layers_s: alt.LayerChart | alt.Chart = state
if mover is not None:
    mark = pd.DataFrame([{x: mover["processing_time"] if x == "processing_time" else mover["batch_id"],
                          "what": f"batch {mover['batch_id']}: row {mover['row']} moved the watermark"}])
    rule = alt.Chart(mark).mark_rule(color="#8e44ad", strokeWidth=2).encode(x=xenc, tooltip=["what:N"])
    layers_d = dropped + rule
    layers_s = state + rule
c1, c2 = st.columns(2)
c1.subheader("Rows dropped per batch")
c1.altair_chart(layers_d.properties(height=240), width="stretch")
c2.subheader("State rows")
c2.altair_chart(layers_s.properties(height=240), width="stretch")
emits = b.dropna(subset=["emit_latency_s"])
if not emits.empty:
    st.subheader("Window emission latency")
    latency = alt.Chart(emits).mark_circle(color="#16a085").encode(
        x=xenc, y=alt.Y("emit_latency_s:Q", title="emission latency (s)"),
        tooltip=["batch_id", "emitted", "emit_latency_s"])
    st.caption("Emission latency: a batch's processing time − the end of the windows it emits.")
    st.altair_chart(latency.properties(height=240), width="stretch")
lat = s.get("latency") or {}
if lat.get("p95_ms") is not None:
    st.caption(f"Window emission latency (processing time − window end): p50 {lat['p50_ms'] / 1000:.1f} s, "
               f"p95 {lat['p95_ms'] / 1000:.1f} s, max {lat['max_ms'] / 1000:.1f} s.")

st.subheader("Delay sweep")
sw = result.sweep
if result.misdated:
    st.caption("The sweep keeps the mis-dated row: every delay in it drops the rows behind that row's watermark; "
               "the recommendation above is without it.")
elif result.recommended_delay_s is not None:
    st.success(f"Recommended delay: **{data.human_lag(result.recommended_delay_s)}**, the smallest of the sweep that "
               f"drops at most {100 - target:.1f}% of rows (from this replay).")
else:
    st.warning(f"No delay in the sweep keeps {target:.1f}% of rows: the late rows are later than 30 min "
               "(or come after a future-dated row: try the future filter).")
st.dataframe(sw, hide_index=True, width="stretch", column_config={
    "delay_s": st.column_config.NumberColumn("delay (s)"),
    "dropped_share_pct": st.column_config.NumberColumn("dropped (%)", format="%.3f"),
    "latency_p95_s": st.column_config.NumberColumn("latency p95 (s)", format="%.1f"),
})
st.altair_chart(charts.sweep_chart(sw, "dropped_share_pct", y_title="rows dropped (%)", x_title="delay threshold (s)",
                                   recommended_s=result.recommended_delay_s), width="stretch")
