"""The Streamlit entry script (``tidegauge dashboard`` runs ``streamlit run dashboard/app.py``).

Multipage navigation (``st.navigation``): Fleet, Job, Pipelines, Alerts, What-if lab, Reports. Each page is a
script under ``dashboard/views/`` that only renders what :mod:`dashboard.data` returns.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import data

st.set_page_config(page_title="tidegauge", layout="wide")

_VIEWS = Path(__file__).parent / "views"
pages = [
    st.Page(str(_VIEWS / "fleet.py"), title="Fleet", default=True),
    st.Page(str(_VIEWS / "job.py"), title="Job", url_path="job"),
    st.Page(str(_VIEWS / "pipelines.py"), title="Pipelines", url_path="pipelines"),
    st.Page(str(_VIEWS / "alerts.py"), title="Alerts", url_path="alerts"),
    st.Page(str(_VIEWS / "whatif.py"), title="What-if lab", url_path="whatif"),
    st.Page(str(_VIEWS / "reports.py"), title="Reports", url_path="reports"),
]
navigation = st.navigation(pages)
with st.sidebar:
    st.caption(f"Database: `{data.db_label()}`")
    st.caption("Times are UTC; hover a chart for your local time.")
    if not data.token_configured():
        st.caption("Read-only: no dashboard token configured.")
navigation.run()
