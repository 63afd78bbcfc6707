"""The freshness SLO's block (error budget left, burn rate, the alert), shared by the Job and Pipelines pages.

It shows what the newest stored burn-rate finding says (``freshness_slo`` for a job, ``pipeline_slo`` for a
pipeline: :func:`dashboard.data._slo`); nothing is computed here.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

__all__ = ["render_slo"]


def render_slo(slo: dict[str, Any]) -> None:
    """Three metrics (error budget left, burn rate over the alert's windows, page/ticket) and the one-line
    text every surface shows (:func:`monitor.facts.slo_text`)."""
    c1, c2, c3 = st.columns(3)
    left = slo["budget_left_pct"]
    c1.metric("error budget left", "spent" if left <= 0 else f"≤ {left:.0f}%",
              help="what the bad minutes of the last 3 days (at most) leave of the SLO window's budget")
    c2.metric(f"burn rate ({slo['windows']})", f"{slo['burn_rate']:.1f}×",
              help="how many times faster than the SLO window allows the budget is spent (1× lasts exactly the "
                   "window)")
    c3.metric("burn-rate alert", slo["alert"] + ("" if slo["open"] else " (ended)"),
              help="page: 1 h & 5 min above 14.4× or 6 h & 30 min above 6×; ticket: 3 days & 6 h above 1×")
    st.caption(slo["text"])
