"""Flink collectors: the JobManager REST API (:class:`FlinkRestCollector`) and its response parsers."""

from collectors.flink.collector import COLLECTOR_NAME, TERMINAL_STATES, FlinkRestCollector
from collectors.flink.values import LONG_MAX, LONG_MIN, Watermark, parse_double, parse_long, parse_watermark

__all__ = [
    "COLLECTOR_NAME",
    "LONG_MAX",
    "LONG_MIN",
    "TERMINAL_STATES",
    "FlinkRestCollector",
    "Watermark",
    "parse_double",
    "parse_long",
    "parse_watermark",
]
