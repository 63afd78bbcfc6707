"""The demo's simulated Flink job, its numbers decided by the reference engine's Flink mode.

Modelled job (Flink 2.x DataStream)::

    env.fromSource(kafkaSource, WatermarkStrategy.forBoundedOutOfOrderness(5 s), "telemetry")   # parallelism 2
       .keyBy(device).window(TumblingEventTimeWindows.of(10 s)).aggregate(count).name("telemetry-window-10s")
       .sinkTo(alerts).name("device-alerts")

Two vertices of two subtasks each: ``Source: telemetry`` (one Kafka partition per subtask, one watermark
generator each) and ``telemetry-window-10s -> Sink: device-alerts`` (a ``keyBy``: every window subtask
reads both source subtasks). The records are generated up front for the whole run (seeded); then

* each source subtask's output watermark over processing time is
  :func:`monitor.watermark.flink.watermark_timeline` of its own records (``BoundedOutOfOrdernessWatermarks``
  emitted every ``pipeline.auto-watermark-interval``);
* the window operator's input watermark, its late drops (``numLateRecordsDropped``) and its firings are
  :func:`monitor.watermark.flink.replay_flink` of all records with one partition per source subtask: the
  minimum over the channels, as ``StatusWatermarkValve`` takes it when no channel is idle (no
  ``withIdleness``: a channel is never idle).

Fault (``idle_subtask``): from its time on, the Kafka partition of source subtask 1 gets no records (its
producer stopped). Without ``withIdleness`` the subtask keeps its last watermark, the minimum over the
window operator's channels stays there: the job's event time is pinned, windows stop firing and their
state grows, while subtask 0 keeps reading.

:meth:`FlinkSimJob.metric_values` answers what the REST metric store would hold at a processing time
(``sourceIdleTime``: ms since the reader last emitted a record; rates over the last 60 s as Flink's
``MeterView``). The window subtask of a key is its index modulo the parallelism (Flink hashes the key into
a key group; the modulo stands in for that). Nothing here reads the clock: times are parameters.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from monitor.demo.flinkfmt import CheckpointView, JobView, VertexView, long_text, operator_metric_name
from monitor.watermark import EventsTable, Tumbling
from monitor.watermark.flink import LONG_MIN, FlinkConfig, replay_flink, watermark_timeline

__all__ = ["CHECKPOINT_INTERVAL_MS", "FlinkSimJob"]

I64 = npt.NDArray[np.int64]
CHECKPOINT_INTERVAL_MS = 10_000
_RATE_WINDOW_MS = 60_000  # MeterView's default time span
_NAMESPACE = uuid.UUID("0f6f3c1e-6a0b-4c8e-8c56-2a7f1f3e9d41")


def _hex_id(name: str) -> str:
    return uuid.uuid5(_NAMESPACE, name).hex


def _count(sorted_ms: I64, at_ms: int) -> int:
    return int(np.searchsorted(sorted_ms, at_ms, side="right"))


def _watermark_at(times_ms: I64, marks_ms: I64, at_ms: int) -> int:
    """The last watermark advanced at or before ``at_ms`` (``Long.MIN_VALUE`` before the first)."""
    i = _count(times_ms, at_ms)
    return int(marks_ms[i - 1]) if i else LONG_MIN


def _rate(sorted_ms: I64, at_ms: int) -> str:
    """Records per second over the last minute, as a Java double's ``toString``."""
    n = _count(sorted_ms, at_ms) - _count(sorted_ms, at_ms - _RATE_WINDOW_MS)
    return repr(n / (_RATE_WINDOW_MS / 1000))


@dataclass(frozen=True, eq=False)
class _Source:
    """One source subtask: its records (arrival order) and its output watermark timeline."""

    arrival_ms: I64
    ts_ms: I64
    wm_time_ms: I64
    wm_ms: I64


@dataclass(frozen=True, eq=False)
class _Window:
    """One window subtask: arrival times of its records, of its late drops, of its firings."""

    arrival_ms: I64
    late_ms: I64
    fired_ms: I64


