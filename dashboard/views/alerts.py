"""Alerts: firing, pending, resolved, the history with durations; silences (same matchers as `tidegauge
silence`) added and expired with the dashboard token; read-only without one, and it says so."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import streamlit as st

from dashboard import data

st.title("Alerts")
frame = data.alerts()
counts = frame["state"].value_counts() if not frame.empty else {}
c1, c2, c3, c4 = st.columns(4)
c1.metric("firing", int(counts.get("firing", 0)))
c2.metric("pending", int(counts.get("pending", 0)))
c3.metric("resolved", int(counts.get("resolved", 0)))
c4.metric("silenced", int((frame["silenced_by"] != "").sum()) if not frame.empty else 0,
          help="open alerts an active silence mutes: they are not notified")

if frame.empty:
    st.info("No alerts yet: the daemon (`tidegauge run`) raises them when a rule finds something.")


def show(state: str) -> None:
    part = frame[frame["state"] == state] if not frame.empty else frame
    if part.empty:
        st.caption(f"No {state} alerts.")
        return
    for _, a in part.iterrows():
        who = a["job_name"] or a["job_id"]
        since = a["active_at"] if pd.isna(a["fired_at"]) else a["fired_at"]
        muted = f" · **silenced** by {a['silenced_by']}, not notified" if a["silenced_by"] else ""
        st.markdown(f"**{a['rule']}** · {a['severity']} · {who}{' · ' + a['scope'] if a['scope'] else ''} · "
                    f"since {since:%H:%M:%S} UTC ({data.human_lag(a['duration_s'])}){muted}  \n{a['message']}")


tabs = st.tabs(["Firing", "Pending", "Resolved", "History"])
with tabs[0]:
    show("firing")
with tabs[1]:
    show("pending")
with tabs[2]:
    show("resolved")
with tabs[3]:
    if frame.empty:
        st.caption("No history yet.")
    else:
        st.dataframe(data.alert_history(frame), hide_index=True, width="stretch")

st.header("Silences")
sil = data.silences()
if sil.empty:
    st.caption("No silences.")
else:
    st.dataframe(sil, hide_index=True, width="stretch")

if not data.token_configured():
    st.info("Read-only: no dashboard token is configured (`dashboard: {token: {env: NAME}}` in the config), so "
            "silences cannot be added or expired here. Use `tidegauge silence add|expire`.")
    st.stop()

token = st.text_input("dashboard token", type="password", help="Needed to add or expire silences.")
with st.form("add_silence"):
    st.subheader("Add a silence")
    matchers = st.text_input("matchers", placeholder="job_id=q-clicks alertname=~watermark.*",
                             help="Space-separated, as `tidegauge silence add`: name=value, name!=value, name=~re, name!~re")
    hours = st.number_input("duration (hours)", min_value=0.25, max_value=24.0 * 30, value=2.0, step=0.25)
    comment = st.text_input("comment")
    author = st.text_input("author", value="dashboard")
    if st.form_submit_button("Add silence"):
        try:
            sid = data.add_silence(token, matchers.split(), timedelta(hours=float(hours)), comment, author)
            st.success(f"Silence {sid} added.")
        except PermissionError as exc:
            st.error(str(exc))
        except Exception as exc:  # bad matcher etc.: say what is wrong, keep the page
            st.error(f"Not added: {exc}")
active = sil[sil["state"] != "expired"] if not sil.empty else sil
if not active.empty:
    with st.form("expire_silence"):
        st.subheader("Expire a silence")
        sid = st.selectbox("silence", list(active["id"]), format_func=lambda i: f"{i[:8]} {active.set_index('id').loc[i, 'matchers']}")
        if st.form_submit_button("Expire"):
            try:
                ok = data.expire_silence(token, sid)
                (st.success if ok else st.warning)("Expired." if ok else "It had already ended.")
            except PermissionError as exc:
                st.error(str(exc))
