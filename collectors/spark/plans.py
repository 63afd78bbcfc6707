"""What a Spark physical plan says about a stream-stream join's state.

Spark logs each micro-batch's plan in the event log (``SparkListenerSQLExecutionStart``'s
``physicalPlanDescription``, the "formatted" explain: a numbered node list, then one section per node). The
``StreamingSymmetricHashJoin`` section (Spark's ``StreamingSymmetricHashJoinExec``) reads, as recorded from
Spark 4.3.0 (``tests/fixtures/spark/stream-join-4.3.0``)::

    (11) StreamingSymmetricHashJoin
    Left output [2]: [ad#10, imp_time#11-T10000ms]
    Right output [2]: [click_ad#12, click_time#13-T10000ms]
    Arguments: [ad#10], [click_ad#12], Inner, condition = [ leftOnly = null, rightOnly = null, both = (...),
    full = (...) ], state info [ ... ] stateStoreCkptIds = None, 0, 0, state cleanup [ left value predicate:
    (imp_time#11-T10000ms <= -60001000), right value predicate: (click_time#13-T10000ms <= -1000) ], 2, Append

An attribute with ``-T<ms>ms`` is a watermarked event-time column (``EventTimeWatermark`` sets that
metadata); ``state cleanup`` is ``JoinStateWatermarkPredicates``: ``left = null`` means Spark found no way
to evict that side's state (``StreamingSymmetricHashJoinHelper.getStateWatermarkPredicates``: neither a
watermarked join key nor a time-range condition against the other side's watermarked column).
"""

from __future__ import annotations

import re
from typing import Any

from monitor.model import JOIN_PLAN_EXTRA, TWS_TIME_MODES_EXTRA

__all__ = ["JOIN_NODE", "TRANSFORM_WITH_STATE_NODE", "join_plan", "plan_extras", "transform_with_state_time_modes"]

#: The node name as it appears in a ``SparkListenerSQLExecutionStart`` line (a cheap bytes search first).
JOIN_NODE = b"StreamingSymmetricHashJoin"
#: The start of the ``transformWithState`` node names (``TransformWithState``, ``TransformWithStateInPandas``,
#: ``TransformWithStateInPySpark``) in such a line.
TRANSFORM_WITH_STATE_NODE = b"TransformWithState"

_SECTION = re.compile(r"^\(\d+\) StreamingSymmetricHashJoin\s*$", re.MULTILINE)
_TWS_SECTION = re.compile(r"^\(\d+\) TransformWithState\w*\s*$", re.MULTILINE)
_TWS_MODE = re.compile(r"^Arguments: .*?, (?:Update|Append|Complete), (\w+), state info \[", re.MULTILINE)
_OUTPUT = re.compile(r"^(Left|Right) output \[\d+\]: \[(.*)\]\s*$", re.MULTILINE)
_ARGUMENTS = re.compile(r"^Arguments: \[(.*?)\], \[(.*?)\], (\w+), condition = \[ (.*) \], state info", re.MULTILINE)
_CLEANUP = re.compile(r"state cleanup \[ left (.*?), right (.*?) \], ")
_FULL = re.compile(r"(?:^|, )full = (.*)$")
_ATTRIBUTE = re.compile(r"#\d+(?:-T\d+ms)?")
_WATERMARKED = re.compile(r"^(.+)#\d+-T(\d+)ms$")
#: Longest text kept of the join's condition (it goes into messages).
MAX_CONDITION_CHARS = 300


def _names(listed: str) -> list[str]:
    """``ad#10, imp_time#11-T10000ms`` -> ``["ad", "imp_time"]`` (attribute ids dropped)."""
    return [_ATTRIBUTE.sub("", item.strip()) for item in listed.split(", ") if item.strip()]


def _watermarked(listed: str) -> str | None:
    """The first watermarked column (``name#id-T<delay>ms``) of an output list, or ``None``."""
    for item in listed.split(", "):
        found = _WATERMARKED.match(item.strip())
        if found is not None:
            return found.group(1)
    return None


def join_plan(description: str) -> dict[str, Any] | None:
    """The first stream-stream join of a formatted physical plan, or ``None`` when it has none (or its
    section is not shaped as Spark 3.x/4.x writes it).

    Args:
        description: ``SparkListenerSQLExecutionStart.physicalPlanDescription``.

    Returns:
        ``{"join_type": "Inner", "left_keys": ["ad"], "right_keys": ["click_ad"], "left_time": "imp_time",
        "right_time": "click_time", "condition": "(click_time >= imp_time) AND ..." | None,
        "left_cleanup": bool, "right_cleanup": bool}``: the join's type, equi-join keys, each side's
        watermarked event-time column (``None`` when that side has none), the condition beyond the keys
        (attribute ids removed, cut to :data:`MAX_CONDITION_CHARS`), and whether Spark planned a state
        watermark predicate for each side (``state cleanup``: ``False`` = that side's state is never evicted).
    """
    section = _SECTION.search(description)
    if section is None:
        return None
    body = description[section.end() : section.end() + 20_000]
    end = body.find("\n\n(")
    body = body if end < 0 else body[:end]
    outputs = {m.group(1): m.group(2) for m in _OUTPUT.finditer(body)}
    arguments = _ARGUMENTS.search(body)
    cleanup = _CLEANUP.search(body)
    if arguments is None or cleanup is None or set(outputs) != {"Left", "Right"}:
        return None
    full = _FULL.search(arguments.group(4))
    condition = None if full is None or full.group(1).strip() == "null" else _ATTRIBUTE.sub("", full.group(1).strip())
    if condition is not None and len(condition) > MAX_CONDITION_CHARS:
        condition = condition[: MAX_CONDITION_CHARS - 3] + "..."
    return {
        "join_type": arguments.group(3),
        "left_keys": _names(arguments.group(1)),
        "right_keys": _names(arguments.group(2)),
        "left_time": _watermarked(outputs["Left"]),
        "right_time": _watermarked(outputs["Right"]),
        "condition": condition,
        "left_cleanup": not cleanup.group(1).startswith("= null"),
        "right_cleanup": not cleanup.group(2).startswith("= null"),
    }


def transform_with_state_time_modes(description: str) -> list[str]:
    """The time mode of each ``transformWithState`` operator of a formatted physical plan, in plan order
    (``ProcessingTime``, ``EventTime``, or ``NoTime`` for ``TimeMode.None()``), as Spark 4.3.0 writes the
    node's arguments (recorded: ``Arguments: transformWithStateUDF(...), [key#8], [key#3, n#4L], Update,
    ProcessingTime, state info [ ... ]``); an operator whose arguments are not shaped so is left out."""
    modes: list[str] = []
    for section in _TWS_SECTION.finditer(description):
        body = description[section.end() : section.end() + 20_000]
        end = body.find("\n\n(")
        found = _TWS_MODE.search(body if end < 0 else body[:end])
        if found is not None:
            modes.append(found.group(1))
    return modes


def plan_extras(description: str) -> dict[str, Any]:
    """What a batch's plan adds to its samples' ``extra`` (:data:`monitor.model.JOIN_PLAN_EXTRA`,
    :data:`monitor.model.TWS_TIME_MODES_EXTRA`): the stream-stream join (:func:`join_plan`) and the
    ``transformWithState`` time modes (:func:`transform_with_state_time_modes`), each only when present."""
    extras: dict[str, Any] = {}
    join = join_plan(description)
    if join is not None:
        extras[JOIN_PLAN_EXTRA] = join
    modes = transform_with_state_time_modes(description)
    if modes:
        extras[TWS_TIME_MODES_EXTRA] = modes
    return extras
