"""Seeded random scenarios for the Flink differential tests, and their harness input text.

A scenario is a stream (event time, arrival time, partition, key per row) plus a Flink job
(:class:`monitor.watermark.flink.FlinkConfig`): tumbling / sliding (divisible or not, sometimes
``slide > size``) / session windows, allowed lateness, 1-4 partitions (splits) that pause and resume
(so idleness matters), per-event or periodic watermarks, a late side output or the drop counter.
Arrival times drive the deterministic periodic schedule (``periodic_ticks``), written into the harness
input as tick records; the input is bounded (end of input fires everything).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from monitor.watermark import EventsTable, Session, Sliding, Tumbling
from monitor.watermark.flink import FlinkConfig, periodic_ticks

__all__ = ["FlinkScenario", "features", "generate", "harness_text"]

_ARRIVAL_BASE_MS = 1_000_000
_EVENT_BASE_MS = 1_700_000_000_000


@dataclass(frozen=True)
class FlinkScenario:
    """One seeded scenario: rows in file order (arrival non-decreasing) and the job."""

    seed: int
    ts_ms: list[int]
    arrival_ms: list[int]
    partition: list[int]
    key: list[int]
    config: FlinkConfig

    @property
    def id(self) -> str:
        return f"s{self.seed}"

    def events(self) -> EventsTable:
        """The rows as the engine's input table (event times in microseconds)."""
        return EventsTable.from_columns(
            np.asarray(self.ts_ms, dtype=np.int64) * 1000,
            arrival_ms=self.arrival_ms,
            partition=self.partition,
            key=[f"k{k}" for k in self.key],
        )

    def describe(self) -> str:
        c = self.config
        w = c.window
        if isinstance(w, Session):
            shape = f"session gap {w.gap_ms}"
        elif isinstance(w, Sliding):
            shape = f"sliding {w.size_ms}/{w.slide_ms}"
        else:
            shape = f"tumbling {w.size_ms}"
        return (
            f"seed {self.seed}: {shape}, delay {c.delay_ms}, lateness {c.allowed_lateness_ms}, "
            f"idleness {c.idleness_ms}, interval {c.watermark_interval_ms}, "
            f"{'per-event' if c.per_event_watermarks else 'periodic'}, "
            f"{'side output' if c.late_side_output else 'drop counter'}, "
            f"{len(set(self.partition)) if self.partition else 0}/{len(c.partitions)} partitions, "
            f"{len(self.ts_ms)} rows, start {c.start_ms}, until {c.run_until_ms}"
        )


def generate(seed: int) -> FlinkScenario:
    """The scenario of ``seed`` (deterministic)."""
    rnd = random.Random(seed * 7919 + 17)
    kind = rnd.choice(["T", "T", "S", "S", "G", "G"])
    if kind == "T":
        window: Tumbling | Sliding | Session = Tumbling(rnd.choice([1000, 2000, 5000]))
    elif kind == "S":
        size, slide = rnd.choice([(4000, 2000), (5000, 2000), (6000, 1500), (3000, 1000), (2000, 3000)])
        window = Sliding(size, slide)
    else:
        window = Session(rnd.choice([500, 1000, 2500]))
    n_parts = rnd.choice([1, 1, 2, 3, 4])
    n_keys = rnd.choice([1, 2, 3])
    n = rnd.randint(15, 120)
    interval = rnd.choice([100, 200, 200, 500])
    idleness = rnd.choice([None, None, 600, 1500])
    per_event = rnd.random() < 0.3
    # partitions pause: each partition has "off" stretches of arrival time
    pauses = {p: (rnd.randint(0, n * 60), rnd.randint(0, 4000)) for p in range(n_parts)}
    arrival = _ARRIVAL_BASE_MS
    ts_ms: list[int] = []
    arr_ms: list[int] = []
    parts: list[int] = []
    keys: list[int] = []
    skew = rnd.choice([0, 300, 1500, 4000])
    for _ in range(n):
        arrival += rnd.choice([0, rnd.randint(1, 150), rnd.randint(50, 400)])
        rel = arrival - _ARRIVAL_BASE_MS
        candidates = [p for p in range(n_parts) if not (pauses[p][0] <= rel < pauses[p][0] + pauses[p][1])]
        p = rnd.choice(candidates or list(range(n_parts)))
        t = _EVENT_BASE_MS + rel * rnd.choice([1, 1, 2]) // 1 - rnd.randint(0, skew)
        r = rnd.random()
        if r < 0.06:
            t -= rnd.randint(2000, 12000)  # very late
        elif r < 0.09:
            t += rnd.randint(3000, 9000)  # ahead of the rest
        ts_ms.append(t)
        arr_ms.append(arrival)
        parts.append(p)
        keys.append(rnd.randrange(n_keys))
    declared = tuple(range(n_parts + (1 if rnd.random() < 0.1 else 0)))  # sometimes a partition with no rows
    config = FlinkConfig(
        delay_ms=rnd.choice([0, 200, 1000, 3000]),
        window=window,
        allowed_lateness_ms=rnd.choice([0, 0, 500, 2000]),
        idleness_ms=idleness,
        watermark_interval_ms=interval,
        per_event_watermarks=per_event,
        late_side_output=rnd.random() < 0.5,
        end_of_input=True,
        start_ms=arr_ms[0] - rnd.randint(0, interval),
        run_until_ms=arr_ms[-1] + rnd.randint(0, 5000),
        partitions=declared,
    )
    return FlinkScenario(seed, ts_ms, arr_ms, parts, keys, config)


