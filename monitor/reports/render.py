"""Render a :class:`monitor.reports.detailed.DetailedReport` as JSON, Markdown or a self-contained HTML file.

HTML holds its charts as inline SVG (Altair/Vega-Lite specifications rendered by ``vl-convert-python``,
no JavaScript, no network), its styles inline, and escapes every text taken from the data, so the file can
be mailed, attached to a webhook or opened offline. Times are UTC.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from monitor.axes import bulk_range, duration_unit, time_axis_format
from monitor.facts import DropCause, waiting_text
from monitor.reports.detailed import DetailedReport, EpisodeEntry, JobReport, PipelineReport
from monitor.text import POLLS, batch_range, plain, plural
from monitor.timefmt import format_instant, format_instant_short, format_lag

__all__ = ["FORMATS", "render", "to_html", "to_json_text", "to_markdown"]

Format = Literal["html", "md", "json"]
FORMATS: tuple[Format, ...] = ("html", "md", "json")


def _n(value: float | int | None, fmt: str = ",.0f", unit: str = "") -> str:
    if value is None:
        return "unknown"
    return f"{value:{fmt}}{unit}"


def _t(value: datetime | None) -> str:
    return "unknown" if value is None else format_instant_short(value)


def _batches(e: EpisodeEntry) -> str:
    """``batch 6``, ``batches 6-9`` or ``polls (no batch ids)`` (Flink, Kafka)."""
    return batch_range(e.first_batch_id, e.last_batch_id, none=POLLS)


def _ended(e: EpisodeEntry) -> str:
    return "open" if e.ended_by is None else e.ended_by


def _worst(j: JobReport) -> str:
    """The worst finding episode of the period in one line, ``none`` without one."""
    w = j.worst_episode
    if w is None:
        return "none"
    where = f", {w.scope}" if w.scope else ""
    return f"{w.severity}: {w.rule} ({_batches(w)}{where}, {_t(w.first_at)} to {_t(w.last_at)}, {_ended(w)})"


def _heading_health(j: JobReport) -> str:
    """``health ok now, critical in the period`` (only ``health X`` when both agree)."""
    if j.period_health == j.health:
        return f"health {j.health}"
    return f"health {j.health} now, {j.period_health} in the period"


def _state(j: JobReport) -> list[tuple[str, str]]:
    unit = "state rows" if j.state_unit == "rows" else (
        "checkpointed state (bytes)" if j.engine == "flink" else "state (bytes)")
    rows = [(f"{unit} (first → last)", f"{_n(j.state_first)} → {_n(j.state_last)}")]
    if j.state_slope_per_h is None:
        rows.append(("state trend", "unknown"))
    elif not j.state_growing:
        rows.append(("state trend", "no growth"))
    else:
        rows.append(("state trend", _n(j.state_slope_per_h, ",.0f", f" {j.state_unit}/h")))
        rows.append(("state projected in 24 h", _n(j.state_projected_24h)))
    if j.state_hours_to_limit is not None:
        rows.append(("hours to the state limit", _n(j.state_hours_to_limit, ".1f")))
    return rows


def _facts(j: JobReport) -> list[tuple[str, str]]:
    """The job's numbers as (label, text) rows, shared by Markdown and HTML."""
    rows = [
        ("health now", j.health),
        ("worst finding in the period", _worst(j)),
        ("batches in the period" if j.engine == "spark" else "polls in the period", f"{j.batches:,}"),
        ("watermark (newest)", _t(j.watermark_last)),
        (f"freshness within {format_lag(j.freshness_target_s)}", _n(j.freshness_attainment_pct, ".2f", " %")),
        ("freshness p50 / p95 / max (processing time − watermark)",
         f"{format_lag(j.freshness_p50_s)} / {format_lag(j.freshness_p95_s)} / {format_lag(j.freshness_max_s)}"),
        *([("watermark ahead of processing time", j.freshness_ahead)] if j.freshness_ahead else []),
        *([("freshness SLO burn rate and error budget", j.slo_burn)] if j.slo_burn else []),
        ("rows read", _n(j.input_rows)),
        ("rows dropped by the watermark", f"{_n(j.dropped_rows)} ({_n(j.dropped_share_pct, '.3f', ' %')})"),
        *_state(j),
    ]
    if j.lag_offsets_max is not None or j.lag_seconds_max is not None:
        rows.append(("consumer lag last / max (offsets)", f"{_n(j.lag_offsets_last)} / {_n(j.lag_offsets_max)}"))
        rows.append(("consumer lag last / max (time)", f"{format_lag(j.lag_seconds_last)} / {format_lag(j.lag_seconds_max)}"))
    if j.lag:
        rows.append(("consumer group status (Burrow)", j.lag_status))
    if j.holding_min is not None:
        rows.append(("holds the minimum watermark", j.holding_min))
    rows.append(("restarts", str(len(j.restarts))))
    rows.append(("inferred delay threshold", format_lag(j.inferred_delay_s)))
    lateness = format_lag(j.lateness_p999_s)
    rows.append(("observed lateness p99.9", f"{lateness} ({j.lateness_note})" if j.lateness_note else lateness))
    return rows


