"""The demo's simulated fleet: Spark queries, a Flink job and Kafka consumer groups, with scheduled faults.

Each :class:`SimJob` is one Structured Streaming query (``withWatermark`` + a window aggregation or a
``dropDuplicates``). Its input rows are generated up front for the whole run (seeded, so a run is
reproducible), and every trigger the job runs one micro-batch through :class:`monitor.watermark.WatermarkRuntime`,
which decides what Spark would: the watermark the batch runs with, the rows dropped as late, the state
rows. The batch becomes a ``QueryProgressEvent`` built by :mod:`monitor.demo.sparkfmt`, which the demo
writes to an event log or pushes to the ingest endpoint, as a real driver would.

Faults (:data:`FAULTS`), each injected into one job at its time after the start:

* ``future_row``: one row dated about a year ahead: the watermark jumps and honest rows are dropped;
* ``idle_input``: one of two Kafka inputs stops delivering: with the default ``min`` policy it pins the
  global watermark;
* ``unbounded_state``: ``dropDuplicates`` on a key without an event-time column starts seeing unique
  keys: state is never evicted;
* ``lag_growth``: the input rate outgrows the query: batches take longer than the trigger and the Kafka
  source falls behind the latest offsets;
* ``restart``: the query stops and starts again (a new ``runId``);
* ``late_surge``: a backlogged upstream flushes rows older than the delay threshold: they are dropped;
* ``idle_subtask`` (the Flink job, :mod:`monitor.demo.flinksim`): one source subtask of two stops getting
  records, without ``withIdleness``: its watermark pins the job's event time;
* ``group_lag`` (a Kafka consumer group, :mod:`monitor.demo.kafkasim`): the group consumes slower than the
  producers write: its lag climbs on every partition. (Distinct from ``lag_growth``: a Spark query keeps
  its Kafka offsets in its checkpoint, not in a consumer group, so an exporter never sees it; its lag is
  in its progress.)

The Flink job and the groups are served on loopback (:mod:`monitor.demo.flinkrest`,
:mod:`monitor.demo.exporter`) from numbers generated up front.

Nothing here reads the clock: :meth:`Fleet.step` takes ``now_ms``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from monitor.demo import sparkfmt
from monitor.demo.flinksim import FlinkSimJob
from monitor.demo.kafkasim import KafkaSim, SimGroup
from monitor.watermark import Dedup, EventsTable, Tumbling, WatermarkConfig, WatermarkRuntime

__all__ = ["FAULTS", "KAFKA_CLUSTER", "Fault", "Fleet", "SimEvent", "SimJob", "build_fleet"]

Transport = Literal["eventlog", "listener"]

TRIGGER_MS = 2_000
#: How long the simulated queries have run before the demo starts.
WARMUP_MS = 60_000
DELAY_MS = 10_000
WINDOW_MS = 10_000
_NAMESPACE = uuid.UUID("5b0c3a8e-2f4e-4b8e-9a51-5e1d7d0c9e11")
#: The name of the demo's kafka_exporter target: Kafka job ids are ``<target>/<group>``.
KAFKA_CLUSTER = "demo-kafka"
FLINK_JOB = "device-telemetry-windows"
LAGGING_GROUP = "ledger-writer"


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault.

    Attributes:
        key: short id (``future_row``).
        title: what a person would call it.
        job: the name of the job it is injected into: a :class:`SimJob`, the Flink job or a consumer group.
        at_s: seconds after the start of the demo.
        rules: the rules expected to find it (any of them counts).
        engine: ``spark``, ``flink`` or ``kafka``.
    """

    key: str
    title: str
    job: str
    at_s: float
    rules: tuple[str, ...]
    engine: str = "spark"


