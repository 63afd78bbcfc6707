"""Benchmark: rule evaluation for 10,000 series with one hour of 15 s samples.

Target: seconds per full evaluation (every rule, every job) under 1 s on one core; issue 16: 100,000
series x 1 h in under 2 s.

Not collected by pytest. Run: ``PYTHONPATH=. python -m tests.benchmarks.bench_rules [series] [repeats] [--tick]``.

Two figures:

* the default: :func:`rules.registry.evaluate` of the whole hour from scratch (each job's history split
  again: what ``scan`` of one instant, or a daemon's first tick, costs);
* ``--tick``: what a daemon tick evaluates once the hour is loaded: one new round of samples per series
  (15 s later), replayed through each job's kept rolling history (:class:`rules.replay.ReplayState`, as
  :class:`monitor.daemon.evaluate.EvaluateStage` keeps it across ticks), then the clock rules on it. The
  hour's rolling histories are built before timing (the daemon's first tick); the figure is per tick
  (without the store). ``--tick --rebuild``: the same ticks as the daemon evaluated them before it kept
  the rolling histories (each job's rebuilt from its window at every tick, the clock rules on a history
  split from scratch): the "before" of the same figure.

The history is what the daemon hands :func:`rules.registry.evaluate` (each job's samples oldest first,
as ``load_recent_samples`` returns them): 240 samples (1 h at 15 s) per series, split as

* Spark queries: a query-scope series plus one per-source series (2 series per query; 40 %);
* Flink jobs: a job-scope series plus 4 source subtasks (5 series per job; 25 %);
* Kafka consumer groups: 7 partitions (7 series per group; 35 %);

with one job in ten of each engine in trouble (a stalled watermark behind a quiet source, state growing
without removals, an idle subtask, a stalled partition), so the rules' slow paths run too. Building the
samples is not timed; the figure is the best and the median of ``repeats`` evaluations, in wall-clock
and in process CPU time (the CPU time is the fair figure on a machine shared with other work).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.model import Engine, JobRef, Sample, SampleKind, Scope
from rules.config import RulesConfig
from rules.registry import Evaluator, evaluate
from rules.replay import ReplayState, replay, resume

T0 = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
STEP = timedelta(seconds=15)
N = 240  # one hour of 15 s samples
CONFIG = RulesConfig.model_validate(
    {
        "freshness": {"target": "15m"},
        "falling_behind": {"trigger_interval": "15s"},
        "state_growth": {"limit_rows": 10_000_000},
    }
)


def _spark(q: int, bad: bool, rounds: int = N) -> list[Sample]:
    job = JobRef(Engine.SPARK, f"spark-{q}", run_id=f"run-{q}", name=f"query-{q}")
    out: list[Sample] = []
    for i in range(rounds):
        at = T0 + STEP * i
        wm = at - timedelta(minutes=10) if not (bad and i > 150) else T0 + STEP * 150 - timedelta(minutes=10)
        out.append(
            Sample(
                job, at, SampleKind.PROGRESS, "spark-eventlog", batch_id=i, watermark=wm,
                event_time_max=at, event_time_min=at - timedelta(seconds=30), num_input_rows=100,
                batch_duration_ms=3000, dropped_by_watermark=0,
                state_rows_total=10_000 + (40 * i if bad else 50 * (i % 8)),
                state_rows_removed=0 if bad else (400 if i % 8 == 0 else 0),
            )
        )  # fmt: skip
        rows = 0 if bad and i > 150 else 100
        out.append(
            Sample(
                job,
                at,
                SampleKind.PROGRESS,
                "spark-eventlog",
                Scope(source="kafka[clicks]"),
                i,
                num_input_rows=rows,
            )
        )
    return out


def _flink(j: int, bad: bool, rounds: int = N) -> list[Sample]:
    job = JobRef(Engine.FLINK, f"flink-{j}", name=f"job-{j}")
    out: list[Sample] = []
    for i in range(rounds):
        at = T0 + STEP * i
        out.append(
            Sample(
                job,
                at,
                SampleKind.GAUGE,
                "flink-rest",
                watermark=at - timedelta(seconds=5),
                num_input_rows=150,
                backpressure_ratio=0.1,
                restart_count=0,
            )
        )
        for s in range(4):
            idle = bad and s == 3
            out.append(
                Sample(
                    job, at, SampleKind.GAUGE, "flink-rest", Scope(source="Source: gen", subtask=s),
                    watermark=None if idle else at - timedelta(seconds=5), num_input_rows=0 if idle else 40,
                    idle_ms=STEP.seconds * 1000 * i if idle else 0, backpressure_ratio=0.1,
                )
            )  # fmt: skip
    return out


def _kafka(g: int, bad: bool, rounds: int = N) -> list[Sample]:
    job = JobRef(Engine.KAFKA, f"prod/group-{g}", name=f"group-{g}")
    out: list[Sample] = []
    for i in range(rounds):
        at = T0 + STEP * i
        for p in range(7):
            end = 1_000 * i + p
            committed = 500 if bad and p == 0 else end - (i + p) % 4  # lag 0-3, caught up now and then
            out.append(
                Sample(
                    job, at, SampleKind.GAUGE, "kafka-lag", Scope(source="orders", partition=p),
                    lag_offsets=end - committed, committed_offset=committed, log_end_offset=end,
                )
            )  # fmt: skip
    return out


def build(series: int, rounds: int = N) -> dict[tuple[Engine, str], list[Sample]]:
    """Histories with about ``series`` series (see the module docstring for the split), ``rounds`` samples
    per series 15 s apart."""
    history: dict[tuple[Engine, str], list[Sample]] = {}
    for q in range(int(series * 0.40) // 2):
        history[(Engine.SPARK, f"spark-{q}")] = _spark(q, q % 10 == 0, rounds)
    for j in range(int(series * 0.25) // 5):
        history[(Engine.FLINK, f"flink-{j}")] = _flink(j, j % 10 == 0, rounds)
    for g in range(int(series * 0.35) // 7):
        history[(Engine.KAFKA, f"prod/group-{g}")] = _kafka(g, g % 10 == 0, rounds)
    return history


def _rss_mib() -> float:
    """This process's resident memory (VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tick(series: int = 10_000, repeats: int = 5, rebuild: bool = False) -> None:
    """The ``--tick`` figure (see the module docstring): ``repeats`` ticks of one new round per series
    (``rebuild``: each job's rolling history rebuilt at every tick, as before it was kept)."""
    t0 = time.perf_counter()
    rss0 = _rss_mib()
    full = build(series, N + repeats)
    evaluator = Evaluator(CONFIG)
    kept: dict[tuple[Engine, str], tuple[list[Sample], ReplayState]] = {}
    cursors: dict[tuple[Engine, str], tuple[datetime, int] | None] = {}
    n_series = 0
    for key, samples in full.items():
        per_round = len(samples) // (N + repeats)
        n_series += per_round
        loaded = samples[: per_round * N]
        state = ReplayState()
        resume(evaluator, loaded, (loaded[-1].observed_at, per_round), state)  # the first tick's rebuild
        kept[key] = (loaded, state)
        cursors[key] = state.after
    n_samples = sum(len(loaded) for loaded, _ in kept.values())
    grown = _rss_mib() - rss0
    print(f"built {len(full)} jobs, {n_series} series, their hour's rolling histories in "
          f"{time.perf_counter() - t0:.1f} s; RSS grew by {grown:.0f} MiB for {n_samples} samples held "
          f"({grown * 2**20 / n_samples:.0f} B per sample, with the kept histories)")  # fmt: skip
    times: list[float] = []
    cpu: list[float] = []
    found = 0
    for r in range(repeats):
        now = T0 + STEP * (N + r) + timedelta(seconds=5)
        new = {key: full[key][len(loaded) : len(loaded) + len(loaded) // (N + r)] for key, (loaded, _) in kept.items()}
        start, start_cpu = time.perf_counter(), time.process_time()
        found = 0
        for key, (loaded, state) in kept.items():
            loaded.extend(new[key])
            if rebuild:
                state = ReplayState()
            for instant in replay(evaluator, loaded, cursors[key], state):
                found += len(instant.findings)
            cursors[key] = state.after
            if rebuild:
                found += len(evaluator.evaluate_job(loaded, now, clock=True))
                continue
            history = state.history()
            assert history is not None
            found += len(evaluator.evaluate_history(history, now, clock=True))
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    how = "rolling histories rebuilt at every tick" if rebuild else "kept rolling histories"
    print(
        f"one tick (one new round per series, {how}) for {n_series} series with one hour "
        f"of 15 s samples: best {min(times):.3f} s, median {statistics.median(times):.3f} s "
        f"(CPU time best {min(cpu):.3f} s, median {statistics.median(cpu):.3f} s); {found} findings at the "
        f"last tick"
    )


def main(series: int = 10_000, repeats: int = 5) -> None:
    t0 = time.perf_counter()
    history = build(series)
    n_series = sum(len({s.scope for s in samples}) for samples in history.values())
    n_samples = sum(len(samples) for samples in history.values())
    print(
        f"built {len(history)} jobs, {n_series} series, {n_samples} samples in {time.perf_counter() - t0:.1f} s"
    )
    now = T0 + STEP * N
    times: list[float] = []
    cpu: list[float] = []
    findings = []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        findings = evaluate(CONFIG, history, now)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    by_rule: dict[str, int] = {}
    for f in findings:
        by_rule[f.rule] = by_rule.get(f.rule, 0) + 1
    print(f"findings: {dict(sorted(by_rule.items()))}")
    print(
        f"rule evaluation for {n_series} series with one hour of 15 s samples: "
        f"best {min(times):.3f} s, median {statistics.median(times):.3f} s per full evaluation "
        f"(CPU time best {min(cpu):.3f} s, median {statistics.median(cpu):.3f} s; target under 1 s on one core)"
    )


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    series, repeats = (numbers + [10_000, 5][len(numbers) :])[:2]
    if "--tick" in sys.argv:
        tick(series, repeats, rebuild="--rebuild" in sys.argv)
    else:
        main(series, repeats)