_WHY = {"future": "a future-dated row", "leap": "a mis-dated row (beyond the data's own progression)",
        "units": "an event time in the wrong unit"}


def _cause_text(c: DropCause) -> str:
    if c.batch_id is None:
        return f"{plural(c.dropped_rows, 'row')} dropped (no earlier event time known: the batch that set the watermark is unknown)"
    what = f" — {_WHY[c.mis_dated]}" if c.mis_dated else ""
    return (f"{plural(c.dropped_rows, 'row')} dropped ({batch_range(c.first_dropped_batch, c.last_dropped_batch)}) against the "
            f"watermark set by batch {c.batch_id} (event-time max {_t(c.event_time_max)}){what}")


def _lag_rows(j: JobReport) -> list[list[str]]:
    return [[p.topic, str(p.partition),
             f"never committed: {waiting_text(p)} waiting" if waiting_text(p) else _n(p.lag_offsets),
             _n(p.lag_offsets_max), format_lag(p.lag_seconds), p.status] for p in j.lag]


_LAG_HEAD = ["topic", "partition", "lag (offsets)", "max", "lag (time)", "status"]


def _pipeline_rows(p: PipelineReport) -> list[tuple[str, str]]:
    """A pipeline's numbers as (label, text) rows, shared by Markdown and HTML."""
    rows = [
        ("jobs (sources first)", " → ".join(f"`{j}`" for j in p.jobs)),
        ("where the staleness enters now", p.stale_now),
        ("where it entered in the period (pipeline_freshness findings)", p.entered_text),
        ("adds the most over the period", "unknown" if p.most_period is None else f"`{p.most_period}`"),
    ]
    if p.slo is None:
        rows.append(("freshness SLO", "no burn-rate alert in the period" if p.configured else
                     "none (an SLO is set on a `pipelines:` entry: slo: {freshness, objective, window})"))
    else:
        left = p.slo_budget_left_pct
        assert left is not None and p.slo_burn_rate is not None
        rows.append(("freshness SLO error budget left", "spent" if left <= 0 else f"at most {left:.0f} %"))
        rows.append(("freshness SLO burn rate", f"{p.slo_burn_rate:.1f}x ({p.slo_alert})"))
        rows.append(("freshness SLO", p.slo))
    return rows


def _pipeline_title(p: PipelineReport) -> str:
    return f"Pipeline {p.name} ({'configured' if p.configured else 'inferred from what the jobs report'})"


def to_json_text(report: DetailedReport) -> str:
    """The report as indented JSON text."""
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: DetailedReport) -> str:
    """The report as Markdown (GitHub-flavoured tables)."""
    out = [
        f"# tidegauge health report: {report.name}",
        "",
        f"Period {_t(report.since)} to {_t(report.until)} · overall health (now or in the period) "
        f"**{report.health}** · {plural(len(report.jobs), 'job')}",
        "",
    ]
    if report.outside_note:
        out += [report.outside_note, ""]
    if not report.jobs:
        out.append("No job reported in this period.")
    for p in report.pipelines:
        out += [f"## {_md_escape(_pipeline_title(p))}", "", "| measure | value |", "|---|---|"]
        out += [f"| {k} | {_md_escape(v)} |" for k, v in _pipeline_rows(p)]
        out.append("")
    for j in report.jobs:
        out += [f"## {j.name or j.job_id} ({j.engine}, {_heading_health(j)})", "", f"Job id `{j.job_id}`.", "",
                "| measure | value |", "|---|---|"]
        out += [f"| {k} | {_md_escape(v)} |" for k, v in _facts(j)]
        out.append("")
        if j.drop_causes:
            out += ["**Late rows and what caused them**", ""]
            out += [f"- {_md_escape(_cause_text(c))}" for c in j.drop_causes]
            out += [f"- {plural(n, 'row')} dropped at {_md_escape(where)}" for where, n in j.drops_by_scope]
            out.append("")
        if j.lag:
            out += ["**Consumer lag per partition**", "", "| " + " | ".join(_LAG_HEAD) + " |",
                    "|" + "---|" * len(_LAG_HEAD)]
            out += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in _lag_rows(j)]
            out.append("")
        if j.episodes:
            out += ["**Findings in the period**", "", "| rule | severity | batches | from | to | ended | where | message |",
                    "|---|---|---|---|---|---|---|---|"]
            out += [f"| {x.rule} | {x.severity} | {_batches(x)} | {_t(x.first_at)} | {_t(x.last_at)} | {_ended(x)} | "
                    f"{_md_escape(x.scope or 'job')} | {_md_escape(x.message)} |" for x in j.episodes]
            out.append("")
        if j.alerts:
            out += ["**Alerts**", "", "| rule | severity | state | since | lasted | message |", "|---|---|---|---|---|---|"]
            out += [f"| {a.rule} | {a.severity} | {a.state} | {_t(a.active_at)} | {format_lag(a.duration_s)} | "
                    f"{_md_escape(a.message)} |" for a in j.alerts]
            out.append("")
        if j.restarts:
            out += ["**Restarts**: " + ", ".join(_t(r) for r in j.restarts), ""]
        if j.recommendations:
            out += ["**Recommendations**", ""]
            out += [f"- {r.text} _(from the {r.source})_" for r in j.recommendations]
            out.append("")
    return "\n".join(out) + "\n"


