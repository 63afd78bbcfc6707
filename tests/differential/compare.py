"""Per-batch comparison of a Spark run and an engine replay, with a readable diff.

Both sides are reduced to :class:`BatchView` records. A field that one side cannot observe is None
on that side and is then not compared (for example the engine's raw late rows have no direct Spark
counterpart; they are checked through ``rows_dropped_by_watermark`` and through the emitted counts,
where a late row wrongly counted, or wrongly dropped, changes a window's count).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.differential.scenarios import DedupSpec, Scenario, WindowSpec
from tests.differential.spark_runner import SparkBatch, SparkRun

EmittedRow = tuple[Any, ...]

#: Fields compared batch by batch, in the order the diff shows them.
COMPARED_FIELDS = (
    "data_step",
    "watermark_ms",
    "emitted",
    "output_rows",
    "state_rows_total",
    "state_rows_removed",
    "rows_dropped_by_watermark",
    "late_rows",
    "late_groups",
    "event_time_min_ms",
    "event_time_max_ms",
    "event_time_avg_ms",
)

#: Spark's ``eventTime.avg`` is a running double mean merged across partitions and truncated to ms;
#: an exact mean may differ from it by 1 ms.
_AVG_TOLERANCE_MS = 1

#: Fields where None is an answer, not "not observed" (data_step None = a no-data batch; no
#: eventTime stats = the batch had no rows).
_NONE_IS_A_VALUE = frozenset({"data_step", "event_time_min_ms", "event_time_max_ms", "event_time_avg_ms"})


@dataclass(frozen=True)
class BatchView:
    """What one side says about one micro-batch.

    ``data_step``: the scenario step the batch read (None for a no-data batch);
    ``watermark_ms``: watermark in effect during the batch (epoch ms);
    ``emitted``: rows the sink received, sorted (``(start_us, end_us, key, count)`` for windows,
    ``(key, event_time_us)`` for dedup; None when a side does not report rows);
    ``output_rows``: how many rows the sink received; ``state_rows_total`` / ``state_rows_removed``:
    state rows after the batch / removed in it (``numRowsTotal`` / ``numRowsRemoved``);
    ``rows_dropped_by_watermark``: Spark's ``numRowsDroppedByWatermark`` (for the engine: its
    reproduction of that metric); ``late_rows``: raw late rows (the engine's explicit late output;
    on the Spark side only for dedup, where ``numRowsDroppedByWatermark`` counts raw rows: a
    window aggregate counts late groups, so there raw late rows show only through the counts);
    ``late_groups``: distinct (window, key) groups among the raw late rows (tumbling/sliding
    windows: Spark's ``numRowsDroppedByWatermark`` counts exactly these, see FINDINGS.md S3; for the
    engine it is derived from its explicit late-row output, so the engine's raw late rows themselves
    are checked, not only its metric reproduction); ``event_time_*_ms``: the progress
    ``eventTime.min/max/avg`` (None: the batch had no rows).
    """

    batch_id: int
    data_step: int | None
    watermark_ms: int | None
    emitted: tuple[EmittedRow, ...] | None
    output_rows: int | None
    state_rows_total: int | None
    state_rows_removed: int | None
    rows_dropped_by_watermark: int | None
    late_rows: int | None = None
    late_groups: int | None = None
    event_time_min_ms: int | None = None
    event_time_max_ms: int | None = None
    event_time_avg_ms: int | None = None


def spark_views(run: SparkRun, scenario: Scenario) -> list[BatchView]:
    """Spark's batches as :class:`BatchView` records. For a deduplication ``numRowsDroppedByWatermark``
    is also the number of raw late rows; for a tumbling or sliding window count it is the number of
    distinct late groups (FINDINGS.md S3)."""
    operation = scenario.operation
    dedup = isinstance(operation, DedupSpec)
    fixed_windows = isinstance(operation, WindowSpec) and operation.kind != "session"
    return [_from_spark(batch, dedup, fixed_windows) for batch in run.batches]


def _from_spark(batch: SparkBatch, dedup: bool, fixed_windows: bool) -> BatchView:
    return BatchView(
        batch_id=batch.batch_id,
        data_step=batch.data_step,
        watermark_ms=batch.watermark_ms,
        emitted=batch.emitted,
        output_rows=len(batch.emitted),
        state_rows_total=batch.state_rows_total,
        state_rows_removed=batch.state_rows_removed,
        rows_dropped_by_watermark=batch.rows_dropped_by_watermark,
        late_rows=batch.rows_dropped_by_watermark if dedup else None,
        late_groups=batch.rows_dropped_by_watermark if fixed_windows else None,
        event_time_min_ms=batch.event_time_min_ms,
        event_time_max_ms=batch.event_time_max_ms,
        event_time_avg_ms=batch.event_time_avg_ms,
    )


@dataclass(frozen=True)
class Difference:
    """One disagreement: the batch id, the field, and each side's value."""

    batch_id: int
    field: str
    spark: Any
    engine: Any


