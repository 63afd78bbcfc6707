"""Text and JSON pieces of ``tidegauge whatif``'s report (the command itself is in :mod:`.whatif`).

Every instant goes through :func:`monitor.timefmt.format_epoch_ms`, which renders any int64 time
(a watermark in year 57,971 prints as Spark prints it, ``+57971-02-25T19:25:40Z``); a
:class:`datetime` is never built, so no input can make rendering fail.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from typing import Any

from monitor.durations import format_duration_ms
from monitor.timefmt import format_duration, format_epoch_ms
from monitor.versions import late_filter_uses_previous_batch
from monitor.watermark import BatchPlan, BatchResult, EventsTable, Replay, Summary, WatermarkConfig
from monitor.watermark.config import Session, Sliding, Tumbling
from monitor.watermark.diagnose import DelayAdvice, Diagnosis, WatermarkMover
from monitor.watermark.events import UnitMismatch
from monitor.watermark.plan import no_data_basis_text
from monitor.watermark.sweep import Recommendation

_DAY_MS = 86_400_000


def iso(ms: int | None) -> str:
    """Epoch ms -> ``2026-01-01T00:00:30Z`` (``.123`` only when the ms are not 0); ``-`` for None."""
    return "-" if ms is None else format_epoch_ms(ms, always_millis=False)


def iso_us(us: int) -> str:
    """Epoch us -> as :func:`iso` (floored to the millisecond)."""
    return iso(us // 1000)


def dur(ms: int | None) -> str:
    """A duration as ``1h30m`` (``-`` for None)."""
    return "-" if ms is None else format_duration_ms(ms)


def human(ms: int | None) -> str:
    """A duration a reader takes in at a glance: ``4m30s`` below a day (:func:`dur`), from a day on
    :func:`monitor.timefmt.format_duration` (``3.5 days``, ``73 years``)."""
    if ms is None:
        return "-"
    if abs(ms) < _DAY_MS:
        return format_duration_ms(ms)
    return ("-" if ms < 0 else "") + format_duration(ms / 1000)


def describe(config: WatermarkConfig) -> str:
    """One line naming the query shape, output mode, policy and options."""
    w = config.window
    if isinstance(w, Tumbling):
        shape = f"window {dur(w.size_ms)} tumbling"
    elif isinstance(w, Sliding):
        shape = f"window {dur(w.size_ms)} sliding {dur(w.slide_ms)}"
    elif isinstance(w, Session):
        shape = f"session gap {dur(w.gap_ms)} per key"
    else:
        assert config.dedup is not None
        shape = f"dedup ({config.dedup.mode})"
    parts = [shape, config.output_mode if config.dedup is None else "", f"policy {config.policy}"]
    if config.group_by_key and not isinstance(w, Session):
        parts.append("grouped by key")
    if config.trigger_ms is not None:
        parts.append(f"trigger {dur(config.trigger_ms)}")
    if config.max_rows_per_batch is not None:
        parts.append(f"max {config.max_rows_per_batch} rows/batch")
    if config.max_future_skew_ms is not None:
        parts.append(f"future-skew filter {dur(config.max_future_skew_ms)}")
    if config.spark_version is not None:
        major, minor = config.spark_version
        late = "previous batch's" if late_filter_uses_previous_batch(config.spark_version) else "batch's own"
        parts.append(f"Spark {major}.{minor} semantics (late rows against the {late} watermark)")
    return ", ".join(p for p in parts if p)


def _clock(ms: int) -> str:
    return iso(ms).split("T", 1)[1]


def emitted_text(b: BatchResult, limit: int = 3) -> str:
    """The first windows a batch emitted, ``[00:00:00Z,00:01:00Z)=3``."""
    ws = b.emitted.to_list()
    if not ws:
        return "-"
    out = []
    for w in ws[:limit]:
        k = f"{w.key}:" if w.key else ""
        out.append(f"{k}[{_clock(w.start_ms)},{_clock(w.end_ms)})={w.count}")
    if len(ws) > limit:
        out.append(f"+{len(ws) - limit} more")
    return " ".join(out)


def latency_text(s: Summary) -> list[str]:
    """Output latency lines (processing time, event time, batches)."""
    lines = []
    if s.latency is not None and s.latency.count:
        lat = s.latency
        lines.append(
            f"  output latency (processing time, window end -> emitting batch): p50 {dur(lat.p50_ms)}, "
            f"p95 {dur(lat.p95_ms)}, max {dur(lat.max_ms)} over {lat.count} windows"
        )
        if lat.p50_ms is not None and lat.p50_ms < 0:
            lines.append(
                "    negative: windows were emitted at arrival times before their end in event time, so the "
                "event times run ahead of the arrival_time clock (a clock or unit mismatch between the two "
                "columns?)"
            )
    e = s.event_time_latency
    if e.count:
        lines.append(
            f"  output latency (event time past window end when emitted): p50 {dur(e.p50_ms)}, "
            f"p95 {dur(e.p95_ms)}, max {dur(e.max_ms)}"
        )
        nb = s.latency_batches
        lines.append(
            f"  output latency in batches: p50 {nb.p50_batches}, p95 {nb.p95_batches}, max {nb.max_batches}"
        )
    return lines


def rows_text(s: Summary) -> list[str]:
    """The Summary block's first lines: rows read, rows dropped as late (share, by source)."""
    named = {k: v for k, v in s.dropped_by_source.items() if k}
    by = ", ".join(f"{k}={v}" for k, v in sorted(named.items()))
    return [
        f"  rows: {s.input_rows} read, {s.rows_with_time} with an event time, "
        f"{s.null_time_rows} null/unparseable (filtered, not counted as dropped)",
        f"  rows dropped as late: {s.dropped_rows} ({s.dropped_share * 100:.3f}%)"
        + (f"; by source: {by}" if by else ""),
    ]


