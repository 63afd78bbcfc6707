"""Text out of an untrusted JSON value: the one place a collector turns an answer's field into a ``str``.

An endpoint may send an object, a list, or a list nested a thousand levels deep where a name or a status
belongs (orjson accepts nesting up to 1,024 levels). ``str()`` of such a value is at best a meaningless
repr and at worst a ``RecursionError`` ("maximum recursion depth exceeded while getting the repr"), which
the fuzzing of the Flink REST answers found twice. A field meant as text is therefore read here: a string
as it is, a number or a boolean as its JSON spelling, anything else as the caller's default.
"""

from __future__ import annotations

from typing import Any

__all__ = ["json_text"]


def json_text(value: Any, default: str = "") -> str:
    """``value`` as text when it is a JSON scalar: a ``str`` unchanged, ``True``/``False`` as ``true``/
    ``false``, an int or float as ``str()`` of it (an int of more than 4,300 digits, which Python refuses to
    print, and a float that is not finite give ``default``); ``None``, a dict or a list (at any depth) give
    ``default``. Never raises."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # sys.get_int_max_str_digits
            return default
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else default
    return default
