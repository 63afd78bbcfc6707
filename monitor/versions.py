"""Engine releases where tidegauge's semantics differ, and how their version strings read.

Shared core (no engine or rule imports it the other way): the Flink collector reads a cluster's version
from the JobManager's ``/config`` (``flink-version``), the rules and the engine's Flink mode decide by it.
"""

from __future__ import annotations

from monitor.errors import InputError

__all__ = ["ALL_IDLE_FLUSH_SINCE", "NEWEST_MODELLED_FLINK", "FlinkVersionError", "flushes_when_all_idle", "parse_flink_version"]

#: The newest Flink release whose semantics the engine and rules follow (checked against a real 2.3.0).
NEWEST_MODELLED_FLINK = (2, 3)
#: FLINK-38454 (apache/flink#27066, merged 2025-09-30, first released in 2.2.0): when every split of a source
#: subtask is idle, ``CombinedWatermarkStatus.updateCombinedWatermark`` flushes the max over the splits'
#: watermarks before the output is marked idle (as ``StatusWatermarkValve`` does for channels since FLINK-7728).
ALL_IDLE_FLUSH_SINCE = (2, 2)


class FlinkVersionError(InputError):
    """A Flink version string that is not ``MAJOR.MINOR[.PATCH][-SUFFIX]`` of a 2.x release."""


def parse_flink_version(text: str) -> tuple[int, int]:
    """``"2.1"``, ``"2.1.1"`` or ``"2.3-SNAPSHOT"`` (``/config``'s ``flink-version``) -> ``(major, minor)``.

    Raises:
        FlinkVersionError: not a Flink 2.x version (tidegauge models Flink 2.0 and later).
    """
    head = text.strip().split("-", 1)[0].split(".")
    if len(head) < 2 or not all(p.isdigit() and len(p) <= 4 for p in head[:3]):
        raise FlinkVersionError(f"flink version {text[:40]!r}: expected MAJOR.MINOR[.PATCH], e.g. 2.1")
    version = (int(head[0]), int(head[1]))
    if version[0] != 2:
        raise FlinkVersionError(f"flink version {text[:40]!r}: tidegauge models Flink 2.x only")
    return version


def flushes_when_all_idle(version: tuple[int, int] | None) -> bool:
    """Whether a Flink of ``version`` (``None``: the newest modelled) advances a source subtask's watermark
    to the max over its splits when every split is idle (:data:`ALL_IDLE_FLUSH_SINCE`). Before, the
    watermark stays where the split that went idle last left it (pre-2.2 ``updateCombinedWatermark``
    moves only on ``!allIdle && min > combined``), so it depends on the order the splits went idle."""
    return version is None or version >= ALL_IDLE_FLUSH_SINCE
