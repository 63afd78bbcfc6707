"""``tidegauge whatif`` for a stream-stream join (``--join``) and a chain of stateful operators
(``--then-window``): the replay through the engine and its report, text and JSON.

The figures are the engine's (:class:`monitor.watermark.join.JoinOperator`'s
:class:`~monitor.watermark.results.JoinOutput` per batch, :func:`monitor.watermark.chain.replay_chain`'s
:class:`~monitor.watermark.chain.OperatorBatch` per operator and batch), added up over the run; the words
are the ones the rest of whatif uses ("dropped as late", "state rows", "emitted"), said per input (join
side) or per operator, so that a reader sees which input or which operator drops rows and what to change.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from monitor.commands import _whatif_text as T
from monitor.text import plural
from monitor.watermark import BatchPlan, EventsTable, Replay, WatermarkConfig, replay
from monitor.watermark.chain import ChainConfig, ChainReplay, replay_chain
from monitor.watermark.config import Sliding, Tumbling
from monitor.watermark.join import StreamJoin

__all__ = ["chain_report", "describe_query", "join_report"]

_JOIN_LATE_RULE = "a row is dropped as late when its event time is <= the watermark of the previous batch"


def _chain_late_rule(chain: ChainConfig) -> str:
    which = "the previous batch's watermark" if chain.allow_multiple else "the current batch's watermark"
    return (
        f"a row is dropped as late at an operator when {which} there has passed its window's end "
        "(a dedup or a join side: its event time)"
    )


def _delays(config: WatermarkConfig) -> str:
    """``delays clicks 10m, views 1h (others 5m)`` for per-input delays; ``""`` for one delay."""
    if not config.source_delays_ms:
        return ""
    named = ", ".join(f"{k} {T.dur(v)}" for k, v in config.source_delays_ms.items())
    return f"delays {named}" + (f" (other inputs {T.dur(config.delay_ms)})" if config.delay_ms else "")


def join_condition(j: StreamJoin) -> str:
    """The join as Spark SQL-like text with durations: ``left-outer join ON a.key = b.key AND
    a.event_time >= b.event_time - 10m AND a.event_time <= b.event_time + 5m``."""
    parts = [f"{j.left}.key = {j.right}.key"]
    for ms, op, sign in ((j.lower_ms, ">=", "-"), (j.upper_ms, "<=", "+")):
        if ms is None:
            continue
        if ms < 0:
            sign = "+" if sign == "-" else "-"
        parts.append(f"{j.left}.event_time {op} {j.right}.event_time {sign} {T.dur(abs(ms))}")
    return f"{j.join_type.replace('_', '-')} join ON " + " AND ".join(parts)


def _window_name(w: Tumbling | Sliding) -> str:
    if isinstance(w, Sliding) and w.slide_ms != w.size_ms:
        return f"window {T.dur(w.size_ms)} sliding {T.dur(w.slide_ms)}"
    return f"window {T.dur(w.size_ms)} tumbling"


def _operator_names(chain: ChainConfig) -> list[str]:
    """Each operator of the chain in a few words, in chain order."""
    f = chain.first
    if f.join is not None:
        first = f"stream-stream join ({join_condition(f.join)})"
    elif f.dedup is not None:
        first = f"dedup ({f.dedup.mode})"
    else:
        assert isinstance(f.window, Tumbling | Sliding)
        first = _window_name(f.window) + (" grouped by key" if f.group_by_key else "")
    return [first] + [
        f"{_window_name(s.window)}{' grouped by key' if s.group_by_key else ''} over operator {i}'s output"
        for i, s in enumerate(chain.then, start=1)
    ]


def describe_query(config: WatermarkConfig, chain: ChainConfig | None = None) -> str:
    """The report's one-line query: :func:`._whatif_text.describe`, a join's condition or a chain's
    operators, and the per-input delays when given."""
    if chain is not None:
        names = _operator_names(chain)
        parts = [
            " -> ".join(names),
            f"policy {config.policy}",
            f"allowMultiple {'true' if chain.allow_multiple else 'false'}",
        ]
        if config.join is not None:
            if config.trigger_ms is not None:
                parts.append(f"trigger {T.dur(config.trigger_ms)}")
        else:
            rest = T.describe(config).split(", ")[1:]  # the options after the first operator's shape
            parts += [p for p in rest if not p.startswith(("policy", "append", "grouped"))]
    elif config.join is not None:
        parts = [join_condition(config.join), f"policy {config.policy}"]
        if config.trigger_ms is not None:
            parts.append(f"trigger {T.dur(config.trigger_ms)}")
    else:
        parts = [T.describe(config)]
    d = _delays(config)
    return ", ".join([*parts, d] if d else parts)


def _count_by_source(events: EventsTable, name: str) -> int:
    if name not in events.source_names:
        return 0
    return int(np.count_nonzero(events.source_codes == events.source_names.index(name)))


def join_report(
    events: EventsTable,
    config: WatermarkConfig,
    plan: BatchPlan,
    *,
    show_batches: int,
    show_late: int,
    result: Replay | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Replay a stream-stream join (``config.join``) and report it per batch and per input (side):
    rows, rows dropped as late, state rows (peak, at the end, removed by the side's state watermark), and
    the output rows (joined, NULL-padded per side). ``(json, text lines)``; the JSON adds ``join`` to
    the usual ``batches`` (each with the engine's ``join`` figures) and ``summary``. ``result``: the replay
    to report instead of one query over ``plan`` (a replay with restarts, :mod:`._whatif_restart`).

    Raises:
        EngineConfigError: the join does not fit the events (a third input's rows).
    """
    j = config.join
    assert j is not None
    if result is None:
        result = replay(events, config, plan=plan)
    outs = [b.join for b in result.batches if b.join is not None]
    sides: list[dict[str, Any]] = []
    for side, name, bound, flag, cond in (
        ("left", j.left, j.lower_ms, "--join-lower", f"{j.left}.event_time >= {j.right}.event_time - X"),
        ("right", j.right, j.upper_ms, "--join-upper", f"{j.left}.event_time <= {j.right}.event_time + Y"),
    ):
        state = [getattr(o, f"state_rows_{side}") for o in outs]
        sides.append({
            "input": name,
            "side": side,
            "delay_ms": config.delay_for(name),
            "rows": _count_by_source(events, name),
            "late_rows": sum(getattr(o, f"late_{side}_rows") for o in outs),
            "state_rows_peak": max(state, default=0),
            "state_rows_end": state[-1] if state else 0,
            "evicted_rows": sum(getattr(o, f"evicted_{side}_rows") for o in outs),
            "null_padded_rows": sum(getattr(o, f"null_padded_{side}_rows") for o in outs),
            "state_bounded": bound is not None,
            "bound_option": flag,
            "bound_condition": cond,
        })
    joined = sum(o.joined_rows for o in outs)
    semi_removed = sum(o.semi_matched_removed_rows for o in outs)
    doc: dict[str, Any] = result.to_json()
    doc["join"] = {
        "type": j.join_type,
        "left": j.left,
        "right": j.right,
        "lower_ms": j.lower_ms,
        "upper_ms": j.upper_ms,
        "condition": join_condition(j),
        "sides": [{k: v for k, v in s.items() if k not in ("bound_option", "bound_condition")} for s in sides],
        "output_rows": joined + sum(int(s["null_padded_rows"]) for s in sides),
        "joined_rows": joined,
        "semi_matched_removed_rows": semi_removed,
    }
    late = T.late_entries(result, events, show_late)
    doc["late_row_details"] = late

    # text
    left, right = j.left, j.right
    labels = T.batch_labels(result.batches, plan) if plan.labels else None
    head = (
        f"{T.batch_head(labels)} {'kind':<7} {'watermark':<24} {'input':>8} {'late ' + left + '/' + right:>16} "
        f"{'state ' + left + '/' + right:>17} {'output':>7}"
    )
    lines = ["", f"Join: {join_condition(j)}", head]
    shown = result.batches if show_batches <= 0 else result.batches[:show_batches]
    for b in shown:
        o = b.join
        assert o is not None
        lines.append(
            f"{T.batch_cell(b.batch_id, labels)} {b.kind:<7} {T.wm_text(b.watermark_ms):<24} {b.input_rows:>8} "
            f"{f'{o.late_left_rows}/{o.late_right_rows}':>16} {f'{o.state_rows_left}/{o.state_rows_right}':>17} "
            f"{len(o.left_rows):>7}"
        )
    if len(shown) < len(result.batches):
        lines.append(f"  ... {len(result.batches) - len(shown)} more batches (--show-batches 0 shows all)")
    lines += ["", f"Per input ({_JOIN_LATE_RULE}; each input has its own withWatermark):"]
    fixes: list[str] = []
    for s in sides:
        lines.append(
            f"  {s['input']} ({s['side']} side, delay {T.dur(int(s['delay_ms']))}): {s['rows']} rows, "
            f"{s['late_rows']} dropped as late; state rows: peak {s['state_rows_peak']}, at the end "
            f"{s['state_rows_end']}, {s['evicted_rows']} removed by its state watermark"
        )
        if not s["state_bounded"]:
            fixes.append(
                f"  {s['input']}'s state never shrinks: no range condition bounds it, so every {s['input']} "
                f"row is kept for ever; add {s['bound_option']} ({s['bound_condition']}) so that Spark can "
                f"drop {s['input']} rows no later {right if s['side'] == 'left' else left} row can match"
            )
    lines += fixes
    out = [f"{joined} joined"]
    for s in sides:
        if s["null_padded_rows"]:
            out.append(
                f"{s['null_padded_rows']} {s['input']} row(s) with NULLs (unmatched, output once the "
                f"watermark passed their range)"
            )
    total = f"Output rows: {doc['join']['output_rows']}" + (f" = {' + '.join(out)}" if len(out) > 1 else "")
    if semi_removed:  # a part of the joined rows, not more rows: said apart so the sum reads right
        total += (
            f"; {semi_removed} of them were {left} rows kept in state until a {right} row matched, output then "
            "and removed (a left semi join outputs each left row once)"
        )
    lines.append(total)
    summ = result.summary
    lines += [
        "",
        "Summary",
        *T.rows_text(summ),
        T.batches_count_text(summ.batches, summ.no_data_batches, summ.final_watermark_ms),
    ]
    total_late = sum(len(b.late_rows) for b in result.batches)
    lines += T.late_text(late, total_late)
    return doc, lines


