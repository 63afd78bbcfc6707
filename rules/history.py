"""One job's sample history, split once into the series the rules read (precomputed per job).

:func:`job_history` makes a single pass over a job's samples and sorts them into:

* ``batches``: the job-scope ``PROGRESS``/``GAUGE`` samples (Spark micro-batches, or Flink/Kafka polls of
  the whole job), in time order, a batch read twice kept once (:func:`rules.batches.progress_batches`'s
  rule for Spark progress);
* ``series``: the same kinds for each narrower :class:`~monitor.model.Scope` (a Spark source, a Flink
  subtask, a Kafka topic partition), each in time order;
* ``lifecycle``: ``STARTED``/``TERMINATED`` samples; ``idle``: Spark ``QueryIdleEvent`` samples.

Every rule reads these lists instead of filtering the raw history again, so a full evaluation touches each
sample once plus each rule's window at the tail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise

from monitor.model import Engine, JobRef, Sample, SampleKind, Scope

__all__ = ["JobHistory", "job_history"]

_MEASURED = (SampleKind.PROGRESS, SampleKind.GAUGE)


@dataclass(slots=True)
class JobHistory:
    """A job's samples split by role (see the module docstring).

    Attributes:
        job: the job as named by its newest sample (its current ``run_id``/name).
        batches: job-scope progress/gauge samples, oldest first.
        series: per-scope progress/gauge samples, oldest first within each scope.
        lifecycle: ``STARTED``/``TERMINATED`` samples, oldest first.
        idle: ``IDLE`` samples, oldest first.
        newest_at: the newest ``observed_at`` of any sample.
    """

    job: JobRef
    batches: list[Sample] = field(default_factory=list)
    series: dict[Scope, list[Sample]] = field(default_factory=dict)
    lifecycle: list[Sample] = field(default_factory=list)
    idle: list[Sample] = field(default_factory=list)
    newest_at: datetime | None = None

    @property
    def engine(self) -> Engine:
        """The job's engine."""
        return self.job.engine


def _time(sample: Sample) -> datetime:
    return sample.observed_at


def _is_sorted(samples: Sequence[Sample]) -> bool:
    return all(a.observed_at <= b.observed_at for a, b in pairwise(samples))


def job_history(samples: Sequence[Sample]) -> JobHistory | None:
    """Split one job's samples (any order; oldest-first input is not re-sorted) into a :class:`JobHistory`.

    Returns ``None`` for an empty history.
    """
    if not samples:
        return None
    ordered = samples if _is_sorted(samples) else sorted(samples, key=_time)
    history = JobHistory(job=ordered[-1].job, newest_at=ordered[-1].observed_at)
    batches = history.batches
    series = history.series
    seen: set[tuple[str | None, int | None, datetime]] = set()
    for sample in ordered:
        kind = sample.kind
        if kind in _MEASURED:
            scope = sample.scope
            if (
                scope.source is None
                and scope.partition is None
                and scope.subtask is None
                and scope.operator is None
            ):
                if sample.batch_id is not None:
                    key = (sample.job.run_id, sample.batch_id, sample.observed_at)
                    if key in seen:
                        continue
                    seen.add(key)
                batches.append(sample)
            else:
                bucket = series.get(scope)
                if bucket is None:
                    series[scope] = [sample]
                else:
                    bucket.append(sample)
        elif kind is SampleKind.IDLE:
            history.idle.append(sample)
        else:
            history.lifecycle.append(sample)
    return history
