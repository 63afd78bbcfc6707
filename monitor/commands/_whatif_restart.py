"""``tidegauge whatif --restart-after N[,M...]`` and ``--run-kind live|available-now|once``: the replay with
the query stopped and started again on its checkpoint, and what that changed.

The figures are :mod:`monitor.watermark.restart`'s (:func:`~monitor.watermark.restart.replay_restarting`
and :func:`~monitor.watermark.restart.restart_impact` against the same events replayed by one query that
never stopped); the batch table, summary and late-row list are whatif's usual ones
(:mod:`._whatif_text`). Each restart is said as a Spark user sees it: after which batch, with which
watermark from the checkpoint, which per-input watermarks were lost, whether a no-data batch was skipped;
then what changed (rows dropped or kept only because of the restarts, windows, latency) and what to do.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from monitor.commands import _whatif_ops as O
from monitor.commands import _whatif_text as T
from monitor.errors import InputError
from monitor.watermark import BatchPlan, EventsTable, WatermarkConfig, replay
from monitor.watermark.restart import RestartImpact, RunKind, replay_restarting, restart_impact

__all__ = ["RestartOptions", "parse_restart_options", "restart_report"]

#: ``--run-kind`` values and the engine's names for them.
_KINDS: dict[str, RunKind] = {"live": "live", "available-now": "available_now", "once": "once"}
_KIND_WORDS = {
    "live": "live runs with the default trigger",
    "available_now": "Trigger.AvailableNow runs",
    "once": "Trigger.Once runs, one batch each",
}


class RestartUsageError(InputError):
    """``--restart-after`` / ``--run-kind`` are malformed or do not fit the other options."""


@dataclass(frozen=True)
class RestartOptions:
    """``--restart-after`` batch ids (ascending, distinct) and the ``--run-kind``."""

    restart_after: tuple[int, ...]
    kind: RunKind


def parse_restart_options(restart_after: str | None, run_kind: str) -> RestartOptions | None:
    """The options, or ``None`` when neither is given (``--run-kind live`` without restarts is the plain
    replay).

    Raises:
        RestartUsageError: a batch id that is not a non-negative integer, or an unknown run kind.
    """
    kind = _KINDS.get(run_kind)
    if kind is None:
        raise RestartUsageError(f"--run-kind must be one of {', '.join(_KINDS)}, got {run_kind!r}")
    ids: set[int] = set()
    if restart_after is not None:
        for part in (p.strip() for p in restart_after.split(",")):
            if not part.isdigit():
                raise RestartUsageError(
                    "--restart-after takes batch ids as the query's progress numbers them (batchId), "
                    f"e.g. --restart-after 12,40; got {part!r}"
                )
            ids.add(int(part))
    if not ids and kind == "live":
        return None
    if ids and kind == "once":
        raise RestartUsageError(
            "--restart-after has no effect with --run-kind once: every Trigger.Once run is one batch, and the "
            "query stops after each; drop --restart-after"
        )
    return RestartOptions(restart_after=tuple(sorted(ids)), kind=kind)


def restart_report(
    events: EventsTable,
    config: WatermarkConfig,
    plan: BatchPlan,
    options: RestartOptions,
    *,
    show_batches: int,
    show_late: int,
) -> tuple[dict[str, Any], list[str]]:
    """The replay with restarts and what they changed; ``(json, text lines)``.

    Raises:
        EngineConfigError: a restart point beyond the replay's last batch.
    """
    with_restarts = replay_restarting(events, config, options.restart_after, kind=options.kind, plan=plan)
    result = with_restarts.replay
    impact = restart_impact(with_restarts, replay(events, config, plan=plan))
    doc: dict[str, Any] = result.to_json()
    doc["run_kind"] = options.kind
    doc["restart_after"] = list(options.restart_after)
    doc["restart_impact"] = impact.to_json()
    for key in ("dropped_only_with_restarts", "kept_only_with_restarts"):  # the file's lines, as the text says
        doc["restart_impact"][f"{key}_lines"] = [
            events.line_of(r) for r in getattr(impact, key)
        ]
    if options.kind != "live":  # the run kind, not an assumption about arrival, decides the no-data batches
        doc["no_data_batches"] = {"enabled": config.no_data_batches, "basis": options.kind}
        what = (
            "Trigger.AvailableNow: each run reads what is waiting batch after batch, then runs one no-data batch"
            if options.kind == "available_now"
            else "Trigger.Once: each run is one batch and never a no-data batch"
        )
        text_basis = textwrap.wrap(f"No-data batches: decided by --run-kind ({what}).", 110, subsequent_indent="  ")
    else:
        text_basis = []
    text = ["", *text_basis] if text_basis else []
    if config.join is not None:  # the join's own report (per side), over the replay with restarts
        part, lines = O.join_report(
            events, config, plan, show_batches=show_batches, show_late=show_late, result=result
        )
        doc.update(part)
        text += lines
    else:
        late = T.late_entries(result, events, show_late)
        doc["late_row_details"] = late
        # with a batch column, the file's batch numbers beside Spark's ids (--restart-after takes the ids)
        labels = T.batch_labels(result.batches, plan) if plan.labels else None
        text += ["", *T.batches_text(result, show_batches, labels), "", *T.summary_text(result.summary)]
        text += T.late_text(late, sum(len(b.late_rows) for b in result.batches))
    text += ["", *impact_text(impact, options.kind, config, events)]
    return doc, text


def impact_text(
    impact: RestartImpact, kind: RunKind, config: WatermarkConfig, events: EventsTable
) -> list[str]:
    """The restarts, one paragraph each, then what they changed and what to do."""
    n = len(impact.restarts)
    lines = [f"Restarts: {n}, {_KIND_WORDS[kind]}; each restart starts a new query on the same checkpoint"]
    held_by_restart = {h.restart.after_batch_id: h for h in impact.held_back}
    skipped = 0
    for r in impact.restarts:
        lost = ", ".join(f"{k} {T.iso(v)}" for k, v in r.lost_source_watermarks_ms.items() if v is not None)
        lines.append(
            f"  after batch {r.after_batch_id}: batch {r.first_batch_id} starts with the watermark "
            f"{T.iso(r.watermark_ms)} from the checkpoint"
            + (
                f"; the per-input watermarks ({lost}) are lost: only the global one is checkpointed"
                if lost
                else ""
            )
        )
        if r.skipped_no_data_batch:
            skipped += 1
            lines.append(
                f"    the query stopped between data batch {r.after_batch_id} and the no-data batch Spark "
                "would have run next: what that batch would have evicted and emitted waits for the next data"
            )
        h = held_by_restart.get(r.after_batch_id)
        if h is not None:
            why = (
                f": input {', '.join(h.waiting_for)} had no rows since the restart and counts as 0 under policy min"
                if h.waiting_for and config.policy == "min"
                else ": each input's watermark starts again from its first rows after the restart"
            )
            lines.append(
                f"    watermark held back for {h.data_batches} data batch(es) from batch {h.first_batch_id} "
                f"({T.iso(h.watermark_ms)} instead of {T.iso(h.watermark_without_restarts_ms)}){why}"
            )
    changed = "the restarts changed" if kind == "live" else "these runs changed"
    join = config.join is not None
    emitted = "join output rows (joined and NULL-padded)" if join else "windows/rows emitted"
    closes = "NULL-padded rows to come out and join state to be removed" if join else "windows to close"
    lines.append(f"What {changed} (against one live query that never stopped, same data batches):")
    lines.append(
        f"  rows dropped as late: {impact.dropped_rows} here, {impact.dropped_rows_without_restarts} in one "
        f"live query; {len(impact.dropped_only_with_restarts)} dropped only here"
        + _lines(impact.dropped_only_with_restarts, events)
        + f", {len(impact.kept_only_with_restarts)} kept only here"
        + _lines(impact.kept_only_with_restarts, events)
    )
    lines.append(
        f"  {emitted}: {impact.windows_emitted} here, {impact.windows_emitted_without_restarts} in one "
        f"live query; no-data batches: {impact.no_data_batches} here, "
        f"{impact.no_data_batches_without_restarts} in one live query"
    )
    if kind != "live" and impact.kept_only_with_restarts:
        lines.append(
            "  with data batches back to back (no no-data batch between them) each batch filters late rows "
            "against the watermark of the data batch before it, one step behind a live query's: rows a live "
            "query drops are counted"
        )
    if not impact.held_back and not skipped and not impact.dropped_only_with_restarts:
        lines.append("  no restart held the watermark back or skipped a no-data batch")
        return lines
    lines.append("What to do:")
    if impact.held_back and config.policy == "min":
        lines.append(
            "  - under policy min, every restart holds the watermark until each input has rows again; "
            "schedule restarts (and AvailableNow/Once runs) when every input has data waiting, or expect "
            f"{closes} that much later"
        )
    elif impact.held_back:
        lines.append(
            "  - after a restart each input's watermark restarts from its first rows; expect "
            f"{closes} later until the inputs have caught up"
        )
    if skipped:
        lines.append(
            f"  - {'what' if join else 'windows'} the skipped no-data batch would have "
            f"{'emitted (NULL-padded rows) and removed from the join state' if join else 'closed'} waits for "
            "the next data batch; Trigger.AvailableNow runs that batch before it stops, Trigger.Once never does"
        )
    return lines


def _lines(rows: tuple[int, ...], events: EventsTable, limit: int = 5) -> str:
    if not rows:
        return ""
    shown = ", ".join(str(events.line_of(r)) for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f" (lines {shown}{more})"