@dataclass(eq=False)
class FlinkSimJob:
    """One simulated Flink streaming job (see the module docstring).

    Attributes:
        name: the job name (tidegauge's Flink ``job_id``).
        source: the source's name (vertex ``Source: <source>``).
        window: the window operator's name. sink: the sink's name (``Sink: <sink>``).
        rate_per_s: records per second per source subtask.
        fault_at_ms: when subtask :attr:`idle_subtask` stops getting records (``None``: never).
    """

    name: str
    source: str = "telemetry"
    window: str = "telemetry-window-10s"
    sink: str = "device-alerts"
    parallelism: int = 2
    rate_per_s: float = 8.0
    keys: int = 24
    delay_ms: int = 5_000
    window_ms: int = 10_000
    idle_subtask: int = 1
    fault_at_ms: int | None = None
    _sources: list[_Source] = field(default_factory=list)
    _windows: list[_Window] = field(default_factory=list)
    _open_ms: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # arrival of kept records
    _open_end_ms: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # their window's end
    _open_pair: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # key * 2^40 + window index
    _job_wm_time_ms: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _job_wm_ms: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _submitted_ms: int = 0
    _state_bytes: dict[int, int] = field(default_factory=dict)

    @property
    def jid(self) -> str:
        """The Flink job id (32 hex digits, stable per name)."""
        return _hex_id(self.name)

    @property
    def source_vertex(self) -> str:
        """Id of the source vertex."""
        return _hex_id(f"{self.name}/source")

    @property
    def window_vertex(self) -> str:
        """Id of the window vertex."""
        return _hex_id(f"{self.name}/window")

    @property
    def running_ms(self) -> int:
        """When the job switched to ``RUNNING``."""
        return self._submitted_ms + 550

    def prepare(self, start_ms: int, horizon_ms: int, rng: np.random.Generator) -> None:
        """Generate the records from ``start_ms`` (the job's submission) for ``horizon_ms`` and run the engine."""
        self._submitted_ms = start_ms
        first, end = self.running_ms + 900, start_ms + horizon_ms
        config = FlinkConfig(delay_ms=self.delay_ms, window=Tumbling(self.window_ms), start_ms=self.running_ms,
                             run_until_ms=end, partitions=tuple(range(self.parallelism)))
        arrivals, stamps, keys, parts = [], [], [], []
        self._sources = []
        for sub in range(self.parallelism):
            n = int(self.rate_per_s * horizon_ms / 1000 * 1.3) + 16
            arrival = (first + np.cumsum(rng.exponential(1000 / self.rate_per_s, n))).astype(np.int64)
            stop = end if sub != self.idle_subtask or self.fault_at_ms is None else self.fault_at_ms
            arrival = arrival[arrival < stop]
            # a device's reading reaches Kafka a little late: mostly within the 5 s bound, rarely more
            ts = arrival - np.minimum(rng.exponential(1_000, len(arrival)), 7_000).astype(np.int64)
            one = watermark_timeline(ts, np.zeros(len(ts), dtype=np.int64), 1, arrival, config)
            self._sources.append(_Source(arrival, ts, one.advance_time_ms, one.advance_ms))
            arrivals.append(arrival)
            stamps.append(ts)
            keys.append(rng.integers(0, self.keys, len(arrival)))
            parts.append(np.full(len(arrival), sub, dtype=np.int64))
        arrival_all = np.concatenate(arrivals)
        order = np.argsort(arrival_all, kind="stable")
        arrival_all = arrival_all[order]
        ts_all = np.concatenate(stamps)[order]
        key_all = np.concatenate(keys)[order]
        events = EventsTable.from_columns(
            ts_all * 1000, arrival_ms=arrival_all, key=[f"device-{k:02d}" for k in key_all.tolist()],
            partition=np.concatenate(parts)[order],
        )
        result = replay_flink(events, config)
        self._job_wm_time_ms, self._job_wm_ms = result.timeline.advance_time_ms, result.timeline.advance_ms
        key_index = np.array([int(k.rsplit("-", 1)[1]) for k in result.key_names], dtype=np.int64)
        late = np.zeros(len(ts_all), dtype=np.bool_)
        late[result.late_rows] = True
        fired_sub = key_index[result.firings.key_codes] % self.parallelism
        self._windows = []
        for w in range(self.parallelism):
            mine = key_all % self.parallelism == w
            self._windows.append(_Window(arrival_all[mine], arrival_all[mine & late],
                                         np.sort(result.firings.time_ms[fired_sub == w])))
        kept = ~late
        index = ts_all[kept] // self.window_ms
        self._open_ms, self._open_end_ms = arrival_all[kept], (index + 1) * self.window_ms
        self._open_pair = key_all[kept] * (1 << 40) + index
        self._state_bytes = {}

    # ---------------------------------------------------------------------------------------- metrics

    def _ops(self) -> tuple[str, str, str]:
        return (operator_metric_name(f"Source: {self.source}"), operator_metric_name(self.window),
                operator_metric_name(f"Sink: {self.sink}"))

    def source_records(self, subtask: int) -> tuple[I64, I64]:
        """``(arrival ms, event time ms)`` of the records source subtask ``subtask`` reads, arrival order."""
        s = self._sources[subtask]
        return s.arrival_ms, s.ts_ms

    def job_watermark(self, now_ms: int) -> int:
        """The window operator's input watermark at ``now_ms`` (``Long.MIN_VALUE``: none yet)."""
        return _watermark_at(self._job_wm_time_ms, self._job_wm_ms, now_ms)

    def metric_ids(self, vertex_id: str) -> list[str]:
        """The ids ``GET .../vertices/<vid>/metrics`` lists (``[]`` for an unknown vertex)."""
        return sorted(self.metric_values(vertex_id, self.running_ms + 1_000))

    def metric_values(self, vertex_id: str, now_ms: int) -> dict[str, str]:
        """Every metric of the vertex's subtasks at ``now_ms``, by id (values as Flink serves them)."""
        src, win, sink = self._ops()
        out: dict[str, str] = {}
        task = {"busyTimeMsPerSecond": "14.0", "idleTimeMsPerSecond": "986", "backPressuredTimeMsPerSecond": "0",
                "isBackPressured": "false", "mailboxQueueSize": "0"}
        if vertex_id == self.source_vertex:
            for i, s in enumerate(self._sources):
                n = _count(s.arrival_ms, now_ms)
                wm = _watermark_at(s.wm_time_ms, s.wm_ms, now_ms)
                last = int(s.arrival_ms[n - 1]) if n else self.running_ms
                out.update({f"{i}.{k}": v for k, v in task.items()})
                out.update({
                    f"{i}.numRecordsIn": "0", f"{i}.numRecordsOut": str(n), f"{i}.numRecordsInPerSecond": "0.0",
                    f"{i}.numRecordsOutPerSecond": _rate(s.arrival_ms, now_ms),
                    f"{i}.{src}.numRecordsIn": "0", f"{i}.{src}.numRecordsOut": str(n),
                    f"{i}.{src}.numRecordsInPerSecond": "0.0",
                    f"{i}.{src}.numRecordsOutPerSecond": _rate(s.arrival_ms, now_ms),
                    f"{i}.{src}.currentOutputWatermark": long_text(wm),
                    f"{i}.{src}.sourceIdleTime": str(max(0, now_ms - last)),
                    f"{i}.{src}.currentEmitEventTimeLag": str(int(s.arrival_ms[n - 1] - s.ts_ms[n - 1]) if n else 0),
                    f"{i}.{src}.watermarkLag": str(now_ms - wm if wm != LONG_MIN else 0),
                })
        elif vertex_id == self.window_vertex:
            mark = long_text(self.job_watermark(now_ms))
            for i, w in enumerate(self._windows):
                n, fired = _count(w.arrival_ms, now_ms), _count(w.fired_ms, now_ms)
                out.update({f"{i}.{k}": v for k, v in task.items()})
                out.update({
                    f"{i}.numRecordsIn": str(n), f"{i}.numRecordsOut": "0",
                    f"{i}.numRecordsInPerSecond": _rate(w.arrival_ms, now_ms), f"{i}.numRecordsOutPerSecond": "0.0",
                    f"{i}.currentInputWatermark": mark,
                    f"{i}.{win}.currentInputWatermark": mark, f"{i}.{win}.currentOutputWatermark": mark,
                    f"{i}.{win}.numLateRecordsDropped": str(_count(w.late_ms, now_ms)),
                    f"{i}.{win}.numRecordsIn": str(n), f"{i}.{win}.numRecordsOut": str(fired),
                    f"{i}.{win}.numRecordsInPerSecond": _rate(w.arrival_ms, now_ms),
                    f"{i}.{win}.numRecordsOutPerSecond": _rate(w.fired_ms, now_ms),
                    f"{i}.{sink}.currentInputWatermark": mark, f"{i}.{sink}.currentOutputWatermark": mark,
                    f"{i}.{sink}.numRecordsIn": str(fired), f"{i}.{sink}.numRecordsOut": "0",
                    f"{i}.{sink}.numRecordsInPerSecond": _rate(w.fired_ms, now_ms),
                    f"{i}.{sink}.numRecordsOutPerSecond": "0.0",
                })
        return out

    def watermarks(self, vertex_id: str, now_ms: int) -> dict[str, str]:
        """``GET .../vertices/<vid>/watermarks``: the tasks' ``currentInputWatermark`` (none for a source)."""
        values = self.metric_values(vertex_id, now_ms)
        return {k: v for k, v in values.items() if k.count(".") == 1 and k.endswith(".currentInputWatermark")}

    # ------------------------------------------------------------------------------------ checkpoints

    def _state_size(self, at_ms: int) -> int:
        """Bytes of window state at ``at_ms``: one accumulator and one timer per open (key, window)."""
        cached = self._state_bytes.get(at_ms)
        if cached is None:
            wm = self.job_watermark(at_ms)
            open_ = (self._open_ms <= at_ms) & (self._open_end_ms - 1 > wm)
            pairs = len(np.unique(self._open_pair[open_]))
            cached = self._state_bytes[at_ms] = 9_800 + 96 * pairs
        return cached

    def completed_checkpoints(self, now_ms: int) -> list[CheckpointView]:
        """Checkpoints completed by ``now_ms``, oldest first (every 10 s after the job started running)."""
        out: list[CheckpointView] = []
        k = 1
        while True:
            trigger = self.running_ms + k * CHECKPOINT_INTERVAL_MS
            ack = trigger + 140 + (k * 37) % 180
            if ack > now_ms:
                return out
            out.append(CheckpointView(k, trigger, ack, self._state_size(trigger), 52 + (k * 131) % 600,
                                      2 * self.parallelism))
            k += 1

    def job_metrics(self, now_ms: int) -> dict[str, str]:
        """Job-scope metrics (``/jobs/<jid>/metrics``): restarts, uptime, checkpoint counters."""
        done = self.completed_checkpoints(now_ms)
        last = done[-1] if done else None
        return {
            "numRestarts": "0", "uptime": str(now_ms - self.running_ms), "runningTime": str(now_ms - self.running_ms),
            "downtime": "0", "restartingTime": "0", "numberOfCompletedCheckpoints": str(len(done)),
            "numberOfFailedCheckpoints": "1", "numberOfInProgressCheckpoints": "0",
            "totalNumberOfCheckpoints": str(len(done) + 1),
            "lastCheckpointSize": str(last.state_size if last else -1),
            "lastCheckpointDuration": str(last.ack_ms - last.trigger_ms if last else -1),
            "lastCompletedCheckpointId": str(last.id if last else -1),
        }

    def view(self, now_ms: int) -> JobView:
        """The job and its vertices at ``now_ms`` (IO counters included)."""
        src_out = sum(_count(s.arrival_ms, now_ms) for s in self._sources)
        win_in = sum(_count(w.arrival_ms, now_ms) for w in self._windows)
        start = self._submitted_ms + 940
        source = VertexView(self.source_vertex, f"Source: {self.source}", self.parallelism,
                            f"Source: {self.source}<br/>", start, write_records=src_out, write_bytes=38 * src_out)
        window = VertexView(
            self.window_vertex, f"{self.window} -> Sink: {self.sink}", self.parallelism,
            f"Window(TumblingEventTimeWindows({self.window_ms}), EventTimeTrigger, CountAggregate, "
            f"PassThroughWindowFunction)<br/>+- Sink: {self.sink}<br/>",
            start + 6, inputs=(self.source_vertex,), read_records=win_in, read_bytes=38 * win_in,
        )
        return JobView(self.jid, self.name, self._submitted_ms, self._submitted_ms + 400, self.running_ms,
                       (source, window))
