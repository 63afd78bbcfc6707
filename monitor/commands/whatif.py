"""``tidegauge whatif``: replay an EVENTS file through Spark's watermark rules (the reference engine).

Examples::

    tidegauge whatif events.csv --delay 10m --window 5m --trigger 30s
    tidegauge whatif events.jsonl --time-unit ms --window 5m --sweep 1m,5m,10m,30m
    tidegauge whatif events.parquet --window 5m --target-completeness 99.9 --format json
    tidegauge whatif events.csv --delay clicks=10m,views=1h --window 5m          # one delay per input
    tidegauge whatif events.csv --delay 10m --join left-outer --join-inputs clicks,views --join-lower 5m
    tidegauge whatif events.csv --delay 10m --window 5m --then-window 1h         # agg -> agg chain

The report is built in two steps: :func:`run_whatif` loads the events and calls the engine's replay
for the chosen ``--engine`` (:func:`_spark_report`: Spark mode, the only one here); the pieces of
text and JSON come from :mod:`._whatif_text`, which renders any int64 instant (no ``datetime``).

With ``--target-completeness`` and a mis-dated row (a row that moved the watermark ahead of the rest of the
stream, :func:`monitor.watermark.diagnose.diagnose`), the report leads with the useful answer: the row,
then the delay the target needs without it (filtered before ``withWatermark``), then — labelled "with the
mis-dated row kept" — the delay it would need with it (decades for a row dated 2099: no fix). The JSON
``recommendation`` is then the one without the row, with ``misdated_rows`` (their lines) and
``with_misdated_rows`` (the recommendation with every row kept) beside it.

``--delay a=10m,b=1h`` gives each input (the events' ``source`` column) its own ``withWatermark`` delay;
``--join`` replays a stream-stream join of two inputs and ``--then-window`` a chain of stateful operators
(:mod:`._whatif_ops` renders both: per side / per operator late rows, state rows, output rows).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from monitor.commands import _whatif_ops as O
from monitor.commands import _whatif_restart as R
from monitor.commands import _whatif_text as T
from monitor.durations import parse_duration_list_ms, parse_duration_ms, parse_optional_duration_ms
from monitor.errors import InputError
from monitor.watermark import (
    BatchPlan,
    EventsTable,
    WatermarkConfig,
    plan_batches,
    replay,
)
from monitor.watermark.chain import ChainConfig
from monitor.watermark.config import Session
from monitor.watermark.diagnose import advise_delay, diagnose
from monitor.watermark.io import load_events
from monitor.watermark.join import StreamJoin
from monitor.watermark.sweep import DEFAULT_LADDER_MS, sweep
from monitor.watermark.whatif_config import CLI_NAMES, chain_config, join_spec, spark_config

__all__ = ["register", "run_whatif"]

#: Engines whose rules ``whatif`` can replay (``--engine``).
ENGINES = ("spark",)


class WhatifUsageError(InputError):
    """The options of ``tidegauge whatif`` do not fit together (the message says which)."""


def parse_delays(text: str) -> tuple[int | None, dict[str, int]]:
    """``--delay``: one duration for every input (``10m``), or one per input (``clicks=10m,views=1h``,
    the input named by the events' ``source`` column), optionally with one bare duration as the delay of
    the inputs not named (``clicks=10m,1h``). Returns ``(default delay ms or None, {input: delay ms})``.

    Raises:
        WhatifUsageError: an empty input name, an input named twice, two bare durations.
        DurationError: a duration that does not parse (named ``--delay`` / ``--delay NAME=``).
    """
    default: int | None = None
    named: dict[str, int] = {}
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq:
            if default is not None:
                raise WhatifUsageError(
                    f"--delay {text!r}: two delays without an input name; name each input (a=10m,b=1h)"
                )
            default = parse_duration_ms(name, what="--delay")
            continue
        name = name.strip()
        if not name:
            raise WhatifUsageError(f"--delay {text!r}: an input name is missing before '=' (a=10m,b=1h)")
        if name in named:
            raise WhatifUsageError(f"--delay {text!r}: input {name!r} is given twice")
        named[name] = parse_duration_ms(value.strip(), what=f"--delay {name}=")
    return default, named


def _signed_duration_ms(text: str | None, what: str) -> int | None:
    """A duration that may be negative (``-5m``): join range bounds may be."""
    if text is None:
        return None
    t = text.strip()
    if t.startswith("-"):
        return -parse_duration_ms(t[1:], what=what)
    return parse_duration_ms(t.lstrip("+"), what=what)


def build_join(
    *, join: str | None, join_inputs: str | None, join_lower: str | None, join_upper: str | None
) -> StreamJoin | None:
    """``--join TYPE --join-inputs LEFT,RIGHT [--join-lower X] [--join-upper Y]`` as a
    :class:`~monitor.watermark.join.StreamJoin` (``None`` when no ``--join`` option is given), through
    :func:`monitor.watermark.whatif_config.join_spec`. The condition modelled is
    ``LEFT.key = RIGHT.key AND LEFT.event_time >= RIGHT.event_time - X AND LEFT.event_time <=
    RIGHT.event_time + Y`` (Spark's ``StreamingSymmetricHashJoinExec``); X and Y may be negative.

    Raises:
        WhatifUsageError: a join option without ``--join``, ``--join`` without ``--join-inputs``, or a range
            that can never hold (``X + Y < 0``).
        WhatifConfigError / EngineConfigError / DurationError: a bad type, sides or bound (named).
    """
    if join is None:
        given = [
            flag
            for flag, v in (("--join-inputs", join_inputs), ("--join-lower", join_lower), ("--join-upper", join_upper))
            if v is not None
        ]
        if given:
            raise WhatifUsageError(f"{', '.join(given)} needs --join TYPE (inner, left-outer, ...)")
        return None
    if join_inputs is None:
        raise WhatifUsageError(
            "--join needs --join-inputs LEFT,RIGHT: the two inputs to join (values of the events' source column)"
        )
    spec = join_spec(
        join_type=join,
        inputs=join_inputs.split(","),
        lower_ms=_signed_duration_ms(join_lower, "--join-lower"),
        upper_ms=_signed_duration_ms(join_upper, "--join-upper"),
        names=CLI_NAMES,
    )
    lo, up = spec.lower_ms, spec.upper_ms
    if lo is not None and up is not None and lo + up < 0:
        # RIGHT - X <= LEFT <= RIGHT + Y holds for some LEFT only when -X <= Y (Spark accepts the query; it
        # never joins a row, and an outer join then pads every row with NULLs)
        raise WhatifUsageError(
            f"--join-lower {join_lower} --join-upper {join_upper}: the condition {O.join_condition(spec)} can never "
            f"hold (it needs --join-lower + --join-upper >= 0), so no row would ever join; e.g. "
            f"--join-lower {T.dur(abs(lo))} --join-upper {T.dur(abs(up))} joins rows up to those apart"
        )
    return spec


def build_chain(
    first: WatermarkConfig, *, then_window: list[str] | None, then_group_by_key: bool, allow_multiple: bool
) -> ChainConfig | None:
    """``--then-window SIZE[,SLIDE]`` (repeatable, in order) after the query of the other options, as a
    :class:`~monitor.watermark.chain.ChainConfig` (``None`` without ``--then-window``), through
    :func:`monitor.watermark.whatif_config.chain_config`.

    Raises:
        WhatifUsageError: ``--then-group-by-key`` / ``--no-allow-multiple`` without ``--then-window``.
        WhatifConfigError / EngineConfigError / DurationError: a chain that does not parse or fit (named).
    """
    if not then_window:
        if then_group_by_key or not allow_multiple:
            flag = "--then-group-by-key" if then_group_by_key else "--no-allow-multiple"
            raise WhatifUsageError(f"{flag} is for a chain: give --then-window SIZE[,SLIDE] too")
        return None
    stages: list[tuple[int, int | None]] = []
    for w in then_window:
        parts = w.split(",")
        if len(parts) > 2:
            raise WhatifUsageError(f"--then-window {w!r}: expected SIZE or SIZE,SLIDE (e.g. 1h or 1h,10m)")
        stages.append(
            (
                parse_duration_ms(parts[0], what="--then-window"),
                parse_duration_ms(parts[1], what="--then-window slide") if len(parts) == 2 else None,
            )
        )
    return chain_config(
        first,
        then_windows_ms=stages,
        then_group_by_key=then_group_by_key,
        allow_multiple=allow_multiple,
        names=CLI_NAMES,
    )


def check_inputs(events: EventsTable, config: WatermarkConfig, *, default_delay_given: bool) -> list[str]:
    """Check the input names of ``--delay NAME=`` and ``--join-inputs`` against the events' ``source``
    column, and that every input has a delay. Returns notes for the report (a default delay that no
    input uses).

    Raises:
        WhatifUsageError: naming the option and the input, and listing the inputs the events have.
    """
    present = [n for n in events.source_names if n] if events.has_sources else []
    have = ", ".join(present) if present else "none: the file has no source column"
    for name in config.source_delays_ms:
        if name not in present:
            raise WhatifUsageError(
                f"--delay {name}=...: no input {name!r} in the events "
                f"(inputs in the source column: {have})"
            )
    if config.join is not None:
        for side in (config.join.left, config.join.right):
            if side not in present:
                raise WhatifUsageError(
                    f"--join-inputs: no input {side!r} in the events (inputs in the source column: {have})"
                )
    if not default_delay_given:
        missing = [n for n in (present or [""]) if n not in config.source_delays_ms]
        if missing:
            what = repr(missing[0]) if missing[0] else "(the file has no source column)"
            raise WhatifUsageError(
                f"--delay gives no delay for input {what}: add {missing[0] or 'a duration'}=DURATION, or one "
                f"bare duration for the inputs not named (e.g. --delay {next(iter(config.source_delays_ms))}="
                f"{T.dur(next(iter(config.source_delays_ms.values())))},10m); inputs in the source column: {have}"
            )
        return []
    if config.source_delays_ms and present and all(n in config.source_delays_ms for n in present):
        return [
            f"Note: --delay's default {T.dur(config.delay_ms)} applies to no input: every input "
            f"({', '.join(present)}) has its own delay. It is not used."
        ]
    return []


def _check_key_column(
    events: EventsTable, events_path: Path, config: WatermarkConfig, chain: ChainConfig | None
) -> None:
    """A query that matches or groups rows on ``key`` needs the events' ``key`` column: without it every row
    would share one key, silently.

    Raises:
        WhatifUsageError: naming the option, the missing column and the file.
    """
    if events.has_keys:
        return
    need = (
        "--join" if config.join is not None
        else "--dedup" if config.dedup is not None
        else "--session-gap (sessions are per key)" if isinstance(config.window, Session)
        else "--group-by-key" if config.group_by_key
        else "--then-group-by-key" if chain is not None and any(s.group_by_key for s in chain.then)
        else None
    )
    if need is not None:
        raise WhatifUsageError(
            f"{need} matches rows on their key, but {events_path} has no 'key' column (or only empty keys): "
            f"add a 'key' column, or drop {need.split()[0]}"
        )


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
    backlog: bool = False,
    join: StreamJoin | None = None,
    spark_version: str | None = None,
) -> WatermarkConfig:
    """Turn the command-line options into a :class:`WatermarkConfig` (through the one builder,
    :func:`monitor.watermark.whatif_config.spark_config`, which the dashboard's What-if lab calls too).
    ``delay`` is one duration or one per input (:func:`parse_delays`); ``join``: :func:`build_join`'s.

    Raises:
        WhatifUsageError / DurationError / WhatifConfigError / EngineConfigError: options that do not parse
            or fit (named as on the command line).
    """
    if delay is None and need_delay:
        raise WhatifUsageError("--delay is required (or use --sweep / --target-completeness)")
    ms = parse_optional_duration_ms
    default, named = parse_delays(delay) if delay is not None else (None, {})
    return spark_config(
        delay_ms=default or 0,
        source_delays_ms=named,
        join=join,
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
        backlog=backlog,
        spark_version=spark_version,
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
    labels: dict[int, str] | None = None  # the file's batch numbers (a plain replay with a batch column)
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
        T.number_batches_json(doc["batches"], plan)
        all_labels = T.batch_labels(result.batches, plan)
        doc["no_data_batches"], basis = T.no_data_basis(plan, config, all_labels, result.batches)
        labels = all_labels if plan.labels else None
        text += ["", *basis, "", *T.batches_text(result, show_batches, labels), "", *T.summary_text(result.summary, config)]
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
    rows, rest = T.diagnosis_parts(diagnosis, config=diagnosed_at, labels=labels)
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
    chain: ChainConfig | None = None,
    default_delay_given: bool = True,
    restarts: R.RestartOptions | None = None,
    backlog_flag: str | None = None,
) -> None:
    """Load the events, replay with ``engine``'s rules and print (text or JSON) to ``out``.

    ``config.join`` set: the stream-stream join's report; ``chain``: the chain's (``chain.first`` is then
    ``config``); ``default_delay_given``: ``--delay`` had a duration for the inputs it does not name;
    ``restarts``: replay with the query restarted / run as AvailableNow or Once runs (:mod:`._whatif_restart`);
    ``backlog_flag``: ``"--backlog"`` / ``"--caught-up"`` when given (an error with arrival times, which
    decide instead).

    Raises:
        InputError (subclasses): bad file, columns, units or options (one line; exit code 2).
    """
    if fmt not in ("text", "json"):
        raise WhatifUsageError(f"--format must be text or json, got {fmt!r}")
    if engine not in ENGINES:
        raise WhatifUsageError(f"--engine {engine!r} is not supported; only {', '.join(ENGINES)}")
    if time_unit is not None and time_unit not in ("s", "ms", "us"):
        raise WhatifUsageError(f"--time-unit must be s, ms or us, got {time_unit!r}")
    if sweep_delays is not None or target_completeness is not None:
        flag = "--sweep" if sweep_delays is not None else "--target-completeness"
        if config.source_delays_ms:
            raise WhatifUsageError(
                f"{flag} varies one delay for every input; give --delay as one duration (not per input)"
            )
        if chain is not None:
            raise WhatifUsageError(f"{flag} is not available with --then-window")
    if restarts is not None and (
        sweep_delays is not None or target_completeness is not None or chain is not None
    ):
        raise WhatifUsageError(
            "--restart-after / --run-kind replay one query; they do not combine with --sweep, "
            "--target-completeness or --then-window yet"
        )
    events = load_events(events_path, time_unit=time_unit, time_column=time_column)  # type: ignore[arg-type]
    if events.batch is not None and config.trigger_ms is not None:
        raise WhatifUsageError(
            f"{events_path} has a 'batch' column, which fixes the batches: drop --trigger or the column"
        )
    if events.arrival_ms is not None and events.batch is None and config.trigger_ms is None:
        raise WhatifUsageError(
            f"{events_path} has an arrival_time column but no 'batch' column, so the batches follow a "
            "processing-time trigger: pass --trigger (e.g. --trigger 30s, the query's "
            "Trigger.ProcessingTime interval) or add a 'batch' column"
        )
    if backlog_flag is not None and events.arrival_ms is not None:
        raise WhatifUsageError(
            f"{backlog_flag}: {events_path} has an arrival_time column, which decides whether data waited at "
            f"each trigger; drop {backlog_flag}"
        )
    if backlog_flag is not None and events.batch is None:
        raise WhatifUsageError(
            f"{backlog_flag} says how the file's batches arrived, but {events_path} has no 'batch' column "
            f"(every row is read in one batch); add the column or drop {backlog_flag}"
        )
    _check_key_column(events, events_path, config, chain)
    notes = check_inputs(events, config, default_delay_given=default_delay_given)
    plan = plan_batches(events, config)
    doc: dict[str, Any] = {
        "events": str(events_path),
        "engine": engine,
        "query": O.describe_query(config, chain),
        # the delay each input ran with (``summary.delay_ms`` is the default one, 0 when every input is named)
        "delays_ms": {name or "": config.delay_for(name) for name in events.source_names},
        "bad_rows": [dataclasses.asdict(b) for b in events.bad_rows],
        "unit_mismatches": [T.mismatch_json(m) for m in events.unit_mismatches],
    }
    text: list[str] = [
        f"tidegauge whatif: {events_path} - {len(events)} rows; {engine}; {O.describe_query(config, chain)}",
        *T.bad_rows_text(events, 10),
        *T.mismatches_text(events, 10),
        *notes,
    ]
    if notes:
        doc["notes"] = notes
    # one dispatch point per engine (only Spark's rules here) and query kind
    if chain is not None:  # operator 1 may be a join (join -> aggregation)
        part, lines = O.chain_report(events, chain, plan, show_batches=show_batches, show_late=show_late)
    elif (
        config.join is not None and restarts is None and sweep_delays is None and target_completeness is None
    ):  # a join's restarts go through the restart report, its sweep through _spark_report
        part, lines = O.join_report(events, config, plan, show_batches=show_batches, show_late=show_late)
    elif restarts is not None:
        part, lines = R.restart_report(events, config, plan, restarts, show_batches=show_batches, show_late=show_late)
    else:
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
    if "no_data_batches" not in part:  # the basis alone (a sweep, a join, a chain)
        part["no_data_batches"], basis = T.no_data_basis(plan, config)
        lines = ["", *basis, *lines]
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
        delay: str | None = typer.Option(
            None,
            "--delay",
            help="Watermark delay, e.g. 10m; per input (source column): clicks=10m,views=1h[,DEFAULT].",
        ),
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
        spark_version: str | None = typer.Option(
            None,
            "--spark-version",
            help="Follow this Spark release where they differ, e.g. 3.3 (before 3.4 late rows are filtered "
            "against the batch's own watermark, SPARK-40925). Default: 4.x.",
        ),
        backlog: bool | None = typer.Option(
            None,
            "--backlog/--caught-up",
            help="Without arrival_time: the query started on these batches already waiting, one per trigger "
            "(maxFilesPerTrigger=1), or (default) a live query caught up between them.",
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
        flink_version: str | None = typer.Option(
            None,
            "--flink-version",
            help="Flink: follow this 2.x release where they differ, e.g. 2.1 (all splits idle: no flush to "
            "the max before 2.2, FLINK-38454). Default: 2.3.",
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
        join: str | None = typer.Option(
            None,
            "--join",
            help="Stream-stream join of two inputs on key: inner, left-outer, right-outer, full-outer, left-semi.",
        ),
        join_inputs: str | None = typer.Option(
            None, "--join-inputs", help="The join's sides as LEFT,RIGHT (values of the source column)."
        ),
        join_lower: str | None = typer.Option(
            None, "--join-lower", help="Join condition LEFT.event_time >= RIGHT.event_time - X, e.g. 10m."
        ),
        join_upper: str | None = typer.Option(
            None, "--join-upper", help="Join condition LEFT.event_time <= RIGHT.event_time + Y, e.g. 5m."
        ),
        then_window: list[str] | None = typer.Option(
            None,
            "--then-window",
            help="Chain: a window aggregation over the previous operator's output, SIZE[,SLIDE]; repeatable.",
        ),
        then_group_by_key: bool = typer.Option(
            False, "--then-group-by-key", help="Chain: later windows also group by key."
        ),
        allow_multiple: bool = typer.Option(
            True,
            "--allow-multiple/--no-allow-multiple",
            help="Chain: spark.sql.streaming.statefulOperator.allowMultiple.",
        ),
        restart_after: str | None = typer.Option(
            None,
            "--restart-after",
            help="Restart the query on its checkpoint after these batches, as the report's batch column names "
            "them: with a batch column the file's numbers, N (right after data batch N, before its no-data batch) "
            "or 'after N' (after that no-data batch); else Spark's batch ids. E.g. '4,after 7'.",
        ),
        run_kind: str = typer.Option(
            "live", "--run-kind", help="live (default trigger), available-now or once (one Trigger run per batch)."
        ),
    ) -> None:
        """Replay EVENTS through Spark's watermark rules: late rows, emitted windows, state, latency."""
        from monitor.commands._whatif_flink import dispatch_flink  # the Flink mode's glue

        if dispatch_flink(engine, locals()):
            return
        if engine not in ENGINES:
            raise WhatifUsageError(f"--engine {engine!r} is not supported; only {', '.join(ENGINES)}")
        sweep_delays = parse_duration_list_ms(sweep_opt, what="--sweep") if sweep_opt is not None else None
        join_spec_ = build_join(join=join, join_inputs=join_inputs, join_lower=join_lower, join_upper=join_upper)
        if join_spec_ is not None and group_by_key:
            raise WhatifUsageError("--group-by-key is for windows; a --join always matches rows on key")
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
            backlog=bool(backlog),
            spark_version=spark_version,
            need_delay=sweep_delays is None and target is None,
            join=join_spec_,
        )
        chain = build_chain(
            config, then_window=then_window, then_group_by_key=then_group_by_key, allow_multiple=allow_multiple
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
            chain=chain,
            default_delay_given=delay is None or parse_delays(delay)[0] is not None,
            restarts=R.parse_restart_options(restart_after, run_kind),
            backlog_flag=None if backlog is None else "--backlog" if backlog else "--caught-up",
        )