def _chain_json(result: ChainReplay) -> list[dict[str, Any]]:
    out = []
    for cb in result.batches:
        b = cb.batch
        out.append({
            "batch_id": b.batch_id,
            "kind": b.kind,
            "watermark_ms": b.watermark_ms,
            "late_watermark_ms": b.late_watermark_ms,
            "input_rows": b.input_rows,
            "operators": [
                {
                    "operator": i,
                    "name": op.name,
                    "spark_name": op.spark_name,
                    "late_watermark_ms": op.late_watermark_ms,
                    "input_rows": op.input_rows,
                    "late_rows": op.late_row_count,
                    "dropped_by_watermark_metric": op.dropped_by_watermark_metric,
                    "state_rows": op.state_rows,
                    "state_rows_removed": op.state_rows_removed,
                    "state_rows_updated": op.state_rows_updated,
                    "output_rows": op.output_rows,
                }
                for i, op in enumerate(cb.operators, start=1)
            ],
            "emitted": [
                {"start_ms": w.start_ms, "end_ms": w.end_ms, "count": w.count, "rows": int(n)}
                | ({"key": w.key} if w.key is not None else {})
                for w, n in zip(cb.emitted.to_list(), cb.emitted_sums.tolist(), strict=True)
            ],
        })
    return out


