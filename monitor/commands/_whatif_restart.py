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
from monitor.watermark import BatchPlan, EngineConfigError, EventsTable, WatermarkConfig, replay
from monitor.watermark.restart import RestartImpact, RunKind, replay_restarting, restart_impact

__all__ = ["RestartOptions", "parse_restart_options", "restart_report"]

#: ``--run-kind`` values and the engine's names for them.
_KINDS: dict[str, RunKind] = {"live": "live", "available-now": "available_now", "once": "once"}
_KIND_WORDS = {
    "live": "live runs",
    "available_now": "Trigger.AvailableNow runs",
    "once": "Trigger.Once runs, one batch each",
}


class RestartUsageError(InputError):
    """``--restart-after`` / ``--run-kind`` are malformed or do not fit the other options."""


@dataclass(frozen=True)
class RestartOptions:
    """``--restart-after`` points (ascending, distinct) and the ``--run-kind``.

    ``restart_after``: ``(number, after its no-data batch)`` each: with a ``batch`` column the file's batch
    number as the report's batch column shows it (``4`` or ``after 4``), else Spark's batch id (``after``
    is then never set)."""

    restart_after: tuple[tuple[int, bool], ...]
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
    ids: set[tuple[int, bool]] = set()
    if restart_after is not None:
        for part in (p.strip() for p in restart_after.split(",")):
            number = part.removeprefix("after").strip()
            if not number.isdigit():
                raise RestartUsageError(
                    "--restart-after takes the batches as the report's batch column names them: with a batch "
                    "column the file's numbers, N (right after data batch N) or 'after N' (after the no-data "
                    "batch that follows it), else Spark's batch ids; e.g. --restart-after '4,after 7'; "
                    f"got {part!r}"
                )
            ids.add((int(number), part.startswith("after")))
    if not ids and kind == "live":
        return None
    if ids and kind == "once":
        raise RestartUsageError(
            "--restart-after has no effect with --run-kind once: every Trigger.Once run is one batch, and the "
            "query stops after each; drop --restart-after"
        )
    return RestartOptions(restart_after=tuple(sorted(ids)), kind=kind)


def _batch_ids(options: RestartOptions, plan: BatchPlan) -> list[int]:
    """Without a ``batch`` column the points are Spark's batch ids."""
    return [] if plan.labels else [n for n, _ in options.restart_after]


def _file_batches(options: RestartOptions, plan: BatchPlan, events: EventsTable) -> list[tuple[int, bool]]:
    """With a ``batch`` column, each point's data-batch index (``(index, after its no-data batch)``).

    Raises:
        RestartUsageError: a batch number the file does not have; ``after N`` without a batch column.
    """
    if not plan.labels:
        if any(after for _, after in options.restart_after):
            raise RestartUsageError(
                f"--restart-after 'after N' names the no-data batch after file batch N, but {events.path or 'the events'} "
                "has no batch column: give Spark's batch ids (the report's batch column)"
            )
        return []
    index = {label: j for j, label in enumerate(plan.labels)}
    out = []
    for n, after in options.restart_after:
        if n not in index:
            have = sorted(v for v in index if v is not None)
            raise RestartUsageError(
                f"--restart-after {'after ' if after else ''}{n}: the file has no batch {n} (its batch column "
                f"holds {have[0]} to {have[-1]})"
            )
        out.append((index[n], after))
    return out


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
    try:
        with_restarts = replay_restarting(
            events, config, _batch_ids(options, plan), kind=options.kind, plan=plan,
            after_data_batches=_file_batches(options, plan, events),
        )
    except EngineConfigError as exc:  # a point at or beyond the last batch: named with the option
        raise RestartUsageError(f"--restart-after: {exc}") from None
    result = with_restarts.replay
    impact = restart_impact(with_restarts, replay(events, config, plan=plan))
    doc: dict[str, Any] = result.to_json()
    T.number_batches_json(doc["batches"], plan)
    doc["run_kind"] = options.kind
    doc["restart_after"] = [f"after {n}" if after else n for n, after in options.restart_after]
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
    # with a batch column, the file's batch numbers beside Spark's ids (--restart-after takes the file's)
    labels = T.batch_labels(result.batches, plan) if plan.labels else None
    if config.join is not None:  # the join's own report (per side), over the replay with restarts
        part, lines = O.join_report(
            events, config, plan, show_batches=show_batches, show_late=show_late, result=result
        )
        doc.update(part)
        text += lines
    else:
        late = T.late_entries(result, events, show_late)
        doc["late_row_details"] = late
        text += ["", *T.batches_text(result, show_batches, labels), "", *T.summary_text(result.summary, config)]
        text += T.late_text(late, sum(len(b.late_rows) for b in result.batches))
    text += ["", *impact_text(impact, options.kind, config, events, requested=options.restart_after, labels=labels)]
    return doc, text


