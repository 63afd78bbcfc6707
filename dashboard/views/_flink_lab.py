"""The What-if lab's Flink part (rendered by ``views/whatif.py`` when the engine is Flink): the controls a
Flink DataStream job has, the replay (:func:`dashboard.data.whatif_flink`) drawn as late elements over
processing time, window firings' emission latency, window state over time, the largest watermark step
marked, and the delay sweep with the recommended delay. Only renders what :mod:`dashboard.data` returns."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, data
from monitor.text import plural

SWEEP_S = (0.0, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


def render(content: bytes, suffix: str, name: str) -> None:
    """Controls, replay and drawings for one events file (``name`` is used in error messages)."""
    st.caption("Flink: the watermark is `BoundedOutOfOrdernessWatermarks`' max timestamp − delay − 1 ms per "
               "partition (split), the min over the splits that are not idle (`WatermarksWithIdleness`); "
               "the `WindowOperator` fires a window when the watermark passes its end.")
    c1, c2, c3, c4 = st.columns(4)
    delay_s = c1.number_input("forBoundedOutOfOrderness delay (s)", min_value=0.0, value=30.0, step=5.0,
                              key="flink_delay")
    window = c2.selectbox("window", ["tumbling", "sliding", "session"], format_func=lambda w: f"{w} window",
                          key="flink_window")
    window_s = c2.number_input("window size / session gap (s)", min_value=0.001, value=60.0, step=10.0,
                               key="flink_size")
    slide_s = (c2.number_input("slide (s)", min_value=0.001, value=30.0, step=5.0, key="flink_slide")
               if window == "sliding" else None)
    lateness_s = c3.number_input("allowed lateness (s)", min_value=0.0, value=0.0, step=5.0, key="flink_lateness")
    side = c3.checkbox("late side output (sideOutputLateData)", value=False, key="flink_side")
    per_event = c4.checkbox("per-event watermarks", value=False, key="flink_per_event",
                            help="a generator that emits in onEvent instead of onPeriodicEmit")
    interval_ms = c4.number_input("watermark interval (ms)", min_value=1, value=200, step=50, key="flink_interval",
                                  help="pipeline.auto-watermark-interval; with per-event watermarks it only "
                                       "paces the idleness checks")
    use_idle = c4.checkbox("withIdleness", value=False, key="flink_use_idle")
    idle_s = (c4.number_input("idleness timeout (s)", min_value=0.001, value=30.0, step=5.0, key="flink_idle")
              if use_idle else None)
    st.caption("No trigger: Flink has no micro-batches; event-time windows fire on watermarks "
               "(`EventTimeTrigger`), which a periodic generator emits every watermark interval.")
    st.caption("Late = an element whose windows all ended (end − 1 + allowed lateness) at or before the current "
               "watermark, judged per element when it arrives, not per batch.")
    st.caption("No multiple-watermark policy: the combined watermark is always the min over the active splits "
               "(`partition` column); an idle split leaves the min after the idleness timeout.")
    target = st.slider("target completeness for the recommendation (%)", 90.0, 100.0, 99.9, 0.1, key="flink_target")
    try:
        r = data.whatif_flink(
            content, suffix, delay_s=delay_s, window=window, window_s=window_s, slide_s=slide_s,
            allowed_lateness_s=lateness_s, idleness_s=idle_s, watermark_interval_ms=int(interval_ms),
            per_event_watermarks=per_event, late_side_output=side, sweep_s=SWEEP_S, target_pct=target, name=name,
        )
    except Exception as exc:  # the file or the settings do not fit: say why and keep the page
        st.error(f"Cannot replay: {exc}")
        st.stop()
    _summary(r, side)
    m = r.misdated
    if m is not None:  # the useful answer first: the element, the delay without it, then the delay with it
        from dashboard.views._lab_advice import render_lead

        when = f" at {m['processing_time']:%H:%M:%S} UTC" if m["processing_time"] is not None else ""
        render_lead([f"line {m['line']}, event time {m['event_time']:%Y-%m-%d %H:%M:%S} UTC, moved the watermark "
                     f"+{data.human_lag(m['advance_s'])}{when}"], r.recommended_delay_s, r.recommended_delay_with_s,
                    target, "the WatermarkStrategy")
    _drawings(r)
    _sweep(r, target)


def _summary(r: data.FlinkWhatIf, side: bool) -> None:
    s = r.summary
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("rows", f"{s['input_rows']:,}")
    m2.metric("late elements", f"{s['late_elements']:,}", f"{100 * s['late_share']:.2f}%", delta_color="inverse",
              help="late side output records" if side else "numLateRecordsDropped")
    m3.metric("window firings", f"{s['firings']:,}", help=f"{s['late_firings']:,} of them late firings "
              "(an element within the allowed lateness re-fires its window)")
    peak = "n/a" if r.state is None or r.state.empty else f"{int(r.state['state_windows'].max()):,}"
    m4.metric("peak windows in state", peak)
    st.caption(f"{plural(s['partitions'], 'partition')}; {plural(s['watermark_advances'], 'watermark advance')}; "
               f"{plural(s['late_firings'], 'late firing')}; {plural(s['open_windows'], 'window')} still open at the end.")
    if r.bad_rows:
        st.warning(f"{plural(r.bad_rows, 'row')} had an unreadable event time (left out: Flink's timestamp assigner "
                   "would fail on them).")
    idle = [p for p in s["idle_periods"] if p["partition"] is not None]
    if idle:
        st.info(f"withIdleness marked a partition idle {plural(len(idle), 'time')}: it left the min watermark meanwhile.")
    m = r.mover
    if m is not None:
        who = (f"element on line {m['line']} (event time {m['event_time']:%Y-%m-%d %H:%M:%S} UTC) sets the new "
               "watermark" if m["line"] is not None else "no single element sets it")
        at = f" at {m['processing_time']:%H:%M:%S} UTC" if m["processing_time"] is not None else ""
        st.markdown(f"The watermark moved most{at} (+{data.human_lag(m['advance_s'])}): the {who}.")


def _drawings(r: data.FlinkWhatIf) -> None:
    if not r.has_processing_time:
        st.info("The file has no arrival_time column: nothing can be drawn over processing time (per-event "
                "watermarks replay in file order). The tables below list the late elements and the firings.")
        st.dataframe(r.late, hide_index=True, width="stretch")
        st.dataframe(r.firings, hide_index=True, width="stretch")
        return
    xenc = charts.time_x("processing_time", "processing time (UTC)")
    rule = None
    if r.mover is not None and r.mover["processing_time"] is not None:
        mark = pd.DataFrame([{"processing_time": r.mover["processing_time"],
                              "what": "the largest watermark step" + (f": line {r.mover['line']}" if r.mover["line"] else "")}])
        rule = alt.Chart(mark).mark_rule(color="#8e44ad", strokeWidth=2).encode(x=xenc, tooltip=["what:N"])
    c1, c2 = st.columns(2)
    c1.subheader("Late elements over processing time")
    if r.late.empty:
        c1.info("No element was late at these settings.")
    else:
        late = r.late.assign(late=1)
        chart: alt.Chart | alt.LayerChart = alt.Chart(late).mark_bar(color="#c0392b").encode(
            x=xenc, y=alt.Y("sum(late):Q", title="late elements"), tooltip=["line", "event_time", "watermark"])
        c1.altair_chart((chart + rule if rule is not None else chart).properties(height=240), width="stretch")
    c2.subheader("Windows in state")
    if r.state is None:
        c2.info("Not available for session windows: the replay does not track merging window state over time "
                f"(windows still open at the end: {r.summary['open_windows']}).")
    else:
        st_chart: alt.Chart | alt.LayerChart = alt.Chart(r.state.dropna(subset=["processing_time"])).mark_line(
            color="#2c3e50", interpolate="step-after").encode(
            x=xenc, y=alt.Y("state_windows:Q", title="(key, window) pairs in state"),
            tooltip=["processing_time", "watermark", "state_windows"])
        c2.altair_chart((st_chart + rule if rule is not None else st_chart).properties(height=240), width="stretch")
    st.subheader("Window emission latency")
    fired = r.firings.dropna(subset=["emit_latency_s"])
    if fired.empty:
        st.info("No window fired at these settings (the watermark never passed a window's end).")
        return
    fired = fired.assign(firing=["late (allowed lateness)" if x else "on time" for x in fired["late_firing"]])
    lat = alt.Chart(fired).mark_circle().encode(
        x=xenc, y=alt.Y("emit_latency_s:Q", title="emission latency (s)"),
        color=alt.Color("firing:N", title="firing", legend=alt.Legend(orient="bottom", labelLimit=0)),
        tooltip=["window_start", "window_end", "count", "emit_latency_s", "late_firing"])
    st.caption("Emission latency: processing time − window end.")
    st.altair_chart(lat.properties(height=240), width="stretch")
    fd = r.summary.get("firing_delay_ms") or {}
    if fd.get("count"):
        st.caption(f"On-time firings, processing time − window end: p50 {fd['p50'] / 1000:.1f} s, "
                   f"p95 {fd['p95'] / 1000:.1f} s, max {fd['max'] / 1000:.1f} s.")


def _sweep(r: data.FlinkWhatIf, target: float) -> None:
    st.subheader("Delay sweep")
    if r.misdated is not None:
        st.caption("The sweep keeps the mis-dated element: every delay in it leaves the elements behind that "
                   "element's watermark late; the recommendation above is without it.")
    elif r.recommended_delay_s is not None:
        st.success(f"Recommended delay: **{data.human_lag(r.recommended_delay_s)}**, the smallest of the sweep "
                   f"whose late elements are at most {100 - target:.1f}% of rows (from this replay).")
    else:
        st.warning(f"No delay in the sweep keeps {target:.1f}% of rows: the late elements are later than 30 min.")
    st.dataframe(r.sweep, hide_index=True, width="stretch", column_config={
        "delay_s": st.column_config.NumberColumn("delay (s)"),
        "late_share_pct": st.column_config.NumberColumn("late (%)", format="%.3f"),
        "firing_delay_p95_s": st.column_config.NumberColumn("firing latency p95 (s)", format="%.1f"),
    })
    chart = charts.sweep_chart(r.sweep, "late_share_pct", y_title="late elements (%)",
                               x_title="forBoundedOutOfOrderness delay (s)", recommended_s=r.recommended_delay_s)
    st.altair_chart(chart, width="stretch")