FAULTS: tuple[Fault, ...] = (
    Fault("future_row", "future-dated row", "clicks_per_window", 16, ("future_timestamp",)),
    Fault("idle_input", "idle input pins the min watermark", "orders_payments", 12, ("watermark_stall", "idle_source")),
    Fault("unbounded_state", "unbounded dedup state", "sessions_dedup", 8, ("state_growth",)),
    Fault("lag_growth", "consumer lag growth", "clickstream_enrich", 14, ("falling_behind", "consumer_lag")),
    Fault("restart", "query restart", "inventory_updates", 30, ("target_health",)),
    Fault("late_surge", "late-drop surge", "payments_fraud", 24, ("late_drop_surge",)),
    Fault("idle_subtask", "Flink source subtask without records pins the watermark", FLINK_JOB, 10,
          ("idle_source",), "flink"),
    Fault("group_lag", "Kafka consumer group lag climbing", LAGGING_GROUP, 12, ("consumer_lag",), "kafka"),
)


@dataclass(frozen=True, slots=True)
class SimEvent:
    """One listener event of one job (an event-log line / a listener push)."""

    job: SimJob
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Input:
    """One input of a query: a Kafka topic or a file source."""

    name: str
    topic: str | None = None

    @property
    def description(self) -> str:
        if self.topic is not None:
            return f"KafkaV2[Subscribe[{self.topic}]]"
        return f"FileStreamSource[file:/data/demo/{self.name}]"


# A row generator: (rng, batch index, scheduled processing time ms, fault active?) -> per-input rows
#   as (event times us, keys).
Generator = Callable[[np.random.Generator, int, int, bool], dict[str, tuple[npt.NDArray[np.int64], list[str]]]]


