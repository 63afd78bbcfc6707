"""Benchmark: reading the config file (``load_config``: what ``run`` and ``config check`` do at start, and
what ``make fuzz``'s config family runs per input).

Measured on ``examples/tidegauge.yaml`` (the documented example: every section, with comments):

1. ``load_config`` (read, YAML, pydantic validation): loads per second and ms per load;
2. the YAML step alone: ``monitor.config._safe_load`` (libyaml's events, PyYAML's Python composer with the
   depth limit, the safe constructor) next to PyYAML's pure-Python ``yaml.SafeLoader`` (what it replaced)
   and the all-C ``yaml.CSafeLoader`` (no depth limit: the bound on what the composer in Python costs).

Usage: ``python -m tests.benchmarks.bench_config [--seconds 3]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from monitor.config import _safe_load, load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tidegauge.yaml"


def _rate(call: Callable[[], Any], seconds: float) -> float:
    call()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    """Print loads per second of each step."""
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_config")
    parser.add_argument("--seconds", type=float, default=3.0, help="time spent on each measurement")
    args = parser.parse_args()
    text = EXAMPLE.read_text()
    assert _safe_load(text, "example") == yaml.safe_load(text)
    rows = [
        ("load_config (YAML + validation)", _rate(lambda: load_config(EXAMPLE), args.seconds)),
        ("YAML: _safe_load (libyaml events)", _rate(lambda: _safe_load(text, "example"), args.seconds)),
        ("YAML: yaml.SafeLoader (pure Python)", _rate(lambda: yaml.load(text, Loader=yaml.SafeLoader), args.seconds)),
        ("YAML: yaml.CSafeLoader (all C)", _rate(lambda: yaml.load(text, Loader=yaml.CSafeLoader), args.seconds)),
    ]
    print(f"{EXAMPLE.name}: {len(text)} characters, libyaml: {yaml.__with_libyaml__}")
    for name, rate in rows:
        print(f"  {name:<38} {rate:>8.0f}/s  {1000 / rate:>7.2f} ms")


if __name__ == "__main__":
    main()