def harness_text(scenarios: list[FlinkScenario]) -> str:
    """The FlinkHarness input: per scenario an ``S`` line, then events (``E``) and ticks (``K``) in
    processing order (an event arriving at ``T`` before the tick at ``T``)."""
    lines: list[str] = []
    for sc in scenarios:
        c = sc.config
        w = c.window
        if isinstance(w, Session):
            head = ("G", 0, 0, w.gap_ms)
        elif isinstance(w, Sliding):
            head = ("S", w.size_ms, w.slide_ms, 0)
        else:
            head = ("T", w.size_ms, w.size_ms, 0)
        n_parts = len(set(sc.partition) | set(c.partitions))
        lines.append(
            f"S {sc.id} {head[0]} {head[1]} {head[2]} {head[3]} {c.allowed_lateness_ms} {c.delay_ms} "
            f"{c.idleness_ms if c.idleness_ms is not None else -1} {int(c.per_event_watermarks)} "
            f"{int(c.late_side_output)} {n_parts}"
        )
        part_codes = {p: i for i, p in enumerate(sorted(set(sc.partition) | set(c.partitions)))}
        order = sorted(range(len(sc.ts_ms)), key=lambda i: sc.arrival_ms[i])
        arrivals = np.asarray([sc.arrival_ms[i] for i in order], dtype=np.int64)
        needs_ticks = not c.per_event_watermarks or c.idleness_ms is not None
        ticks = periodic_ticks(arrivals, c).tolist() if needs_ticks else []
        j = 0
        for i in order:
            while j < len(ticks) and ticks[j] < sc.arrival_ms[i]:
                lines.append(f"K {ticks[j]}")
                j += 1
            lines.append(f"E {i} {sc.ts_ms[i]} {part_codes[sc.partition[i]]} {sc.key[i]} {sc.arrival_ms[i]}")
        for t in ticks[j:]:
            lines.append(f"K {t}")
    return "\n".join(lines) + "\n"


def features(sc: FlinkScenario) -> set[str]:
    """What a scenario exercises (configuration only; what happens is checked by the engine tests)."""
    c = sc.config
    w = c.window
    out = {
        "window:"
        + ("session" if isinstance(w, Session) else "sliding" if isinstance(w, Sliding) else "tumbling")
    }
    if isinstance(w, Sliding) and w.slide_ms > w.size_ms:
        out.add("sliding_gaps")
    if isinstance(w, Sliding) and w.size_ms % w.slide_ms:
        out.add("sliding_not_divisible")
    if c.allowed_lateness_ms:
        out.add("allowed_lateness")
    if len(set(sc.partition) | set(c.partitions)) > 1:
        out.add("partitions")
    if set(c.partitions) - set(sc.partition):
        out.add("partition_without_rows")
    if c.idleness_ms is not None:
        out.add("idleness")
    out.add("per_event" if c.per_event_watermarks else "periodic")
    out.add("side_output" if c.late_side_output else "drop_counter")
    if len(set(sc.key)) > 1:
        out.add("keys")
    if c.delay_ms == 0:
        out.add("monotonous")
    return out
