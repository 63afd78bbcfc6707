"""Scripted streams for engine tests, in the style of Beam's ``TestStream``.

``stream([100, 103], [112, None], [])`` builds an :class:`EventsTable` whose rows are listed batch by
batch; numbers are **seconds** since the epoch (so expected watermarks read as seconds*1000), ``None``
is a null event time, and a dict gives extra columns: ``{"t": 100, "key": "a", "source": "s1"}``.
"""

from __future__ import annotations

from typing import Any

from monitor.watermark import BatchResult, EventsTable

SEC_US = 1_000_000


def stream(*batches: list[Any], columns: tuple[str, ...] = ()) -> EventsTable:
    """One list per data batch (values: seconds, ``None`` or dicts with ``t`` and extra columns)."""
    records: list[dict[str, Any]] = []
    extra = set(columns)
    for b in batches:
        for item in b:
            if isinstance(item, dict):
                extra |= set(item) - {"t"}
    for i, b in enumerate(batches):
        for item in b:
            d = item if isinstance(item, dict) else {"t": item}
            t = d["t"]
            rec: dict[str, Any] = {"event_time": None if t is None else round(t * SEC_US), "batch": i}
            for c in extra:
                rec[c] = d.get(c, 0 if c in ("partition", "arrival_ms") else "")
            records.append(rec)
    return EventsTable.from_records(records)


def summary_rows(batches: list[BatchResult]) -> list[tuple[int, str, int, int, int, int]]:
    """``(batch_id, kind, watermark_s, input_rows, late_rows, state_rows)`` per batch (watermark in s)."""
    return [
        (b.batch_id, b.kind, b.watermark_ms // 1000, b.input_rows, b.late_row_count, b.state_rows)
        for b in batches
    ]


def emitted_s(b: BatchResult) -> list[tuple[int, int, int]]:
    """Emitted windows of a batch as ``(start_s, end_s, count)``."""
    return [(w.start_ms // 1000, w.end_ms // 1000, w.count) for w in b.emitted.to_list()]
