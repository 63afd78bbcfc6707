"""The What-if lab's answer when a mis-dated row is present, for both engines' parts (``views/whatif.py``
and :mod:`dashboard.views._flink_lab`): the row first, then the delay the target needs without it, then —
labelled — the delay it would need with the row kept. Only renders what :mod:`dashboard.data` returned."""

from __future__ import annotations

import streamlit as st

from dashboard import data


def render_lead(rows: list[str], recommended_s: float | None, kept_s: float | None, target: float,
                filter_where: str) -> None:
    """``rows``: one text per mis-dated row (line, event time, how far it moved the watermark);
    ``recommended_s``: the target's delay without them; ``kept_s``: with them kept (``None``: no delay
    of the sweep); ``filter_where``: where the filter goes (``withWatermark``, the ``WatermarkStrategy``)."""
    n = len(rows)
    what = "row" if n == 1 else "rows"
    st.warning(f"**Mis-dated {what}**: " + "; ".join(rows) + f". Every later row is behind the watermark "
             f"{'it' if n == 1 else 'they'} set, whatever the delay.")
    if recommended_s is not None:
        st.success(f"Recommended delay without the mis-dated {what}: **{data.human_lag(recommended_s)}** "
                   f"(filter {'it' if n == 1 else 'them'} out before {filter_where}), the smallest of the sweep "
                   f"that keeps {target:.1f}% of the other rows.")
    else:
        st.warning(f"Even without the mis-dated {what}, no delay in the sweep keeps {target:.1f}% of the rows.")
    kept = data.human_lag(kept_s) if kept_s is not None else "more than any delay in the sweep"
    st.info(f"With the mis-dated {what} kept: {kept}. For comparison only, not a fix: such a delay just waits "
            f"until processing time reaches the mis-dated event time.")