def impact_text(
    impact: RestartImpact,
    kind: RunKind,
    config: WatermarkConfig,
    events: EventsTable,
    *,
    requested: tuple[tuple[int, bool], ...] = (),
    labels: dict[int, str] | None = None,
) -> list[str]:
    """The restarts, one paragraph each, then what they changed and what to do. ``requested``: the
    ``--restart-after`` points (an AvailableNow run asked to stop after a data batch stops after the no-data
    batch that closes it, which the paragraph says); ``labels``: the report's batch names by Spark id
    (:func:`._whatif_text.batch_labels`), with a ``batch`` column."""

    def name(batch_id: int) -> str:
        label = None if labels is None else labels.get(batch_id)
        if label is None:
            return f"batch {batch_id}"
        if label.startswith("after "):
            return f"the no-data batch after batch {label.removeprefix('after ')} (id {batch_id})"
        return f"batch {label} (id {batch_id})"

    n = len(impact.restarts)
    runs = _KIND_WORDS[kind]
    if kind == "live" and config.trigger_ms is not None:
        runs += f" with a {T.dur(config.trigger_ms)} processing-time trigger"
    lines = [f"Restarts: {n}, {runs}; each restart starts a new query on the same checkpoint"]
    held_by_restart = {h.restart.after_batch_id: h for h in impact.held_back}
    skipped = 0
    for r in impact.restarts:
        # with one input the global watermark is that input's: nothing of it is lost
        lost = ", ".join(
            f"{k} {T.iso(v)}" for k, v in r.lost_source_watermarks_ms.items() if v is not None
        ) if len(r.lost_source_watermarks_ms) > 1 else ""
        lines.append(
            f"  after {name(r.after_batch_id)}: {name(r.first_batch_id)} starts with the watermark "
            f"{T.iso(r.watermark_ms)} from the checkpoint"
            + (
                f"; the per-input watermarks ({lost}) are lost: only the global one is checkpointed"
                if lost
                else ""
            )
        )
        # where it stopped, as --restart-after names it: (file batch, after its no-data batch)
        label = None if labels is None else labels.get(r.after_batch_id)
        stopped = None if label is None else (int(label.removeprefix("after ")), label.startswith("after "))
        ran_on = (
            stopped is not None and stopped[1] and (stopped[0], False) in requested
            if labels is not None
            else (r.after_batch_id, False) not in requested
        )
        if kind == "available_now" and requested and ran_on:
            lines.append(
                f"    (asked after {name(r.after_batch_id - 1)}: a Trigger.AvailableNow run ends with the no-data "
                "batch that closes it, so this run stopped after that one)"
            )
        if stopped is not None and not stopped[1] and (stopped[0], True) in requested:
            lines.append(
                f"    (asked after the no-data batch after batch {stopped[0]}: none ran there, the watermark did "
                "not move, so the query stopped after the data batch)"
            )
        if r.skipped_no_data_batch:
            skipped += 1
            lines.append(
                f"    the query stopped between data {name(r.after_batch_id)} and the no-data batch Spark "
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
                f"    watermark held back for {h.data_batches} data batch(es) from {name(h.first_batch_id)} "
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
            "against the watermark of the data batch before it, one step behind a live query's (whose no-data "
            "batch moves it in between): rows a live query drops as late are kept here and counted in their windows"
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
    return f" ({'line' if len(rows) == 1 else 'lines'} {shown}{more})"
