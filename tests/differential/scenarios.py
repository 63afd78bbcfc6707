"""Seeded random scenarios for the differential tests (engine vs real PySpark).

A :class:`Scenario` is a small streaming job written out in full: one or more inputs (each with its own
watermark delay), the rows each input receives at each step (one step = one Spark micro-batch), the
stateful operation (a window aggregation or a deduplication), the output mode and the
multiple-watermark policy (``spark.sql.streaming.multipleWatermarkPolicy``).

The generator deliberately produces the cases issue 3 lists: several inputs including one that never
gets data, out-of-order and late rows, a row dated far in the future, null event times, equal
timestamps at delay 0, sub-millisecond event times, tumbling/sliding/session windows, three dedup
variants, both policies. Scenarios stay small (3-6 steps, at most 30 rows per step) so that a real
Spark run takes a couple of seconds.

Times: event times are ISO-8601 UTC strings with exactly six fractional digits (what the JSON file
source parses into a microsecond ``TimestampType``); :func:`iso_to_us` / :func:`us_to_iso` convert
to and from integer epoch microseconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

WindowKind = Literal["tumbling", "sliding", "session"]
DedupKind = Literal["with_event_time", "without_event_time", "within_watermark"]
OutputMode = Literal["append", "update"]
Policy = Literal["min", "max"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: All generated event times start from here (epoch microseconds of 2026-01-01T00:00:00Z).
BASE_US = int((datetime(2026, 1, 1, tzinfo=UTC) - _EPOCH) / timedelta(microseconds=1))
#: The "far future" timestamp a scenario may contain (2099-01-01T00:00:00Z), plus a random offset.
FUTURE_US = int((datetime(2099, 1, 1, tzinfo=UTC) - _EPOCH) / timedelta(microseconds=1))

MAX_ROWS_PER_STEP = 30


def us_to_iso(event_time_us: int) -> str:
    """Epoch microseconds -> ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC, always six fractional digits)."""
    moment = _EPOCH + timedelta(microseconds=event_time_us)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso_to_us(text: str) -> int:
    """``...Z`` ISO-8601 UTC string -> epoch microseconds. Raises ValueError on other formats."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"event time {text!r} has no UTC offset")
    return (moment - _EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True)
class EventRow:
    """One input row: ``event_time`` as ISO string with microseconds, or None (a null event time)."""

    event_time: str | None
    key: str

    @property
    def event_time_us(self) -> int | None:
        """The event time as epoch microseconds (None for a null event time)."""
        return None if self.event_time is None else iso_to_us(self.event_time)


@dataclass(frozen=True)
class InputSpec:
    """One watermarked input: ``withWatermark("event_time", f"{delay_ms} milliseconds")``.

    ``steps[i]`` holds the rows this input receives in step ``i`` (all inputs of a scenario have the
    same number of steps; an input that never gets data has only empty steps).
    """

    name: str
    delay_ms: int
    steps: tuple[tuple[EventRow, ...], ...]


@dataclass(frozen=True)
class WindowSpec:
    """``groupBy(window(...)[, key]).count()``.

    ``size_ms`` is the window duration (tumbling, sliding) or the session gap (session);
    ``slide_ms`` is set only for sliding windows. ``by_key`` adds the ``key`` column to the grouping.
    """

    kind: WindowKind
    size_ms: int
    slide_ms: int | None
    by_key: bool


@dataclass(frozen=True)
class DedupSpec:
    """A deduplication:

    - ``with_event_time``: ``dropDuplicates(["key", "event_time"])`` (state evicted by the watermark),
    - ``without_event_time``: ``dropDuplicates(["key"])`` (state never evicted),
    - ``within_watermark``: ``dropDuplicatesWithinWatermark(["key"])``.
    """

    kind: DedupKind


