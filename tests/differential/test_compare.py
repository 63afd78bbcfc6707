"""The per-batch comparison must report every kind of disagreement (otherwise the differential test
could never fail) and skip what one side does not observe."""

from __future__ import annotations

from dataclasses import replace

from tests.differential.compare import BatchView, Difference, compare, render

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
WINDOW = (T0_MS * 1_000, T0_MS * 1_000 + 10_000_000, None, 3)


def view(batch_id: int, **changes: object) -> BatchView:
    base = BatchView(
        batch_id=batch_id,
        data_step=batch_id,
        watermark_ms=T0_MS,
        emitted=(WINDOW,),
        output_rows=1,
        state_rows_total=2,
        state_rows_removed=0,
        rows_dropped_by_watermark=0,
        late_rows=None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_identical_runs_have_no_difference() -> None:
    assert compare([view(0), view(1)], [view(0), view(1)]) == []


def test_each_field_is_compared() -> None:
    spark = [view(0)]
    changed = {
        "data_step": None,  # a no-data batch where Spark read step 0
        "watermark_ms": T0_MS + 1,
        "emitted": ((*WINDOW[:3], 4),),
        "output_rows": 2,
        "state_rows_total": 3,
        "state_rows_removed": 1,
        "rows_dropped_by_watermark": 1,
    }
    found = {d.field for d in compare(spark, [view(0, **changed)])}
    assert found == set(changed)


def test_missing_batch_and_wrong_no_data_step_are_reported() -> None:
    differences = compare([view(0), view(1, data_step=None)], [view(0), view(1, data_step=1)])
    assert differences == [Difference(1, "data_step", None, 1)]
    differences = compare([view(0), view(1)], [view(0)])
    assert [(d.batch_id, d.field) for d in differences] == [(1, "batch")]


def test_late_rows_compared_only_when_both_sides_report_them() -> None:
    assert compare([view(0)], [view(0, late_rows=2)]) == []
    assert compare([view(0, late_rows=1)], [view(0, late_rows=2)]) == [Difference(0, "late_rows", 1, 2)]


def test_render_names_the_rows_only_one_side_has() -> None:
    spark, engine = [view(0)], [view(0, emitted=((*WINDOW[:3], 4),))]
    text = render(spark, engine, compare(spark, engine))
    assert "only Spark [[00:00:00.000000,00:00:10.000000) key=None n=3]" in text
    assert "only engine [[00:00:00.000000,00:00:10.000000) key=None n=4]" in text


def test_event_time_avg_tolerates_one_ms_but_not_a_missing_stat() -> None:
    # Spark truncates a running double mean; the engine's exact mean may be 1 ms off (compare.py).
    assert compare([view(0, event_time_avg_ms=T0_MS)], [view(0, event_time_avg_ms=T0_MS + 1)]) == []
    assert len(compare([view(0, event_time_avg_ms=T0_MS)], [view(0, event_time_avg_ms=T0_MS + 2)])) == 1
    assert len(compare([view(0, event_time_max_ms=T0_MS)], [view(0, event_time_max_ms=None)])) == 1
