"""Mutations that turn recorded seeds (or libFuzzer's corpus entries) into hostile inputs.

Every choice is one call of a *draw* function (``draw(n)`` returns an int in ``range(n)``): the fuzz
worker passes a :class:`random.Random` seeded by libFuzzer's per-mutation seed, so a run is reproducible
from ``-seed``. Two kinds of mutation:

* byte-level: insert, replace, delete or repeat a span, with payloads from :data:`TOKENS` (the values
  issue 11 found crashing: extreme offsets, 309+/4300+ digit integers, ``1e30``, NaN, deep nesting, lone
  surrogates, invalid UTF-8) or random bytes;
* structural (JSON families): decode the seed (or one of its lines), set up to three values at random
  paths to values from :data:`VALUES`, or nest one deeply, encode again (so deep fields get hostile values while the
  document stays otherwise valid).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

__all__ = ["TOKENS", "VALUES", "Draw", "mutate"]

Draw = Callable[[int], int]
"""``draw(n)``: one choice, an int in ``range(n)`` (``n >= 1``)."""

DEEP = 5000
TOKENS: list[bytes] = [
    b"1e30", b"-1e30", b"1e309", b"1e-400", b"9" * 309, b"9" * 400, b"9" * 4301, b"NaN", b"Infinity",
    b"-Infinity", b"9223372036854775807", b"9223372036854775808", b"-9223372036854775809",
    b"18446744073709551616", b'"9999-12-31T23:59:59-23:59"', b'"0001-01-01T00:00:00+01:00"',
    b'"9999-12-31T23:59:59.999999Z"', b'"1970-01-01T00:00:00.000Z"', b'"2026-11-29T11:32:41.709Z"',
    b'"\\ud800"', b'"\\udfff"', b'"\\ud83d\\ude00"', b"[" * DEEP, b"{\"a\":" * 2000, b"]" * DEEP,
    b"{", b"}", b"[", b"]", b'"', b",", b":", b"null", b"true", b"false", b"0", b"-1", b"1.5", b"-0",
    b"\xff", b"\xfe", b"\x00", b"\xed\xa0\x80", b"\xc3", b"\n", b"\r\n", b"\t", b" ", b'""', b"{}", b"[]",
    b"\\", b'{"Event":', b"StreamingQueryListener$QueryProgressEvent", b"# TYPE x gauge\n", b"} ",
    b"{type=\"gauges\"} ", b"&a", b"*a", b"!!python/object", b"---\n", b"- ", b": ", b"? ", b"%YAML 1.1\n",
    b"99999999999999999999999h", b"1h30m", b"0s", b"-5m", b"{env: X}", b"{file: /dev/zero}",
]
_SURROGATE = "\ud800"
VALUES: list[Any] = [
    10**400, 10**30, 2**63, -(2**63) - 1, 2**64, 1e30, 1e20, -1e20, 1e300, float("nan"), float("inf"),
    float("-inf"), "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+01:00", "NaN", "Infinity", "1e30",
    "9" * 400, "q" + _SURROGATE, _SURROGATE, None, True, False, 0, -1, "", [], {}, [[[]]], {"": {}},
    "2026-11-29T11:32:41.709Z", "x" * 10_000, -0.0, 5e-324, 1.7976931348623157e308, "1.5", " 7 ", "0x10",
    {"watermark": "9999-12-31T23:59:59-23:59"}, [None], {"a": [1, {"b": float("nan")}]},
]

_OPS = ("insert", "replace", "delete", "repeat", "flip")
_DEPTHS = (65, 100, 999, DEEP)


def _pick(draw: Draw, items: Any) -> Any:
    return items[draw(len(items))]


def _paths(node: Any, prefix: tuple[Any, ...] = (), out: list[tuple[Any, ...]] | None = None) -> list[tuple[Any, ...]]:
    out = [] if out is None else out
    out.append(prefix)
    if isinstance(node, dict):
        for key, value in node.items():
            _paths(value, (*prefix, key), out)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _paths(value, (*prefix, i), out)
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def _dumps(doc: Any) -> bytes:
    text = json.dumps(doc, separators=(",", ":"), allow_nan=True)
    return text.encode("utf-8", errors="surrogatepass")


def _structural(draw: Draw, seed: bytes) -> bytes:
    try:
        return _set_values(draw, seed)
    except RecursionError:  # a corpus entry nested too deeply for json (libFuzzer keeps what it found)
        return seed


def _set_values(draw: Draw, seed: bytes) -> bytes:
    lines = seed.splitlines(keepends=True)
    if not lines:
        return seed
    index = draw(len(lines))
    try:
        doc = json.loads(lines[index])
    except ValueError:
        try:
            doc, lines, index = json.loads(seed), [seed], 0
        except ValueError:
            return seed
    for _ in range(1 + draw(3)):
        path = _pick(draw, _paths(doc))
        value = _pick(draw, VALUES)
        doc = _set(doc, path, copy.deepcopy(value))  # a fresh copy: a shared list could become circular
    if draw(4) == 0:
        # nest one value deeply, as text (json.dumps itself would recurse)
        marker = "@@DEEP@@"
        doc = _set(doc, _pick(draw, _paths(doc)), marker)
        depth = _pick(draw, _DEPTHS)
        body = _dumps(doc).replace(json.dumps(marker).encode(), b"[" * depth + b"]" * depth)
    else:
        body = _dumps(doc)
    lines[index] = body + (b"\n" if lines[index].endswith(b"\n") else b"")
    return b"".join(lines)


def _bytewise(draw: Draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(1 + draw(4)):
        op = _pick(draw, _OPS)
        pos = draw(len(data) + 1)
        payload = _pick(draw, TOKENS) if draw(4) else bytes(draw(256) for _ in range(1 + draw(8)))
        if op == "insert":
            data[pos:pos] = payload
        elif op == "replace":
            data[pos : pos + len(payload)] = payload
        elif op == "delete":
            del data[pos : pos + 1 + draw(64)]
        elif op == "repeat":
            span = bytes(data[pos : pos + 1 + draw(64)])
            data[pos:pos] = span * (1 + draw(50))
        elif data:
            data[min(pos, len(data) - 1)] ^= 1 << draw(8)
    return bytes(data)


def mutate(data: bytes, draw: Draw, *, json_like: bool, prefixes: tuple[bytes, ...] = (b"",)) -> bytes:
    """One hostile input from ``data`` (a seed or corpus entry, starting with one of ``prefixes`` when the
    family reads a mode byte: codec, format): mutated structurally (JSON families) and/or byte-wise; the
    mode byte is kept, or (one time in eight) replaced by another of ``prefixes``."""
    prefix = b""
    if prefixes != (b"",) and data[:1] in prefixes:
        prefix, data = data[:1], data[1:]
    if prefixes != (b"",) and draw(8) == 0:
        prefix = _pick(draw, prefixes)
    mode = draw(3)  # 0: structural, 1: byte-wise, 2: both
    if json_like and mode != 1:
        data = _structural(draw, data)
    if not json_like or mode != 0:
        data = _bytewise(draw, data)
    return prefix + data