@dataclass(frozen=True)
class Scenario:
    """One differential-test case. ``inputs`` are unioned in order after each gets its own watermark."""

    seed: int
    inputs: tuple[InputSpec, ...]
    operation: WindowSpec | DedupSpec
    output_mode: OutputMode
    policy: Policy

    @property
    def step_count(self) -> int:
        """Number of steps (micro-batches with data) in the scenario."""
        return len(self.inputs[0].steps)

    def step_rows(self, step: int) -> list[tuple[str, EventRow]]:
        """All rows of one step as ``(input name, row)``, in the order they are written to the file."""
        return [(spec.name, row) for spec in self.inputs for row in spec.steps[step]]

    def describe(self) -> str:
        """A multi-line human-readable dump (used in failure messages and by ``run.py``)."""
        lines = [
            f"Scenario seed={self.seed} op={self.operation} mode={self.output_mode} policy={self.policy}",
        ]
        for spec in self.inputs:
            lines.append(f"  input {spec.name} delay_ms={spec.delay_ms}")
            for index, rows in enumerate(spec.steps):
                shown = ", ".join(f"{r.key}@{r.event_time}" for r in rows) or "-"
                lines.append(f"    step {index}: {shown}")
        return "\n".join(lines)


_DELAYS_MS = (0, 0, 1_000, 2_000, 2_500, 5_000, 10_000)