def batches_count_text(batches: int, no_data: int, final_watermark_ms: int) -> str:
    """The Summary block's last line."""
    return f"  batches: {batches} ({no_data} no-data); final watermark {wm_text(final_watermark_ms)}"


#: Said under the state figures of a ``dropDuplicates`` on the key alone (alone or as a chain's operator 1).
DEDUP_KEY_NEVER_EVICTS = (
    "    dropDuplicates on the key alone never evicts: the watermark cannot expire a key without its "
    "event time (StreamingDeduplicateExec), so the state keeps every key seen and grows for as long as "
    "new keys arrive. Add the event-time column to the keys (--dedup key,event_time) or use "
    "dropDuplicatesWithinWatermark (--dedup within-watermark)"
)


def summary_text(s: Summary, config: WatermarkConfig | None = None) -> list[str]:
    """The Summary block (``config``: the replayed query, which names what was emitted and, for
    ``dropDuplicates`` on the key alone, says that its state is never evicted)."""
    lines = ["Summary", *rows_text(s)]
    if s.future_filtered_rows:
        lines.append(f"  rows removed by the future-skew filter: {s.future_filtered_rows}")
    if s.duplicates_dropped:
        lines.append(f"  duplicates dropped: {s.duplicates_dropped}")
    dedup = config.dedup if config is not None else None
    what = "rows emitted" if dedup is not None else "windows/rows emitted"
    lines.append(f"  {what}: {s.windows_emitted}")
    lines.extend(latency_text(s))
    lines.append(f"  state rows: peak {s.peak_state_rows}, at the end {s.final_state_rows}")
    if dedup is not None and dedup.mode == "key":
        lines.append(DEDUP_KEY_NEVER_EVICTS)
    lines.append(batches_count_text(s.batches, s.no_data_batches, s.final_watermark_ms))
    return lines


