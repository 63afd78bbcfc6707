"""Reports: the generated health reports (scheduled ones as queued for delivery, and report files),
viewable and downloadable."""

from __future__ import annotations

import json

import streamlit as st
import streamlit.components.v1 as components

from dashboard import data

st.title("Reports")
files = data.report_files()
scheduled = data.scheduled_reports()
if not files and not scheduled:
    st.info("No reports yet: add `reports: [{name, cron, receiver}]` to the config, or run "
            "`tidegauge report --format html -o FILE`.")
    st.stop()

if files:
    st.header("Report files")
    names = [p.name for p in files]
    pick = st.selectbox("file", names)
    path = files[names.index(pick)]
    content = path.read_bytes()
    mime = {".html": "text/html", ".md": "text/markdown", ".json": "application/json"}[path.suffix]
    st.download_button(f"Download {path.name}", content, file_name=path.name, mime=mime)
    if path.suffix == ".html":
        components.html(content.decode("utf-8"), height=900, scrolling=True)
    elif path.suffix == ".md":
        st.markdown(content.decode("utf-8"))
    else:
        st.json(json.loads(content))

if scheduled:
    st.header("Scheduled reports")
    for r in scheduled:
        doc = r["document"]
        with st.expander(f"{doc.get('name')} · {r['created_at']:%Y-%m-%d %H:%M} UTC · {doc.get('health')} · "
                         f"{len(doc.get('jobs', []))} jobs · to {r['receiver']} ({r['state']})"):
            for job in doc.get("jobs", []):
                alerts = "; ".join(f"{a['rule']} ({a['state']})" for a in job.get("alerts", [])) or "no open alerts"
                st.markdown(f"- **{job.get('name') or job['job_id']}** ({job['health']}): {alerts}")
            st.download_button("Download JSON", json.dumps(doc, indent=2), file_name=f"report-{r['id']}.json",
                               mime="application/json", key=f"dl-{r['id']}")