@dataclass(eq=False)
class SimJob:
    """One simulated Spark streaming query.

    Attributes:
        name: the query name (``queryName``).
        transport: ``eventlog`` (written to the demo's event-log directory) or ``listener`` (pushed).
        config: the engine configuration (the query's watermark and stateful operator).
        inputs: the query's inputs.
        fault: the fault injected into it, if any.
    """

    name: str
    transport: Transport
    config: WatermarkConfig
    inputs: tuple[_Input, ...]
    generate: Generator
    operator: str
    fault: Fault | None = None
    app_id: str = ""
    query_id: str = ""
    run_id: str = ""
    runs: int = 0
    # filled by prepare()
    _runtime: WatermarkRuntime | None = None
    _batches: list[npt.NDArray[np.int64]] = field(default_factory=list)
    _offsets: dict[str, int] = field(default_factory=dict)
    _behind: int = 0
    _next_due_ms: int = 0
    _k: int = 0
    _started: bool = False
    _restarted: bool = False
    _origin_ms: int = 0
    _first_ms: int = 0

    def __post_init__(self) -> None:
        self.query_id = str(uuid.uuid5(_NAMESPACE, self.name))
        self.app_id = f"local-demo-{self.name.replace('_', '-')}"

    def fault_active(self, at_ms: int, origin_ms: int) -> bool:
        """Whether this job's fault is active at ``at_ms`` (its time counts from ``origin_ms``)."""
        return self.fault is not None and at_ms - origin_ms >= self.fault.at_s * 1000

    def prepare(self, start_ms: int, horizon_ms: int, rng: np.random.Generator, *, origin_ms: int | None = None) -> None:
        """Generate every input row from ``start_ms`` for ``horizon_ms`` and build the engine runtime.

        ``origin_ms`` (default ``start_ms``) is the demo's start, from which fault times count: a job may
        have run (healthy) before it.
        """
        origin = start_ms if origin_ms is None else origin_ms
        self._origin_ms = origin
        self._first_ms = start_ms
        times: list[npt.NDArray[np.int64]] = []
        sources: list[str] = []
        keys: list[str] = []
        batches: list[npt.NDArray[np.int64]] = []
        n = 0
        for k in range(horizon_ms // TRIGGER_MS + 1):
            at = start_ms + k * TRIGGER_MS
            rows = self.generate(rng, k, at, self.fault_active(at, origin))
            idx: list[int] = []
            for inp in self.inputs:
                t, ks = rows.get(inp.name, (np.zeros(0, dtype=np.int64), []))
                times.append(t)
                sources.extend([inp.name] * len(t))
                keys.extend(ks)
                idx.extend(range(n, n + len(t)))
                n += len(t)
            batches.append(np.array(idx, dtype=np.int64))
        events = EventsTable.from_columns(
            np.concatenate(times) if times else np.zeros(0, dtype=np.int64), source=sources, key=keys
        )
        self._runtime = WatermarkRuntime(events, self.config)
        self._batches = batches
        self._offsets = {i.name: 0 for i in self.inputs}
        self._next_due_ms = start_ms
        self.run_id = str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63)), version=4))

    def due(self, now_ms: int) -> bool:
        """Whether the next trigger is due."""
        return self._k < len(self._batches) and now_ms >= self._next_due_ms

    def step(self, rng: np.random.Generator) -> list[dict[str, Any]]:
        """Run the next micro-batch; returns the listener events it produced (started/progress/...)."""
        assert self._runtime is not None, "prepare() first"
        out: list[dict[str, Any]] = []
        at = self._next_due_ms
        fault_on = self.fault_active(at, self._origin_ms)
        if not self._started:
            out.append(sparkfmt.query_started(self.query_id, self.run_id, self.name, at))
            self._started = True
        if self.fault is not None and self.fault.key == "restart" and fault_on and not self._restarted:
            # the query stops (the driver was redeployed) and starts again from its checkpoint: same id,
            # new runId; the watermark and state are restored from the checkpoint (the engine keeps them)
            out.append(sparkfmt.query_terminated(self.query_id, self.run_id))
            self.run_id = str(uuid.uuid5(_NAMESPACE, f"{self.name}/run/{self.runs + 1}"))
            self.runs += 1
            self._restarted = True
            at += 3_000
            out.append(sparkfmt.query_started(self.query_id, self.run_id, self.name, at))
        rows = self._batches[self._k]
        result = self._runtime.run_data_batch(rows, processing_time_ms=at)
        lag_fault = self.fault is not None and self.fault.key == "lag_growth" and fault_on
        duration = int(rng.integers(250, 700)) if not lag_fault else int(rng.integers(3_200, 4_800))
        stats = result.event_time
        event_time = None if stats is None else (stats.min_ms, stats.avg_ms, stats.max_ms)
        per_source: dict[str, int] = {}
        codes = self._runtime.events.source_codes[rows] if len(rows) else np.zeros(0, dtype=np.int32)
        names = self._runtime.events.source_names
        for inp in self.inputs:
            per_source[inp.name] = int((codes == names.index(inp.name)).sum()) if inp.name in names else 0
        sources = []
        for inp in self.inputs:
            start = self._offsets[inp.name]
            end = start + per_source[inp.name]
            self._offsets[inp.name] = end
            behind: int | None = None
            if inp.topic is not None:
                if lag_fault:
                    self._behind += int(rng.integers(400, 700))
                behind = self._behind
            sources.append(
                sparkfmt.SourceProgress(
                    inp.description, per_source[inp.name], start, end,
                    latest_offset=end + (behind or 0) if inp.topic is not None else None,
                    topic=inp.topic, offsets_behind=behind,
                )
            )
        dropped = result.dropped_by_watermark_metric
        op = sparkfmt.StateOperatorProgress(
            self.operator,
            rows_total=result.state_rows,
            rows_updated=result.state_rows_updated,
            rows_removed=result.state_rows_removed,
            memory_used_bytes=600 + 96 * result.state_rows,
            dropped_by_watermark=int(dropped) if dropped is not None else result.late_row_count,
        )
        out.append(
            sparkfmt.progress_event(
                query_id=self.query_id, run_id=self.run_id, name=self.name, timestamp_ms=at,
                batch_id=result.batch_id, duration_ms=duration, trigger_ms=TRIGGER_MS,
                watermark_ms=result.watermark_ms, event_time=event_time, state_operators=[op], sources=sources,
            )
        )
        self._k += 1
        # ProcessingTimeExecutor: the next trigger is the next multiple of the interval after the batch ends
        end = at + duration
        self._next_due_ms = max(self._first_ms + self._k * TRIGGER_MS, end)
        return out