def bad_rows_text(events: EventsTable, limit: int) -> list[str]:
    """Rows skipped for want of an event time: invalid lines, then unparseable times."""
    lines: list[str] = []
    for kind, title in (
        ("line", "Invalid lines: {n} rows (Spark's PERMISSIVE reader makes them rows of nulls, skipped)"),
        ("event_time", "Unparseable event times: {n} rows (Spark reads them as null and skips them)"),
    ):
        rows = [b for b in events.bad_rows if b.kind == kind]
        if not rows:
            continue
        lines.append(title.format(n=len(rows)))
        for br in rows[:limit]:
            if kind == "line":
                lines.append(f"  line {br.line}: {br.reason}: {br.value!r}")
            else:
                lines.append(f"  line {br.line}: {br.value!r} ({br.reason})")
        if len(rows) > limit:
            lines.append(f"  ... {len(rows) - limit} more")
    return lines


def mismatch_json(m: UnitMismatch) -> dict[str, Any]:
    """A unit mismatch as JSON (times as epoch ms and as text, any year)."""
    return dataclasses.asdict(m) | {"read_as": iso_us(m.read_as_us), "likely": iso_us(m.likely_us)}


def mismatches_text(events: EventsTable, limit: int) -> list[str]:
    """Rows whose epoch number looks written in another unit."""
    ms = events.unit_mismatches
    if not ms:
        return []
    lines = [
        f"Epoch unit mismatch: {len(ms)} row(s) look written in another unit than --time-unit "
        f"{ms[0].unit}; replayed as read, as Spark would (its JSON reader takes an integer as seconds):"
    ]
    for m in ms[:limit]:
        lines.append(
            f"  line {m.line}: {m.value} read as epoch {m.unit} is {iso_us(m.read_as_us)}; "
            f"as epoch {m.likely_unit} it would be {iso_us(m.likely_us)}"
        )
    if len(ms) > limit:
        lines.append(f"  ... {len(ms) - limit} more")
    return lines


def batch_labels(batches: Sequence[BatchResult], plan: BatchPlan) -> dict[int, str]:
    """How the report names each batch: with an explicit ``batch`` column, a data batch by the file's own
    value (the Spark batch id counts no-data batches too, so it drifts from the file's numbers) and a
    no-data batch as ``after N``; otherwise by the Spark batch id. Keyed by Spark batch id."""
    out: dict[int, str] = {}
    j = 0
    last = "-"
    for b in batches:
        if b.kind == "data":
            last = str(plan.labels[j]) if plan.labels else str(b.batch_id)
            out[b.batch_id] = last
            j += 1
        else:
            out[b.batch_id] = f"after {last}" if plan.labels else str(b.batch_id)
    return out


def number_batches_json(batches: list[dict[str, Any]], plan: BatchPlan) -> None:
    """Add to each JSON data batch (``BatchResult.to_json``) the file's own ``batch`` value, when the events
    have a ``batch`` column (``batch_id`` is Spark's id, which counts no-data batches too)."""
    if not plan.labels:
        return
    data = iter(plan.labels)
    for b in batches:
        if b.get("kind") == "data":
            b["batch"] = next(data, None)


