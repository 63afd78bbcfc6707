"""Altair (Vega-Lite) charts of the dashboard: pure functions from DataFrames to charts.

Time axes are in UTC (``scale type utc``, axis title says so) with a format chosen from the range shown
(:func:`time_format`: seconds within a day, dates over weeks, years over decades); hovering shows the
local time of the browser (Vega-Lite formats tooltip times in local time) next to the UTC one.

A value far off the others (a 2099 event time among 2026 ones, Spark's 1970 "no watermark yet") would
squash every other line flat: :func:`lines_over_time` clips a time series to ``clip`` (usually the
processing-time range, widened), draws the clipped points as triangles at the edge and labels them with
their real value. Legends sit under the chart with no label limit, so long names (a Flink vertex and
subtask) are never cut off.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

__all__ = [
    "AnyChart",
    "bars_over_time",
    "clip_range",
    "episode_timeline",
    "lines_over_time",
    "rule_line",
    "time_format",
    "time_marks",
    "time_tooltips",
    "time_x",
]

_HEIGHT = 220
_FULL = "%Y-%m-%d %H:%M:%S"
#: Legend under the chart, every label whole (Vega-Lite's default cuts labels at 160 px).
_LEGEND = alt.Legend(orient="bottom", labelLimit=0, columns=2, title=None, symbolLimit=0)

#: What the builders and their ``+`` combinations return (``st.altair_chart`` takes each).
AnyChart = alt.Chart | alt.LayerChart | alt.FacetChart


def time_format(span: pd.Timedelta | None) -> str:
    """The axis format for times spanning ``span``: ``%H:%M:%S`` within a day (or unknown), ``%m-%d
    %H:%M`` within two months, ``%Y-%m-%d`` within 20 years, ``%Y`` beyond."""
    if span is None or pd.isna(span) or span <= pd.Timedelta(days=1):
        return "%H:%M:%S"
    if span <= pd.Timedelta(days=62):
        return "%m-%d %H:%M"
    if span <= pd.Timedelta(days=365 * 20):
        return "%Y-%m-%d"
    return "%Y"


def _span(values: pd.Series) -> pd.Timedelta | None:
    known = pd.to_datetime(values.dropna(), utc=True) if len(values) else values
    if len(known) == 0:
        return None
    return pd.Timedelta(known.max() - known.min())


def time_x(field: str = "observed_at", title: str = "time (UTC)", *, span: pd.Timedelta | None = None) -> alt.X:
    """An x encoding of ``field`` on a UTC time scale, labelled for a range of ``span``."""
    return alt.X(f"{field}:T", scale=alt.Scale(type="utc"), axis=alt.Axis(title=title, format=time_format(span)))


def time_tooltips(field: str = "observed_at") -> list[alt.Tooltip]:
    """Tooltips with the time in UTC and in the browser's local time."""
    return [
        alt.Tooltip(f"utcyearmonthdatehoursminutesseconds({field}):T", title="UTC", format=_FULL),
        alt.Tooltip(f"{field}:T", title="local time", format=_FULL),
    ]


#: The least a clipped time chart shows beyond its processing times, each side.
CLIP_MARGIN = pd.Timedelta(minutes=10)


def clip_range(times: pd.Series, *, margin: pd.Timedelta = CLIP_MARGIN) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """The range a time chart over ``times`` (its processing times) shows on its value axis: those times
    widened on each side by their own span or ``margin``, whichever is larger; ``None`` without a time. A watermark or event
    time outside it is far off (a mis-dated row, an epoch placeholder) and is clipped."""
    known = pd.to_datetime(times.dropna(), utc=True)
    if known.empty:
        return None
    lo, hi = known.min(), known.max()
    pad = max(pd.Timedelta(hi - lo), margin)
    return lo - pad, hi + pad