def _lateness(rng: np.random.Generator, n: int, mean_ms: float = 1_500.0, cap_ms: int = 7_000) -> npt.NDArray[np.int64]:
    return np.minimum(rng.exponential(mean_ms, n), cap_ms).astype(np.int64)


def _steady(rate: int) -> Generator:
    """Rows arriving ``rate`` ± a few per batch on one input, a little late (< the delay)."""

    def gen(rng: np.random.Generator, k: int, at: int, fault: bool) -> dict[str, tuple[npt.NDArray[np.int64], list[str]]]:
        n = int(rng.integers(max(1, rate - 3), rate + 4))
        t = (at - _lateness(rng, n)) * 1000
        return {"main": (t.astype(np.int64), [f"u{int(x)}" for x in rng.integers(0, 200, n)])}

    return gen


def _future_row(rate: int) -> Generator:
    base = _steady(rate)
    injected = [False]

    def gen(rng: np.random.Generator, k: int, at: int, fault: bool) -> dict[str, tuple[npt.NDArray[np.int64], list[str]]]:
        rows = base(rng, k, at, fault)
        if fault and not injected[0]:
            injected[0] = True
            t, ks = rows["main"]
            future_us = (at + 400 * 86_400_000) * 1000  # a device clock a year ahead
            rows["main"] = (np.append(t, np.int64(future_us)), [*ks, "device-7"])
        return rows

    return gen


def _late_surge(rate: int) -> Generator:
    base = _steady(rate)

    def gen(rng: np.random.Generator, k: int, at: int, fault: bool) -> dict[str, tuple[npt.NDArray[np.int64], list[str]]]:
        rows = base(rng, k, at, fault)
        if fault:
            n = int(rng.integers(rate, 2 * rate))  # a backlogged partition flushes rows 25-45 s old
            old = (at - rng.integers(25_000, 45_000, n)) * 1000
            t, ks = rows["main"]
            rows["main"] = (np.concatenate([t, old.astype(np.int64)]), [*ks, *[f"b{i}" for i in range(n)]])
        return rows

    return gen


def _two_inputs(rate: int) -> Generator:
    def gen(rng: np.random.Generator, k: int, at: int, fault: bool) -> dict[str, tuple[npt.NDArray[np.int64], list[str]]]:
        out = {}
        for name in ("orders", "payments"):
            if name == "payments" and fault:
                continue  # the payments topic's producer is down: no rows, the input's watermark stays
            n = int(rng.integers(max(1, rate - 2), rate + 3))
            out[name] = (((at - _lateness(rng, n)) * 1000).astype(np.int64), [f"o{k}-{i}" for i in range(n)])
        return out

    return gen


#: How many sessions the healthy ``sessions_dedup`` query deduplicates (its state's size).
_SESSIONS = 40


def _dedup_keys(rate: int) -> Generator:
    def gen(rng: np.random.Generator, k: int, at: int, fault: bool) -> dict[str, tuple[npt.NDArray[np.int64], list[str]]]:
        n = int(rng.integers(max(1, rate - 3), rate + 4))
        t = ((at - _lateness(rng, n)) * 1000).astype(np.int64)
        if fault:  # a client release sends a fresh request id with every event: every key is new
            keys = [f"req-{k}-{i}" for i in range(n)]
        else:  # a few dozen sessions re-sending their events: state stays at the number of sessions
            keys = [f"session-{int(x)}" for x in rng.integers(0, _SESSIONS, n)]
            if k == 0:
                # the query's first batch reads the backlog, where every open session has sent: the state
                # is at the number of sessions from the first batch on, so the healthy warm-up shows no
                # growth (40 sessions first seen over 7 batches fired state_growth before the fault)
                seen = set(keys)
                extra = [f"session-{i}" for i in range(_SESSIONS) if f"session-{i}" not in seen]
                t = np.concatenate([t, np.full(len(extra), (at - 1_500) * 1000, dtype=np.int64)])
                keys += extra
        return {"main": (t, keys)}

    return gen