def chain_report(
    events: EventsTable, chain: ChainConfig, plan: BatchPlan, *, show_batches: int, show_late: int
) -> tuple[dict[str, Any], list[str]]:
    """Replay a chain of stateful operators and report it per batch and per operator (rows in, rows
    dropped as late, Spark's ``numRowsDroppedByWatermark``, state rows, rows out), the windows the last
    operator emitted and the late rows (operator 1's, with their lines). ``(json, text lines)``.

    Raises:
        EngineConfigError: the chain does not fit the events.
    """
    result = replay_chain(events, chain, plan=plan)
    names = _operator_names(chain)
    n_ops = len(names)
    per_op: list[dict[str, Any]] = []
    for i in range(n_ops):
        ops = [cb.operators[i] for cb in result.batches]
        metric = [op.dropped_by_watermark_metric for op in ops]
        per_op.append({
            "operator": i + 1,
            "query": names[i],
            "name": ops[0].name if ops else "",
            "spark_name": ops[0].spark_name if ops else "",
            "input_rows": sum(op.input_rows for op in ops) if i else sum(cb.batch.input_rows for cb in result.batches),
            "late_rows": sum(op.late_row_count for op in ops),
            "dropped_by_watermark_metric": None if any(m is None for m in metric) else sum(m or 0 for m in metric),
            "state_rows_peak": max((op.state_rows for op in ops), default=0),
            "state_rows_end": ops[-1].state_rows if ops else 0,
            "output_rows": sum(op.output_rows for op in ops),
        })
    first = [cb.batch for cb in result.batches]
    by_source: dict[str, int] = {}
    for b in first:
        for lr in b.late_rows:
            if lr.source:
                by_source[lr.source] = by_source.get(lr.source, 0) + 1
    last = first[-1] if first else None
    doc: dict[str, Any] = {
        "chain": {
            "allow_multiple": chain.allow_multiple,
            "operators": per_op,
            "batches": _chain_json(result),
        },
        "summary": {
            "dropped_rows_by_operator": [int(p["late_rows"]) for p in per_op],
            "dropped_by_source": by_source,
            "batches": len(first),
            "no_data_batches": sum(1 for b in first if b.kind == "no-data"),
            "final_watermark_ms": None if last is None else last.next_watermark_ms,
        },
    }
    late = T.late_entries(first, events, show_late)
    doc["late_row_details"] = late

    # text
    labels = T.batch_labels(first, plan) if plan.labels else None
    cols = " ".join(f"{f'op{i} late/state/out':>20}" for i in range(1, n_ops + 1))
    lines = [
        "",
        "Chain (rows flow from operator 1 to operator "
        f"{n_ops}; Spark's progress lists them the other way round, stateOperators[0] = operator {n_ops}):",
        *(f"  operator {i}: {name}" for i, name in enumerate(names, start=1)),
        f"{T.batch_head(labels)} {'kind':<7} {'watermark':<24} {'input':>8} {cols}",
    ]
    shown = result.batches if show_batches <= 0 else result.batches[:show_batches]
    for cb in shown:
        b = cb.batch
        cells = " ".join(
            f"{f'{op.late_row_count}/{op.state_rows}/{op.output_rows}':>20}" for op in cb.operators
        )
        lines.append(
            f"{T.batch_cell(b.batch_id, labels)} {b.kind:<7} {T.wm_text(b.watermark_ms):<24} {b.input_rows:>8} {cells}"
        )
    if len(shown) < len(result.batches):
        lines.append(f"  ... {len(result.batches) - len(shown)} more batches (--show-batches 0 shows all)")
    lines += ["", f"Per operator ({_chain_late_rule(chain)}):"]
    for p in per_op:
        m = p["dropped_by_watermark_metric"]
        metric_text = f"numRowsDroppedByWatermark {'-' if m is None else m}"
        if m is not None and m != p["late_rows"] and p["spark_name"] != "dedupe":
            # an aggregation's metric counts late groups after partial aggregation (FINDINGS S3), not rows
            metric_text = f"Spark's numRowsDroppedByWatermark shows {m}: it counts late groups, not rows"
        lines.append(
            f"  operator {p['operator']}, {p['query']} ({p['spark_name']}): {p['input_rows']} rows in, "
            f"{p['late_rows']} dropped as late ({metric_text}); "
            f"state rows: peak {p['state_rows_peak']}, at the end {p['state_rows_end']}; "
            f"{plural(int(p['output_rows']), 'row')} out"
        )
    if chain.first.join is not None and result.batches:
        # StreamingSymmetricHashJoinExec.produceOutputWatermark: the operators after a join read its output
        # watermark, lowered by the range condition, so their windows close later than the global one says
        end = result.batches[-1]
        lines.append(
            f"  operator 2 reads the join's output watermark, not the global one: at the end "
            f"{T.wm_text(max(end.operators[1].eviction_watermark_ms, 0))} against the global "
            f"{T.wm_text(end.batch.next_watermark_ms)} (the join's state watermarks: the global watermark minus "
            "the range's bound and 1 ms), so its windows close that much later"
        )
    if chain.first.dedup is not None and chain.first.dedup.mode == "key":
        lines.append(T.DEDUP_KEY_NEVER_EVICTS.replace("    ", "  operator 1: ", 1))
    later = [p for p in per_op[1:] if p["late_rows"]]
    for p in later:
        lines.append(
            f"  operator {p['operator']} dropped {p['late_rows']} rows that operator {int(p['operator']) - 1} "
            "emitted: with allowMultiple false every operator filters late rows against the current batch's "
            "watermark, so rows emitted in the same batch arrive late; set "
            "spark.sql.streaming.statefulOperator.allowMultiple=true (the default since Spark 3.4)"
        )
    emitted = [
        (w, int(n))
        for cb in result.batches
        for w, n in zip(cb.emitted.to_list(), cb.emitted_sums.tolist(), strict=True)
    ]
    lines.append(
        f"Windows emitted by operator {n_ops}: {len(emitted)}"
        + (
            " (" + ", ".join(
                f"{w.key + ':' if w.key else ''}[{T.iso(w.start_ms)},{T.iso(w.end_ms)})={w.count} "
                f"(rows: {n})"
                for w, n in emitted[:5]
            ) + (f", +{len(emitted) - 5} more" if len(emitted) > 5 else "") + ")"
            if emitted else ""
        )
    )
    by = ", ".join(f"{k}={v}" for k, v in sorted(by_source.items()))
    drops = "; ".join(f"operator {p['operator']}: {p['late_rows']}" for p in per_op)
    lines += [
        "",
        "Summary",
        f"  rows: {len(events)} read",
        f"  rows dropped as late by operator: {drops}" + (f"; operator 1 by source: {by}" if by else ""),
    ]
    if last is not None:
        lines.append(
            T.batches_count_text(len(first), int(doc["summary"]["no_data_batches"]), last.next_watermark_ms)
        )
    total_late = sum(len(b.late_rows) for b in first)
    lines += T.late_text(late, total_late)
    return doc, lines
