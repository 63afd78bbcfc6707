"""Altair (Vega-Lite) charts of the dashboard: pure functions from DataFrames to charts.

Time axes are in UTC (``scale type utc``, axis title says so) with a format chosen from the range shown
(:func:`time_format`: seconds within a day, dates over weeks, years over decades); hovering shows the
local time of the browser (Vega-Lite formats tooltip times in local time) next to the UTC one.

A value far off the others (a 2099 event time among 2024 ones, Spark's 1970 "no watermark yet") would
squash every other line flat: :func:`lines_over_time` clips a time series to ``clip`` (:func:`clip_range`:
the bulk of the event times and watermarks), draws the clipped points as triangles at the edge and says
above the plot how many there are and their real values. Legends sit under the chart with no label limit, so long names (a Flink vertex and
subtask) are never cut off.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from monitor.axes import CLUSTER_GAP_S, bulk_range, time_axis_format
from monitor.timefmt import format_lag

__all__ = [
    "AnyChart",
    "bars_over_time",
    "clip_range",
    "episode_timeline",
    "lines_over_time",
    "rule_line",
    "sweep_chart",
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
    """The axis format for times spanning ``span`` (:func:`monitor.axes.time_axis_format`)."""
    return time_axis_format(None if span is None or pd.isna(span) else span.to_pytimedelta())


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


#: The least a clipped time chart shows beyond its values, each side.
CLIP_MARGIN = pd.Timedelta(seconds=30)


def _epoch_s(times: pd.Series) -> list[float]:
    return [t.timestamp() for t in pd.to_datetime(times.dropna(), utc=True)]


def clip_range(*value_series: pd.Series, processing: pd.Series | None = None,
               margin: pd.Timedelta = CLIP_MARGIN) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """The range a time chart shows on its value axis: the bulk of its event times and watermarks.

    The points of ``value_series`` (event-time max, watermarks; UTC times, missing ones skipped) are split
    into clusters (:func:`monitor.axes.bulk_range`, gaps over 30 days); the range covers the cluster holding
    most points (a tie goes to the cluster nearest the processing times), widened by the ``processing``
    times (the batches' or polls' wall clock) lying within that gap of it, then by 5 % of its span or
    ``margin`` each side. A point outside (a 2099 row, a 1970 placeholder, a year-8999 clamp) is clipped by
    :func:`lines_over_time`; a backfill of old data keeps its own range (its processing times, years later,
    are clipped too). ``None`` without any time."""
    proc = _epoch_s(processing) if processing is not None else []
    points = [v for series in value_series for v in _epoch_s(series)] or proc
    centre = sorted(proc)[len(proc) // 2] if proc else None
    bulk = bulk_range(points, centre=centre)
    if bulk is None:
        return None
    lo, hi = bulk
    near = [p for p in proc if lo - CLUSTER_GAP_S <= p <= hi + CLUSTER_GAP_S]
    if near:
        lo, hi = min(lo, *near), max(hi, *near)
    pad = max(0.05 * (hi - lo), margin.total_seconds())
    return pd.Timestamp(lo - pad, unit="s", tz="UTC"), pd.Timestamp(hi + pad, unit="s", tz="UTC")


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
    off = pd.DataFrame(columns=[time_field, "series", "value", "real", "edge"])
    notes: list[str] = []
    if temporal:
        long["value"] = pd.to_datetime(long["value"], utc=True)
        if clip is not None and not long.empty:
            lo, hi = clip
            outside = (long["value"] < lo) | (long["value"] > hi)
            if outside.any():
                off = long[outside].copy()
                off["real"] = [f"{v:%Y-%m-%d %H:%M:%S} (off the chart)" for v in off["value"]]
                notes = off_chart_notes(off, lo, hi)
                off["edge"] = ["top" if v > hi else "bottom" for v in off["value"]]
                off["value"] = off["value"].clip(lower=lo, upper=hi)
                long = long[~outside]
    x = time_x(time_field, span=_span(frame[time_field]))
    if temporal:
        shown = long["value"] if clip is None else pd.Series(list(clip))
        domain = None if clip is None else [_vl_datetime(t) for t in clip]
        y = alt.Y("value:T", title=y_title, scale=alt.Scale(type="utc", domain=domain) if domain else alt.Scale(type="utc"),
                  axis=alt.Axis(format=time_format(_span(shown))))
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
        for edge, shape in (("top", "triangle-up"), ("bottom", "triangle-down")):
            if (off["edge"] == edge).any():
                layers.append(alt.Chart(off[off["edge"] == edge]).mark_point(shape=shape, size=90, filled=True).encode(
                    x=x, y=alt.Y("value:T"), color=color,
                    tooltip=[*time_tooltips(time_field), alt.Tooltip("series:N"), alt.Tooltip("real:N", title="value")],
                ))
    # Streamlit fits the whole chart (legend included) into its height: give each legend row its own room
    rows = -(-long["series"].nunique() // 2)
    out = alt.LayerChart(layer=layers).properties(height=_HEIGHT + 24 * rows + 40 + 16 * len(notes))
    if notes:  # above the plot, one line per series: never over the ticks, never cut by the plot's edge
        out = out.properties(title=alt.TitleParams(text=notes, anchor="start", fontSize=11, fontWeight="normal",
                                                   color="#555555"))
    return out


def _vl_datetime(t: pd.Timestamp) -> alt.DateTime:
    """``t`` as a Vega-Lite DateTime in UTC (a time scale's domain)."""
    return alt.DateTime(year=t.year, month=t.month, date=t.day, hours=t.hour, minutes=t.minute, seconds=t.second,
                        milliseconds=t.microsecond // 1000, utc=True)


def off_chart_notes(off: pd.DataFrame, lo: pd.Timestamp, hi: pd.Timestamp) -> list[str]:
    """One line per series with points outside ``[lo, hi]`` (columns ``series``, ``value``): how many, where
    they are drawn (triangles at the top or bottom edge) and their real values, the first and the last,
    e.g. ``watermark: 5 points above the chart (▲ at the top edge), 2098-12-31 23:50:00 … 2099-01-01 00:10:00``."""
    lines = []
    for series, group in off.groupby("series", sort=False):
        for side, part in (("above", group[group["value"] > hi]), ("below", group[group["value"] < lo])):
            if part.empty:
                continue
            values = sorted(set(part["value"]))
            shown = f"{values[0]:%Y-%m-%d %H:%M:%S}" + (f" … {values[-1]:%Y-%m-%d %H:%M:%S}" if len(values) > 1 else "")
            count = "1 point" if len(part) == 1 else f"{len(part)} points"
            edge = "▲ at the top edge" if side == "above" else "▼ at the bottom edge"
            lines.append(f"{series}: {count} {side} the chart ({edge}), {shown}")
    return lines


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
    ) + base.mark_text(align="left", baseline="top", dx=3, color=color).encode(x=x, y=alt.value(14),
                                                                               text=f"{label_field}:N")
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


def sweep_chart(frame: pd.DataFrame, y: str, *, y_title: str, x_title: str,
                recommended_s: float | None = None) -> alt.LayerChart:
    """A delay sweep: ``frame[y]`` (a share in %) per ``frame["delay_s"]``, every delay a point and a tick
    (a symlog scale: 0 s and 1,800 s on one axis), the recommended delay as a green rule."""
    delays = sorted(float(d) for d in frame["delay_s"].dropna().unique())
    x = alt.X("delay_s:Q", scale=alt.Scale(type="symlog", constant=1), title=x_title,
              axis=alt.Axis(values=delays, format=",.0f", labelOverlap=True))
    chart = alt.Chart(frame).mark_line(point=alt.OverlayMarkDef(size=50, filled=True)).encode(
        x=x, y=alt.Y(f"{y}:Q", title=y_title), tooltip=list(frame.columns))
    layers: list[alt.Chart] = [chart]
    if recommended_s is not None:
        layers.append(alt.Chart(pd.DataFrame({"delay_s": [recommended_s], "what": ["recommended"]}))
                      .mark_rule(color="#27ae60", strokeWidth=2).encode(x=alt.X("delay_s:Q"), tooltip=["what:N", "delay_s:Q"]))
    return alt.LayerChart(layer=layers).properties(height=240)


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def pipeline_dot(nodes: pd.DataFrame, edges: pd.DataFrame, target_s: float | None, most: str | None) -> str:
    """A Graphviz DOT graph of a pipeline (:class:`dashboard.data.PipelineView` ``nodes``/``edges``): one box
    per job with its local and global lag now, red where the staleness enters, amber downstream of it, green
    within the target; the pipeline's external inputs and outputs as ellipses; job-to-job edges labelled with
    the dataset between them. ``most``: the job that adds the most (marked)."""
    lines = ['digraph {', 'rankdir=LR; bgcolor="transparent";',
             'node [fontname="sans-serif", fontsize=11]; edge [fontname="sans-serif", fontsize=10, color="#555555"];']
    internal = set(edges["dataset"])
    for n in nodes.itertuples():
        g, loc = n.global_now_s, n.local_now_s
        known = g is not None and not pd.isna(g)
        fill = {"entry": "#f8d7da", "downstream": "#fff3cd"}.get(str(n.role))
        if fill is None:
            fill = "#eeeeee" if not known or target_s is None else "#d4edda" if g <= target_s else "#fff3cd"
        local_s = None if loc is None or pd.isna(loc) else float(loc)
        label = [str(n.job), f"adds {format_lag(local_s)} · behind sources {format_lag(float(g) if known else None)}"]
        if n.role == "entry":
            label.append("staleness enters here")
        if most is not None and n.job == most:
            label.append("adds the most")
        border = "#c0392b" if n.role == "entry" else "#555555"
        width = 2.5 if n.role == "entry" else 1
        lines.append(f'"{_dot_text(str(n.key))}" [shape=box, style="rounded,filled", fillcolor="{fill}", '
                     f'color="{border}", penwidth={width}, label="{_dot_text(chr(10).join(label))}"];')
        for d in [x for x in str(n.reads).split(", ") if x and x not in internal]:
            lines.append(f'"in:{_dot_text(d)}" [shape=ellipse, style=dashed, label="{_dot_text(d)}"];')
            lines.append(f'"in:{_dot_text(d)}" -> "{_dot_text(str(n.key))}";')
        fed = set(edges["upstream"])
        if n.key not in fed:
            for d in [x for x in str(n.writes).split(", ") if x and x not in internal]:
                lines.append(f'"out:{_dot_text(d)}" [shape=ellipse, style=dashed, label="{_dot_text(d)}"];')
                lines.append(f'"{_dot_text(str(n.key))}" -> "out:{_dot_text(d)}";')
    for e in edges.itertuples():
        lines.append(f'"{_dot_text(str(e.upstream))}" -> "{_dot_text(str(e.downstream))}" '
                     f'[label="{_dot_text(str(e.dataset))}"];')
    lines.append("}")
    return "\n".join(lines)
