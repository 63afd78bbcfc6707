"""In-memory view of the newest sample per (job, scope) plus cumulative row counters.

The daemon feeds every polled sample here; the Prometheus exporter and the dashboard's live view read it.
Counters (``input_rows_total``, ``dropped_by_watermark_total``) are sums of per-batch values, counted once
per (job, run, batch id, scope) so a batch read twice (event log and listener) is not double counted.
Thread-safe: the scheduler's worker threads write while the HTTP server's threads read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from monitor.model import Engine, Sample, SampleKind, Scope

__all__ = ["LatestSamples", "SeriesKey", "SeriesState"]


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """Identity of one exported series: engine, job id and scope (run ids change on restart; series don't)."""

    engine: Engine
    job_id: str
    scope: Scope


@dataclass(slots=True)
class SeriesState:
    """Newest sample of a series and its cumulative counters."""

    latest: Sample
    input_rows_total: int = 0
    dropped_by_watermark_total: int = 0


class LatestSamples:
    """Newest sample per series, with counters.

    Args:
        max_batches_remembered: how many (run, batch) ids per series are remembered for de-duplication.
    """

    def __init__(self, max_batches_remembered: int = 256) -> None:
        self._lock = threading.Lock()
        self._series: dict[SeriesKey, SeriesState] = {}
        self._seen: dict[SeriesKey, OrderedDict[tuple[str | None, int], None]] = {}
        self._max = max_batches_remembered

    def update(self, samples: Iterable[Sample]) -> None:
        """Record samples; lifecycle samples (started/terminated, batch starts) update nothing but the job's presence."""
        with self._lock:
            for s in samples:
                if s.kind in (SampleKind.STARTED, SampleKind.TERMINATED, SampleKind.BATCH_STARTED):
                    continue
                key = SeriesKey(s.job.engine, s.job.job_id, s.scope)
                state = self._series.get(key)
                if state is None:
                    state = SeriesState(latest=s)
                    self._series[key] = state
                elif s.observed_at >= state.latest.observed_at:
                    state.latest = s
                if s.batch_id is not None and s.kind is SampleKind.PROGRESS:
                    seen = self._seen.setdefault(key, OrderedDict())
                    mark = (s.job.run_id, s.batch_id)
                    if mark in seen:
                        continue
                    seen[mark] = None
                    if len(seen) > self._max:
                        seen.popitem(last=False)
                state.input_rows_total += s.num_input_rows or 0
                state.dropped_by_watermark_total += s.dropped_by_watermark or 0

    def snapshot(self) -> list[tuple[SeriesKey, SeriesState]]:
        """A consistent copy of every series."""
        with self._lock:
            return [
                (k, SeriesState(v.latest, v.input_rows_total, v.dropped_by_watermark_total))
                for k, v in self._series.items()
            ]

    def forget_job(self, engine: Engine, job_id: str) -> None:
        """Drop a job's series (e.g. after retention removed it), so stale gauges stop being exported."""
        with self._lock:
            for key in [k for k in self._series if k.engine is engine and k.job_id == job_id]:
                del self._series[key]
                self._seen.pop(key, None)