def no_data_basis(plan: BatchPlan, config: WatermarkConfig, labels: dict[int, str] | None = None,
                  batches: Sequence[BatchResult] = ()) -> tuple[dict[str, Any], list[str]]:
    """What decided when no-data batches ran (Spark's ``MicroBatchExecution.constructNextBatch`` runs one
    only when no new data is available at a trigger and the watermark moved), as ``(json, text lines)``:
    the arrival times, or, without them, the assumption made (``caught_up`` / ``backlog``) and the flag
    that makes the other one. ``batches`` (with ``labels``): where no-data batches were added."""
    # where they were added is said only for the replay whose batches are listed (labels given): a sweep,
    # a join, a chain or a restart report lists its own batches
    after = [labels[b.batch_id].removeprefix("after ") for b in batches if b.kind == "no-data"] if labels else None
    doc: dict[str, Any] = {"enabled": config.no_data_batches, "basis": plan.basis}
    if after is not None:
        doc["added"] = len(after)
        if plan.labels:
            doc["after_file_batches"] = [int(a) if a.lstrip("-").isdigit() else a for a in after]
    if not config.no_data_batches:
        return doc, ["No-data batches: off (--no-no-data-batches: spark.sql.streaming.noDataMicroBatches.enabled=false)."]
    where = ""
    if plan.labels and after is not None:
        shown = ", ".join(after[:10]) + (f" and {len(after) - 10} more" if len(after) > 10 else "")
        where = f"{len(after)} added" + (f", after file batch{'es' if len(after) > 1 else ''} {shown}" if after else "")
        where += " (the batch column below keeps the file's numbers; id is Spark's batch id)."
    # what decided (one sentence, shared with the What-if lab), then the flag that makes the other assumption
    text = no_data_basis_text(plan.basis, config.trigger_ms) + {
        "caught_up": " A query started on this backlog (the batches already waiting, one per trigger as with "
        "maxFilesPerTrigger=1) runs none until the last: --backlog. Add an arrival_time column to decide "
        "from the data.",
        "backlog": " (--backlog) A live query caught up between batches runs one after each batch that moves "
        "the watermark: --caught-up.",
    }.get(plan.basis, "")
    lines = textwrap.wrap(f"No-data batches: {text}", 110, subsequent_indent="  ")
    return doc, lines + ([f"  {where}"] if where else [])


def batch_head(labels: dict[int, str] | None) -> str:
    """The batch column(s) of a per-batch table's header: ``batch`` (and ``id``, Spark's batch id, when the
    file's own numbers label the rows)."""
    return f"{'batch':>9} {'id':>5}" if labels else f"{'batch':>9}"


def batch_cell(batch_id: int, labels: dict[int, str] | None) -> str:
    """A row's batch column(s), aligned with :func:`batch_head` (``labels``: :func:`batch_labels`)."""
    return f"{labels[batch_id]:>9} {batch_id:>5}" if labels else f"{batch_id:>9}"


def batches_text(r: Replay, show: int, labels: dict[int, str] | None = None) -> list[str]:
    """The per-batch table (``labels``: :func:`batch_labels`; the Spark batch id is then shown beside)."""
    lines = [f"{batch_head(labels)} {'kind':<7} {'watermark':<24} {'input':>8} {'late':>7} {'state':>8}  emitted"]
    rows = r.batches if show <= 0 or len(r.batches) <= show else r.batches[:show]
    for b in rows:
        lines.append(
            f"{batch_cell(b.batch_id, labels)} {b.kind:<7} {wm_text(b.watermark_ms):<24} {b.input_rows:>8} "
            f"{b.late_row_count:>7} {b.state_rows:>8}  {emitted_text(b)}"
        )
    if len(rows) < len(r.batches):
        lines.append(f"  ... {len(r.batches) - len(rows)} more batches (--show-batches 0 shows all)")
    return lines


def wm_text(ms: int) -> str:
    """A watermark as text: ``-`` while it is still Spark's initial 0 (no watermark yet; progress shows
    ``1970-01-01T00:00:00.000Z``, ``scan`` shows ``-``), else :func:`iso`."""
    return "-" if ms == 0 else iso(ms)


def late_entries(
    r: Replay | Sequence[BatchResult], events: EventsTable, limit: int
) -> list[dict[str, Any]]:
    """The first ``limit`` late (row, window) entries (all when ``limit < 0``) of a replay or of its
    batches, JSON-ready."""
    out: list[dict[str, Any]] = []
    if limit == 0:
        return out
    for b in r.batches if isinstance(r, Replay) else r:
        for lr in b.late_rows:
            out.append(
                {
                    "batch_id": b.batch_id,
                    # the file's own batch value when it has one (the Spark id counts no-data batches too)
                    "batch": b.batch_id if events.batch is None else int(events.batch[lr.row_index]),
                    "line": events.line_of(lr.row_index),
                    "event_time_us": lr.event_time_us,
                    "window_start_ms": lr.window_start_ms,
                    "window_end_ms": lr.window_end_ms,
                    "watermark_ms": b.late_watermark_ms,
                    "lateness_ms": lr.lateness_ms,
                    "lateness": human(lr.lateness_ms),
                    "source": lr.source,
                    "key": lr.key,
                }
            )
            if 0 < limit <= len(out):
                return out
    return out