def _round_time(rng: random.Random, event_time_us: int) -> int:
    """Whole seconds (window boundaries, equal timestamps), whole ms, or full microseconds."""
    granularity = rng.choices((1_000_000, 1_000, 1), weights=(4, 3, 3))[0]
    return (event_time_us // granularity) * granularity


def generate(seed: int) -> Scenario:
    """Builds the scenario for ``seed`` (deterministic: same seed, same scenario, on any platform)."""
    rng = random.Random(seed)
    operation = _pick_operation(rng)
    output_mode: OutputMode
    if isinstance(operation, WindowSpec) and operation.kind != "session":
        output_mode = rng.choice(("append", "update"))
    else:
        # Spark rejects update mode for session windows (STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION);
        # dedup behaves the same in both modes.
        output_mode = "append"
    policy: Policy = rng.choice(("min", "max"))
    input_count = rng.choices((1, 2, 3), weights=(3, 5, 2))[0]
    silent_last = input_count >= 2 and rng.random() < 0.4
    step_count = rng.randint(3, 6)
    same_delay = rng.random() < 0.4
    first_delay = rng.choice(_DELAYS_MS)
    delays = [first_delay if same_delay else rng.choice(_DELAYS_MS) for _ in range(input_count)]
    keys = ("a", "b", "c") if isinstance(operation, WindowSpec) else ("k0", "k1", "k2", "k3", "k4")
    future_at = (rng.randrange(step_count), rng.randrange(input_count)) if rng.random() < 0.2 else None

    names = [f"in{i}" for i in range(input_count)]
    rows: dict[str, list[list[EventRow]]] = {name: [] for name in names}
    frontier = {name: BASE_US + rng.randrange(0, 5_000_000) for name in names}
    seen: list[int] = []
    for step in range(step_count):
        key_owner = {key: rng.randrange(input_count) for key in keys}
        for index, name in enumerate(names):
            if silent_last and index == input_count - 1:
                rows[name].append([])
                continue
            count = rng.choices((0, 1, 2, 3, 4, 6, 8), weights=(1, 2, 3, 3, 3, 2, 1))[0]
            step_rows: list[EventRow] = []
            for _ in range(count):
                event_time_us = _pick_time(rng, frontier[name], delays[index], seen)
                if event_time_us is not None:
                    seen.append(event_time_us)
                key = rng.choice(keys)
                if isinstance(operation, DedupSpec) and operation.kind != "with_event_time":
                    # Key-only dedup keeps the first row of a key within a batch; Spark's order across
                    # inputs after the shuffle is not defined, so a key comes from one input per step.
                    own = [k for k in keys if key_owner[k] == index] or [f"x{index}"]
                    key = rng.choice(own)
                step_rows.append(EventRow(None if event_time_us is None else us_to_iso(event_time_us), key))
            if future_at == (step, index):
                future_us = FUTURE_US + _round_time(rng, rng.randrange(0, 60_000_000))
                step_rows.insert(rng.randrange(len(step_rows) + 1), EventRow(us_to_iso(future_us), keys[0]))
            rows[name].append(step_rows[:MAX_ROWS_PER_STEP])
            frontier[name] += rng.randrange(0, 12_000_000)
        if not any(rows[name][step] for name in names):
            # Every step must carry data, or Spark would not run a batch for it.
            rows[names[0]][step].append(EventRow(us_to_iso(_round_time(rng, frontier[names[0]])), keys[0]))
    inputs = tuple(
        InputSpec(name=name, delay_ms=delays[i], steps=tuple(tuple(s) for s in rows[name]))
        for i, name in enumerate(names)
    )
    return Scenario(seed=seed, inputs=inputs, operation=operation, output_mode=output_mode, policy=policy)


def _pick_operation(rng: random.Random) -> WindowSpec | DedupSpec:
    choice = rng.choice(
        ("tumbling", "sliding", "session", "with_event_time", "without_event_time", "within_watermark")
    )
    if choice == "tumbling":
        return WindowSpec("tumbling", rng.choice((5_000, 10_000)), None, rng.random() < 0.5)
    if choice == "sliding":
        size_ms = rng.choice((6_000, 10_000))
        return WindowSpec("sliding", size_ms, rng.choice((2_000, 5_000)), rng.random() < 0.5)
    if choice == "session":
        # Spark rejects a session window without another grouping key ("Global aggregation with
        # session window in streaming query is not supported").
        return WindowSpec("session", rng.choice((2_000, 4_000)), None, True)
    if choice == "with_event_time":
        return DedupSpec("with_event_time")
    if choice == "without_event_time":
        return DedupSpec("without_event_time")
    return DedupSpec("within_watermark")


def _pick_time(rng: random.Random, frontier_us: int, delay_ms: int, seen: list[int]) -> int | None:
    """One event time near ``frontier_us``: in order, out of order, late, equal to an earlier one,
    a microsecond away from an earlier one, or null."""
    kind = rng.choices(
        ("near", "late", "equal", "sub_ms", "null"),
        weights=(10, 3, 3 if seen else 0, 2 if seen else 0, 1),
    )[0]
    if kind == "null":
        return None
    if kind == "equal":
        return rng.choice(seen)
    if kind == "sub_ms":
        return max(seen) + rng.randrange(-999, 1_000)
    if kind == "late":
        return _round_time(rng, frontier_us - delay_ms * 1_000 - rng.randrange(1_000_000, 20_000_000))
    return _round_time(rng, frontier_us + rng.randrange(-3_000_000, 4_000_000))


def features(scenario: Scenario) -> set[str]:
    """The issue-3 features a scenario exercises (used to check that the CI seeds cover them all):
    ``multiple_inputs``, ``silent_input``, ``out_of_order``, ``late`` (a row at or below its input's
    max-so-far minus the delay), ``future`` (year >= 2099), ``null``, ``equal_at_delay_0``,
    ``sub_ms``, ``policy:<p>``, ``mode:<m>``, ``op:<kind>``."""
    found = {f"policy:{scenario.policy}", f"mode:{scenario.output_mode}", f"op:{scenario.operation.kind}"}
    if len(scenario.inputs) > 1:
        found.add("multiple_inputs")
    for spec in scenario.inputs:
        if not any(spec.steps):
            found.add("silent_input")
        seen: set[int] = set()
        max_us: int | None = None
        for step_rows in spec.steps:
            step_max = max_us
            for row in step_rows:
                us = row.event_time_us
                if us is None:
                    found.add("null")
                    continue
                if us % 1_000:
                    found.add("sub_ms")
                if us >= FUTURE_US:
                    found.add("future")
                if max_us is not None and us < max_us:
                    found.add("out_of_order")
                if step_max is not None and us // 1_000 <= step_max // 1_000 - spec.delay_ms:
                    found.add("late")
                if spec.delay_ms == 0 and us in seen:
                    found.add("equal_at_delay_0")
                seen.add(us)
                max_us = us if max_us is None else max(max_us, us)
    return found
