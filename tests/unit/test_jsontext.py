"""collectors.jsontext.json_text: a field meant as text, from an untrusted JSON answer."""

from __future__ import annotations

import sys

import orjson

from collectors.jsontext import json_text


def test_scalars_are_their_json_spelling() -> None:
    assert json_text("RUNNING") == "RUNNING"
    assert json_text("") == ""
    assert (json_text(True), json_text(False)) == ("true", "false")
    assert (json_text(42), json_text(-1.5)) == ("42", "-1.5")


def test_structures_null_and_unprintable_numbers_give_the_default() -> None:
    deep = orjson.loads("[" * 1000 + "]" * 1000)  # what the fuzzer sent as a vertex's status
    assert json_text(deep, "UNKNOWN") == "UNKNOWN"
    assert json_text({"a": 1}) == "" and json_text(None, "x") == "x"
    assert json_text(float("nan"), "?") == "?" and json_text(float("inf"), "?") == "?"
    assert sys.get_int_max_str_digits() == 4300  # CPython's default: a longer int is not printed
    assert json_text(10**5000, "?") == "?"