def late_text(entries: list[dict[str, Any]], total: int) -> list[str]:
    """The late-row list."""
    if not entries:
        return []
    lines = [f"Late rows ({len(entries)} of {total} shown; --show-late N, -1 for all):"]
    for e in entries:
        where = f"window ending {iso(e['window_end_ms'])}" if e["window_end_ms"] is not None else "event time"
        src = f" source {e['source']}" if e["source"] else ""
        # lateness 0: the window end (or event time) equals the watermark, and Spark drops <=
        by = (
            f"late by {e['lateness']}"
            if e["lateness_ms"] > 0
            else "late: its " + ("window ended" if e["window_end_ms"] is not None else "event time is")
            + " exactly at the watermark, and Spark drops <="
        )
        lines.append(
            f"  batch {e['batch']}: line {e['line']} (event time {iso_us(e['event_time_us'])}{src}) "
            f"{by} ({where} <= watermark {wm_text(e['watermark_ms'])})"
        )
    return lines


def sweep_table(summaries: list[Summary]) -> list[str]:
    """The ``--sweep`` comparison table."""
    lines = [
        f"{'delay':>8} {'dropped':>9} {'share':>9} {'lat p50':>12} {'lat p95':>12} "
        f"{'peak state':>11} {'no-data':>8}"
    ]
    for s in summaries:
        lat = s.latency if s.latency is not None and s.latency.count else s.event_time_latency
        lines.append(
            f"{dur(s.delay_ms):>8} {s.dropped_rows:>9} {s.dropped_share * 100:>8.3f}% {human(lat.p50_ms):>12} "
            f"{human(lat.p95_ms):>12} {s.peak_state_rows:>11} {s.no_data_batches:>8}"
        )
    kind = "processing time" if summaries and summaries[0].latency is not None else "event time"
    lines.append(f"(latency: window end -> emission, in {kind})")
    return lines


def recommendation_json(rec: Recommendation) -> dict[str, Any]:
    """The ``recommendation`` object of the JSON report."""
    return {
        "target_completeness_pct": rec.target_completeness_pct,
        "allowed_rows": rec.allowed_rows,
        "delay_ms": rec.delay_ms,
        "estimated_ms": rec.estimated_ms,
        "confirmed_by_replay": rec.confirmed,
        "smallest_candidate_ms": rec.smallest_candidate_ms,
        "summary": rec.summary.to_json(),
    }


def recommendation_text(rec: Recommendation, what: str = "") -> list[str]:
    """The ``--target-completeness`` answer (``what``: after "completeness", e.g. which rows were left out)."""
    allowed = rec.max_dropped_share * 100
    s = rec.summary
    big = f" ({human(rec.delay_ms)})" if rec.delay_ms >= _DAY_MS else ""
    out = [
        f"Smallest delay for {rec.target_completeness_pct}% completeness{what}: {dur(rec.delay_ms)}{big} "
        f"(drops {s.dropped_rows} of {s.rows_with_time} rows = {s.dropped_share * 100:.3f}% <= "
        f"{allowed:.3f}%; peak state {s.peak_state_rows})",
        "  read off the lateness of the rows at delay 0 "
        + (
            f"and confirmed by replay ({dur(rec.delay_ms - 1)} would drop more)"
            if rec.confirmed and rec.delay_ms > 0
            else "and confirmed by replay"
            if rec.confirmed
            else f"(estimate {dur(rec.estimated_ms)}); the replays settled on {dur(rec.delay_ms)}"
        ),
    ]
    if rec.smallest_candidate_ms is not None and rec.smallest_candidate_ms != rec.delay_ms:
        out.append(f"  smallest of the delays tried that meets it: {dur(rec.smallest_candidate_ms)}")
    return out


