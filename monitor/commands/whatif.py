"""``tidegauge whatif``: replay an EVENTS file through Spark's watermark rules (the reference engine).

Examples::

    tidegauge whatif events.csv --delay 10m --window 5m --trigger 30s
    tidegauge whatif events.jsonl --time-unit ms --window 5m --sweep 1m,5m,10m,30m
    tidegauge whatif events.parquet --window 5m --target-completeness 99.9 --format json
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from monitor.durations import format_duration_ms, parse_duration_list_ms, parse_duration_ms
from monitor.errors import InputError
from monitor.model import ms_to_datetime
from monitor.watermark import (
    BatchResult,
    Dedup,
    EventsTable,
    Replay,
    Session,
    Sliding,
    Summary,
    Tumbling,
    WatermarkConfig,
    WindowSpec,
    plan_batches,
    replay,
)
from monitor.watermark.io import load_events
from monitor.watermark.sweep import Recommendation, recommend_delay, sweep

__all__ = ["register", "run_whatif"]


class WhatifUsageError(InputError):
    """The options of ``tidegauge whatif`` do not fit together (the message says which)."""


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    dt = ms_to_datetime(ms)
    assert dt is not None
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")


def _dur(ms: int | None) -> str:
    return "-" if ms is None else format_duration_ms(ms)


def build_config(
    *,
    delay: str | None,
    window: str | None,
    slide: str | None,
    session_gap: str | None,
    dedup: str | None,
    trigger: str | None,
    policy: str,
    output_mode: str,
    max_future_skew: str | None,
    max_rows_per_batch: int | None,
    group_by_key: bool,
    no_data_batches: bool,
    need_delay: bool,
) -> WatermarkConfig:
    """Turn the command-line options into an :class:`WatermarkConfig`.

    Raises:
        WhatifUsageError / DurationError / EngineConfigError: options that do not parse or fit.
    """
    if delay is None and need_delay:
        raise WhatifUsageError("--delay is required (or use --sweep / --target-completeness)")
    delay_ms = parse_duration_ms(delay, what="--delay") if delay is not None else 0
    spec: WindowSpec | None = None
    if session_gap is not None:
        if slide is not None:
            raise WhatifUsageError("--slide and --session-gap cannot be combined")
        spec = Session(parse_duration_ms(session_gap, what="--session-gap"))
    elif window is not None:
        size = parse_duration_ms(window, what="--window")
        if slide is not None:
            sl = parse_duration_ms(slide, what="--slide")
            spec = Tumbling(size) if sl == size else Sliding(size, sl)
        else:
            spec = Tumbling(size)
    elif slide is not None:
        raise WhatifUsageError("--slide needs --window")
    dd: Dedup | None = None
    if dedup is not None:
        modes = {
            "key": "key",
            "key,event_time": "key_and_event_time",
            "key_and_event_time": "key_and_event_time",
            "within-watermark": "within_watermark",
            "within_watermark": "within_watermark",
        }
        if dedup not in modes:
            raise WhatifUsageError(f"--dedup must be key, key,event_time or within-watermark, got {dedup!r}")
        if spec is not None:
            raise WhatifUsageError("--dedup cannot be combined with --window / --session-gap")
        dd = Dedup(modes[dedup])  # type: ignore[arg-type]
    if spec is None and dd is None:
        raise WhatifUsageError("give --window (with optional --slide), --session-gap, or --dedup")
    if policy not in ("min", "max"):
        raise WhatifUsageError(f"--policy must be min or max, got {policy!r}")
    if output_mode not in ("append", "update"):
        raise WhatifUsageError(f"--output-mode must be append or update, got {output_mode!r}")
    return WatermarkConfig(
        delay_ms=delay_ms,
        window=spec,
        dedup=dd,
        group_by_key=group_by_key,
        output_mode=output_mode,  # type: ignore[arg-type]
        policy=policy,  # type: ignore[arg-type]
        trigger_ms=parse_duration_ms(trigger, what="--trigger") if trigger is not None else None,
        max_rows_per_batch=max_rows_per_batch,
        max_future_skew_ms=parse_duration_ms(max_future_skew, what="--max-future-skew")
        if max_future_skew is not None
        else None,
        no_data_batches=no_data_batches,
    )


def _describe(config: WatermarkConfig) -> str:
    w = config.window
    if isinstance(w, Tumbling):
        shape = f"window {_dur(w.size_ms)} tumbling"
    elif isinstance(w, Sliding):
        shape = f"window {_dur(w.size_ms)} sliding {_dur(w.slide_ms)}"
    elif isinstance(w, Session):
        shape = f"session gap {_dur(w.gap_ms)} per key"
    else:
        assert config.dedup is not None
        shape = f"dedup ({config.dedup.mode})"
    parts = [shape, config.output_mode if config.dedup is None else "", f"policy {config.policy}"]
    if config.group_by_key and not isinstance(w, Session):
        parts.append("grouped by key")
    if config.trigger_ms is not None:
        parts.append(f"trigger {_dur(config.trigger_ms)}")
    if config.max_rows_per_batch is not None:
        parts.append(f"max {config.max_rows_per_batch} rows/batch")
    if config.max_future_skew_ms is not None:
        parts.append(f"future-skew filter {_dur(config.max_future_skew_ms)}")
    return ", ".join(p for p in parts if p)


def _emitted_text(b: BatchResult, limit: int = 3) -> str:
    ws = b.emitted.to_list()
    if not ws:
        return "-"
    out = []
    for w in ws[:limit]:
        k = f"{w.key}:" if w.key else ""
        out.append(f"{k}[{_iso(w.start_ms)[11:]},{_iso(w.end_ms)[11:]})={w.count}")
    if len(ws) > limit:
        out.append(f"+{len(ws) - limit} more")
    return " ".join(out)


def _latency_text(s: Summary) -> list[str]:
    lines = []
    if s.latency is not None and s.latency.count:
        lat = s.latency
        lines.append(
            f"  output latency (processing time, window end -> emitting batch): p50 {_dur(lat.p50_ms)}, "
            f"p95 {_dur(lat.p95_ms)}, max {_dur(lat.max_ms)} over {lat.count} windows"
        )
    e = s.event_time_latency
    if e.count:
        lines.append(
            f"  output latency (event time past window end when emitted): p50 {_dur(e.p50_ms)}, "
            f"p95 {_dur(e.p95_ms)}, max {_dur(e.max_ms)}"
        )
        nb = s.latency_batches
        lines.append(f"  output latency in batches: p50 {nb.p50_ms}, p95 {nb.p95_ms}, max {nb.max_ms}")
    return lines


def _summary_text(s: Summary) -> list[str]:
    named = {k: v for k, v in s.dropped_by_source.items() if k}
    by = ", ".join(f"{k}={v}" for k, v in sorted(named.items()))
    lines = [
        "Summary",
        f"  rows: {s.input_rows} read, {s.rows_with_time} with an event time, "
        f"{s.null_time_rows} null/unparseable (filtered, not counted as dropped)",
        f"  rows dropped as late: {s.dropped_rows} ({s.dropped_share * 100:.3f}%)"
        + (f"; by source: {by}" if by else ""),
    ]
    if s.future_filtered_rows:
        lines.append(f"  rows removed by the future-skew filter: {s.future_filtered_rows}")
    if s.duplicates_dropped:
        lines.append(f"  duplicates dropped: {s.duplicates_dropped}")
    lines.append(f"  windows/rows emitted: {s.windows_emitted}")
    lines.extend(_latency_text(s))
    lines.append(f"  state rows: peak {s.peak_state_rows}, at the end {s.final_state_rows}")
    lines.append(
        f"  batches: {s.batches} ({s.no_data_batches} no-data); final watermark {_iso(s.final_watermark_ms)}"
    )
    return lines


def _bad_rows_text(events: EventsTable, limit: int) -> list[str]:
    if not events.bad_rows:
        return []
    lines = [
        f"Unparseable event times: {len(events.bad_rows)} rows (Spark reads them as null and skips them)"
    ]
    for br in events.bad_rows[:limit]:
        lines.append(f"  line {br.line}: {br.value!r} ({br.reason})")
    if len(events.bad_rows) > limit:
        lines.append(f"  ... {len(events.bad_rows) - limit} more")
    return lines


def _batches_text(r: Replay, show: int) -> list[str]:
    head = f"{'batch':>6} {'kind':<7} {'watermark':<24} {'input':>8} {'late':>7} {'state':>8}  emitted"
    lines = [head]
    rows = r.batches if show <= 0 or len(r.batches) <= show else r.batches[:show]
    for b in rows:
        lines.append(
            f"{b.batch_id:>6} {b.kind:<7} {_iso(b.watermark_ms):<24} {b.input_rows:>8} "
            f"{b.late_row_count:>7} {b.state_rows:>8}  {_emitted_text(b)}"
        )
    if len(rows) < len(r.batches):
        lines.append(f"  ... {len(r.batches) - len(rows)} more batches (--show-batches 0 shows all)")
    return lines


def _late_entries(r: Replay, events: EventsTable, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` late (row, window) entries (all when ``limit < 0``), JSON-ready."""
    out: list[dict[str, Any]] = []
    if limit == 0:
        return out
    for b in r.batches:
        for lr in b.late_rows:
            out.append(
                {
                    "batch_id": b.batch_id,
                    "line": events.line_of(lr.row_index),
                    "event_time_us": lr.event_time_us,
                    "window_start_ms": lr.window_start_ms,
                    "window_end_ms": lr.window_end_ms,
                    "watermark_ms": b.late_watermark_ms,
                    "lateness_ms": lr.lateness_ms,
                    "source": lr.source,
                    "key": lr.key,
                }
            )
            if 0 < limit <= len(out):
                return out
    return out


