"""Window assignment shared by the Spark and Flink modes: which tumbling/sliding windows a time falls in.

Both engines place a time ``t`` in the windows ``[start, start + size)`` with
``start = last_start - i * slide`` for ``i = 0 .. ceil(size / slide) - 1``, where
``last_start = t - floorMod(t - offset, slide)``, keeping only windows with ``start <= t < start + size``:

* Spark: ``TimeWindowing`` (3.4+), which expands each row into ``ceil(size / slide)`` candidates and
  filters them;
* Flink: ``SlidingEventTimeWindows.assignWindows`` (``for (start = lastStart; start > t - size;
  start -= slide)``) with ``TimeWindow.getWindowStartWithOffset``; ``TumblingEventTimeWindows`` is the
  case ``slide == size``. Flink allows ``slide > size`` (gaps between windows): a time in a gap is in
  no window.

The unit is whatever the caller uses (Spark mode: microseconds, Flink mode: milliseconds).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["assign_window_indices", "assign_windows"]

I64 = npt.NDArray[np.int64]


def assign_window_indices(t: I64, rows: I64, size: int, slide: int, offset: int = 0) -> tuple[I64, I64]:
    """Every (window index, row) pair, window ``j`` being ``[j * slide + offset, j * slide + offset + size)``.

    Same pairs and order as :func:`assign_windows` (which returns starts instead of indices); one
    floor division per row: the latest window is ``floorDiv(t - offset, slide)``, the earlier
    candidates count down from it.
    """
    last = (t - offset) // slide
    k = -(-size // slide)
    if k == 1 and size >= slide:
        return last, rows
    widx = np.concatenate([last - i for i in range(k)]) if k > 1 else last
    r = np.tile(rows, k) if k > 1 else rows
    if size % slide != 0:
        tt = np.tile(t, k) if k > 1 else t
        keep = tt < widx * slide + offset + size  # start <= t holds by construction
        widx, r = widx[keep], r[keep]
    return widx, r


def assign_windows(t: I64, rows: I64, size: int, slide: int, offset: int = 0) -> tuple[I64, I64]:
    """Every (window start, row) pair: the windows each time ``t[i]`` (row ``rows[i]``) falls in.

    Args:
        t: int64 times, one per row.
        rows: int64 row ids, same length as ``t`` (returned alongside each window start).
        size, slide, offset: window size, slide and offset (``0 <= |offset| < slide``), same unit as ``t``.

    Returns:
        ``(starts, rows)``: for ``k = ceil(size / slide)`` candidates per row, grouped by candidate
        (all rows' latest window first, then each row's next-earlier window, ...), filtered to the
        windows that contain the time.
    """
    widx, r = assign_window_indices(t, rows, size, slide, offset)
    return widx * slide + offset, r