def _lines_of(advice: DelayAdvice) -> str:
    lines = [m.line for m in advice.misdated]
    return ", ".join(str(n) for n in lines[:5]) + (" ..." if len(lines) > 5 else "")


def advice_text(advice: DelayAdvice) -> list[str]:
    """With mis-dated rows: the delay the target needs without them, then (labelled) the one with them."""
    n = len(advice.misdated)
    rows = f"row{'s' if n > 1 else ''}"
    without = advice.without
    assert without is not None
    kept = advice.with_rows
    s = kept.summary
    big = f" ({human(kept.delay_ms)})" if kept.delay_ms >= _DAY_MS else ""
    return [
        *recommendation_text(
            without,
            f" without the mis-dated {rows} (line {_lines_of(advice)}, filtered out before withWatermark)",
        ),
        f"With the mis-dated {rows} kept (for comparison, not a fix): {dur(kept.delay_ms)}{big} (drops "
        f"{s.dropped_rows} of {s.rows_with_time} rows = {s.dropped_share * 100:.3f}%); such a delay only waits "
        f"until processing time reaches the mis-dated event time{'s' if n > 1 else ''}",
    ]


def advice_json(advice: DelayAdvice) -> dict[str, Any]:
    """The ``recommendation`` object: the delay to recommend, and with mis-dated rows ``misdated_rows``
    (their lines) and ``with_misdated_rows`` (the recommendation with every row kept)."""
    out = recommendation_json(advice.recommended)
    if advice.without is not None:
        out["misdated_rows"] = [m.line for m in advice.misdated]
        out["with_misdated_rows"] = recommendation_json(advice.with_rows)
    return out


