"""collectors.kafka.interpolation.OffsetTimeTable: kafka-lag-exporter's lookup table, without extrapolation.
Times are ms; each expected figure is worked out in the comment."""

from __future__ import annotations

import pytest

from collectors.kafka import OffsetTimeTable


def table(*points: tuple[int, int], max_points: int = 60) -> OffsetTimeTable:
    t = OffsetTimeTable(max_points)
    for offset, ms in points:
        t.add(offset, ms)
    return t


def test_interpolates_between_the_points_around_the_committed_offset() -> None:
    t = table((100, 0), (200, 10_000), (300, 30_000))
    # record 249 exists once the log-end is 250: halfway from (200, 10 s) to (300, 30 s) = 20 s; now 50 s
    assert t.estimate(249, 300, 50_000).seconds == pytest.approx(30.0)
    # caught up
    assert t.estimate(300, 300, 50_000).seconds == 0.0


def test_idle_partition_keeps_the_first_time_of_its_offset() -> None:
    t = table((100, 0), (200, 10_000), (200, 20_000), (200, 90_000))
    assert len(t) == 2
    # record 150: between (100, 0) and (200, 10 s) -> 5.1 s; at 100 s that is 94.9 s, not 45 s
    assert t.estimate(150, 200, 100_000).seconds == pytest.approx(94.9)


@pytest.mark.parametrize(
    ("points", "committed", "note", "at_least"),
    [
        # one point only (idle since the first poll): no slope to read -> no estimate, lower bound 60 s
        ([(100, 0)], 50, "has not changed", 60.0),
        # the record (offset 10) is older than the oldest point (log-end 100 at 0 s): lower bound only
        ([(100, 0), (200, 30_000)], 10, "older than the oldest sample", 60.0),
    ],
)
def test_no_extrapolation(points: list[tuple[int, int]], committed: int, note: str, at_least: float) -> None:
    est = table(*points).estimate(committed, 200, 60_000)
    assert est.seconds is None and note in (est.note or "") and est.at_least == pytest.approx(at_least)


def test_a_lower_log_end_offset_starts_a_new_table_and_old_points_go() -> None:
    t = table((100, 0), (200, 10_000), (5, 20_000))  # topic recreated
    assert len(t) == 1
    t = table(*[(i * 10, i * 1000) for i in range(10)], max_points=3)
    assert len(t) == 3
    assert t.estimate(5, 90, 20_000).seconds is None  # offset 5 fell out of the kept points
