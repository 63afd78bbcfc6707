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

_SECTION = re.compile(r"^\(\d+\) StreamingSymmetricHashJoin[ \t]*$", re.MULTILINE)
_TWS_SECTION = re.compile(r"^\(\d+\) TransformWithState\w*[ \t]*$", re.MULTILINE)
_ATTRIBUTE = re.compile(r"#\d+(?:-T\d+ms)?")
_WATERMARKED = re.compile(r"^([^#]+)#\d+-T\d+ms$")
_OUTPUT_MODES = frozenset({"Update", "Append", "Complete"})
#: Longest text kept of the join's condition (it goes into messages).
MAX_CONDITION_CHARS = 300
#: Characters of a node's section read (Spark's are a few hundred; a longer one is cut, never scanned whole).
MAX_SECTION_CHARS = 20_000


def _section_lines(description: str, start: int) -> dict[str, str]:
    """The ``Name: value`` lines of the node section starting at ``start`` (up to the next section or
    :data:`MAX_SECTION_CHARS`), by name (``Left output [2]`` -> ``"[ad#10, imp_time#11-T10000ms]"``). Parsed
    with plain finds and splits: the plan comes from a file that may be hostile, so nothing here backtracks."""
    body = description[start : start + MAX_SECTION_CHARS]
    end = body.find("\n\n(")
    lines: dict[str, str] = {}
    for line in (body if end < 0 else body[:end]).split("\n"):
        name, sep, value = line.partition(": ")
        if sep and name not in lines:
            lines[name] = value.rstrip()
    return lines


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
    lines = _section_lines(description, section.end())
    left = next((v for k, v in lines.items() if k.startswith("Left output [")), None)
    right = next((v for k, v in lines.items() if k.startswith("Right output [")), None)
    arguments = lines.get("Arguments")
    if left is None or right is None or arguments is None or not arguments.startswith("["):
        return None
    # [ad#10], [click_ad#12], Inner, condition = [ ... full = ... ], state info [ ... ] ..., state cleanup [ left
    # value predicate: (...), right = null ], 2, Append
    keys_end = arguments.find("], [")
    right_end = arguments.find("], ", keys_end + 4)
    cond_start = arguments.find(", condition = [ ", right_end)
    cond_end = arguments.find(" ], state info [", cond_start)
    cleanup = arguments.find("state cleanup [ left ", cond_end)
    if min(keys_end, right_end, cond_start, cond_end, cleanup) < 0:
        return None
    join_type = arguments[right_end + 3 : cond_start]
    if not join_type.isidentifier():
        return None
    condition_text = arguments[cond_start + len(", condition = [ ") : cond_end]
    full = condition_text.rfind("full = ")
    condition: str | None = None
    if full >= 0 and condition_text[full + len("full = ") :].strip() != "null":
        condition = _ATTRIBUTE.sub("", condition_text[full + len("full = ") :].strip())
        if len(condition) > MAX_CONDITION_CHARS:
            condition = condition[: MAX_CONDITION_CHARS - 3] + "..."
    cleanups = arguments[cleanup + len("state cleanup [ left ") :]
    return {
        "join_type": join_type,
        "left_keys": _names(arguments[1:keys_end]),
        "right_keys": _names(arguments[keys_end + 4 : right_end]),
        "left_time": _watermarked(left.strip("[]")),
        "right_time": _watermarked(right.strip("[]")),
        "condition": condition,
        "left_cleanup": not cleanups.startswith("= null"),
        "right_cleanup": cleanups.find(", right = null ]") < 0,
    }


def transform_with_state_time_modes(description: str) -> list[str]:
    """The time mode of each ``transformWithState`` operator of a formatted physical plan, in plan order
    (``ProcessingTime``, ``EventTime``, or ``NoTime`` for ``TimeMode.None()``), as Spark 4.3.0 writes the
    node's arguments (recorded: ``Arguments: transformWithStateUDF(...), [key#8], [key#3, n#4L], Update,
    ProcessingTime, state info [ ... ]``); an operator whose arguments are not shaped so is left out."""
    modes: list[str] = []
    for section in _TWS_SECTION.finditer(description):
        arguments = _section_lines(description, section.end()).get("Arguments", "")
        head = arguments[: max(arguments.find(", state info ["), 0)].rsplit(", ", 2)
        if len(head) == 3 and head[1] in _OUTPUT_MODES and head[2].isidentifier():
            modes.append(head[2])
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
