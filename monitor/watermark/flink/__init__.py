"""Flink mode of the reference watermark engine: what a Flink DataStream job would do with a stream.

Modelled job: ``assignTimestampsAndWatermarks(forBoundedOutOfOrderness(delay)[.withIdleness(t)])``
with one generator per partition/split, ``keyBy(key).window(Tumbling|Sliding|EventTimeSession)
.allowedLateness(L)[.sideOutputLateData(tag)]`` and a counting window function. Times are integer
epoch milliseconds; ``Long.MIN_VALUE`` is the watermark before the first one.

Use::

    config = FlinkConfig(delay_ms=5_000, window=Tumbling(10_000), allowed_lateness_ms=5_000,
                         idleness_ms=30_000, watermark_interval_ms=200)
    result = replay_flink(events, config)     # events: monitor.watermark.EventsTable
    result.firings, result.summary.late_records_dropped, result.to_json()

The rules and the Flink classes they come from are in :mod:`.watermarks` and :mod:`.operator`; the
differential tests against a real Flink 2.3.0 are in ``tests/differential/flink``.
"""

from monitor.watermark.flink.config import LONG_MAX, LONG_MIN, FlinkConfig
from monitor.watermark.flink.operator import Firings, WindowOutcome, run_windows
from monitor.watermark.flink.replay import FlinkReplay, FlinkSummary, replay_flink
from monitor.watermark.flink.watermarks import (
    IdlePeriod,
    WatermarkTimeline,
    periodic_ticks,
    watermark_timeline,
    watermark_timeline_stepwise,
)

__all__ = [
    "LONG_MAX",
    "LONG_MIN",
    "Firings",
    "FlinkConfig",
    "FlinkReplay",
    "FlinkSummary",
    "IdlePeriod",
    "WatermarkTimeline",
    "WindowOutcome",
    "periodic_ticks",
    "replay_flink",
    "run_windows",
    "watermark_timeline",
    "watermark_timeline_stepwise",
]
