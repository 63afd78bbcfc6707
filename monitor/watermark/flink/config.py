"""Configuration of a Flink-mode replay: watermark strategy, window, allowed lateness, end of input."""

from __future__ import annotations

from dataclasses import dataclass

from monitor.watermark.config import EngineConfigError, Session, Sliding, Tumbling

__all__ = ["LONG_MAX", "LONG_MIN", "FlinkConfig"]

LONG_MIN = -(2**63)  # Long.MIN_VALUE: the watermark before the first one (and "no watermark")
LONG_MAX = 2**63 - 1  # Long.MAX_VALUE: the end-of-input watermark of a bounded source

@dataclass(frozen=True, slots=True)
class FlinkConfig:
    """What to replay in Flink mode. All durations and times are integer milliseconds.

    The modelled job is ``source.assignTimestampsAndWatermarks(strategy)`` (or ``fromSource`` with the
    strategy and per-split generators) ``.keyBy(key).window(assigner).allowedLateness(L)
    [.sideOutputLateData(tag)].process(count)``.

    Attributes:
        delay_ms: ``WatermarkStrategy.forBoundedOutOfOrderness(delay)``; ``0`` is
            ``forMonotonousTimestamps()`` (the same generator with no delay).
        window: the window assigner: :class:`Tumbling` (``TumblingEventTimeWindows.of(size, offset)``),
            :class:`Sliding` (``SlidingEventTimeWindows.of(size, slide, offset)``; Flink allows
            ``slide > size``) or :class:`Session` (``EventTimeSessionWindows.withGap(gap)``).
        allowed_lateness_ms: ``WindowedStream.allowedLateness``.
        idleness_ms: ``WatermarkStrategy.withIdleness(timeout)``; ``None``: no idleness detection.
        watermark_interval_ms: ``pipeline.auto-watermark-interval`` (200 ms by default): periodic
            ``onPeriodicEmit`` calls on processing time (the events' ``arrival_ms``); also the cadence of
            the idleness checks in per-event mode.
        per_event_watermarks: a generator that emits ``max - delay - 1`` in ``onEvent`` (punctuated)
            instead of periodically.
        late_side_output: ``sideOutputLateData``: dropped elements go to the late side output instead
            of being counted in ``numLateRecordsDropped``.
        end_of_input: the input is bounded: after the last event (and the last tick) the source emits
            ``Long.MAX_VALUE``, which fires every pending window (as with ``fromData`` / a bounded
            ``FileSource``).
        start_ms: processing time the job starts; the first periodic tick is at ``start_ms + interval``
            (``TimestampsAndWatermarksOperator.open`` registers ``now + interval``). Default: the first
            row's arrival time.
        run_until_ms: processing time the replay runs until (ticks continue after the last arrival up
            to and including this time). Default: one interval after the last arrival.
        partitions: partitions (splits) known up front; a declared partition that never has a row
            holds the watermark at ``Long.MIN_VALUE`` unless idleness marks it idle.
        keep_late_rows: keep the indices of dropped / side-output rows (sweeps turn it off).
        flink_version: ``(major, minor)`` of the Flink whose behaviour to follow where it changed across
            2.x (:func:`monitor.versions.flushes_when_all_idle`); ``None``: the newest modelled
            (:data:`monitor.versions.NEWEST_MODELLED_FLINK`).
    """

    delay_ms: int
    window: Tumbling | Sliding | Session
    allowed_lateness_ms: int = 0
    idleness_ms: int | None = None
    watermark_interval_ms: int = 200
    per_event_watermarks: bool = False
    late_side_output: bool = False
    end_of_input: bool = False
    start_ms: int | None = None
    run_until_ms: int | None = None
    partitions: tuple[int, ...] = ()
    keep_late_rows: bool = True
    flink_version: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check field values (the checks Flink's constructors make, plus ours).

        Raises:
            EngineConfigError: naming the field.
        """
        if self.delay_ms < 0:
            raise EngineConfigError(
                f"delay_ms must be >= 0 (maxOutOfOrderness cannot be negative), got {self.delay_ms}"
            )
        if self.allowed_lateness_ms < 0:
            raise EngineConfigError(f"allowed_lateness_ms must be >= 0, got {self.allowed_lateness_ms}")
        if self.idleness_ms is not None and self.idleness_ms <= 0:
            raise EngineConfigError(
                f"idleness_ms must be > 0 (idleTimeout must be greater than zero), got {self.idleness_ms}"
            )
        if self.flink_version is not None and self.flink_version[0] != 2:
            raise EngineConfigError(f"flink_version must be a 2.x release, got {self.flink_version}")
        if self.watermark_interval_ms <= 0:
            raise EngineConfigError(f"watermark_interval_ms must be > 0, got {self.watermark_interval_ms}")
        w = self.window
        if isinstance(w, Tumbling):
            if w.size_ms <= 0 or abs(w.offset_ms) >= w.size_ms:
                raise EngineConfigError("TumblingEventTimeWindows: size must be > 0 and |offset| < size")
        elif isinstance(w, Sliding):
            if w.size_ms <= 0 or w.slide_ms <= 0 or abs(w.offset_ms) >= w.slide_ms:
                raise EngineConfigError(
                    "SlidingEventTimeWindows: size and slide must be > 0 and |offset| < slide"
                )
        elif isinstance(w, Session):
            if w.gap_ms <= 0:
                raise EngineConfigError(f"EventTimeSessionWindows: gap must be > 0 ms, got {w.gap_ms}")
        else:
            raise EngineConfigError(f"unknown window spec {w!r}")