def mover_json(m: WatermarkMover) -> dict[str, Any]:
    """A watermark mover as JSON."""
    d = dataclasses.asdict(m)
    d["unit_mismatch"] = None if m.unit_mismatch is None else mismatch_json(m.unit_mismatch)
    d["event_time"] = iso_us(m.event_time_us)
    d["watermark_after"] = iso(m.watermark_after_ms)
    return d


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The ``cause`` object of the JSON report."""
    fix = d.skew_fix
    return {
        "misdated_rows": [mover_json(m) for m in d.misdated],
        "watermark_movers": [mover_json(m) for m in d.movers[:20]],
        "dropped_rows": d.dropped_rows,
        "dropped_by_misdated_rows": d.dropped_by_misdated,
        "delay_needed_ms": d.delay_needed_ms,
        "without_misdated_rows": None if d.without_misdated is None else d.without_misdated.to_json(),
        "max_future_skew": None
        if fix is None
        else {
            "max_future_skew_ms": fix.max_future_skew_ms,
            "movers_min_lead_ms": fix.movers_min_lead_ms,
            "others_max_lead_ms": fix.others_max_lead_ms,
            "summary": fix.summary.to_json(),
        },
        "max_future_skew_unavailable": d.skew_unavailable or None,
    }


def _share(s: Summary) -> str:
    return f"{s.dropped_rows} rows ({s.dropped_share * 100:.3f}%)"


def diagnosis_text(
    d: Diagnosis, limit: int = 5, *, config: WatermarkConfig | None = None, labels: dict[int, str] | None = None
) -> list[str]:
    """The Cause block: which rows moved the watermark, that no delay helps, what does."""
    rows, rest = diagnosis_parts(d, limit, config=config, labels=labels)
    return rows + rest


def _delay_needed_text(d: Diagnosis, config: WatermarkConfig | None) -> str | None:
    """What delay keeps the rows the mis-dated rows made late: one delay, or with per-input delays each
    input's own raised by the same amount (a delay shifts that input's watermark); "No delay fixes it" only
    when that is a day or more."""
    if d.delay_needed_ms is None or d.delay_raise_ms is None:
        return None
    raise_ms = d.delay_raise_ms
    if config is not None and config.source_delays_ms:
        names = [*config.source_delays_ms] + [n for n in config.sources if n not in config.source_delays_ms]
        each = ", ".join(f"{n} {dur(config.delay_for(n))} -> {dur(config.delay_for(n) + raise_ms)}" for n in names)
        need = f"every input's delay raised by at least {human(raise_ms)} ({each})"
    else:
        need = f"a delay of at least {human(d.delay_needed_ms)}"
        if d.delay_needed_ms >= _DAY_MS:
            need += f" ({dur(d.delay_needed_ms)})"
    if raise_ms >= _DAY_MS:
        return f"  No delay fixes it: keeping those rows needs {need}."
    return f"  A larger delay would keep those rows: {need}."


def diagnosis_parts(
    d: Diagnosis, limit: int = 5, *, config: WatermarkConfig | None = None, labels: dict[int, str] | None = None
) -> tuple[list[str], list[str]]:
    """The Cause block in two parts: the mis-dated rows (header first), and the rest (how many drops they
    caused, that no delay helps, what does); both empty when there is no mis-dated row. ``config``: the
    query (per-input delays are then named); ``labels``: :func:`batch_labels` (the file's batch numbers)."""
    if not d.misdated:
        return [], []
    n = len(d.misdated)
    lines = [
        f"Cause: {n} row{'s' if n > 1 else ''} moved the watermark ahead of the rest of the stream "
        f"(almost no later row reaches the watermark {'they' if n > 1 else 'it'} set):"
    ]
    for m in d.misdated[:limit]:
        src = f", source {m.source}" if m.source else ""
        batch = labels.get(m.batch_id, str(m.batch_id)) if labels else str(m.batch_id)
        moved = (
            f"set the first watermark, {iso(m.watermark_after_ms)}"
            if m.watermark_before_ms == 0  # Spark's initial 0: no watermark yet
            else f"moved the watermark from {iso(m.watermark_before_ms)} to {iso(m.watermark_after_ms)} "
            f"(+{human(m.watermark_after_ms - m.watermark_before_ms)})"
        )
        lines.append(f"  line {m.line} (batch {batch}{src}): event time {iso_us(m.event_time_us)} {moved}")
        if m.later_max_event_time_us is not None:
            of = f" of {m.source}" if m.source else ""
            lines.append(f"    the rows{of} read after it reach at most {iso_us(m.later_max_event_time_us)}")
        if m.unit_mismatch is not None:
            u = m.unit_mismatch
            lines.append(
                f"    {u.value} read as epoch {u.unit}; as epoch {u.likely_unit} it is {iso_us(u.likely_us)}: "
                f"fix the producer, or convert that row"
            )
    if n > limit:
        lines.append(f"  ... {n - limit} more")
    rows, lines = lines, []
    share = d.dropped_by_misdated / d.dropped_rows * 100 if d.dropped_rows else 0.0
    lines.append(
        f"  {d.dropped_by_misdated} of the {d.dropped_rows} dropped rows ({share:.1f}%) were dropped "
        f"against a watermark {'these rows' if n > 1 else 'this row'} set."
    )
    needed = _delay_needed_text(d, config)
    if needed is not None:
        lines.append(needed)
    fixes = []
    if d.without_misdated is not None:
        fixes.append(
            f"  Filtering {'these rows' if n > 1 else 'that row'} out before withWatermark: "
            f"{_share(d.without_misdated)} dropped"
        )
    if d.skew_fix is not None:
        f = d.skew_fix
        fixes.append(
            f"  --max-future-skew {dur(f.max_future_skew_ms)} (filter(event_time <= current_timestamp() + "
            f"INTERVAL {f.max_future_skew_ms // 1000} SECONDS) before withWatermark): {_share(f.summary)} "
            f"dropped, {f.summary.future_filtered_rows} row(s) filtered"
        )
    elif d.skew_unavailable:
        fixes.append(f"  --max-future-skew cannot: {d.skew_unavailable}")
    if fixes:
        lines.append("  What fixes it (replayed):")
        lines.extend("  " + f for f in fixes)
    return rows, lines
