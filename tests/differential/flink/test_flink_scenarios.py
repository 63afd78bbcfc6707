"""The Flink scenario generator is deterministic and the CI seeds cover what issue 7 lists."""

from __future__ import annotations

from tests.differential.flink.scenarios import features, generate, harness_text
from tests.differential.flink.test_flink_differential import CI_SEEDS

REQUIRED = {
    "window:tumbling",
    "window:sliding",
    "window:session",
    "sliding_not_divisible",
    "allowed_lateness",
    "partitions",
    "idleness",
    "per_event",
    "periodic",
    "side_output",
    "drop_counter",
    "keys",
    "monotonous",
}


def test_generate_is_deterministic() -> None:
    a, b = generate(7), generate(7)
    assert a == b
    assert harness_text([a]) == harness_text([b])
    assert generate(8) != a


def test_ci_seeds_cover_issue_7() -> None:
    seen: set[str] = set()
    for s in CI_SEEDS:
        seen |= features(generate(s))
    assert seen >= REQUIRED, f"missing in CI seeds: {sorted(REQUIRED - seen)}"


def test_harness_text_puts_an_event_arriving_at_a_tick_before_it() -> None:
    sc = generate(3)
    lines = harness_text([sc]).splitlines()
    assert lines[0].startswith(f"S {sc.id} ")
    last_tick = None
    for line in lines[1:]:
        kind, *vals = line.split()
        if kind == "K":
            last_tick = int(vals[0])
        elif kind == "E" and last_tick is not None:
            assert int(vals[4]) > last_tick  # arrival strictly after the tick before it


def test_compare_reports_each_kind_of_difference() -> None:
    from tests.differential.flink.compare import compare, engine_run
    from tests.differential.flink.harness import FlinkResult

    sc = next(
        generate(s)
        for s in range(50)
        if generate(s).config.late_side_output and engine_run(generate(s)).late_rows.size
    )
    r = engine_run(sc)
    f = r.firings
    firings = [
        (int(r.key_names[k][1:]), s, e, c, wm, lf)
        for k, s, e, c, wm, lf in zip(
            f.key_codes.tolist(),
            f.start_ms.tolist(),
            f.end_ms.tolist(),
            f.count.tolist(),
            f.watermark_ms.tolist(),
            f.late_firing.tolist(),
            strict=True,
        )
    ]
    same = FlinkResult(firings=list(firings), side_output_rows=r.late_rows.tolist(), late_records_dropped=0)
    assert compare(sc, same) == []
    k, s, e, c, wm, lf = firings[0]
    off_by_one = FlinkResult([(k, s, e, c + 1, wm, lf), *firings[1:]], r.late_rows.tolist(), 0)
    assert any("firings differ" in d for d in compare(sc, off_by_one))
    assert any(
        "numLateRecordsDropped" in d for d in compare(sc, FlinkResult(firings, r.late_rows.tolist(), 1))
    )
    assert any("side output" in d for d in compare(sc, FlinkResult(firings, r.late_rows.tolist()[1:], 0)))
    assert compare(sc, FlinkResult(error="boom")) == ["Flink failed: boom"]
