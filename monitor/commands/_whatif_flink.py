"""``tidegauge whatif --engine flink``: replay an EVENTS file through Flink's watermark and window rules.

Examples::

    tidegauge whatif events.csv --engine flink --delay 5s --window 10s
    tidegauge whatif events.csv --engine flink --delay 5s --window 10s --slide 5s --allowed-lateness 5s
    tidegauge whatif events.jsonl --engine flink --delay 2s --session-gap 30s --idleness 30s --format json
    tidegauge whatif events.csv --engine flink --delay 5s --window 1m --per-event-watermarks --end-of-input

Input: the same files as the Spark mode (:mod:`monitor.watermark.io`): ``event_time`` (required),
``arrival_time`` (processing time: drives the periodic watermark emission and idleness),
``partition`` (one watermark generator per partition/split), ``key`` (``keyBy``). The replay itself is
:func:`monitor.watermark.flink.replay_flink`; this module parses the options, builds the
:class:`~monitor.watermark.flink.FlinkConfig` with :func:`monitor.watermark.whatif_config.flink_config`
and sweeps through :mod:`monitor.watermark.flink.whatif` (both shared with the dashboard's What-if lab) and prints the result. ``--format json`` prints
``{"firings": [{"start_ms", "end_ms", "count", "watermark_ms", "late_firing", "key",
"processing_time_ms"}], "summary": {"late_records_dropped", ...}, "open_windows": [...],
"late_rows": [...]}``. When an element moved the watermark ahead of the rest of the stream
(:func:`monitor.watermark.flink.whatif.misdated_element`), the report leads with it and the figures
without it (``"misdated_element": {"line", "event_time_ms", ..., "without", "sweep_without"}``); the
sweep with it kept follows, labelled. ``--target-completeness`` recommends a delay through the lab's
:func:`monitor.watermark.flink.whatif.advise_flink_delay` (see :func:`run_whatif_flink`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from monitor.durations import (
    format_duration_ms,
    parse_duration_list_ms,
    parse_duration_ms,
    parse_optional_duration_ms,
)
from monitor.errors import InputError
from monitor.text import plural
from monitor.timefmt import format_epoch_ms
from monitor.versions import NEWEST_MODELLED_FLINK, flushes_when_all_idle, modelled_flink
from monitor.watermark import EventsTable, Session, Sliding
from monitor.watermark.flink import LONG_MAX, LONG_MIN, FlinkConfig, FlinkReplay, replay_flink
from monitor.watermark.flink.replay import FlinkSummary
from monitor.watermark.flink.whatif import (
    FlinkDelayAdvice,
    WatermarkMover,
    advise_flink_delay,
    check_flink_events,
    misdated_element,
    sweep_flink,
)
from monitor.watermark.io import load_events
from monitor.watermark.sweep import DEFAULT_LADDER_MS
from monitor.watermark.whatif_config import CLI_NAMES, flink_config

__all__ = [
    "FlinkOptions",
    "WhatifFlinkUsageError",
    "build_flink_config",
    "dispatch_flink",
    "run_whatif_flink",
]


class WhatifFlinkUsageError(InputError):
    """The options of ``tidegauge whatif --engine flink`` do not fit together (the message says which)."""


@dataclasses.dataclass(frozen=True)
class FlinkOptions:
    """The raw Flink-only command-line options (strings as typed; ``None``: not given)."""

    allowed_lateness: str | None = None
    idleness: str | None = None
    watermark_interval: str | None = None
    per_event_watermarks: bool = False
    late_side_output: bool = False
    end_of_input: bool = False
    show_firings: int = 50
    flink_version: str | None = None


def build_flink_config(
    *,
    delay: str | None,
    window: str | None,
    slide: str | None,
    session_gap: str | None,
    opts: FlinkOptions,
    spark_only: dict[str, bool],
) -> FlinkConfig:
    """Turn the options into a :class:`FlinkConfig` (through the one builder,
    :func:`monitor.watermark.whatif_config.flink_config`, which the dashboard's What-if lab calls too).

    Args:
        spark_only: Spark-mode options that were given (name -> given); any given one is an error.

    Raises:
        WhatifFlinkUsageError / DurationError / WhatifConfigError / EngineConfigError: options that do not
            parse or fit (named as on the command line).
    """
    given = [name for name, on in spark_only.items() if on]
    if given:
        raise WhatifFlinkUsageError(f"{', '.join(given)}: only for --engine spark")
    if delay is None:
        raise WhatifFlinkUsageError(
            "--delay is required (forBoundedOutOfOrderness; 0 = monotonous timestamps)"
        )
    dur = parse_optional_duration_ms
    return flink_config(
        delay_ms=parse_duration_ms(delay, what="--delay"),
        size_ms=dur(window, what="--window"),
        slide_ms=dur(slide, what="--slide"),
        gap_ms=dur(session_gap, what="--session-gap"),
        allowed_lateness_ms=dur(opts.allowed_lateness, what="--allowed-lateness") or 0,
        idleness_ms=dur(opts.idleness, what="--idleness"),
        watermark_interval_ms=dur(opts.watermark_interval, what="--watermark-interval"),
        per_event_watermarks=opts.per_event_watermarks,
        late_side_output=opts.late_side_output,
        end_of_input=opts.end_of_input,
        flink_version=opts.flink_version,
        names=CLI_NAMES,
    )


def _instant(ms: int | None) -> str:
    if ms is None or ms == LONG_MIN:
        return "Long.MIN_VALUE (no watermark)"
    if ms == LONG_MAX:
        return "Long.MAX_VALUE (end of input)"
    return format_epoch_ms(ms)


def describe(config: FlinkConfig) -> str:
    """One line naming the modelled job."""
    w = config.window
    if isinstance(w, Session):
        shape = f"session gap {format_duration_ms(w.gap_ms)} per key"
    elif isinstance(w, Sliding):
        shape = f"window {format_duration_ms(w.size_ms)} sliding {format_duration_ms(w.slide_ms)}"
    else:
        shape = f"window {format_duration_ms(w.size_ms)} tumbling"
    parts = [shape, f"delay {format_duration_ms(config.delay_ms)}"]
    if config.allowed_lateness_ms:
        parts.append(f"allowed lateness {format_duration_ms(config.allowed_lateness_ms)}")
    if config.idleness_ms is not None:
        parts.append(f"idleness {format_duration_ms(config.idleness_ms)}")
    if config.flink_version is not None:
        newer = config.flink_version > NEWEST_MODELLED_FLINK  # a later release is replayed as the newest modelled
        parts.append("Flink {}.{} semantics".format(*config.flink_version) + (" (modelled as {}.{})".format(*NEWEST_MODELLED_FLINK) if newer else ""))
    else:
        parts.append("Flink {}.{} semantics (the default; --flink-version to change)".format(*NEWEST_MODELLED_FLINK))
    if config.per_event_watermarks:
        parts.append("per-event watermarks")
    else:
        parts.append(f"periodic watermarks every {format_duration_ms(config.watermark_interval_ms)}")
    parts.append("late side output" if config.late_side_output else "late elements dropped")
    if config.end_of_input:
        parts.append("bounded input (Long.MAX_VALUE at the end)")
    return ", ".join(parts)


def _late_entries(r: FlinkReplay, events: EventsTable, limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if limit == 0:
        return out
    rows = r.late_rows.tolist()
    wms = r.late_row_watermarks_ms.tolist()
    for row, wm in zip(rows, wms, strict=True):
        out.append(
            {
                "line": events.line_of(row),
                "event_time_ms": int(events.event_time_us[row]) // 1000,
                "partition": None if events.partition is None else int(events.partition[row]),
                "key": events.key_names[int(events.key_codes[row])],
                "watermark_ms": wm,
            }
        )
        if 0 < limit <= len(out):
            break
    return out


def _after_all_idle_flush(events: EventsTable, config: FlinkConfig, r: FlinkReplay) -> list[str]:
    """Late elements that met the watermark an all-idle flush set (Flink 2.2+, FLINK-38454: when every split
    of a source subtask is idle its watermark jumps to the highest split's), one line per such flush: the
    replay's own watermark advance at the processing time every partition went idle, linked to the late
    elements that arrived after it and met that watermark."""
    if not flushes_when_all_idle(config.flink_version) or events.arrival_ms is None or not len(r.late_rows):
        return []
    times = r.timeline.advance_time_ms.tolist()
    values = r.timeline.advance_ms.tolist()
    late = list(zip(r.late_rows.tolist(), r.late_row_watermarks_ms.tolist(), strict=True))
    lines: list[str] = []
    for p in r.summary.idle_periods:
        if p.partition is not None or p.from_ms not in times:
            continue
        flush = values[times.index(p.from_ms)]
        rows = [row for row, wm in late if wm == flush and int(events.arrival_ms[row]) >= p.from_ms]
        if not rows:
            continue
        parts = sorted({int(events.partition[row]) for row in rows}) if events.partition is not None else []
        whose = f" of partition {', '.join(map(str, parts))}" if parts else ""
        lines.append(
            f"  {plural(len(rows), 'late element')}{whose} met the watermark {_instant(flush)} that the "
            f"all-idle flush at {_instant(p.from_ms)} (processing time) set: with every partition idle, the "
            "watermark jumped to the highest partition's (Flink 2.2+, FLINK-38454), so elements that came "
            "later below it were dropped. Before 2.2 (--flink-version 2.1) it would have stayed where the "
            "partition that went idle last left it; an --idleness longer than the pause of the partition that "
            "resumed would not have marked every partition idle"
        )
    return lines


def _text(
    path: Path,
    events: EventsTable,
    config: FlinkConfig,
    r: FlinkReplay,
    show: int,
    late: list[dict[str, Any]],
) -> list[str]:
    s = r.summary
    lines = [f"tidegauge whatif: {path} - {len(events)} rows; flink; {describe(config)}", ""]
    recs = r.firing_records()
    lines.append(f"{'window':<52} {'key':<10} {'count':>7}  {'watermark':<32} firing")
    for f in recs if show <= 0 else recs[:show]:
        win = f"[{_instant(f['start_ms'])}, {_instant(f['end_ms'])})"
        lines.append(
            f"{win:<52} {f['key'] or '-':<10} {f['count']:>7}  {_instant(f['watermark_ms']):<32} "
            f"{'late (allowed lateness)' if f['late_firing'] else 'on time'}"
        )
    if 0 < show < len(recs):
        lines.append(f"  ... {len(recs) - show} more firings (--show-batches 0 shows all)")
    lines += [
        "",
        "Summary",
        f"  rows: {s.input_rows} read, {s.rows_without_time} without an event time (left out)",
        f"  late elements (all their windows past end - 1 + allowed lateness): {s.late_elements} "
        f"({s.late_share * 100:.3f}%) -> "
        + (
            f"late side output {s.late_side_output_records} (numLateRecordsDropped stays 0)"
            if config.late_side_output
            else f"numLateRecordsDropped {s.late_records_dropped}"
        ),
        f"  firings: {s.firings} ({s.late_firings} late firings), windows fired {s.windows_fired}, "
        f"open at the end {s.open_windows}",
        *(
            [
                f"  on-time firings, processing time past the window end: p50 "
                f"{format_duration_ms(max(0, s.firing_delay_ms['p50']))}, p95 "
                f"{format_duration_ms(max(0, s.firing_delay_ms['p95']))}, max "
                f"{format_duration_ms(max(0, s.firing_delay_ms['max']))}"
            ]
            if s.firing_delay_ms and s.firing_delay_ms["count"]
            else []
        ),
        f"  watermark: {s.watermark_advances} advances over {s.partitions} partition(s); final "
        f"{_instant(s.final_watermark_ms)}",
    ]
    idle = [p for p in s.idle_periods if p.partition is not None]
    if idle:
        lines.append(f"  idle partitions (withIdleness): {plural(len(idle), 'period')} (processing time)")
        for p in idle[:10]:
            until = _instant(p.until_ms) if p.until_ms is not None else "the end"
            value = r.partition_values[p.partition or 0]
            lines.append(f"    partition {value}: idle from {_instant(p.from_ms)} until {until}")
    if s.all_partitions_idle_ms:
        lines.append(
            f"  all partitions idle for {format_duration_ms(s.all_partitions_idle_ms)} of processing time: "
            + (
                "the watermark jumps to the highest partition's, then event time freezes"
                if flushes_when_all_idle(config.flink_version)
                else "the watermark stays where the partition that went idle last left it (before Flink 2.2; "
                "2.2+ jumps to the highest partition's, FLINK-38454), then event time freezes"
            )
        )
    if s.partitions > 1 and config.idleness_ms is None and s.final_watermark_ms is None:
        lines.append(
            "  a partition never emitted a watermark: it holds the min at Long.MIN_VALUE (try --idleness)"
        )
    lines += _after_all_idle_flush(events, config, r)
    if late:
        lines += ["", f"Late elements ({len(late)} of {s.late_elements} shown; --show-late N, -1 for all):"]
        for e in late:
            part = f" partition {e['partition']}" if e["partition"] is not None else ""
            lines.append(
                f"  line {e['line']}: event time {_instant(e['event_time_ms'])}{part} at watermark "
                f"{_instant(e['watermark_ms'])}"
            )
    return lines


def _sweep_text(rows: list[Any], title: str) -> list[str]:
    out = ["", title, f"{'delay':>8} {'late':>9} {'share':>9} {'firings':>8} {'late firings':>13} {'open':>6}"]
    for s in rows:
        out.append(
            f"{format_duration_ms(s.delay_ms):>8} {s.late_elements:>9} {s.late_share * 100:>8.3f}% "
            f"{s.firings:>8} {s.late_firings:>13} {s.open_windows:>6}"
        )
    return out


def _misdated_text(events: EventsTable, m: WatermarkMover, without: Any) -> list[str]:
    assert m.row is not None
    return [
        "",
        f"Mis-dated element: line {events.line_of(m.row)} (event time "
        f"{_instant(int(events.event_time_us[m.row]) // 1000)}) moved the watermark from {_instant(m.from_ms)} to "
        f"{_instant(m.to_ms)} at processing time {_instant(m.processing_time_ms)}; almost no later element "
        "reaches it, so every one is late whatever the delay.",
        f"  without it (filtered before the WatermarkStrategy): {without.late_elements} late elements "
        f"({without.late_share * 100:.3f}%) at this delay",
    ]


#: what the answer says when no delay tried meets the target (the What-if lab's words)
NO_DELAY_TRIED = "more than any delay in the sweep"


def _late_text(s: FlinkSummary) -> str:
    return f"{s.late_elements} late element{'' if s.late_elements == 1 else 's'}, {s.late_share * 100:.3f}%"


def _advice_text(advice: FlinkDelayAdvice, tried: list[FlinkSummary], target: float, events: EventsTable) -> list[str]:
    """The ``--target-completeness`` answer: with a mis-dated element, the delay the target needs without
    it (filtered before the ``WatermarkStrategy``), then — labelled — the delay with it kept."""
    def at(rows: list[FlinkSummary], delay_ms: int) -> FlinkSummary:
        return next(r for r in rows if r.delay_ms == delay_ms)

    pct = f"{target:g}%"
    m = advice.misdated
    rows = advice.sweep_without if m is not None else tried
    what = ""
    if m is not None:
        assert m.row is not None
        what = f" without the mis-dated element (line {events.line_of(m.row)}, filtered out before the WatermarkStrategy)"
    if advice.recommended_ms is None:
        out = [f"No delay tried keeps {pct} of the elements{what}: try larger delays (--sweep)."]
    else:
        out = [
            f"Recommended delay for {pct} completeness{what}: {format_duration_ms(advice.recommended_ms)} "
            f"({_late_text(at(rows, advice.recommended_ms))}), the smallest of the delays tried that meets it"
        ]
    if m is not None:
        if advice.with_element_ms is None:
            largest = max(tried, key=lambda r: r.delay_ms)
            kept = (
                f"{NO_DELAY_TRIED} (at {format_duration_ms(largest.delay_ms)}, the largest tried: "
                f"{_late_text(largest)})"
            )
        else:
            kept = f"{format_duration_ms(advice.with_element_ms)} ({_late_text(at(tried, advice.with_element_ms))})"
        out.append(
            f"With the mis-dated element kept (for comparison, not a fix): {kept}; such a delay only waits until "
            "processing time reaches the mis-dated event time"
        )
    return out


def _check_processing_time(events: EventsTable, config: FlinkConfig, events_path: Path) -> None:
    """Periodic watermarks and idleness run on processing time (``pipeline.auto-watermark-interval``,
    ``WatermarksWithIdleness``): without an ``arrival_time`` column there is none to run them on.

    Raises:
        WhatifFlinkUsageError: naming the file and the option that needs the column.
    """
    if events.arrival_ms is not None:
        return
    if config.idleness_ms is not None:
        raise WhatifFlinkUsageError(
            f"--idleness: {events_path} has no arrival_time column; idleness is measured in processing time "
            "(WatermarksWithIdleness), so it needs one: add the column or drop --idleness"
        )
    if not config.per_event_watermarks:
        raise WhatifFlinkUsageError(
            f"{events_path} has no arrival_time column: periodic watermarks (every "
            f"{format_duration_ms(config.watermark_interval_ms)}) are emitted on processing time, so they need "
            "one; add the column, or pass --per-event-watermarks (a watermark after every element)"
        )


def run_whatif_flink(
    events_path: Path,
    *,
    config: FlinkConfig,
    time_unit: str | None,
    time_column: str,
    fmt: str,
    show_firings: int,
    show_late: int,
    sweep: str | None,
    out: TextIO,
    target: float | None = None,
) -> None:
    """Load the events, replay them in Flink mode and print text or JSON to ``out``.

    With ``target`` (``--target-completeness``, percent in ``(0, 100]``): the smallest delay of the
    sweep (``--sweep``, else :data:`monitor.watermark.sweep.DEFAULT_LADDER_MS`) whose late elements stay
    within it, through :func:`monitor.watermark.flink.whatif.advise_flink_delay` (the What-if lab's
    advice): with a mis-dated element, the delay without it leads and the one with it kept follows,
    labelled (:data:`NO_DELAY_TRIED` when no delay tried meets it); JSON ``"recommendation":
    {"target_completeness_pct", "delays_tried_ms", "delay_ms", "misdated_line", "with_misdated_element_ms"}``.

    Raises:
        InputError (subclasses): bad file, columns, units or options; EngineConfigError: periodic
            watermarks without an ``arrival_time`` column.
    """
    if fmt not in ("text", "json"):
        raise WhatifFlinkUsageError(f"--format must be text or json, got {fmt!r}")
    if time_unit is not None and time_unit not in ("s", "ms", "us"):
        raise WhatifFlinkUsageError(f"--time-unit must be s, ms or us, got {time_unit!r}")
    events = load_events(events_path, time_unit=time_unit, time_column=time_column)  # type: ignore[arg-type]
    check_flink_events(events, str(events_path))
    _check_processing_time(events, config, events_path)
    result = replay_flink(events, config)
    late = _late_entries(result, events, show_late)
    doc: dict[str, Any] = {
        "events": str(events_path),
        "engine": "flink",
        "query": describe(config),
        # the release whose semantics were replayed (the newest modelled when none was given)
        "flink_version": "{}.{}".format(*modelled_flink(config.flink_version)),
        "bad_rows": [dataclasses.asdict(b) for b in events.bad_rows],
        **result.to_json(),
        "late_rows": late,
    }
    text = _text(events_path, events, config, result, show_firings, late)
    # the useful answer first: the mis-dated element, then the figures without it, then (labelled) with it
    m = misdated_element(events, result)
    without_events = events
    lead_end, before = 1, len(text)  # where the lead (mis-dated element, then the advice) ends
    if m is not None and m.row is not None:
        valid = events.valid.copy()
        valid[m.row] = False  # left out, as a record the TimestampAssigner rejects
        without_events = dataclasses.replace(events, valid=valid)
        without = replay_flink(without_events, config).summary
        doc["misdated_element"] = {
            "line": events.line_of(m.row),
            "event_time_ms": int(events.event_time_us[m.row]) // 1000,
            "watermark_from_ms": m.from_ms,
            "watermark_to_ms": m.to_ms,
            "processing_time_ms": m.processing_time_ms,
            "without": without.to_json(),
        }
        text[1:1] = _misdated_text(events, m, without)
        lead_end += len(text) - before
    if target is not None:
        tried_ms = parse_duration_list_ms(sweep, what="--sweep") if sweep is not None else list(DEFAULT_LADDER_MS)
        tried = sweep_flink(events, config, tried_ms)
        advice = advise_flink_delay(events, config, result, tried, tried_ms, target)
        doc["recommendation"] = {
            "target_completeness_pct": target,
            "delays_tried_ms": tried_ms,
            "delay_ms": advice.recommended_ms,
            "misdated_line": None if advice.misdated is None or advice.misdated.row is None
            else events.line_of(advice.misdated.row),
            "with_misdated_element_ms": advice.with_element_ms if advice.misdated is not None else None,
        }
        # after the mis-dated element's lines (when there is one), before the replay's own figures
        answer = _advice_text(advice, tried, target, events)
        text[lead_end:lead_end] = answer if lead_end > 1 else ["", *answer]
    if sweep is not None:
        delays = parse_duration_list_ms(sweep, what="--sweep")
        rows = sweep_flink(events, config, delays)
        doc["sweep"] = [s.to_json() for s in rows]
        if without_events is not events:
            kept = sweep_flink(without_events, config, delays)
            doc["misdated_element"]["sweep_without"] = [s.to_json() for s in kept]
            text += _sweep_text(kept, "Sweep without the mis-dated element:")
            text += _sweep_text(rows, "Sweep with the mis-dated element kept (for comparison, not a fix):")
        else:
            text += _sweep_text(rows, "Sweep:")
    if fmt == "json":
        out.write(json.dumps(doc, separators=(",", ":")) + "\n")
    else:
        out.write("\n".join(text) + "\n")


_FLINK_ONLY = {
    "allowed_lateness": "--allowed-lateness",
    "idleness": "--idleness",
    "watermark_interval": "--watermark-interval",
    "per_event_watermarks": "--per-event-watermarks",
    "late_side_output": "--late-side-output",
    "end_of_input": "--end-of-input",
    "flink_version": "--flink-version",
}


def dispatch_flink(engine: str, params: Mapping[str, Any]) -> bool:
    """The ``whatif`` command's hook: run the Flink mode when ``--engine flink`` (returns True), else
    check that no Flink-only option was given and return False (the Spark mode runs).

    ``params``: the command's parameters by name (``events``, ``delay``, ``window``, ``slide``,
    ``session_gap``, the Flink-only options, and the Spark-only ones, which are rejected here).

    Raises:
        WhatifFlinkUsageError: a Flink-only option with another engine, or a Spark-only one with flink.
    """
    if engine != "flink":
        given = [flag for name, flag in _FLINK_ONLY.items() if params.get(name)]
        if given:
            raise WhatifFlinkUsageError(f"{', '.join(given)}: only for --engine flink")
        return False
    spark_only = {
        "--dedup": params.get("dedup") is not None,
        "--trigger": params.get("trigger") is not None,
        "--policy": params.get("policy", "min") != "min",
        "--output-mode": params.get("output_mode", "append") != "append",
        "--group-by-key": bool(params.get("group_by_key")),
        "--max-future-skew": params.get("max_future_skew") is not None,
        "--max-rows-per-batch": params.get("max_rows_per_batch") is not None,
        "--no-no-data-batches": params.get("no_data_batches", True) is False,
        "--delay NAME=DURATION (per-input delays)": "=" in str(params.get("delay") or ""),
        "--join": params.get("join") is not None,
        "--join-inputs": params.get("join_inputs") is not None,
        "--then-window": bool(params.get("then_window")),
        "--restart-after": params.get("restart_after") is not None,
        "--run-kind": params.get("run_kind", "live") != "live",
        "--spark-version": params.get("spark_version") is not None,
    }
    opts = FlinkOptions(
        allowed_lateness=params.get("allowed_lateness"),
        idleness=params.get("idleness"),
        watermark_interval=params.get("watermark_interval"),
        per_event_watermarks=bool(params.get("per_event_watermarks")),
        late_side_output=bool(params.get("late_side_output")),
        end_of_input=bool(params.get("end_of_input")),
        show_firings=int(params.get("show_batches", 50)),
        flink_version=params.get("flink_version"),
    )
    config = build_flink_config(
        delay=params.get("delay"),
        window=params.get("window"),
        slide=params.get("slide"),
        session_gap=params.get("session_gap"),
        opts=opts,
        spark_only=spark_only,
    )
    run_whatif_flink(
        Path(params["events"]),
        config=config,
        time_unit=params.get("time_unit"),
        time_column=params.get("time_column", "event_time"),
        fmt=params.get("fmt", "text"),
        show_firings=opts.show_firings,
        show_late=int(params.get("show_late", 10)),
        sweep=params.get("sweep_opt"),
        out=sys.stdout,
        target=params.get("target"),
    )
    return True
