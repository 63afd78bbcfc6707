"""Write the What-if lab's sample event files (``python -m dashboard.samples.generate``; seeded, so the
files are reproducible). Columns: ``event_time``, ``arrival_time`` (ISO-8601 UTC), ``source``, ``key``."""

from __future__ import annotations

import csv
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sensor_future_row(rng: np.random.Generator) -> list[tuple[str, str, str, str]]:
    rows = []
    for i in range(2000):
        arrival = START + timedelta(milliseconds=int(i * 300 + rng.integers(0, 300)))
        event = arrival - timedelta(milliseconds=int(min(rng.exponential(4000), 20000)))
        if i == 700:
            event = datetime(2099, 1, 1, tzinfo=UTC)
        rows.append((_iso(event), _iso(arrival), "sensors", f"s{int(rng.integers(0, 50))}"))
    return rows


def orders_backlog(rng: np.random.Generator) -> list[tuple[str, str, str, str]]:
    rows = []
    for i in range(3000):
        arrival = START + timedelta(milliseconds=int(i * 200 + rng.integers(0, 200)))
        source = "web" if i % 2 == 0 else "mobile"
        late = min(rng.exponential(3000), 15000)
        quiet = timedelta(minutes=3) <= arrival - START < timedelta(minutes=5)
        if source == "mobile" and quiet:
            continue  # the mobile gateway is down: nothing arrives
        if source == "mobile" and timedelta(minutes=5) <= arrival - START < timedelta(minutes=5, seconds=20):
            late = float(rng.integers(60_000, 180_000))  # the gateway flushes its backlog
        event = arrival - timedelta(milliseconds=int(late))
        rows.append((_iso(event), _iso(arrival), source, f"o{i}"))
    return rows


def main() -> None:
    """Write both files next to this module."""
    for name, make in (("sensor_future_row.csv", sensor_future_row), ("orders_backlog.csv", orders_backlog)):
        rows = make(np.random.default_rng(11))
        with (HERE / name).open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["event_time", "arrival_time", "source", "key"])
            writer.writerows(rows)


if __name__ == "__main__":
    main()
