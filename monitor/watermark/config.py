"""Configuration of a what-if replay: the query shape (window or dedup), the watermark and the trigger."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from monitor.errors import ConfigError

if TYPE_CHECKING:
    from monitor.watermark.join import StreamJoin

__all__ = [
    "MAX_DELAY_MS",
    "Dedup",
    "EngineConfigError",
    "Session",
    "Sliding",
    "Tumbling",
    "WatermarkConfig",
    "WindowSpec",
]

OutputMode = Literal["append", "update"]
Policy = Literal["min", "max"]
DedupMode = Literal["key", "key_and_event_time", "within_watermark"]


#: Largest delay, window, gap, trigger or skew accepted (ms): about 73,000 years, so that every
#: watermark and window bound the engine computes in microseconds stays inside int64.
MAX_DELAY_MS = (1 << 61) // 1000


class EngineConfigError(ConfigError):
    """An :class:`WatermarkConfig` (or a window/dedup spec) is invalid; the message names the field."""


@dataclass(frozen=True, slots=True)
class Tumbling:
    """``window(event_time, size)``: tumbling windows ``[start, start + size_ms)``.

    ``offset_ms`` is Spark's ``startTime`` argument (``0 <= |offset_ms| < size_ms``). Window starts are
    ``t - floorMod(t - offset, size)`` (Spark 3.4+ ``TimeWindowing``, which fixed negative timestamps).
    """

    size_ms: int
    offset_ms: int = 0

    @property
    def slide_ms(self) -> int:
        """Tumbling windows slide by their size."""
        return self.size_ms


@dataclass(frozen=True, slots=True)
class Sliding:
    """``window(event_time, size, slide)``: each row falls in up to ``ceil(size / slide)`` windows.

    Spark (``TimeWindowing``) expands every row into ``ceil(size/slide)`` candidate windows and keeps
    those with ``start <= t < end``; late filtering and eviction then apply per window.
    """

    size_ms: int
    slide_ms: int
    offset_ms: int = 0


@dataclass(frozen=True, slots=True)
class Session:
    """``session_window(event_time, gap)`` grouped by the ``key`` column.

    Each row starts as the session ``[t, t + gap)``; sessions of one key merge when the next start is
    ``<=`` the current end (``MergingSessionsIterator``). Only append mode is modelled (Spark's
    ``SessionWindowStateStoreSaveExec`` supports append and complete).
    """

    gap_ms: int


WindowSpec = Tumbling | Sliding | Session


@dataclass(frozen=True, slots=True)
class Dedup:
    """Streaming deduplication on the ``key`` column.

    ``mode``:
        ``"key"``: ``dropDuplicates(["key"])`` on a watermarked stream. Rows whose event time is
            ``<=`` the watermark are still dropped as late, but state is never evicted (the key has no
            event-time column: ``watermarkPredicateForKeys`` is empty).
        ``"key_and_event_time"``: ``dropDuplicates(["key", "event_time"])``; state for a (key, time)
            is evicted once ``event_time <= watermark``.
        ``"within_watermark"``: ``dropDuplicatesWithinWatermark(["key"])`` (Spark 3.5+); the first row
            of a key stores ``expiresAt = event_time + delay``; the entry is evicted when
            ``watermark >= expiresAt`` (``StreamingDeduplicateWithinWatermarkExec``).
    """

    mode: DedupMode = "key_and_event_time"


@dataclass(frozen=True, slots=True)
class WatermarkConfig:
    """What to replay. All durations are integer milliseconds.

    Attributes:
        delay_ms: ``withWatermark`` delay threshold (``>= 0``).
        window: a :class:`Tumbling`, :class:`Sliding` or :class:`Session` spec, or ``None`` when
            ``dedup`` is set. Exactly one of ``window`` / ``dedup`` must be given.
        dedup: a :class:`Dedup` spec or ``None``.
        group_by_key: aggregate per (``key``, window) instead of per window (tumbling/sliding only;
            session windows always group by ``key``).
        output_mode: ``"append"`` (windows emitted once, when evicted) or ``"update"`` (windows
            emitted in every batch that changed them; evicted silently). Ignored for dedup.
        policy: ``spark.sql.streaming.multipleWatermarkPolicy`` (``"min"`` default, or ``"max"``).
        trigger_ms: processing-time trigger interval; needs an ``arrival_ms`` column and is ignored
            when the events carry an explicit ``batch`` column.
        max_rows_per_batch: ``maxOffsetsPerTrigger``-style cap on rows per data batch.
        max_future_skew_ms: model ``filter(event_time <= current_timestamp() + skew)`` placed before
            ``withWatermark``; needs batch processing times (``arrival_ms``).
        no_data_batches: ``spark.sql.streaming.noDataMicroBatches.enabled`` (default ``True``).
        backlog: for events with a ``batch`` column and no arrival times: the query started on these
            batches already waiting, read one per trigger (``maxFilesPerTrigger=1`` over files written
            before the start), so data waits at every trigger and a no-data batch can run only after
            the last; ``False`` (default): a live query caught up between batches (see
            :mod:`monitor.watermark.plan`). Arrival times, when the events have them, decide instead.
        sources: input names known up front, in plan order (the first one with rows provides the
            batch's reported ``eventTime`` stats). Sources seen in the events are appended in order of
            first appearance. A declared source that never has a row holds the ``min`` policy at 0.
        source_delays_ms: per-source delay overriding ``delay_ms`` (each input has its own
            ``withWatermark``).
        keep_late_rows: keep per-row late details (``BatchResult.late_rows``); sweeps turn it off.
        join: a :class:`monitor.watermark.join.StreamJoin` (stream-stream join of two inputs),
            instead of ``window`` / ``dedup``; ``sources`` should then be ``(left, right)``.
        spark_version: ``(major, minor)`` of the Spark whose behaviour to follow where it changed
            (:func:`monitor.versions.late_filter_uses_previous_batch`: before 3.4 late rows are filtered
            against the batch's own watermark); ``None``: the newest (4.x).
    """

    delay_ms: int
    window: WindowSpec | None = None
    dedup: Dedup | None = None
    group_by_key: bool = False
    output_mode: OutputMode = "append"
    policy: Policy = "min"
    trigger_ms: int | None = None
    max_rows_per_batch: int | None = None
    max_future_skew_ms: int | None = None
    no_data_batches: bool = True
    backlog: bool = False
    sources: tuple[str, ...] = ()
    source_delays_ms: Mapping[str, int] = field(default_factory=dict)
    keep_late_rows: bool = True
    join: StreamJoin | None = None
    spark_version: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check field values and combinations.

        Raises:
            EngineConfigError: naming the field and the allowed values.
        """
        if self.delay_ms < 0:
            raise EngineConfigError(f"delay_ms must be >= 0, got {self.delay_ms}")
        w0 = self.window
        sizes = {
            "delay_ms": self.delay_ms,
            "trigger_ms": self.trigger_ms,
            "max_future_skew_ms": self.max_future_skew_ms,
            "window size": getattr(w0, "size_ms", None),
            "window slide": getattr(w0, "slide_ms", None),
            "session gap": getattr(w0, "gap_ms", None),
            **{f"source_delays_ms[{k!r}]": v for k, v in self.source_delays_ms.items()},
        }
        for what, v in sizes.items():
            if v is not None and abs(v) > MAX_DELAY_MS:
                raise EngineConfigError(
                    f"{what} must be at most {MAX_DELAY_MS} ms (about 73,000 years), got {v}"
                )
        if sum(x is not None for x in (self.window, self.dedup, self.join)) != 1:
            raise EngineConfigError(
                "exactly one of window (tumbling/sliding/session), dedup or join must be set"
            )
        if self.join is not None:
            self.join.validate()
            if self.output_mode != "append":
                raise EngineConfigError(
                    "a stream-stream join runs only in output_mode='append' (Spark rejects update mode)"
                )
        if self.policy not in ("min", "max"):
            raise EngineConfigError(f"policy must be 'min' or 'max', got {self.policy!r}")
        if self.output_mode not in ("append", "update"):
            raise EngineConfigError(f"output_mode must be 'append' or 'update', got {self.output_mode!r}")
        w = self.window
        if isinstance(w, Tumbling):
            if w.size_ms <= 0:
                raise EngineConfigError(f"window size must be > 0 ms, got {w.size_ms}")
            if abs(w.offset_ms) >= w.size_ms:
                raise EngineConfigError("window offset (startTime) must be smaller than the window size")
        elif isinstance(w, Sliding):
            if w.size_ms <= 0 or w.slide_ms <= 0:
                raise EngineConfigError("window size and slide must be > 0 ms")
            if w.slide_ms > w.size_ms:
                raise EngineConfigError(
                    f"slide ({w.slide_ms} ms) must be <= window size ({w.size_ms} ms), as Spark requires"
                )
            if abs(w.offset_ms) >= w.slide_ms:
                raise EngineConfigError("window offset (startTime) must be smaller than the slide")
        elif isinstance(w, Session):
            if w.gap_ms <= 0:
                raise EngineConfigError(f"session gap must be > 0 ms, got {w.gap_ms}")
            if self.output_mode != "append":
                raise EngineConfigError("session windows support only output_mode='append' here")
        elif w is not None:
            raise EngineConfigError(f"unknown window spec {w!r}")
        modes = ("key", "key_and_event_time", "within_watermark")
        if self.dedup is not None and self.dedup.mode not in modes:
            raise EngineConfigError(
                f"dedup mode must be key, key_and_event_time or within_watermark, got {self.dedup.mode!r}"
            )
        if self.trigger_ms is not None and self.trigger_ms <= 0:
            raise EngineConfigError(f"trigger_ms must be > 0, got {self.trigger_ms}")
        if self.max_rows_per_batch is not None and self.max_rows_per_batch <= 0:
            raise EngineConfigError(f"max_rows_per_batch must be > 0, got {self.max_rows_per_batch}")
        if self.max_future_skew_ms is not None and self.max_future_skew_ms < 0:
            raise EngineConfigError(f"max_future_skew_ms must be >= 0, got {self.max_future_skew_ms}")
        for name, d in self.source_delays_ms.items():
            if d < 0:
                raise EngineConfigError(f"source_delays_ms[{name!r}] must be >= 0, got {d}")

    def delay_for(self, source: str) -> int:
        """The watermark delay (ms) of input ``source``."""
        return self.source_delays_ms.get(source, self.delay_ms)
