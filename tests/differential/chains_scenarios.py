"""Seeded chain scenarios (issue 17): two or three stateful operators in one query.

A :class:`ChainScenario` reuses the inputs of :func:`tests.differential.scenarios.generate` for the same
seed (several inputs with their own delays, a silent input, late / out-of-order / null / far-future
rows, sub-millisecond times, both multiple-watermark policies) and stacks operators on them:

- operator 1 is the base scenario's operation: a tumbling or sliding window count (a session window
  is replaced by a tumbling window of the same size: windows of sessions are not modelled), or one of
  the three deduplications (the generator gives key-only deduplications keys owned by one input per
  step, so the first row of a key is well defined);
- then one or two window aggregations over the previous operator's output
  (``window(window_time(window), ...)`` after an aggregation, ``window(event_time, ...)`` after a
  deduplication), tumbling or sliding, grouped by ``key`` where the previous operator carries it;
- append mode (Spark rejects a chain in update mode), and
  ``spark.sql.streaming.statefulOperator.allowMultiple`` true for three seeds in four, false for the rest
  (Spark 4.3 still runs the chain then, with one global watermark for both filtering and eviction).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from tests.differential.scenarios import DedupSpec, Scenario, WindowSpec, generate


@dataclass(frozen=True)
class ThenSpec:
    """A window aggregation after the previous operator: ``kind`` tumbling/sliding, sizes in ms."""

    kind: str
    size_ms: int
    slide_ms: int | None
    by_key: bool


@dataclass(frozen=True)
class ChainScenario:
    """One chain case: the base scenario (inputs, policy, operator 1 as ``base.operation``), the later
    operators and the ``allowMultiple`` setting."""

    base: Scenario
    then: tuple[ThenSpec, ...]
    allow_multiple: bool

    @property
    def seed(self) -> int:
        """The seed (same as the base scenario's)."""
        return self.base.seed

    @property
    def first(self) -> WindowSpec | DedupSpec:
        """Operator 1."""
        return self.base.operation

    def describe(self) -> str:
        """Human-readable dump (failure messages, ``chains_run --verbose``)."""
        then = " -> ".join(
            f"{t.kind}({t.size_ms}"
            + (f"/{t.slide_ms}" if t.slide_ms else "")
            + ")"
            + ("+key" if t.by_key else "")
            for t in self.then
        )
        return f"{self.base.describe()}\n  then: {then}  allowMultiple={str(self.allow_multiple).lower()}"

    def label(self) -> str:
        """One-line shape for run logs."""
        op = self.first
        if isinstance(op, WindowSpec):
            head = f"{op.kind}({op.size_ms}" + (f"/{op.slide_ms}" if op.slide_ms else "") + ")"
            head += "+key" if op.by_key else ""
        else:
            head = f"dedup:{op.kind}"
        rest = "".join(
            f" -> {t.kind}({t.size_ms}"
            + (f"/{t.slide_ms}" if t.slide_ms else "")
            + ")"
            + ("+key" if t.by_key else "")
            for t in self.then
        )
        am = "multi" if self.allow_multiple else "single"
        return f"{head + rest:62} {self.base.policy} inputs={len(self.base.inputs)} {am}"


def generate_chain(seed: int) -> ChainScenario:
    """The chain scenario for ``seed`` (deterministic)."""
    base = generate(seed)
    rng = random.Random(f"chain-{seed}")
    first = base.operation
    if isinstance(first, WindowSpec) and first.kind == "session":
        first = WindowSpec("tumbling", 5_000, None, first.by_key)
    base = dataclasses.replace(base, operation=first, output_mode="append")
    carries_key = isinstance(first, DedupSpec) or first.by_key
    stages: list[ThenSpec] = []
    for _ in range(rng.choices((1, 2), weights=(3, 1))[0]):
        by_key = carries_key and rng.random() < 0.6
        if rng.random() < 0.7:
            stages.append(ThenSpec("tumbling", rng.choice((5_000, 10_000, 20_000)), None, by_key))
        else:
            size = rng.choice((10_000, 20_000))
            stages.append(ThenSpec("sliding", size, rng.choice((5_000, 10_000)), by_key))
        carries_key = by_key
    return ChainScenario(base=base, then=tuple(stages), allow_multiple=rng.random() < 0.75)