def _late_text(entries: list[dict[str, Any]], total: int) -> list[str]:
    if not entries:
        return []
    lines = [f"Late rows ({len(entries)} of {total} shown; --show-late N, -1 for all):"]
    for e in entries:
        where = (
            f"window ending {_iso(e['window_end_ms'])}" if e["window_end_ms"] is not None else "event time"
        )
        src = f" source {e['source']}" if e["source"] else ""
        et = _iso(e["event_time_us"] // 1000)
        lines.append(
            f"  batch {e['batch_id']}: line {e['line']} (event time {et}{src}) late by "
            f"{_dur(e['lateness_ms'])} ({where} <= watermark {_iso(e['watermark_ms'])})"
        )
    return lines


def _sweep_table(summaries: list[Summary]) -> list[str]:
    lines = [
        f"{'delay':>8} {'dropped':>9} {'share':>9} {'lat p50':>9} {'lat p95':>9} "
        f"{'peak state':>11} {'no-data':>8}"
    ]
    for s in summaries:
        lat = s.latency if s.latency is not None and s.latency.count else s.event_time_latency
        lines.append(
            f"{_dur(s.delay_ms):>8} {s.dropped_rows:>9} {s.dropped_share * 100:>8.3f}% {_dur(lat.p50_ms):>9} "
            f"{_dur(lat.p95_ms):>9} {s.peak_state_rows:>11} {s.no_data_batches:>8}"
        )
    kind = "processing time" if summaries and summaries[0].latency is not None else "event time"
    lines.append(f"(latency: window end -> emission, in {kind})")
    return lines


def _recommendation_text(rec: Recommendation) -> list[str]:
    allowed = rec.max_dropped_share * 100
    if rec.delay_ms is None:
        return [
            f"No delay tried meets {rec.target_completeness_pct}% completeness "
            f"(at most {allowed:.3f}% dropped); "
            f"the largest tried, {_dur(rec.summary.delay_ms)}, drops {rec.summary.dropped_share * 100:.3f}%."
        ]
    s = rec.summary
    out = [
        f"Recommended delay for {rec.target_completeness_pct}% completeness: {_dur(rec.delay_ms)} "
        f"(drops {s.dropped_rows} rows = {s.dropped_share * 100:.3f}% <= {allowed:.3f}%; "
        f"peak state {s.peak_state_rows})"
    ]
    if rec.smallest_candidate_ms is not None and rec.smallest_candidate_ms != rec.delay_ms:
        out.append(f"  smallest candidate meeting it: {_dur(rec.smallest_candidate_ms)}")
    return out


def run_whatif(
    events_path: Path,
    *,
    config: WatermarkConfig,
    time_unit: str | None,
    time_column: str,
    fmt: str,
    sweep_delays: list[int] | None,
    target_completeness: float | None,
    show_batches: int,
    show_late: int,
    out: TextIO,
) -> None:
    """Load the events, replay and print (text or JSON) to ``out``.

    Raises:
        InputError (subclasses): bad file, columns, units or options.
    """
    if fmt not in ("text", "json"):
        raise WhatifUsageError(f"--format must be text or json, got {fmt!r}")
    if time_unit is not None and time_unit not in ("s", "ms", "us"):
        raise WhatifUsageError(f"--time-unit must be s, ms or us, got {time_unit!r}")
    events = load_events(events_path, time_unit=time_unit, time_column=time_column)  # type: ignore[arg-type]
    if events.batch is not None and config.trigger_ms is not None:
        raise WhatifUsageError(
            f"{events_path} has a 'batch' column, which fixes the batches: drop --trigger or the column"
        )
    plan = plan_batches(events, config)
    doc: dict[str, Any] = {
        "events": str(events_path),
        "engine": "spark",
        "query": _describe(config),
        "bad_rows": [dataclasses.asdict(b) for b in events.bad_rows],
    }
    text: list[str] = [
        f"tidegauge whatif: {events_path} - {len(events)} rows; spark; {_describe(config)}",
        *_bad_rows_text(events, 10),
    ]
    if sweep_delays is not None or target_completeness is not None:
        if sweep_delays is not None:
            summaries = sweep(events, config, sweep_delays, plan=plan)
            doc["sweep"] = [s.to_json() for s in summaries]
            text += ["", *_sweep_table(summaries)]
        if target_completeness is not None:
            rec = recommend_delay(events, config, target_completeness, candidates_ms=sweep_delays, plan=plan)
            doc["recommendation"] = {
                "target_completeness_pct": rec.target_completeness_pct,
                "delay_ms": rec.delay_ms,
                "smallest_candidate_ms": rec.smallest_candidate_ms,
                "summary": rec.summary.to_json(),
            }
            text += ["", *_recommendation_text(rec)]
    else:
        result = replay(events, config, plan=plan)
        doc.update(result.to_json())
        text += ["", *_batches_text(result, show_batches), "", *_summary_text(result.summary)]
        late = _late_entries(result, events, show_late)
        doc["late_row_details"] = late
        total_late = sum(len(b.late_rows) for b in result.batches)
        text += _late_text(late, total_late)
        if config.max_future_skew_ms is not None:
            base = replay(events, dataclasses.replace(config, max_future_skew_ms=None), plan=plan).summary
            s = result.summary
            saved = base.dropped_rows - s.dropped_rows
            doc["future_skew"] = {
                "max_future_skew_ms": config.max_future_skew_ms,
                "without_filter": base.to_json(),
                "late_rows_saved": saved,
                "rows_filtered": s.future_filtered_rows,
            }
            text += [
                "",
                f"Future-skew filter ({_dur(config.max_future_skew_ms)} ahead of processing time):",
                f"  without it: {base.dropped_rows} rows dropped as late ({base.dropped_share * 100:.3f}%), "
                f"final watermark {_iso(base.final_watermark_ms)}",
                f"  with it: {s.dropped_rows} dropped as late + {s.future_filtered_rows} future rows "
                f"filtered; it saves {saved} late rows",
            ]
    if fmt == "json":
        out.write(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
    else:
        out.write("\n".join(text) + "\n")


def register(app: typer.Typer) -> None:
    """Add the ``whatif`` command to ``app``."""

    @app.command("whatif")
    def whatif(
        events: Annotated[
            Path, typer.Argument(help="EVENTS file: .csv, .jsonl or .parquet with an event_time column.")
        ],
        engine: str = typer.Option("spark", "--engine", help="Engine whose rules to replay (spark)."),
        delay: str | None = typer.Option(None, "--delay", help="Watermark delay, e.g. 10m."),
        window: str | None = typer.Option(None, "--window", help="Window size, e.g. 5m."),
        slide: str | None = typer.Option(None, "--slide", help="Slide of a sliding window, e.g. 1m."),
        session_gap: str | None = typer.Option(None, "--session-gap", help="Session window gap (per key)."),
        dedup: str | None = typer.Option(
            None, "--dedup", help="Deduplicate on key: key | key,event_time | within-watermark."
        ),
        trigger: str | None = typer.Option(
            None, "--trigger", help="Processing-time trigger interval (needs arrival_time), e.g. 30s."
        ),
        policy: str = typer.Option("min", "--policy", help="Multiple-watermark policy: min or max."),
        output_mode: str = typer.Option("append", "--output-mode", help="append or update."),
        group_by_key: bool = typer.Option(False, "--group-by-key", help="Aggregate per (key, window)."),
        max_future_skew: str | None = typer.Option(
            None, "--max-future-skew", help="Model dropping rows more than this ahead of processing time."
        ),
        max_rows_per_batch: int | None = typer.Option(
            None, "--max-rows-per-batch", help="maxOffsetsPerTrigger-style cap on rows per batch."
        ),
        no_data_batches: bool = typer.Option(
            True,
            "--no-data-batches/--no-no-data-batches",
            help="spark.sql.streaming.noDataMicroBatches.enabled",
        ),
        time_unit: str | None = typer.Option(None, "--time-unit", help="Unit of numeric times: s, ms or us."),
        time_column: str = typer.Option("event_time", "--time-column", help="Name of the event-time column."),
        fmt: str = typer.Option("text", "--format", help="text or json."),
        sweep_opt: str | None = typer.Option(None, "--sweep", help="Compare delays, e.g. 1m,5m,10m,30m."),
        target: float | None = typer.Option(
            None,
            "--target-completeness",
            help="Recommend the smallest delay keeping this % of rows, e.g. 99.9.",
        ),
        show_batches: int = typer.Option(
            50, "--show-batches", help="Batches to list in text output (0: all)."
        ),
        show_late: int = typer.Option(10, "--show-late", help="Late rows to list (text and JSON); -1: all."),
    ) -> None:
        """Replay EVENTS through Spark's watermark rules: late rows, emitted windows, state, latency."""
        if engine != "spark":
            raise WhatifUsageError(f"--engine {engine!r} is not supported; only spark")
        sweep_delays = parse_duration_list_ms(sweep_opt, what="--sweep") if sweep_opt is not None else None
        config = build_config(
            delay=delay,
            window=window,
            slide=slide,
            session_gap=session_gap,
            dedup=dedup,
            trigger=trigger,
            policy=policy,
            output_mode=output_mode,
            max_future_skew=max_future_skew,
            max_rows_per_batch=max_rows_per_batch,
            group_by_key=group_by_key,
            no_data_batches=no_data_batches,
            need_delay=sweep_delays is None and target is None,
        )
        run_whatif(
            events,
            config=config,
            time_unit=time_unit,
            time_column=time_column,
            fmt=fmt,
            sweep_delays=sweep_delays,
            target_completeness=target,
            show_batches=show_batches,
            show_late=show_late,
            out=sys.stdout,
        )