@dataclass(eq=False)
class Fleet:
    """The simulated jobs; :meth:`step` runs every Spark job whose trigger is due (the Flink job and the
    Kafka groups are read at request time by their servers)."""

    jobs: list[SimJob]
    start_ms: int
    rng: np.random.Generator
    flink: list[FlinkSimJob] = field(default_factory=list)
    kafka: KafkaSim | None = None

    def step(self, now_ms: int) -> list[SimEvent]:
        """Run every due micro-batch up to ``now_ms``; returns the events, in time order per job."""
        out: list[SimEvent] = []
        for job in self.jobs:
            while job.due(now_ms):
                out.extend(SimEvent(job, e) for e in job.step(self.rng))
        return out

    def job(self, name: str) -> SimJob:
        """The Spark job named ``name``. Raises KeyError."""
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)

    def job_id(self, fault: Fault) -> str:
        """The ``job_id`` tidegauge gives the faulted job: a Spark query's id, a Flink job's name (the Flink
        collector follows jobs by name), ``<cluster>/<group>`` for a consumer group. Raises KeyError."""
        if fault.engine == "flink":
            return next(j.name for j in self.flink if j.name == fault.job)
        if fault.engine == "kafka":
            if self.kafka is None:
                raise KeyError(fault.job)
            return f"{KAFKA_CLUSTER}/{self.kafka.group(fault.job).group}"
        return self.job(fault.job).query_id


def build_fleet(start_ms: int, horizon_ms: int, seed: int = 7, *, warmup_ms: int = WARMUP_MS) -> Fleet:
    """The demo fleet (six Spark queries, a Flink job and two consumer groups; one fault each but the
    healthy group), prepared for ``horizon_ms`` from ``start_ms``.

    The queries have already run, healthy, for ``warmup_ms`` before ``start_ms`` (their first
    :meth:`Fleet.step` writes that history at once), so their state and watermark are past the warm-up of
    a fresh query when the faults begin; fault times count from ``start_ms``.
    """
    window = Tumbling(size_ms=WINDOW_MS)
    faults = {f.job: f for f in FAULTS}
    kafka = _Input("main", topic="clicks")
    jobs = [
        SimJob("clicks_per_window", "eventlog", WatermarkConfig(delay_ms=DELAY_MS, window=window),
               (_Input("main"),), _future_row(12), "stateStoreSave"),
        SimJob("orders_payments", "listener",
               WatermarkConfig(delay_ms=DELAY_MS, window=window, sources=("orders", "payments")),
               (_Input("orders", topic="orders"), _Input("payments", topic="payments")), _two_inputs(6),
               "stateStoreSave"),
        SimJob("sessions_dedup", "eventlog", WatermarkConfig(delay_ms=DELAY_MS, dedup=Dedup("key")),
               (_Input("main"),), _dedup_keys(20), "dedupe"),
        SimJob("clickstream_enrich", "eventlog", WatermarkConfig(delay_ms=DELAY_MS, window=window),
               (kafka,), _steady(15), "stateStoreSave"),
        SimJob("inventory_updates", "listener", WatermarkConfig(delay_ms=DELAY_MS, window=window),
               (_Input("main"),), _steady(8), "stateStoreSave"),
        SimJob("payments_fraud", "eventlog", WatermarkConfig(delay_ms=DELAY_MS, window=window),
               (_Input("main"),), _late_surge(10), "stateStoreSave"),
    ]
    rng = np.random.default_rng(seed)
    for job in jobs:
        job.fault = faults.get(job.name)
        job.prepare(start_ms - warmup_ms, horizon_ms + warmup_ms, rng, origin_ms=start_ms)
    at = {f.key: start_ms + int(f.at_s * 1000) for f in FAULTS}
    flink = FlinkSimJob(FLINK_JOB, fault_at_ms=at["idle_subtask"])
    flink.prepare(start_ms - warmup_ms, horizon_ms + warmup_ms, rng)
    groups = KafkaSim([SimGroup(LAGGING_GROUP, fault_at_ms=at["group_lag"]), SimGroup("audit-archiver", members=1)])
    groups.prepare(start_ms - warmup_ms, horizon_ms + warmup_ms, rng)
    return Fleet(jobs, start_ms, rng, [flink], groups)
