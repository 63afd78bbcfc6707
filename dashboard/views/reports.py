"""Reports: this database's health report as a person reads it (the HTML that ``tidegauge report`` writes),
the scheduled reports queued in this database, and the report files of the reports directory that are of
this database; each downloadable."""

from __future__ import annotations

import base64

import streamlit as st

from dashboard import data
from monitor.text import plural

_MIME = {"html": "text/html", "md": "text/markdown", "json": "application/json"}
_HEIGHT = 900


def show_html(document: str) -> None:
    """A report's self-contained HTML in an iframe of its own opaque origin (a ``data:`` URL): its styles
    stay out of the page and nothing in it can reach the dashboard."""
    encoded = base64.b64encode(document.encode("utf-8")).decode("ascii")
    st.iframe(f"data:text/html;charset=utf-8;base64,{encoded}", height=_HEIGHT)


st.title("Reports")
jobs = data.fleet()
if jobs.empty:
    st.info("No reports yet: this database holds no job. Start `tidegauge run -c FILE` (or `tidegauge scan --db`), "
            "then come back; add `reports: [{name, cron, receiver}]` to the config for scheduled ones.")
    st.stop()

st.header("Health report of this database")
period = st.selectbox("period", list(data.REPORT_PERIODS), index=list(data.REPORT_PERIODS).index(data.REPORT_DEFAULT),
                      key="report_period",
                      help="Ending at the newest stored sample (the data's own clock), so a scanned recording "
                           "reports on its own hours.")
report = data.database_report(period)
if report is None:
    st.info("No samples stored yet.")
else:
    st.caption(f"{report.since:%Y-%m-%d %H:%M:%S} to {report.until:%Y-%m-%d %H:%M:%S} UTC · overall health "
               f"**{report.health}** · {plural(report.jobs, 'job')} · the same report as "
               f"`{report.command}` (without `-c`: the default targets)")
    d1, d2, d3 = st.columns(3)
    for col, (fmt, text) in zip((d1, d2, d3), (("html", report.html), ("md", report.markdown),
                                                ("json", report.json)), strict=True):
        col.download_button(f"Download .{fmt}", text, file_name=f"tidegauge-report.{fmt}", mime=_MIME[fmt],
                            key=f"db-report-{fmt}")
    show_html(report.html)

scheduled = data.scheduled_reports()
st.header("Scheduled reports")
if not scheduled:
    st.caption("None queued in this database (add `reports: [{name, cron, receiver}]` to the config).")
for r in scheduled:
    with st.expander(f"{r['name']} · {r['created_at']:%Y-%m-%d %H:%M} UTC · health {r['health']} · "
                     f"{plural(len(r['jobs']), 'job')} · to {r['receiver']} ({r['state']})"):
        if r["html"]:
            show_html(r["html"])
        else:
            st.dataframe(r["jobs"].drop(columns=["job_id"]), hide_index=True, width="stretch")
        st.download_button("Download JSON", data.report_json(r["document"]), file_name=f"report-{r['id']}.json",
                           mime="application/json", key=f"dl-{r['id']}")

files = data.report_files()
if files:
    st.header("Report files")
    mine = [f for f in files if f.of_this_database]
    others = [f for f in files if not f.of_this_database]
    if others:
        st.caption(f"Not shown, not of this database (their jobs are not here, or they cover no job): "
                   f"{plural(len(others), 'report')} of the reports directory: " + ", ".join(f.stem for f in others[:10])
                   + (" ..." if len(others) > 10 else ""))
    if mine:
        pick = st.selectbox("report", [f.stem for f in mine], key="report_file")
        chosen = next(f for f in mine if f.stem == pick)
        cols = st.columns(len(chosen.paths))
        for col, (fmt, path) in zip(cols, sorted(chosen.paths.items()), strict=True):
            col.download_button(f"Download {path.name}", path.read_bytes(), file_name=path.name, mime=_MIME[fmt],
                                key=f"file-{fmt}")
        if "html" in chosen.paths:
            show_html(chosen.paths["html"].read_text(encoding="utf-8"))
        elif "md" in chosen.paths:
            st.markdown(chosen.paths["md"].read_text(encoding="utf-8"))
        else:
            st.caption("Only the JSON of this report was written: download it, or write it with `--format html`.")