def compare(spark: list[BatchView], engine: list[BatchView]) -> list[Difference]:
    """Every field that differs, batch by batch; a batch present on one side only is one Difference
    with field ``"batch"``. Fields that are None on either side are skipped, except ``data_step``
    and the eventTime stats."""
    differences: list[Difference] = []
    spark_by_id = {view.batch_id: view for view in spark}
    engine_by_id = {view.batch_id: view for view in engine}
    for batch_id in sorted(set(spark_by_id) | set(engine_by_id)):
        ours, theirs = spark_by_id.get(batch_id), engine_by_id.get(batch_id)
        if ours is None or theirs is None:
            differences.append(
                Difference(batch_id, "batch", _summary(ours), _summary(theirs)),
            )
            continue
        for name in COMPARED_FIELDS:
            left, right = getattr(ours, name), getattr(theirs, name)
            if (left is None or right is None) and name not in _NONE_IS_A_VALUE:
                continue
            if (
                name == "event_time_avg_ms"
                and left is not None
                and right is not None
                and abs(left - right) <= _AVG_TOLERANCE_MS
            ):
                continue
            if left != right:
                differences.append(Difference(batch_id, name, left, right))
    return differences


def _summary(view: BatchView | None) -> str:
    if view is None:
        return "(no such batch)"
    return f"step={view.data_step} wm={format_ms(view.watermark_ms)}"


def format_ms(ms: int | None) -> str:
    """Epoch ms -> ``2026-01-01T00:00:05.123`` (or ``-``)."""
    if ms is None:
        return "-"
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def format_row(row: EmittedRow) -> str:
    """A window row ``(start_us, end_us, key, count)`` as ``[00:00:05,00:00:10) key=a n=2``; a dedup
    row ``(key, event_time_us)`` as ``k1@00:00:05.000123``."""

    def clock(us: int | None) -> str:
        if us is None:
            return "null"
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
        return text[11:] if text.startswith("2026-01-01") else text

    if len(row) == 4:
        start_us, end_us, key, count = row
        return f"[{clock(start_us)},{clock(end_us)}) key={key} n={count}"
    key, event_time_us = row
    return f"{key}@{clock(event_time_us)}"


def render(
    spark: list[BatchView],
    engine: list[BatchView],
    differences: list[Difference],
    row_format: Callable[[EmittedRow], str] | None = None,
) -> str:
    """A side-by-side table of both runs followed by the list of differences (``row_format``:
    how an emitted row is shown, :func:`format_row` by default)."""
    show = row_format or format_row
    lines = [
        "batch | side   | step | watermark               | state | removed | dropped | late | grp  | out | "
        "emitted"
    ]
    spark_by_id = {view.batch_id: view for view in spark}
    engine_by_id = {view.batch_id: view for view in engine}
    bad = {(d.batch_id, d.field) for d in differences}
    for batch_id in sorted(set(spark_by_id) | set(engine_by_id)):
        for side, view in (("spark", spark_by_id.get(batch_id)), ("engine", engine_by_id.get(batch_id))):
            if view is None:
                lines.append(f"{batch_id:5} | {side:6} | (no such batch)")
                continue
            differs = any(b == batch_id for b, _ in bad)
            lines.append(
                f"{batch_id:5} | {side:6} | {_opt(view.data_step):4} | {format_ms(view.watermark_ms):23} | "
                f"{_opt(view.state_rows_total):5} | {_opt(view.state_rows_removed):7} | "
                f"{_opt(view.rows_dropped_by_watermark):7} | {_opt(view.late_rows):4} | "
                f"{_opt(view.late_groups):4} | "
                f"{_opt(view.output_rows):3} | {_rows(view.emitted, show)}"
                + ("   <-- differs" if differs else "")
            )
    lines.append("")
    lines.append(f"{len(differences)} difference(s):")
    for d in differences:
        if d.field == "emitted":
            only_spark = sorted(set(d.spark) - set(d.engine), key=repr)
            only_engine = sorted(set(d.engine) - set(d.spark), key=repr)
            lines.append(
                f"  batch {d.batch_id} emitted: only Spark [{', '.join(map(show, only_spark))}] "
                f"only engine [{', '.join(map(show, only_engine))}]"
            )
        elif d.field == "watermark_ms" or d.field.startswith("event_time_"):
            lines.append(
                f"  batch {d.batch_id} {d.field}: Spark {format_ms(d.spark)} engine {format_ms(d.engine)}"
            )
        else:
            lines.append(f"  batch {d.batch_id} {d.field}: Spark {d.spark!r} engine {d.engine!r}")
    return "\n".join(lines)


def _rows(emitted: tuple[EmittedRow, ...] | None, show: Callable[[EmittedRow], str] = format_row) -> str:
    return "(not reported)" if emitted is None else ", ".join(show(r) for r in emitted)


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)
