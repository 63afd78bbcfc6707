"""How often a Spark query reports, by its trigger: the one place that decides "what batch spacing to expect".

``no_progress`` (how long a silence is normal), ``batch_running`` (how long a batch may run) and the
pipeline's lags (how much of a real-time job's watermark age is its reporting, :mod:`rules.pipeline`) read
:func:`report_cadence`; none of them measures the spacing of reports on its own.

Spark semantics followed:

- ``ProgressContext.constructNewProgress`` (``ProgressReporter.scala``): a progress's ``timestamp`` is the
  trigger's *start* (``currentTriggerStartTimestamp``) and ``batchDuration`` the time from that start to
  ``finishTrigger``, where the ``QueryProgressEvent`` is posted. So a report reaches a listener or the event
  log ``batchDuration`` after its ``timestamp`` (:func:`report_at`).
- Micro-batch triggers (``ProcessingTimeTrigger``, the default ``ProcessingTime(0)``, ``AvailableNow``): a
  batch every trigger interval while data comes, a ``QueryIdleEvent`` every
  ``spark.sql.streaming.noDataProgressEventInterval`` while none does; the usual spacing is the median gap
  between reports.
- Real-time mode (``RealTimeTrigger(batchDurationMs)``, ``trigger(realTime="5 minutes")``, Spark 4.1+;
  ``MicroBatchExecution`` with a ``RealTimeStreamScanExec``): each batch is a long-running job that
  processes records as they arrive for ``batchDurationMs`` (5 minutes by default) and ends there, then the
  next one starts at once. One progress per batch, posted at its end: the spacing of reports is the batch
  duration however much data flows, and nothing is reported in between. How tidegauge knows the trigger:
  :func:`trigger_kind`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, pairwise

from monitor.model import TRIGGER_EXTRA, Sample, SampleKind, TriggerKind
from monitor.timefmt import format_duration
from rules.history import JobHistory

__all__ = [
    "Cadence",
    "report_at",
    "report_cadence",
    "running_batch",
    "trigger_kind",
]

_RECENT = 21  # reports whose spacing is the usual one (the newest ones)


def report_at(sample: Sample) -> datetime:
    """When Spark posted ``sample``'s report: its ``observed_at`` (the trigger's start) plus its
    ``batch_duration_ms`` (``ProgressContext.finishTrigger``); ``observed_at`` when the duration is
    unknown (an idle event, a gauge). Aware UTC."""
    if sample.batch_duration_ms is None or sample.batch_duration_ms <= 0:
        return sample.observed_at
    return sample.observed_at + timedelta(milliseconds=sample.batch_duration_ms)


def trigger_kind(batches: Sequence[Sample]) -> TriggerKind:
    """The trigger of the query whose job batches (oldest first) are ``batches``: ``REAL_TIME`` when the
    newest batch that names its trigger says ``real_time`` (:data:`monitor.model.TRIGGER_EXTRA`, set by the
    Spark event-log collector when the run's plan has a ``RealTimeStreamScanExec``, and by the ingest
    endpoint when ``TidegaugeListener`` names ``RealTimeTrigger``: :func:`collectors.spark.progress.
    trigger_extras`), else ``MICRO_BATCH`` (the Prometheus servlet says neither: there a real-time query reads
    as a micro-batch one). Only the newest few batches of the newest run are read: a restart may change the
    trigger."""
    run = batches[-1].job.run_id if batches else None
    for sample in islice(reversed(batches), _RECENT):
        if sample.job.run_id != run:
            break
        said = sample.extra.get(TRIGGER_EXTRA)
        if said is not None:
            return TriggerKind.REAL_TIME if said == TriggerKind.REAL_TIME.value else TriggerKind.MICRO_BATCH
    return TriggerKind.MICRO_BATCH


def _median(values: list[timedelta]) -> timedelta | None:
    values.sort()
    return values[len(values) // 2] if values else None


@dataclass(frozen=True, slots=True)
class Cadence:
    """How often a query reports (see :func:`report_cadence`).

    Attributes:
        kind: the trigger.
        report_gap: the median gap between the starts of the newest reports (batches and idle events),
            ``None`` with fewer than two.
        batch_duration: the median ``batchDuration`` of the newest batches, ``None`` when none is known.
    """

    kind: TriggerKind
    report_gap: timedelta | None
    batch_duration: timedelta | None

    @property
    def spacing(self) -> timedelta | None:
        """The time to expect between two reports: in real-time mode the batch duration (each report comes
        at the end of one batch; the gap when no duration is known), else the usual gap."""
        if self.kind is TriggerKind.REAL_TIME and self.batch_duration is not None:
            return self.batch_duration
        return self.report_gap

    def unreported_at(self, batch: Sample, at: datetime) -> timedelta:
        """How much of ``at - watermark of batch`` is Spark's reporting rather than the data's, when ``at``
        comes from another clock than ``batch``'s own time (a pipeline's newest observation).

        Real-time mode: once ``batch`` has reported (``at >= report_at(batch)``) the next batch runs with a
        watermark computed from ``batch``'s rows (``MicroBatchExecution.markMicroBatchEnd`` updates the
        ``WatermarkTracker`` before the next batch is constructed), which Spark reports only at that batch's
        end: about one batch duration of event time newer. So one batch duration then, nothing before.
        Micro-batch triggers: nothing (the next watermark comes with the next, prompt, report).
        """
        if at < report_at(batch):
            return timedelta(0)
        return self.batch_span

    @property
    def batch_span(self) -> timedelta:
        """How long one batch holds its watermark by design: in real-time mode the usual batch duration
        (``RealTimeTrigger.batchDurationMs``: the batch reads records as they come for that long, and
        ``MicroBatchExecution.markMicroBatchEnd`` moves the watermark only when it ends); zero for micro-batch
        triggers (a batch is short, the next one follows when data does) and while no duration is known."""
        if self.kind is not TriggerKind.REAL_TIME or self.batch_duration is None:
            return timedelta(0)
        return self.batch_duration

    def running_allowance(self, batch: Sample, at: datetime) -> timedelta:
        """How much of ``at - watermark of batch`` is ``batch`` running by design rather than the data being
        late, for an instant ``at`` while ``batch``'s watermark is the one in force (at or after its start,
        ``observed_at``): in real-time mode the time ``batch`` has run so far, up to :attr:`batch_span`
        (a batch that overruns it counts as late again); zero for micro-batch triggers. Read by
        ``freshness_slo`` (:mod:`rules.slo`) to judge each minute as ``freshness`` judges each batch: by the
        watermark's distance when it took effect."""
        ran = at - batch.observed_at
        return max(timedelta(0), min(ran, self.batch_span))

    def describe(self) -> str:
        """For messages: ``"it usually reports every 10 s"`` or ``"in real-time mode it reports once per
        5 min batch, at the batch's end"`` (``""`` when nothing is known)."""
        spacing = self.spacing
        if self.kind is TriggerKind.REAL_TIME:
            per = f"{format_duration(spacing)} batch" if spacing is not None else "batch"
            return f"in real-time mode it reports once per {per}, at the batch's end"
        return f"it usually reports every {format_duration(spacing)}" if spacing is not None else ""