def lines_over_time(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    y_title: str,
    time_field: str = "observed_at",
    y_type: str = "quantitative",
    labels: dict[str, str] | None = None,
    clip: tuple[pd.Timestamp, pd.Timestamp] | None = None,
    value_format: str = ",.0f",
) -> alt.LayerChart:
    """One line per column of ``frame`` over ``time_field`` (long format, a legend naming each line).

    Args:
        y_type: ``quantitative`` or ``temporal`` (the columns hold times: watermarks, event times).
        clip: for temporal values, the range shown; a value outside is drawn at the edge as a triangle
            labelled with its real value (``2099-01-01 00:00:00 (off the chart)``).
        value_format: d3 format of quantitative values in tooltips.
    """
    names = labels or {}
    long = frame[[time_field, *columns]].melt(time_field, var_name="series", value_name="value").dropna()
    long["series"] = long["series"].map(lambda c: names.get(c, c))
    temporal = y_type == "temporal"
    off = pd.DataFrame(columns=[time_field, "series", "value", "real", "label"])
    if temporal:
        long["value"] = pd.to_datetime(long["value"], utc=True)
        if clip is not None and not long.empty:
            lo, hi = clip
            outside = (long["value"] < lo) | (long["value"] > hi)
            if outside.any():
                off = long[outside].copy()
                off["real"] = [f"{v:%Y-%m-%d %H:%M:%S} (off the chart)" for v in off["value"]]
                # one label for the chart, at the first point off it: each series' values there (the jump)
                firsts = off.drop_duplicates(["series", "real"])
                text = "; ".join(f"{r['series']} {r['real'].removesuffix(' (off the chart)')}"
                                 for _, r in firsts.head(4).iterrows()) + " (off the chart)"
                off["label"] = ""
                off.loc[off.index[0], "label"] = text
                off["value"] = off["value"].clip(lower=lo, upper=hi)
                long = long[~outside]
    x = time_x(time_field, span=_span(frame[time_field]))
    if temporal:
        y = alt.Y("value:T", title=y_title, scale=alt.Scale(type="utc"),
                  axis=alt.Axis(format=time_format(_span(long["value"]))))
        value_tip = alt.Tooltip("utcyearmonthdatehoursminutesseconds(value):T", title="value (UTC)", format=_FULL)
    else:
        y = alt.Y("value:Q", title=y_title, axis=alt.Axis(format=value_format))
        value_tip = alt.Tooltip("value:Q", title=y_title, format=value_format)
    color = alt.Color("series:N", legend=_LEGEND)
    chart = (
        alt.Chart(long)
        .mark_line(point=alt.OverlayMarkDef(size=12), interpolate="step-after")
        .encode(x=x, y=y, color=color, tooltip=[*time_tooltips(time_field), alt.Tooltip("series:N"), value_tip])
        .properties(height=_HEIGHT)
    )
    layers: list[alt.Chart] = [chart]
    if not off.empty:
        base = alt.Chart(off)
        layers.append(base.mark_point(shape="triangle-up", size=90, filled=True).encode(
            x=x, y=alt.Y("value:T"), color=color,
            tooltip=[*time_tooltips(time_field), alt.Tooltip("series:N"), alt.Tooltip("real:N", title="value")],
        ))
        layers.append(alt.Chart(off[off["label"] != ""]).mark_text(align="left", dx=6, dy=12, fontSize=11).encode(
            x=x, y=alt.Y("value:T"), text="label:N", color=color,
        ))
    # Streamlit fits the whole chart (legend included) into its height: give each legend row its own room
    rows = -(-long["series"].nunique() // 2)
    return alt.LayerChart(layer=layers).properties(height=_HEIGHT + 24 * rows + 40)


def bars_over_time(frame: pd.DataFrame, column: str, *, y_title: str, color: str = "#c0392b",
                   time_field: str = "observed_at", extra_tooltips: Sequence[str] = ()) -> alt.Chart:
    """Bars of ``column`` over time (e.g. rows dropped by the watermark per batch)."""
    data = frame[frame[column].fillna(0) > 0]
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar(color=color, size=6)
        .encode(x=time_x(time_field, span=_span(frame[time_field])), y=alt.Y(f"{column}:Q", title=y_title),
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
    x = time_x(field, span=_span(times[field]))
    chart: alt.LayerChart = base.mark_rule(color=color, strokeWidth=2).encode(
        x=x, tooltip=[*time_tooltips(field), alt.Tooltip(f"{label_field}:N", title="what")]
    ) + base.mark_text(align="left", dx=3, dy=-80, color=color).encode(x=x, text=f"{label_field}:N")
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
    ).properties(height=90 + 32 * data["what"].nunique())  # the axes and legend take about 90 px
    return chart
