"""``tidegauge whatif``: replay an EVENTS file through Spark's watermark rules (the reference engine).

Examples::

    tidegauge whatif events.csv --delay 10m --window 5m --trigger 30s
    tidegauge whatif events.jsonl --time-unit ms --window 5m --sweep 1m,5m,10m,30m
    tidegauge whatif events.parquet --window 5m --target-completeness 99.9 --format json

The report is built in two steps: :func:`run_whatif` loads the events and calls the engine's replay
for the chosen ``--engine`` (:func:`_spark_report`: Spark mode, the only one here); the pieces of
text and JSON come from :mod:`._whatif_text`, which renders any int64 instant (no ``datetime``).

With ``--target-completeness`` and a mis-dated row (a row that moved the watermark ahead of the rest of the
stream, :func:`monitor.watermark.diagnose.diagnose`), the report leads with the useful answer: the row,
then the delay the target needs without it (filtered before ``withWatermark``), then — labelled "with the
mis-dated row kept" — the delay it would need with it (decades for a row dated 2099: no fix). The JSON
``recommendation`` is then the one without the row, with ``misdated_rows`` (their lines) and
``with_misdated_rows`` (the recommendation with every row kept) beside it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from monitor.commands import _whatif_text as T
from monitor.durations import parse_duration_list_ms, parse_optional_duration_ms
from monitor.errors import InputError
from monitor.watermark import (
    BatchPlan,
    EventsTable,
    WatermarkConfig,
    plan_batches,
    replay,
)
from monitor.watermark.diagnose import advise_delay, diagnose
from monitor.watermark.io import load_events
from monitor.watermark.sweep import DEFAULT_LADDER_MS, sweep
from monitor.watermark.whatif_config import CLI_NAMES, spark_config

__all__ = ["register", "run_whatif"]

#: Engines whose rules ``whatif`` can replay (``--engine``).
ENGINES = ("spark",)


class WhatifUsageError(InputError):
    """The options of ``tidegauge whatif`` do not fit together (the message says which)."""


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
    """Turn the command-line options into a :class:`WatermarkConfig` (through the one builder,
    :func:`monitor.watermark.whatif_config.spark_config`, which the dashboard's What-if lab calls too).

    Raises:
        WhatifUsageError / DurationError / WhatifConfigError / EngineConfigError: options that do not parse
            or fit (named as on the command line).
    """
    if delay is None and need_delay:
        raise WhatifUsageError("--delay is required (or use --sweep / --target-completeness)")
    ms = parse_optional_duration_ms
    return spark_config(
        delay_ms=ms(delay, what="--delay") or 0,
        size_ms=ms(window, what="--window"),
        slide_ms=ms(slide, what="--slide"),
        gap_ms=ms(session_gap, what="--session-gap"),
        dedup=dedup,
        trigger_ms=ms(trigger, what="--trigger"),
        policy=policy,
        output_mode=output_mode,
        max_future_skew_ms=ms(max_future_skew, what="--max-future-skew"),
        max_rows_per_batch=max_rows_per_batch,
        group_by_key=group_by_key,
        no_data_batches=no_data_batches,
        names=CLI_NAMES,
    )


def _spark_report(
    events: EventsTable,
    config: WatermarkConfig,
    plan: BatchPlan,
    *,
    delay_given: bool,
    sweep_delays: list[int] | None,
    target_completeness: float | None,
    show_batches: int,
    show_late: int,
) -> tuple[dict[str, Any], list[str]]:
    """Spark mode: replay (or sweep / recommend), say what moved the watermark; ``(json, text lines)``."""
    doc: dict[str, Any] = {}
    text: list[str] = []
    diagnosed_at = config
    lead: list[str] = []  # the useful answer first: the mis-dated row, then the delay without it
    if sweep_delays is not None or target_completeness is not None:
        if sweep_delays is not None:
            summaries = sweep(events, config, sweep_delays, plan=plan)
            doc["sweep"] = [s.to_json() for s in summaries]
            text += ["", *T.sweep_table(summaries)]
        if not delay_given:  # name the cause at the largest delay tried: what no delay up to it fixed
            largest = max(sweep_delays) if sweep_delays else DEFAULT_LADDER_MS[-1]
            diagnosed_at = dataclasses.replace(config, delay_ms=largest)
        if target_completeness is not None:
            advice = advise_delay(
                events,
                config,
                target_completeness,
                candidates_ms=sweep_delays,
                plan=plan,
                diagnose_at_ms=diagnosed_at.delay_ms,
            )
            diagnosis = advice.diagnosis
            doc["recommendation"] = T.advice_json(advice)
            if advice.without is None:
                text += ["", *T.recommendation_text(advice.with_rows)]
            else:
                lead = T.advice_text(advice)
        else:
            diagnosis = diagnose(events, diagnosed_at, plan=plan)
    else:
        result = replay(events, config, plan=plan)
        doc.update(result.to_json())
        text += ["", *T.batches_text(result, show_batches), "", *T.summary_text(result.summary)]
        late = T.late_entries(result, events, show_late)
        doc["late_row_details"] = late
        total_late = sum(len(b.late_rows) for b in result.batches)
        text += T.late_text(late, total_late)
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
                f"Future-skew filter ({T.dur(config.max_future_skew_ms)} ahead of processing time):",
                f"  without it: {base.dropped_rows} rows dropped as late ({base.dropped_share * 100:.3f}%), "
                f"final watermark {T.iso(base.final_watermark_ms)}",
                f"  with it: {s.dropped_rows} dropped as late + {s.future_filtered_rows} future rows "
                f"filtered; it saves {saved} late rows",
            ]
        diagnosis = diagnose(events, config, plan=plan, result=result)
    doc["cause"] = T.diagnosis_json(diagnosis) | {"delay_ms": diagnosed_at.delay_ms}
    rows, rest = T.diagnosis_parts(diagnosis)
    if rows:
        at = (
            "" if diagnosed_at is config else f" (at delay {T.dur(diagnosed_at.delay_ms)}, the largest tried)"
        )
        cause = [rows[0].replace("Cause:", f"Cause{at}:", 1), *rows[1:]]
        if lead:  # the row, the delay the target needs without it, the delay with it; then the rest
            return doc, ["", *cause, *lead, *rest, *text]
        text += ["", *cause, *rest]
    return doc, text


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
    engine: str = "spark",
    delay_given: bool = True,
) -> None:
    """Load the events, replay with ``engine``'s rules and print (text or JSON) to ``out``.

    Raises:
        InputError (subclasses): bad file, columns, units or options (one line; exit code 2).
    """
    if fmt not in ("text", "json"):
        raise WhatifUsageError(f"--format must be text or json, got {fmt!r}")
    if engine not in ENGINES:
        raise WhatifUsageError(f"--engine {engine!r} is not supported; only {', '.join(ENGINES)}")
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
        "engine": engine,
        "query": T.describe(config),
        "bad_rows": [dataclasses.asdict(b) for b in events.bad_rows],
        "unit_mismatches": [T.mismatch_json(m) for m in events.unit_mismatches],
    }
    text: list[str] = [
        f"tidegauge whatif: {events_path} - {len(events)} rows; {engine}; {T.describe(config)}",
        *T.bad_rows_text(events, 10),
        *T.mismatches_text(events, 10),
    ]
    # one dispatch point per engine (only Spark's rules here)
    part, lines = _spark_report(
        events,
        config,
        plan,
        delay_given=delay_given,
        sweep_delays=sweep_delays,
        target_completeness=target_completeness,
        show_batches=show_batches,
        show_late=show_late,
    )
    doc.update(part)
    text += lines
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
        engine: str = typer.Option("spark", "--engine", help="Engine whose rules to replay: spark or flink."),
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
        allowed_lateness: str | None = typer.Option(
            None, "--allowed-lateness", help="Flink: allowedLateness."
        ),
        idleness: str | None = typer.Option(
            None, "--idleness", help="Flink: withIdleness timeout, e.g. 30s."
        ),
        watermark_interval: str | None = typer.Option(
            None, "--watermark-interval", help="Flink: pipeline.auto-watermark-interval (200ms)."
        ),
        per_event_watermarks: bool = typer.Option(
            False, "--per-event-watermarks", help="Flink: emit per event."
        ),
        late_side_output: bool = typer.Option(False, "--late-side-output", help="Flink: sideOutputLateData."),
        end_of_input: bool = typer.Option(
            False, "--end-of-input", help="Flink: bounded input, fire all at end."
        ),
    ) -> None:
        """Replay EVENTS through Spark's watermark rules: late rows, emitted windows, state, latency."""
        from monitor.commands._whatif_flink import dispatch_flink  # the Flink mode's glue

        if dispatch_flink(engine, locals()):
            return
        if engine not in ENGINES:
            raise WhatifUsageError(f"--engine {engine!r} is not supported; only {', '.join(ENGINES)}")
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
            engine=engine,
            delay_given=delay is not None,
        )