def _svg(spec: dict[str, Any]) -> str:
    import vl_convert as vlc

    svg: str = vlc.vegalite_to_svg(spec)
    return svg


def _duration_axis(values: Sequence[float]) -> tuple[list[float | None], str, str, tuple[float, float] | None]:
    """Durations in seconds for an axis: the values in the unit of their bulk (:func:`monitor.axes.bulk_range`,
    :func:`monitor.axes.duration_unit`), the ones outside it as ``None``; the unit's name, a note on the
    clipped ones (``""`` without) and the bulk's range in that unit."""
    bulk = bulk_range(values, centre=0.0, nearest=True)  # an honest lag is nearer 0 than a mis-dated row's
    if bulk is None:
        return [], "seconds", "", None
    lo, hi = bulk
    size, unit = duration_unit(max(abs(lo), abs(hi)))
    outside = [v for v in values if v < lo or v > hi]
    note = ""
    if outside:
        shown = sorted({format_lag(v) for v in outside})
        note = (f"{plural(len(outside), 'point')} far off the others, not drawn: " + ", ".join(shown[:3])
                + (" …" if len(shown) > 3 else ""))
    return [None if v < lo or v > hi else v / size for v in values], unit, note, (lo / size, hi / size)


def _line(times: Sequence[datetime], values: Sequence[float], title: str, y: str, mark: str = "line",
          *, seconds: bool = False) -> str:
    """An inline SVG chart of ``values`` over ``times`` (UTC axis formatted for the range shown). With
    ``seconds`` the values are durations: drawn in the unit of their bulk, values far off it (a mis-dated
    row's year-8999 watermark) left out and named under the title."""
    if not times:
        return ""
    shown: list[float | None] = list(values)
    subtitle = ""
    y_scale: dict[str, Any] = {}
    if seconds:
        shown, unit, subtitle, bulk = _duration_axis(values)
        y = f"{y} ({unit})"
        if bulk is not None:
            y_scale = {"domain": [min(0.0, bulk[0]), max(0.0, bulk[1])] if bulk[0] != bulk[1] else [0.0, max(bulk[1], 1.0)]}
    rows = [{"t": format_instant(t), "v": v} for t, v in zip(times, shown, strict=True) if v is not None]
    span = max(times) - min(times)
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": {"text": title, "subtitle": subtitle} if subtitle else title,
        "width": 560,
        "height": 160,
        "data": {"values": rows},
        "mark": {"type": mark, "interpolate": "step-after", "point": True} if mark == "line"
        else {"type": mark, "color": "#c0392b"},
        "encoding": {
            "x": {"field": "t", "type": "temporal", "scale": {"type": "utc"}, "title": "time (UTC)",
                  "axis": {"format": time_axis_format(span), "labelOverlap": True}},
            "y": {"field": "v", "type": "quantitative", "title": y, "scale": y_scale, "axis": {"format": ",.4~g"}},
        },
    }
    return f'<figure class="chart">{_svg(spec)}</figure>'


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:980px;margin:2em auto;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;
vertical-align:top}.critical{color:#b00020;font-weight:600}.warning{color:#9a6700;font-weight:600}
.info{color:#555}
.ok{color:#1b7f3b}.src{color:#666;font-style:italic}figure.chart{margin:.5em 0}"""


def to_html(report: DetailedReport) -> str:
    """The report as one self-contained HTML document (inline CSS and SVG charts)."""
    def e(text: str) -> str:  # HTML shows Markdown code quotes literally
        return html.escape(plain(text))

    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>tidegauge health report: {e(report.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>tidegauge health report: {e(report.name)}</h1>",
        f"<p>Period {e(_t(report.since))} to {e(_t(report.until))} · overall health "
        f"<span class='{e(report.health)}'>{e(report.health)}</span> (now or in the period) · "
        f"{plural(len(report.jobs), 'job')}</p>",
    ]
    if report.outside_note:
        parts.append(f"<p>{e(report.outside_note)}</p>")
    if not report.jobs:
        parts.append("<p>No job reported in this period.</p>")
    for p in report.pipelines:
        parts.append(f"<h2>{e(_pipeline_title(p))}</h2>")
        parts.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _pipeline_rows(p))
                     + "</table>")
    for j in report.jobs:
        worst = j.worst.label()
        parts.append(f"<h2 id='job-{e(j.job_id)}'>{e(j.name or j.job_id)} <small>({e(j.engine)}, "
                     f"<span class='{e(worst)}'>{e(_heading_health(j))}</span>)</small></h2>")
        parts.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _facts(j)) + "</table>")
        s = j.series
        parts.append(_line(s["freshness_at"], s["freshness_s"], "Freshness (processing time − watermark; below 0: ahead)",
                           "freshness", seconds=True))
        state_title = "State rows" if j.state_unit == "rows" else "State (bytes)"
        parts.append(_line(s["state_at"], s["state_values"], state_title, j.state_unit))
        parts.append(_line(s["dropped_at"], s["dropped_rows"], "Rows dropped by the watermark", "rows", mark="bar"))
        parts.append(_line(s["lag_at"], s["lag_offsets"], "Consumer lag", "offsets"))
        if j.drop_causes or j.drops_by_scope:
            parts.append("<h3>Late rows and what caused them</h3><ul>")
            parts += [f"<li>{e(_cause_text(c))}</li>" for c in j.drop_causes]
            parts += [f"<li>{plural(n, 'row')} dropped at {e(where)}</li>" for where, n in j.drops_by_scope]
            parts.append("</ul>")
        if j.lag:
            parts.append("<h3>Consumer lag per partition</h3><table><tr>" + "".join(f"<th>{h}</th>" for h in _LAG_HEAD)
                         + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in _lag_rows(j)]
            parts.append("</table>")
        if j.episodes:
            parts.append("<h3>Findings in the period</h3><table><tr><th>rule</th><th>severity</th><th>batches</th>"
                         "<th>from</th><th>to</th><th>ended</th><th>where</th><th>message</th></tr>")
            parts += [f"<tr><td>{e(x.rule)}</td><td class='{e(x.severity)}'>{e(x.severity)}</td>"
                      f"<td>{e(_batches(x))}</td><td>{e(_t(x.first_at))}</td><td>{e(_t(x.last_at))}</td>"
                      f"<td>{e(_ended(x))}</td><td>{e(x.scope or 'job')}</td><td>{e(x.message)}</td></tr>"
                      for x in j.episodes]
            parts.append("</table>")
        if j.alerts:
            parts.append("<h3>Alerts</h3><table><tr><th>rule</th><th>severity</th><th>state</th><th>since</th>"
                         "<th>lasted</th><th>message</th></tr>")
            parts += [f"<tr><td>{e(a.rule)}</td><td class='{e(a.severity)}'>{e(a.severity)}</td><td>{e(a.state)}</td>"
                      f"<td>{e(_t(a.active_at))}</td><td>{e(format_lag(a.duration_s))}</td><td>{e(a.message)}</td></tr>"
                      for a in j.alerts]
            parts.append("</table>")
        if j.restarts:
            parts.append("<p><b>Restarts</b>: " + e(", ".join(_t(r) for r in j.restarts)) + "</p>")
        if j.recommendations:
            parts.append("<h3>Recommendations</h3><ul>")
            parts += [f"<li>{e(r.text)} <span class='src'>(from the {e(r.source)})</span></li>" for r in j.recommendations]
            parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(p for p in parts if p)


def render(report: DetailedReport, fmt: Format) -> str:
    """``report`` in ``fmt`` (``html``, ``md`` or ``json``). Raises ValueError for another format."""
    if fmt == "html":
        return to_html(report)
    if fmt == "md":
        return to_markdown(report)
    if fmt == "json":
        return to_json_text(report)
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
