"""Chain scenarios through the engine (:func:`monitor.watermark.chain.replay_chain`) and the per-batch
comparison with a real Spark run.

Compared per batch: batch ids including no-data batches, the step a data batch read, the global
watermark in effect, the rows the last operator emitted ``(start_us, end_us, key, count, sum)``, and
per operator in Spark's ``stateOperators`` order (last operator first): operator kind,
``numRowsTotal``, ``numRowsRemoved``, ``numRowsDroppedByWatermark``.
The events table and the inputs' watermarks come from :mod:`tests.differential.engine_adapter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.watermark import Sliding, Tumbling
from monitor.watermark.chain import ChainConfig, ChainReplay, ThenWindow, replay_chain
from tests.differential.chains_scenarios import ChainScenario, ThenSpec
from tests.differential.chains_spark import ChainSparkRun
from tests.differential.compare import Difference, format_ms, format_row
from tests.differential.engine_adapter import engine_config, engine_events


@dataclass(frozen=True)
class ChainView:
    """What one side says about one batch; ``operators``: ``(name, total, removed, dropped)`` per
    operator, last operator first."""

    batch_id: int
    data_step: int | None
    watermark_ms: int | None
    emitted: tuple[tuple[Any, ...], ...]
    operators: tuple[tuple[str, int, int, int | None], ...]


def then_window(stage: ThenSpec) -> ThenWindow:
    """The engine's :class:`ThenWindow` for a generated stage."""
    if stage.kind == "sliding":
        assert stage.slide_ms is not None
        return ThenWindow(Sliding(stage.size_ms, stage.slide_ms), stage.by_key)
    return ThenWindow(Tumbling(stage.size_ms), stage.by_key)


def chain_config(scenario: ChainScenario) -> ChainConfig:
    """The engine's :class:`ChainConfig` for the scenario."""
    return ChainConfig(
        first=engine_config(scenario.base),
        then=tuple(then_window(s) for s in scenario.then),
        allow_multiple=scenario.allow_multiple,
    )


def engine_chain_views(scenario: ChainScenario) -> list[ChainView]:
    """Runs the engine on the scenario; one :class:`ChainView` per batch."""
    result = replay_chain(engine_events(scenario.base), chain_config(scenario))
    return chain_views(result, scenario.then[-1].by_key)


def chain_views(result: ChainReplay, by_key: bool) -> list[ChainView]:
    """An engine chain replay as one :class:`ChainView` per batch (``by_key``: the last operator
    groups by key)."""
    views = []
    step = 0
    for b in result.batches:
        data_step = None
        if b.batch.kind == "data":
            data_step, step = step, step + 1
        w = b.emitted
        rows = [
            (
                int(w.start_us[i]),
                int(w.end_us[i]),
                w.key_names[int(w.key_codes[i])] if by_key and w.key_codes is not None else None,
                int(w.count[i]),
                int(b.emitted_sums[i]),
            )
            for i in range(len(w))
        ]
        views.append(
            ChainView(
                batch_id=b.batch.batch_id,
                data_step=data_step,
                watermark_ms=b.batch.watermark_ms,
                emitted=tuple(sorted(rows, key=lambda r: tuple((v is not None, v) for v in r))),
                operators=tuple(
                    (
                        op.spark_name,
                        op.state_rows,
                        op.state_rows_removed,
                        op.dropped_by_watermark_metric,
                    )
                    for op in b.state_operators
                ),
            )
        )
    return views


def spark_chain_views(run: ChainSparkRun) -> list[ChainView]:
    """Spark's batches as :class:`ChainView` records."""
    return [
        ChainView(
            batch_id=b.batch_id,
            data_step=b.data_step,
            watermark_ms=b.watermark_ms,
            emitted=b.emitted,
            operators=tuple(
                (op.name, op.rows_total, op.rows_removed, op.rows_dropped_by_watermark) for op in b.operators
            ),
        )
        for b in run.batches
    ]


def compare_chain(spark: list[ChainView], engine: list[ChainView]) -> list[Difference]:
    """Every differing field, batch by batch (a batch on one side only: field ``"batch"``)."""
    out: list[Difference] = []
    left = {v.batch_id: v for v in spark}
    right = {v.batch_id: v for v in engine}
    for batch_id in sorted(set(left) | set(right)):
        a, b = left.get(batch_id), right.get(batch_id)
        if a is None or b is None:
            out.append(Difference(batch_id, "batch", a is not None, b is not None))
            continue
        for name in ("data_step", "watermark_ms", "emitted", "operators"):
            if getattr(a, name) != getattr(b, name):
                out.append(Difference(batch_id, name, getattr(a, name), getattr(b, name)))
    return out


def render_chain(spark: list[ChainView], engine: list[ChainView], differences: list[Difference]) -> str:
    """Both runs side by side, then the differences."""
    lines = [
        "batch | side   | step | watermark               | operators (name total removed dropped) | emitted"
    ]
    views = {("spark", v.batch_id): v for v in spark} | {("engine", v.batch_id): v for v in engine}
    for batch_id in sorted({v.batch_id for v in spark} | {v.batch_id for v in engine}):
        for side in ("spark", "engine"):
            v = views.get((side, batch_id))
            if v is None:
                lines.append(f"{batch_id:5} | {side:6} | (no such batch)")
                continue
            ops = "; ".join(" ".join(str(x) for x in op) for op in v.operators)
            rows = ", ".join(format_row(r[:4]) + f" sum={r[4]}" for r in v.emitted)
            step = "-" if v.data_step is None else str(v.data_step)
            lines.append(
                f"{batch_id:5} | {side:6} | {step:4} | {format_ms(v.watermark_ms):23} | {ops} | {rows}"
            )
    lines.append(f"{len(differences)} difference(s):")
    lines.extend(
        f"  batch {d.batch_id} {d.field}: Spark {d.spark!r} engine {d.engine!r}" for d in differences
    )
    return "\n".join(lines)
