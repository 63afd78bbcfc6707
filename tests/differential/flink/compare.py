"""Compare the engine's Flink mode with real Flink on one scenario."""

from __future__ import annotations

from monitor.watermark.flink import FlinkReplay, replay_flink
from tests.differential.flink.harness import FlinkResult
from tests.differential.flink.scenarios import FlinkScenario

__all__ = ["compare", "engine_run"]

Firing = tuple[int, int, int, int, int, bool]  # watermark, late, key, start, end, count (sorted form)


def engine_run(sc: FlinkScenario) -> FlinkReplay:
    """The engine's replay of the scenario."""
    return replay_flink(sc.events(), sc.config)


def _sorted(
    firings: list[tuple[int, int, int, int, int, bool]],
) -> list[tuple[int, bool, int, int, int, int]]:
    # (key, start, end, count, wm, late) -> ordered by watermark, then the rest (ties inside one
    # watermark advance fire in timer-queue order, which carries no meaning)
    return sorted((wm, late, k, s, e, c) for k, s, e, c, wm, late in firings)


def compare(sc: FlinkScenario, flink: FlinkResult) -> list[str]:
    """Differences (empty when the engine agrees): firings with counts, watermarks and the late flag,
    ``numLateRecordsDropped``, the late side output's rows."""
    if flink.error:
        return [f"Flink failed: {flink.error}"]
    r = engine_run(sc)
    names = r.key_names
    ours = [
        (int(names[k][1:]), s, e, c, wm, lf)
        for k, s, e, c, wm, lf in zip(
            r.firings.key_codes.tolist(),
            r.firings.start_ms.tolist(),
            r.firings.end_ms.tolist(),
            r.firings.count.tolist(),
            r.firings.watermark_ms.tolist(),
            r.firings.late_firing.tolist(),
            strict=True,
        )
    ]
    diffs: list[str] = []
    a, b = _sorted(flink.firings), _sorted(ours)
    if a != b:
        only_f = sorted(set(a) - set(b))
        only_e = sorted(set(b) - set(a))
        diffs.append(
            f"firings differ: flink {len(a)}, engine {len(b)}\n  only in Flink: {only_f[:12]}\n"
            f"  only in engine: {only_e[:12]}"
        )
    want_dropped = 0 if sc.config.late_side_output else len(r.late_rows)
    if flink.late_records_dropped != want_dropped:
        diffs.append(f"numLateRecordsDropped: flink {flink.late_records_dropped}, engine {want_dropped}")
    side = sorted(r.late_rows.tolist()) if sc.config.late_side_output else []
    if sorted(flink.side_output_rows) != side:
        diffs.append(f"late side output rows: flink {sorted(flink.side_output_rows)}, engine {side}")
    return diffs