def report_cadence(history: JobHistory) -> Cadence:
    """The :class:`Cadence` of a Spark job from its newest batches and idle events (at most the newest
    21 of each), the trigger from :func:`trigger_kind`."""
    batches = history.batches[-_RECENT:]
    times = sorted(s.observed_at for s in (*batches, *history.idle[-_RECENT:]))
    recent = islice(times, max(0, len(times) - _RECENT), None)
    gap = _median([b - a for a, b in pairwise(recent) if b > a])
    durations = [timedelta(milliseconds=s.batch_duration_ms) for s in batches if s.batch_duration_ms]
    return Cadence(trigger_kind(batches), gap, _median(durations))


def running_batch(history: JobHistory) -> Sample | None:
    """The newest trigger that started and has not reported (Spark 4.2+ ``QueryExecutionStartEvent``,
    :attr:`monitor.model.SampleKind.BATCH_STARTED`), ``None`` when every start has its report or the job
    has none.

    Spark (``ProgressContext``): the start event and the batch's progress carry the same instant (the
    trigger's start, ``currentTriggerStartTimestamp``) and the progress is posted when the batch finishes;
    an idle event (``QueryIdleEvent``) likewise carries the start of the trigger that ran no batch. So a
    start is finished when a batch or idle report at or after its instant exists, and running otherwise.
    """
    started = next((s for s in reversed(history.lifecycle) if s.kind is SampleKind.BATCH_STARTED), None)
    if started is None:
        return None
    if history.batches and history.batches[-1].observed_at >= started.observed_at:
        return None
    if history.idle and history.idle[-1].observed_at >= started.observed_at:
        return None
    later = (s for s in reversed(history.lifecycle) if s.observed_at > started.observed_at)
    if any(s.kind is SampleKind.TERMINATED for s in later):
        return None  # the run ended after the start: the batch is not running any more
    return started
