"""Chart axes for people, shared by the dashboard's charts and the HTML report: which values an axis
covers (the bulk of them: a 2099 row, Spark's 1970 "no watermark yet" or a year-8999 clamp would squash
every honest value flat), the format of a time axis for the range it shows, the unit of a duration axis."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from itertools import pairwise

__all__ = ["CLUSTER_GAP_S", "bulk_range", "duration_unit", "time_axis_format"]

#: Sorted values (event times, watermarks, freshness in seconds) further apart than this belong to
#: different clusters: mis-dated rows and placeholders are years off, a backfill's honest times follow each
#: other by far less.
CLUSTER_GAP_S = 30 * 86_400.0


def bulk_range(values: Sequence[float], *, centre: float | None = None, nearest: bool = False,
               gap: float = CLUSTER_GAP_S) -> tuple[float, float] | None:
    """The smallest and largest of the bulk of ``values`` (seconds, or epoch seconds of times): the values
    are split into clusters at gaps over ``gap``; the bulk is the cluster holding most values, a tie going to
    the cluster whose median is nearest ``centre`` (e.g. the processing times), else to the first. With
    ``nearest`` the cluster nearest ``centre`` wins whatever its size (freshness around 0 s: a job whose
    watermark sat at a year-8999 clamp for most batches still shows its honest lag). ``None`` without
    values.

    >>> bulk_range([0.0, 1.7e9, 1.7e9 + 60, 4.1e9])
    (1700000000.0, 1700000060.0)
    """
    ordered = sorted(values)
    if not ordered:
        return None
    clusters: list[list[float]] = [[ordered[0]]]
    for before, value in pairwise(ordered):
        if value - before > gap:
            clusters.append([])
        clusters[-1].append(value)

    def rank(cluster: list[float]) -> tuple[float, float]:
        middle = cluster[len(cluster) // 2]
        closeness = 0.0 if centre is None else -abs(middle - centre)
        return (closeness, len(cluster)) if nearest else (len(cluster), closeness)

    bulk = max(clusters, key=rank)
    return bulk[0], bulk[-1]


def time_axis_format(span: timedelta | None) -> str:
    """The d3 time format of an axis spanning ``span``: ``%H:%M:%S`` within a day (or unknown), ``%m-%d
    %H:%M`` within two months, ``%Y-%m-%d`` within 20 years, ``%Y`` beyond: distinct ticks, no digits that
    never change."""
    if span is None or span != span or span <= timedelta(days=1):  # span != span: NaT
        return "%H:%M:%S"
    if span <= timedelta(days=62):
        return "%m-%d %H:%M"
    if span <= timedelta(days=365 * 20):
        return "%Y-%m-%d"
    return "%Y"


_UNITS = ((365.25 * 86_400, "years"), (86_400.0, "days"), (3_600.0, "hours"), (60.0, "minutes"), (1.0, "seconds"))


def duration_unit(largest_s: float) -> tuple[float, str]:
    """The unit of a duration axis whose largest magnitude is ``largest_s`` seconds: ``(seconds per unit,
    name)``, the largest unit the value reaches (``(3600.0, "hours")`` for 7,200 s; seconds below a minute)."""
    for size, name in _UNITS:
        if abs(largest_s) >= size:
            return size, name
    return 1.0, "seconds"
