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

from monitor.reports.detailed import DetailedReport, JobReport

__all__ = ["FORMATS", "render", "to_html", "to_json_text", "to_markdown"]

Format = Literal["html", "md", "json"]
FORMATS: tuple[Format, ...] = ("html", "md", "json")


def _n(value: float | int | None, fmt: str = ",.0f", unit: str = "") -> str:
    if value is None:
        return "unknown"
    return f"{value:{fmt}}{unit}"


def _t(value: datetime | None) -> str:
    return "unknown" if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    v = abs(seconds)
    text = f"{v:.0f} s" if v < 120 else f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.1f} h" if v < 172_800 else (
        f"{v / 86400:.1f} d")
    return f"{text} ahead" if seconds < 0 else text


def _facts(j: JobReport) -> list[tuple[str, str]]:
    """The job's numbers as (label, text) rows, shared by Markdown and HTML."""
    rows = [
        ("health now", j.health),
        ("batches in the period", f"{j.batches:,}"),
        (f"freshness within {_dur(j.freshness_target_s)}", _n(j.freshness_attainment_pct, ".2f", " %")),
        ("freshness p50 / p95 / max", f"{_dur(j.freshness_p50_s)} / {_dur(j.freshness_p95_s)} / {_dur(j.freshness_max_s)}"),
        ("rows read", _n(j.input_rows)),
        ("rows dropped by the watermark", f"{_n(j.dropped_rows)} ({_n(j.dropped_share_pct, '.3f', ' %')})"),
        ("state rows (first → last)", f"{_n(j.state_rows_first)} → {_n(j.state_rows_last)}"),
        ("state trend", _n(j.state_slope_rows_per_h, ",.0f", " rows/h")),
        ("state projected in 24 h", _n(j.state_projected_24h)),
    ]
    if j.state_hours_to_limit is not None:
        rows.append(("hours to the state limit", _n(j.state_hours_to_limit, ".1f")))
    if j.lag_offsets_max is not None or j.lag_seconds_max is not None:
        rows.append(("consumer lag last / max (offsets)", f"{_n(j.lag_offsets_last)} / {_n(j.lag_offsets_max)}"))
        rows.append(("consumer lag last / max (time)", f"{_dur(j.lag_seconds_last)} / {_dur(j.lag_seconds_max)}"))
    rows.append(("restarts", str(len(j.restarts))))
    rows.append(("inferred delay threshold", _dur(j.inferred_delay_s)))
    rows.append(("observed lateness p99.9", _dur(j.lateness_p999_s)))
    return rows


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
        f"Period {_t(report.since)} to {_t(report.until)} · overall health **{report.health}** · {len(report.jobs)} jobs",
        "",
    ]
    if not report.jobs:
        out.append("No job reported in this period.")
    for j in report.jobs:
        out += [f"## {j.name or j.job_id} ({j.engine}, health {j.health})", "", f"Job id `{j.job_id}`.", "",
                "| measure | value |", "|---|---|"]
        out += [f"| {k} | {_md_escape(v)} |" for k, v in _facts(j)]
        out.append("")
        if j.drop_causes:
            out += ["**Late rows and what caused them**", ""]
            for c in j.drop_causes:
                what = " (a future-dated row)" if c.future_dated else ""
                out.append(f"- {c.dropped_rows:,} rows dropped against the watermark set by batch {c.batch_id} "
                           f"(event-time max {_t(c.event_time_max)}){what}")
            out.append("")
        if j.alerts:
            out += ["**Alerts**", "", "| rule | severity | state | since | lasted | message |", "|---|---|---|---|---|---|"]
            out += [f"| {a.rule} | {a.severity} | {a.state} | {_t(a.active_at)} | {_dur(a.duration_s)} | "
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


def _line(times: Sequence[datetime], values: Sequence[float], title: str, y: str, mark: str = "line") -> str:
    """An inline SVG chart of ``values`` over ``times`` (UTC axis)."""
    if not times:
        return ""
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": title,
        "width": 560,
        "height": 160,
        "data": {"values": [{"t": t.isoformat(), "v": v} for t, v in zip(times, values, strict=True)]},
        "mark": {"type": mark, "interpolate": "step-after"} if mark == "line" else {"type": mark, "color": "#c0392b"},
        "encoding": {
            "x": {"field": "t", "type": "temporal", "scale": {"type": "utc"}, "title": "time (UTC)",
                  "axis": {"format": "%m-%d %H:%M"}},
            "y": {"field": "v", "type": "quantitative", "title": y},
        },
    }
    return f'<figure class="chart">{_svg(spec)}</figure>'


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:980px;margin:2em auto;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;
vertical-align:top}.critical{color:#b00020;font-weight:600}.warning{color:#9a6700;font-weight:600}
.ok{color:#1b7f3b}.src{color:#666;font-style:italic}figure.chart{margin:.5em 0}"""


def to_html(report: DetailedReport) -> str:
    """The report as one self-contained HTML document (inline CSS and SVG charts)."""
    e = html.escape
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>tidegauge health report: {e(report.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>tidegauge health report: {e(report.name)}</h1>",
        f"<p>Period {e(_t(report.since))} to {e(_t(report.until))} · overall health "
        f"<span class='{e(report.health)}'>{e(report.health)}</span> · {len(report.jobs)} jobs</p>",
    ]
    if not report.jobs:
        parts.append("<p>No job reported in this period.</p>")
    for j in report.jobs:
        parts.append(f"<h2 id='job-{e(j.job_id)}'>{e(j.name or j.job_id)} <small>({e(j.engine)}, "
                     f"<span class='{e(j.health)}'>{e(j.health)}</span>)</small></h2>")
        parts.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _facts(j)) + "</table>")
        s = j.series
        parts.append(_line(s["freshness_at"], s["freshness_s"], "Freshness (processing time − watermark)", "seconds"))
        parts.append(_line(s["state_at"], s["state_rows"], "State rows", "rows"))
        parts.append(_line(s["dropped_at"], s["dropped_rows"], "Rows dropped by the watermark", "rows", mark="bar"))
        if j.drop_causes:
            parts.append("<h3>Late rows and what caused them</h3><ul>")
            for c in j.drop_causes:
                what = " — <b>a future-dated row</b>" if c.future_dated else ""
                parts.append(f"<li>{c.dropped_rows:,} rows dropped against the watermark set by batch "
                             f"{e(str(c.batch_id))} (event-time max {e(_t(c.event_time_max))}){what}</li>")
            parts.append("</ul>")
        if j.alerts:
            parts.append("<h3>Alerts</h3><table><tr><th>rule</th><th>severity</th><th>state</th><th>since</th>"
                         "<th>lasted</th><th>message</th></tr>")
            parts += [f"<tr><td>{e(a.rule)}</td><td class='{e(a.severity)}'>{e(a.severity)}</td><td>{e(a.state)}</td>"
                      f"<td>{e(_t(a.active_at))}</td><td>{e(_dur(a.duration_s))}</td><td>{e(a.message)}</td></tr>"
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
