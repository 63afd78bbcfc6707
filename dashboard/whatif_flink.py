"""The What-if lab's Flink replay as tables the page draws (called by :func:`dashboard.data.whatif_flink`,
the only module pages read through).

The replay is the engine's Flink mode (:func:`monitor.watermark.flink.replay_flink`); the config comes from
:func:`monitor.watermark.whatif_config.flink_config` (called by :mod:`dashboard.data`); the events check, the delay sweep, the recommendation and the watermark mover come from
:mod:`monitor.watermark.flink.whatif`, shared with ``tidegauge whatif --engine flink``. Flink classes
behind the numbers: ``BoundedOutOfOrdernessWatermarks`` and ``WatermarksWithIdleness`` (the watermark),
``WindowOperator`` with ``EventTimeTrigger`` (firings, late elements, window state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor.watermark.events import EventsTable
from monitor.watermark.flink import LONG_MAX, LONG_MIN, FlinkConfig, replay_flink
from monitor.watermark.flink.whatif import (
    advise_flink_delay,
    check_flink_events,
    sweep_flink,
    watermark_mover,
)

__all__ = ["FlinkWhatIf", "flink_whatif"]


def _ts(ms: int | None) -> pd.Timestamp | None:
    """An epoch-ms instant as a UTC timestamp; ``None`` for unknown (-1), ``Long.MIN/MAX_VALUE``."""
    if ms is None or ms < 0 or ms in (LONG_MIN, LONG_MAX):
        return None
    return pd.Timestamp(ms, unit="ms", tz="UTC")


@dataclass(frozen=True)
class FlinkWhatIf:
    """One Flink-mode what-if replay and its delay sweep, as frames.

    Attributes:
        firings: per window firing ``processing_time, window_start, window_end, count, late_firing,
            emit_latency_s`` (processing time of the firing minus the window's end, seconds; ``None``
            without arrival times).
        late: per late element (dropped, or sent to the late side output) ``processing_time`` (its
            arrival), ``event_time``, ``line`` (of the events file), ``partition``, ``watermark``.
        state: per watermark advance ``processing_time, watermark, state_windows`` ((key, window)
            pairs in the ``WindowOperator``'s state after it); ``None`` for session windows.
        mover: the largest watermark step ``{"processing_time", "from", "to", "advance_s", "line",
            "event_time"}`` (``line``/``event_time``: the element whose timestamp is the new watermark +
            delay + 1 ms; ``None`` when not found), or ``None`` with fewer than two watermarks.
        summary: :meth:`monitor.watermark.flink.FlinkSummary.to_json`.
        sweep: per delay ``delay_s, late_elements, late_share_pct, firings, late_firings, open_windows,
            firing_delay_p95_s``.
        recommended_delay_s: the smallest swept delay meeting the target (``None``: none does) — without the
            mis-dated element when there is one.
        misdated: the mis-dated element (:func:`monitor.watermark.flink.whatif.misdated_element`): the
            ``mover`` dict of that step, or ``None``.
        recommended_delay_with_s: with a mis-dated element, the smallest swept delay meeting the target
            with it kept (``None``: none does); without one, ``recommended_delay_s``.
        has_processing_time: the events have an ``arrival_time`` column (the time axis).
        bad_rows: rows whose event time could not be read.
    """

    firings: pd.DataFrame
    late: pd.DataFrame
    state: pd.DataFrame | None
    mover: dict[str, Any] | None
    summary: dict[str, Any]
    sweep: pd.DataFrame
    recommended_delay_s: float | None
    has_processing_time: bool
    bad_rows: int
    misdated: dict[str, Any] | None = None
    recommended_delay_with_s: float | None = None


def flink_whatif(
    events: EventsTable, name: str, config: FlinkConfig, sweep_ms: list[int], target_pct: float
) -> FlinkWhatIf:
    """Replay ``events`` (from file ``name``) with ``config``, and sweep the delay over ``sweep_ms``.

    Raises:
        FlinkWhatifError: a ``batch`` or multi-input ``source`` column (naming ``name``);
        EngineConfigError: periodic watermarks or idleness without ``arrival_time``, or a bad target.
    """
    check_flink_events(events, name)
    r = replay_flink(events, config)
    arrival = events.arrival_ms
    f = r.firings
    firings = pd.DataFrame({
        "processing_time": [_ts(int(t)) for t in f.time_ms.tolist()],
        "window_start": [_ts(int(s)) for s in f.start_ms.tolist()],
        "window_end": [_ts(int(e)) for e in f.end_ms.tolist()],
        "count": f.count.tolist(),
        "late_firing": f.late_firing.tolist(),
        "emit_latency_s": [None if t < 0 else (t - e) / 1000 for t, e in zip(f.time_ms.tolist(), f.end_ms.tolist(),
                                                                              strict=True)],
    })
    rows = r.late_rows.tolist()
    late = pd.DataFrame({
        "processing_time": [_ts(int(arrival[i])) if arrival is not None else None for i in rows],
        "event_time": [_ts(int(events.event_time_us[i]) // 1000) for i in rows],
        "line": [events.line_of(i) for i in rows],
        "partition": [None if events.partition is None else int(events.partition[i]) for i in rows],
        "watermark": [_ts(int(w)) for w in r.late_row_watermarks_ms.tolist()],
    })
    state = None
    if r.state_windows is not None:
        tl = r.timeline
        state = pd.DataFrame({
            "processing_time": [_ts(int(t)) for t in tl.advance_time_ms.tolist()],
            "watermark": [_ts(int(w)) for w in tl.advance_ms.tolist()],
            "state_windows": r.state_windows.tolist(),
        })
    m = watermark_mover(events, r)
    mover = None if m is None else {
        "processing_time": _ts(m.processing_time_ms), "from": _ts(m.from_ms), "to": _ts(m.to_ms),
        "advance_s": (m.to_ms - m.from_ms) / 1000,
        "line": None if m.row is None else events.line_of(m.row),
        "event_time": None if m.row is None else _ts(int(events.event_time_us[m.row]) // 1000),
    }
    summaries = sweep_flink(events, config, sweep_ms)
    sweep = pd.DataFrame([{
        "delay_s": s.delay_ms / 1000, "late_elements": s.late_elements, "late_share_pct": 100 * s.late_share,
        "firings": s.firings, "late_firings": s.late_firings, "open_windows": s.open_windows,
        "firing_delay_p95_s": s.firing_delay_ms["p95"] / 1000 if s.firing_delay_ms and s.firing_delay_ms["count"]
        else np.nan,
    } for s in summaries])
    advice = advise_flink_delay(events, config, r, summaries, sweep_ms, target_pct)

    def seconds(ms: int | None) -> float | None:
        return None if ms is None else ms / 1000

    return FlinkWhatIf(
        firings=firings, late=late, state=state, mover=mover, summary=r.summary.to_json(), sweep=sweep,
        recommended_delay_s=seconds(advice.recommended_ms), has_processing_time=arrival is not None,
        bad_rows=len(events.bad_rows), misdated=mover if advice.misdated is not None else None,
        recommended_delay_with_s=seconds(advice.with_element_ms),
    )
