"""Engine releases where tidegauge's semantics differ, and how their version strings read.

Shared core (no engine or rule imports it the other way): the Flink collector reads a cluster's version
from the JobManager's ``/config`` (``flink-version``), the rules and the engine's Flink mode decide by it.
"""

from __future__ import annotations

from monitor.errors import InputError

__all__ = [
    "ALL_IDLE_FLUSH_SINCE",
    "LATE_FILTER_PREVIOUS_BATCH_SINCE",
    "NEWEST_MODELLED_FLINK",
    "FlinkVersionError",
    "SparkVersionError",
    "VersionError",
    "flushes_when_all_idle",
    "late_filter_uses_previous_batch",
    "modelled_flink",
    "parse_flink_version",
    "parse_spark_version",
]

#: The newest Flink release whose semantics the engine and rules follow (checked against a real 2.3.0).
NEWEST_MODELLED_FLINK = (2, 3)
#: FLINK-38454 (apache/flink#27066, merged 2025-09-30, first released in 2.2.0): when every split of a source
#: subtask is idle, ``CombinedWatermarkStatus.updateCombinedWatermark`` flushes the max over the splits'
#: watermarks before the output is marked idle (as ``StatusWatermarkValve`` does for channels since FLINK-7728).
ALL_IDLE_FLUSH_SINCE = (2, 2)


#: SPARK-40925 (apache/spark#38405, first in Spark 3.4.0): a stateful operator drops input rows as late
#: against the *previous* batch's watermark (``eventTimeWatermarkForLateEvents``) and evicts state against the
#: current one (``eventTimeWatermarkForEviction``). Before, both used the current batch's watermark, so a row
#: between the two is dropped before 3.4 and kept (and counted in the windows evicted that batch) from 3.4.
#: Observed: the same three files read one per trigger (Trigger.AvailableNow) drop that row on PySpark 3.3.4
#: and keep it on 4.3.0 (``tests/unit/test_spark_versions.py``).
LATE_FILTER_PREVIOUS_BATCH_SINCE = (3, 4)


class VersionError(InputError):
    """A release version string that tidegauge cannot follow (the message names the engine and the text)."""


class SparkVersionError(VersionError):
    """A Spark version string that is not ``MAJOR.MINOR[.PATCH]`` of a 3.x or 4.x release."""


def _major_minor(text: str, engine: str, example: str, majors: tuple[int, ...], modelled: str) -> tuple[int, int]:
    """``MAJOR.MINOR[.PATCH][-SUFFIX]`` -> ``(major, minor)`` of one engine's releases (``majors``).

    Raises:
        ValueError: the message the caller raises as its engine's :class:`VersionError`.
    """
    head = text.strip().split("-", 1)[0].split(".")
    if len(head) < 2 or not all(p.isdigit() and len(p) <= 4 for p in head[:3]):
        raise ValueError(f"{engine} version {text[:40]!r}: expected MAJOR.MINOR[.PATCH], e.g. {example}")
    version = (int(head[0]), int(head[1]))
    if version[0] not in majors:
        raise ValueError(f"{engine} version {text[:40]!r}: tidegauge models {modelled}")
    return version


def parse_spark_version(text: str) -> tuple[int, int]:
    """``"3.3"``, ``"3.5.1"`` or ``"4.1.0-preview"`` -> ``(major, minor)``.

    Raises:
        SparkVersionError: not a Spark 3.x or 4.x version (tidegauge models Structured Streaming from 3.0).
    """
    try:
        return _major_minor(text, "spark", "3.3", (3, 4), "Spark 3.x and 4.x")
    except ValueError as exc:
        raise SparkVersionError(str(exc)) from None


def late_filter_uses_previous_batch(version: tuple[int, int] | None) -> bool:
    """Whether a Spark of ``version`` (``None``: the newest modelled, 4.x) drops late rows against the
    previous batch's watermark (:data:`LATE_FILTER_PREVIOUS_BATCH_SINCE`) rather than the batch's own."""
    return version is None or version >= LATE_FILTER_PREVIOUS_BATCH_SINCE


class FlinkVersionError(VersionError):
    """A Flink version string that is not ``MAJOR.MINOR[.PATCH][-SUFFIX]`` of a 2.x release."""


def parse_flink_version(text: str) -> tuple[int, int]:
    """``"2.1"``, ``"2.1.1"`` or ``"2.3-SNAPSHOT"`` (``/config``'s ``flink-version``) -> ``(major, minor)``.

    Raises:
        FlinkVersionError: not a Flink 2.x version (tidegauge models Flink 2.0 and later).
    """
    try:
        return _major_minor(text, "flink", "2.1", (2,), "Flink 2.x only")
    except ValueError as exc:
        raise FlinkVersionError(str(exc)) from None


def modelled_flink(version: tuple[int, int] | None) -> tuple[int, int]:
    """The Flink release whose semantics are followed for ``version`` (``(major, minor)``): itself up to
    :data:`NEWEST_MODELLED_FLINK`, that one for a later or unknown (``None``) release."""
    return NEWEST_MODELLED_FLINK if version is None or version > NEWEST_MODELLED_FLINK else version


def flushes_when_all_idle(version: tuple[int, int] | None) -> bool:
    """Whether a Flink of ``version`` (``None``: the newest modelled) advances a source subtask's watermark
    to the max over its splits when every split is idle (:data:`ALL_IDLE_FLUSH_SINCE`). Before, the
    watermark stays where the split that went idle last left it (pre-2.2 ``updateCombinedWatermark``
    moves only on ``!allIdle && min > combined``), so it depends on the order the splits went idle."""
    return version is None or version >= ALL_IDLE_FLUSH_SINCE
