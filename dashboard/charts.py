"""Altair (Vega-Lite) charts of the dashboard: pure functions from DataFrames to charts.

Time axes are in UTC (``scale type utc``, axis title says so); hovering shows the local time of the
browser (Vega-Lite formats tooltip times in local time) next to the UTC one.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

__all__ = ["AnyChart", "bars_over_time", "episode_timeline", "lines_over_time", "time_tooltips", "time_x"]

_HEIGHT = 220

#: What the builders and their ``+`` combinations return (``st.altair_chart`` takes each).
AnyChart = alt.Chart | alt.LayerChart | alt.FacetChart


def time_x(field: str = "observed_at", title: str = "time (UTC)") -> alt.X:
    """An x encoding of ``field`` on a UTC time scale."""
    return alt.X(f"{field}:T", scale=alt.Scale(type="utc"), axis=alt.Axis(title=title, format="%H:%M:%S"))


def time_tooltips(field: str = "observed_at") -> list[alt.Tooltip]:
    """Tooltips with the time in UTC and in the browser's local time."""
    return [
        alt.Tooltip(f"utcyearmonthdatehoursminutesseconds({field}):T", title="UTC", format="%Y-%m-%d %H:%M:%S"),
        alt.Tooltip(f"{field}:T", title="local time", format="%Y-%m-%d %H:%M:%S"),
    ]


def lines_over_time(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    y_title: str,
    time_field: str = "observed_at",
    y_type: str = "quantitative",
    labels: dict[str, str] | None = None,
) -> alt.Chart:
    """One line per column of ``frame`` over ``time_field`` (long format, a legend naming each line)."""
    names = labels or {}
    long = frame[[time_field, *columns]].melt(time_field, var_name="series", value_name="value").dropna()
    long["series"] = long["series"].map(lambda c: names.get(c, c))
    y = alt.Y("value:T" if y_type == "temporal" else "value:Q", title=y_title)
    if y_type == "temporal":
        y = alt.Y("value:T", title=y_title, scale=alt.Scale(type="utc"), axis=alt.Axis(format="%H:%M:%S"))
    value_tip = (
        alt.Tooltip("utcyearmonthdatehoursminutesseconds(value):T", title="value (UTC)", format="%Y-%m-%d %H:%M:%S")
        if y_type == "temporal"
        else alt.Tooltip("value:Q", title=y_title, format=",.0f")
    )
    chart: alt.Chart = (
        alt.Chart(long)
        .mark_line(point=alt.OverlayMarkDef(size=12), interpolate="step-after")
        .encode(x=time_x(time_field), y=y, color=alt.Color("series:N", title=None),
                tooltip=[*time_tooltips(time_field), alt.Tooltip("series:N"), value_tip])
        .properties(height=_HEIGHT)
    )
    return chart


def bars_over_time(frame: pd.DataFrame, column: str, *, y_title: str, color: str = "#c0392b",
                   time_field: str = "observed_at", extra_tooltips: Sequence[str] = ()) -> alt.Chart:
    """Bars of ``column`` over time (e.g. rows dropped by the watermark per batch)."""
    data = frame[frame[column].fillna(0) > 0]
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar(color=color, size=6)
        .encode(x=time_x(time_field), y=alt.Y(f"{column}:Q", title=y_title),
                tooltip=[*time_tooltips(time_field), alt.Tooltip(f"{column}:Q", title=y_title),
                         *[alt.Tooltip(f"{c}") for c in extra_tooltips]])
        .properties(height=_HEIGHT)
    )
    return chart


def rule_line(value: float, title: str, color: str = "#7f8c8d") -> alt.LayerChart:
    """A horizontal reference line at ``value`` (a limit, a trigger interval) with its label."""
    base = alt.Chart(pd.DataFrame({"y": [value], "label": [title]}))
    chart: alt.LayerChart = base.mark_rule(color=color, strokeDash=[4, 4]).encode(y="y:Q") + base.mark_text(
        align="left", dx=4, dy=-6, color=color
    ).encode(y="y:Q", text="label:N", x=alt.value(0))
    return chart


def time_marks(times: pd.DataFrame, field: str, label_field: str, color: str = "#8e44ad") -> alt.LayerChart:
    """Vertical marks at ``times[field]`` (restarts, the row that moved the watermark), labelled."""
    base = alt.Chart(times)
    chart: alt.LayerChart = base.mark_rule(color=color, strokeWidth=2).encode(
        x=time_x(field), tooltip=[*time_tooltips(field), alt.Tooltip(f"{label_field}:N", title="what")]
    ) + base.mark_text(align="left", dx=3, dy=-80, color=color).encode(x=time_x(field), text=f"{label_field}:N")
    return chart


_SEVERITY_COLORS = alt.Scale(domain=["critical", "warning", "info"], range=["#c0392b", "#d68910", "#2980b9"])


def episode_timeline(frame: pd.DataFrame) -> alt.LayerChart:
    """Finding episodes on a timeline (:func:`dashboard.data.episodes` columns): one row per rule (and scope),
    a bar from ``first_at`` to ``last_at`` coloured by severity, a dot where each began; the tooltip gives
    the batches, how it ended and the message."""
    data = frame.assign(what=[f"{r} ({s})" if s else r for r, s in zip(frame["rule"], frame["scope"], strict=True)])
    base = alt.Chart(data).encode(
        y=alt.Y("what:N", title=None, axis=alt.Axis(labelLimit=400)),
        color=alt.Color("severity:N", scale=_SEVERITY_COLORS, title="severity"),
        tooltip=[*time_tooltips("first_at"), alt.Tooltip("batches:N"), alt.Tooltip("ended_by:N", title="ended"),
                 alt.Tooltip("message:N")],
    )
    chart: alt.LayerChart = (
        base.mark_rule(strokeWidth=8).encode(x=time_x("first_at"), x2="last_at:T")
        + base.mark_point(filled=True, size=60).encode(x=time_x("first_at"))
    ).properties(height=max(60, 28 * data["what"].nunique()))
    return chart
