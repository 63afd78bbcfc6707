"""The one what-if configuration builder: plain settings (integer milliseconds, option strings) to the
engine's :class:`~monitor.watermark.WatermarkConfig` (Spark mode) or
:class:`~monitor.watermark.flink.FlinkConfig` (Flink mode).

``tidegauge whatif`` (``--engine spark|flink``) and the dashboard's What-if lab both call these; each only
turns its own inputs (duration strings, number widgets in seconds) into milliseconds. Error messages name a
setting the way the caller's user knows it: pass ``names`` (e.g. :data:`CLI_NAMES`, ``{"window":
"--window", ...}``); the defaults (:data:`NAMES`) are plain words.

Semantics followed:

* window shape: Spark's ``window(event_time, size[, slide])`` / ``session_window(event_time, gap)``,
  Flink's ``TumblingEventTimeWindows.of(size)`` / ``SlidingEventTimeWindows.of(size, slide)`` /
  ``EventTimeSessionWindows.withGap(gap)``; a slide equal to the size is a tumbling window.
* Spark dedup: ``dropDuplicates(["key"])`` (``key``), ``dropDuplicates(["key", "event_time"])``
  (``key_and_event_time``, also ``key,event_time``), ``dropDuplicatesWithinWatermark(["key"])``
  (``within_watermark``, also ``within-watermark``).
* Flink: ``WatermarkStrategy.forBoundedOutOfOrderness(delay)[.withIdleness(idleness)]`` with
  ``pipeline.auto-watermark-interval`` (:data:`DEFAULT_WATERMARK_INTERVAL_MS` when not given) or a
  per-event generator, ``allowedLateness``, ``sideOutputLateData``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Final

from monitor.versions import VersionError, parse_flink_version, parse_spark_version
from monitor.watermark.chain import ChainConfig, ThenWindow
from monitor.watermark.config import (
    Dedup,
    DedupMode,
    EngineConfigError,
    OutputMode,
    Policy,
    Session,
    Sliding,
    Tumbling,
    WatermarkConfig,
    WindowSpec,
)
from monitor.watermark.flink.config import FlinkConfig
from monitor.watermark.join import JOIN_TYPES, JoinType, StreamJoin

__all__ = [
    "CLI_NAMES",
    "DEDUP_MODES",
    "DEFAULT_WATERMARK_INTERVAL_MS",
    "NAMES",
    "WhatifConfigError",
    "chain_config",
    "flink_config",
    "join_spec",
    "spark_config",
    "window_spec",
]

#: ``pipeline.auto-watermark-interval``'s default (Flink's ``PipelineOptions.AUTO_WATERMARK_INTERVAL``).
DEFAULT_WATERMARK_INTERVAL_MS: Final = 200

#: Dedup modes as written by a user -> :class:`~monitor.watermark.Dedup` mode.
DEDUP_MODES: Final[Mapping[str, DedupMode]] = MappingProxyType({
    "key": "key",
    "key,event_time": "key_and_event_time",
    "key_and_event_time": "key_and_event_time",
    "within-watermark": "within_watermark",
    "within_watermark": "within_watermark",
})

#: How the settings are named in messages by default.
NAMES: Final[Mapping[str, str]] = MappingProxyType({
    "delay": "the delay",
    "window": "a window size",
    "slide": "a slide",
    "session_gap": "a session gap",
    "dedup": "dedup",
    "policy": "the multiple-watermark policy",
    "output_mode": "the output mode",
    "watermark_interval": "the watermark interval",
    "per_event_watermarks": "per-event watermarks",
    "idleness": "an idleness timeout",
    "join": "the join type",
    "join_inputs": "the join's two inputs",
    "join_lower": "the lower bound",
    "join_upper": "the upper bound",
    "then_window": "a later window",
    "then_group_by_key": "grouping later windows by key",
    "spark_version": "the Spark version",
    "flink_version": "the Flink version",
})

#: How ``tidegauge whatif`` names them (its options).
CLI_NAMES: Final[Mapping[str, str]] = MappingProxyType({
    "delay": "--delay",
    "window": "--window",
    "slide": "--slide",
    "session_gap": "--session-gap",
    "dedup": "--dedup",
    "policy": "--policy",
    "output_mode": "--output-mode",
    "watermark_interval": "--watermark-interval",
    "per_event_watermarks": "--per-event-watermarks",
    "idleness": "--idleness",
    "flink_version": "--flink-version",
    "spark_version": "--spark-version",
    "join": "--join",
    "join_inputs": "--join-inputs",
    "join_lower": "--join-lower",
    "join_upper": "--join-upper",
    "then_window": "--then-window",
    "then_group_by_key": "--then-group-by-key",
})


class WhatifConfigError(EngineConfigError):
    """What-if settings that do not fit together or are out of range (the message names them)."""


def window_spec(
    *,
    size_ms: int | None,
    slide_ms: int | None = None,
    gap_ms: int | None = None,
    names: Mapping[str, str] = NAMES,
) -> WindowSpec:
    """The window: a session window when ``gap_ms`` is given, else a sliding one (a tumbling one when the
    slide equals the size or is not given).

    Raises:
        WhatifConfigError: a gap together with a size or slide, a slide without a size, or neither a size
            nor a gap.
    """
    if gap_ms is not None:
        if size_ms is not None or slide_ms is not None:
            raise WhatifConfigError(f"{names['session_gap']} cannot be combined with {names['window']} / "
                                    f"{names['slide']}")
        return Session(gap_ms)
    if size_ms is None:
        if slide_ms is not None:
            raise WhatifConfigError(f"{names['slide']} needs {names['window']}")
        raise WhatifConfigError(f"give {names['window']} (and optionally {names['slide']}) or {names['session_gap']}")
    if slide_ms is None or slide_ms == size_ms:
        return Tumbling(size_ms)
    return Sliding(size_ms, slide_ms)


def spark_config(
    *,
    delay_ms: int,
    size_ms: int | None = None,
    slide_ms: int | None = None,
    gap_ms: int | None = None,
    dedup: str | None = None,
    trigger_ms: int | None = None,
    policy: str = "min",
    output_mode: str = "append",
    max_future_skew_ms: int | None = None,
    max_rows_per_batch: int | None = None,
    group_by_key: bool = False,
    no_data_batches: bool = True,
    backlog: bool = False,
    source_delays_ms: Mapping[str, int] | None = None,
    join: StreamJoin | None = None,
    spark_version: str | None = None,
    names: Mapping[str, str] = NAMES,
) -> WatermarkConfig:
    """A Spark-mode config: ``withWatermark(delay)`` then a window (``size_ms`` [+ ``slide_ms``] or
    ``gap_ms``) or a dedup (``dedup``: a key of :data:`DEDUP_MODES`), a ``ProcessingTimeTrigger`` of
    ``trigger_ms`` (``None``: the events' own batches), ``spark.sql.streaming.multipleWatermarkPolicy``
    ``policy`` (``min``/``max``), ``output_mode`` (``append``/``update``), a modelled
    ``filter(event_time <= current_timestamp() + skew)`` of ``max_future_skew_ms``, a
    ``maxOffsetsPerTrigger``-style ``max_rows_per_batch``, and ``spark.sql.streaming.noDataMicroBatches.enabled``.
    ``backlog``: without arrival times, the query started on the events' batches already waiting
    (:attr:`WatermarkConfig.backlog`).
    ``source_delays_ms``: each named input's own ``withWatermark`` delay (others take ``delay_ms``).
    ``join``: a stream-stream join (:func:`join_spec`) instead of a window or dedup; its two inputs
    become the config's ``sources`` (left first). ``spark_version`` (``"3.3"``; ``None``: the newest) picks
    the behaviour where Spark releases differ (:attr:`WatermarkConfig.spark_version`).

    Raises:
        WhatifConfigError: settings that do not fit together, an unknown dedup mode, policy or output mode.
        EngineConfigError: a value out of range (:meth:`WatermarkConfig.validate`).
    """
    spec: WindowSpec | None = None
    if join is not None:
        if dedup is not None or size_ms is not None or slide_ms is not None or gap_ms is not None:
            raise WhatifConfigError(
                f"{names['join']} cannot be combined with {names['window']} / {names['session_gap']} / "
                f"{names['dedup']}: whatif replays the join alone (its output rows are what it reports)"
            )
    elif dedup is not None:
        if dedup not in DEDUP_MODES:
            raise WhatifConfigError(f"{names['dedup']} must be key, key,event_time or within-watermark, got {dedup!r}")
        if size_ms is not None or slide_ms is not None or gap_ms is not None:
            raise WhatifConfigError(f"{names['dedup']} cannot be combined with {names['window']} / {names['session_gap']}")
    elif size_ms is None and slide_ms is None and gap_ms is None:
        raise WhatifConfigError(
            f"give {names['window']} (and optionally {names['slide']}), {names['session_gap']}, or {names['dedup']}"
        )
    else:
        spec = window_spec(size_ms=size_ms, slide_ms=slide_ms, gap_ms=gap_ms, names=names)
    if policy not in ("min", "max"):
        raise WhatifConfigError(f"{names['policy']} must be min or max, got {policy!r}")
    if output_mode not in ("append", "update"):
        raise WhatifConfigError(f"{names['output_mode']} must be append or update, got {output_mode!r}")
    pol: Policy = "min" if policy == "min" else "max"
    mode: OutputMode = "append" if output_mode == "append" else "update"
    return WatermarkConfig(
        delay_ms=delay_ms,
        window=spec,
        dedup=None if dedup is None else Dedup(DEDUP_MODES[dedup]),
        group_by_key=group_by_key,
        output_mode=mode,
        policy=pol,
        trigger_ms=trigger_ms,
        max_rows_per_batch=max_rows_per_batch,
        max_future_skew_ms=max_future_skew_ms,
        no_data_batches=no_data_batches,
        backlog=backlog,
        sources=() if join is None else (join.left, join.right),
        source_delays_ms=dict(source_delays_ms or {}),
        join=join,
        spark_version=None if spark_version is None else _version(parse_spark_version, spark_version, names, 'spark_version'),
    )


def _version(parse: Callable[[str], tuple[int, int]], text: str, names: Mapping[str, str], key: str) -> tuple[int, int]:
    """``parse(text)`` (:func:`monitor.versions.parse_spark_version` / ``parse_flink_version``), its error
    prefixed with the option's name (``names[key]``)."""
    try:
        return parse(text)
    except VersionError as exc:
        raise EngineConfigError(f"{names[key]}: {exc}") from None


def join_spec(
    *,
    join_type: str,
    inputs: Sequence[str],
    lower_ms: int | None = None,
    upper_ms: int | None = None,
    names: Mapping[str, str] = NAMES,
) -> StreamJoin:
    """A stream-stream join of two inputs on ``key`` (Spark's ``StreamingSymmetricHashJoinExec``, as
    :class:`~monitor.watermark.join.StreamJoin` models it).

    Args:
        join_type: one of :data:`~monitor.watermark.join.JOIN_TYPES`; ``-`` may stand for ``_``
            (``left-outer``).
        inputs: ``(left, right)``: the ``source`` names of the two sides.
        lower_ms: ``left.event_time >= right.event_time - lower_ms`` (ms, may be negative; ``None``: no
            such conjunct). Bounds the left side's state.
        upper_ms: ``left.event_time <= right.event_time + upper_ms`` (``None``: none). Bounds the right
            side's state.

    Raises:
        WhatifConfigError: an unknown join type, not exactly two different inputs, or a join Spark
            rejects (an outer side without the bound it needs: the message gives the condition to add
            and the setting that adds it), named as in ``names``.
    """
    jt = join_type.replace("-", "_")
    if jt not in JOIN_TYPES:
        raise WhatifConfigError(
            f"{names['join']} must be one of {', '.join(t.replace('_', '-') for t in JOIN_TYPES)}, "
            f"got {join_type!r}"
        )
    sides = [s.strip() for s in inputs]
    if len(sides) != 2 or not all(sides):
        raise WhatifConfigError(
            f"{names['join_inputs']} must name the two sides as LEFT,RIGHT (their values in the events' "
            f"source column), got {','.join(inputs)!r}: "
            + ("a side is missing" if len(sides) < 2 or not all(sides) else "a join has exactly two sides")
        )
    if sides[0] == sides[1]:
        raise WhatifConfigError(f"{names['join_inputs']} must name two different inputs, got {sides[0]!r} twice")
    kind: JoinType = JOIN_TYPES[JOIN_TYPES.index(jt)]
    spec = StreamJoin(left=sides[0], right=sides[1], join_type=kind, lower_ms=lower_ms, upper_ms=upper_ms)
    try:
        spec.validate()
    except EngineConfigError as e:
        raise WhatifConfigError(
            f"{names['join']} {join_type}: {e} ({names['join_lower']} X is {spec.left}.event_time >= "
            f"{spec.right}.event_time - X, {names['join_upper']} Y is {spec.left}.event_time <= "
            f"{spec.right}.event_time + Y)"
        ) from e
    return spec


def chain_config(
    first: WatermarkConfig,
    *,
    then_windows_ms: Sequence[tuple[int, int | None]],
    then_group_by_key: bool = False,
    allow_multiple: bool = True,
    names: Mapping[str, str] = NAMES,
) -> ChainConfig:
    """A chain of stateful operators (:class:`~monitor.watermark.chain.ChainConfig`): ``first``'s window
    aggregation (append mode) or dedup, then one window aggregation per ``then_windows_ms`` entry
    ``(size_ms, slide_ms or None)`` over the previous operator's output (``window_time`` of its windows,
    or the rows a dedup passed), each grouped by key too when ``then_group_by_key``.
    ``allow_multiple``: ``spark.sql.streaming.statefulOperator.allowMultiple``.

    Raises:
        WhatifConfigError: no later window, a later window that does not parse as a window, or a chain
            Spark rejects or the engine does not model (session window or update mode first, grouping by
            a key operator 1 does not output), named as in ``names``.
    """
    if not then_windows_ms:
        raise WhatifConfigError(f"a chain needs at least one {names['then_window']}")
    stages = []
    for size_ms, slide_ms in then_windows_ms:
        w = window_spec(size_ms=size_ms, slide_ms=slide_ms, names=names)
        assert isinstance(w, Tumbling | Sliding)
        stages.append(ThenWindow(w, group_by_key=then_group_by_key))
    if then_group_by_key and not (first.group_by_key or first.dedup is not None):
        raise WhatifConfigError(
            f"{names['then_group_by_key']} needs operator 1 to output the key: group it by key too, or "
            "make it a dedup"
        )
    try:
        return ChainConfig(first=first, then=tuple(stages), allow_multiple=allow_multiple)
    except EngineConfigError as e:  # operator 1 Spark cannot chain (session window, update mode)
        raise WhatifConfigError(
            f"{names['then_window']}: {e} (operator 1 is {names['window']} [{names['slide']}], {names['dedup']} or "
            f"{names['join']})"
        ) from e


def flink_config(
    *,
    delay_ms: int,
    size_ms: int | None = None,
    slide_ms: int | None = None,
    gap_ms: int | None = None,
    allowed_lateness_ms: int = 0,
    idleness_ms: int | None = None,
    watermark_interval_ms: int | None = None,
    per_event_watermarks: bool = False,
    late_side_output: bool = False,
    end_of_input: bool = False,
    flink_version: str | None = None,
    names: Mapping[str, str] = NAMES,
) -> FlinkConfig:
    """A Flink-mode config: ``forBoundedOutOfOrderness(delay)[.withIdleness(idleness)]`` emitted every
    ``watermark_interval_ms`` (``None``: 200 ms) or per event, then a window (``size_ms`` [+ ``slide_ms``]
    or ``gap_ms``) with ``allowedLateness`` and optionally ``sideOutputLateData``; ``end_of_input``: the
    source is bounded (``Long.MAX_VALUE`` fires every window at the end); ``flink_version`` (``"2.1"``;
    ``None``: the newest modelled) picks the behaviour where Flink 2.x releases differ
    (:func:`monitor.watermark.flink.config.flushes_when_all_idle`).

    Raises:
        WhatifConfigError: the window settings do not fit (see :func:`window_spec`), or an interval with
            per-event watermarks and no idleness (in per-event mode the interval only paces
            ``WatermarksWithIdleness``' checks).
        EngineConfigError: a value out of range (:meth:`FlinkConfig.validate`).
    """
    window = window_spec(size_ms=size_ms, slide_ms=slide_ms, gap_ms=gap_ms, names=names)
    if per_event_watermarks and watermark_interval_ms is not None and idleness_ms is None:
        raise WhatifConfigError(
            f"{names['watermark_interval']} and {names['per_event_watermarks']} exclude each other (the interval "
            f"only paces idleness checks in per-event mode: give {names['idleness']} too)"
        )
    return FlinkConfig(
        delay_ms=delay_ms,
        window=window,
        allowed_lateness_ms=allowed_lateness_ms,
        idleness_ms=idleness_ms,
        watermark_interval_ms=watermark_interval_ms or DEFAULT_WATERMARK_INTERVAL_MS,
        per_event_watermarks=per_event_watermarks,
        late_side_output=late_side_output,
        end_of_input=end_of_input,
        flink_version=None if flink_version is None else _version(parse_flink_version, flink_version, names, 'flink_version'),
    )


