"""The one what-if configuration builder (monitor/watermark/whatif_config.py) behind ``tidegauge whatif``
and the dashboard's What-if lab, Spark and Flink modes: which window/dedup each combination of settings
makes, which it refuses and how the message names the settings (plain words, or the CLI's options)."""

from __future__ import annotations

import pytest

from monitor.watermark import Dedup, EngineConfigError, Session, Sliding, Tumbling
from monitor.watermark.whatif_config import (
    CLI_NAMES,
    WhatifConfigError,
    flink_config,
    spark_config,
    window_spec,
)


def test_window_spec_picks_the_assigner_and_refuses_mixes() -> None:
    assert window_spec(size_ms=10) == Tumbling(10)
    assert window_spec(size_ms=10, slide_ms=10) == Tumbling(10)  # a slide equal to the size tumbles
    assert window_spec(size_ms=10, slide_ms=5) == Sliding(10, 5)
    assert window_spec(size_ms=None, gap_ms=3) == Session(3)
    with pytest.raises(WhatifConfigError, match="a session gap cannot be combined with a window size / a slide"):
        window_spec(size_ms=10, gap_ms=3)
    with pytest.raises(WhatifConfigError, match="a slide needs a window size"):
        window_spec(size_ms=None, slide_ms=5)
    with pytest.raises(WhatifConfigError, match="give a window size"):
        window_spec(size_ms=None)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"size_ms": 60_000}, {"window": Tumbling(60_000), "dedup": None}),
        ({"size_ms": 60_000, "slide_ms": 30_000}, {"window": Sliding(60_000, 30_000), "dedup": None}),
        ({"gap_ms": 5_000}, {"window": Session(5_000), "dedup": None}),
        ({"dedup": "within-watermark"}, {"window": None, "dedup": Dedup("within_watermark")}),
        ({"dedup": "key,event_time"}, {"window": None, "dedup": Dedup("key_and_event_time")}),
        ({"dedup": "key"}, {"window": None, "dedup": Dedup("key")}),
    ],
)
def test_spark_config_shapes(settings: dict[str, object], expected: dict[str, object]) -> None:
    c = spark_config(delay_ms=10_000, trigger_ms=5_000, policy="max", max_future_skew_ms=3_600_000, **settings)  # type: ignore[arg-type]
    assert (c.window, c.dedup) == (expected["window"], expected["dedup"])
    assert (c.delay_ms, c.trigger_ms, c.policy, c.max_future_skew_ms) == (10_000, 5_000, "max", 3_600_000)
    assert (c.output_mode, c.no_data_batches, c.group_by_key) == ("append", True, False)  # Spark's defaults


@pytest.mark.parametrize(
    ("settings", "plain", "cli"),
    [
        ({}, "give a window size (and optionally a slide), a session gap, or dedup",
         "give --window (and optionally --slide), --session-gap, or --dedup"),
        ({"slide_ms": 5}, "a slide needs a window size", "--slide needs --window"),
        ({"size_ms": 5, "gap_ms": 5}, "a session gap cannot be combined", "--session-gap cannot be combined"),
        ({"dedup": "key", "size_ms": 5}, "dedup cannot be combined", "--dedup cannot be combined"),
        ({"dedup": "nope"}, "dedup must be key, key,event_time or within-watermark, got 'nope'",
         "--dedup must be key"),
        ({"size_ms": 5, "policy": "avg"}, "the multiple-watermark policy must be min or max", "--policy must be"),
        ({"size_ms": 5, "output_mode": "complete"}, "the output mode must be append or update",
         "--output-mode must be"),
    ],
)
def test_spark_config_refusals_name_the_settings_as_the_caller_does(
    settings: dict[str, object], plain: str, cli: str
) -> None:
    with pytest.raises(WhatifConfigError) as plain_error:
        spark_config(delay_ms=1, **settings)  # type: ignore[arg-type]
    assert plain in str(plain_error.value)
    with pytest.raises(WhatifConfigError) as cli_error:
        spark_config(delay_ms=1, names=CLI_NAMES, **settings)  # type: ignore[arg-type]
    assert cli in str(cli_error.value)


def test_spark_config_range_errors_come_from_the_engine_config() -> None:
    with pytest.raises(EngineConfigError, match="delay_ms must be >= 0"):
        spark_config(delay_ms=-1, size_ms=10)


def test_flink_config_defaults_and_the_interval_per_event_exclusion() -> None:
    c = flink_config(delay_ms=5_000, size_ms=10_000)
    assert (c.window, c.watermark_interval_ms, c.allowed_lateness_ms, c.idleness_ms) == (Tumbling(10_000), 200, 0, None)
    assert flink_config(delay_ms=1, gap_ms=3).window == Session(3)
    with pytest.raises(WhatifConfigError, match="the watermark interval and per-event watermarks exclude each other"):
        flink_config(delay_ms=1, size_ms=10, per_event_watermarks=True, watermark_interval_ms=50)
    with pytest.raises(WhatifConfigError, match="--watermark-interval and --per-event-watermarks exclude"):
        flink_config(delay_ms=1, size_ms=10, per_event_watermarks=True, watermark_interval_ms=50, names=CLI_NAMES)
    c = flink_config(delay_ms=1, size_ms=10, per_event_watermarks=True, watermark_interval_ms=50, idleness_ms=1000)
    assert c.watermark_interval_ms == 50  # it paces the idleness checks
    with pytest.raises(WhatifConfigError, match="--session-gap cannot be combined with --window / --slide"):
        flink_config(delay_ms=1, size_ms=10, gap_ms=3, names=CLI_NAMES)
