"""The culprit record of a Spark or Flink future-timestamp jump, located when the daemon evaluates, stored
with the finding.

Where: the evaluate stage (its own thread: a poll is never held up), once per (query, batch that carried the
record) and process — the answer (or the error) is kept and attached to every later instant of the same
finding, so the finding episode stores it (``details["culprit"]`` and one sentence of the message,
:func:`rules.future.with_culprit`) and the dashboard's Job page and the notifications show it from the
stored finding. How long: each locate is bounded by its ``timeout`` per request and for the read and by
``max_bytes`` (``targets.kafka[].locate_event_time``). What it reads: the carrier batch's stored progress
document (the raw document the Spark collector stored, :func:`monitor.store.iter_raw_documents`) for its
Kafka ``startOffset``/``endOffset``, then :func:`collectors.kafka.culprit.locate_culprit` in the configured
cluster. Flink: a source subtask's ``future_timestamp`` finding carries the Kafka offsets its reader handed
on around the watermark's jump (``details["kafka_offset_ranges"]``, :data:`rules.future.KAFKA_RANGES`, from
the ``KafkaSourceReader`` ``currentOffset`` gauges the collector reads): :func:`locate_flink` searches those,
once per (job, subtask, ranges). Any failure (the document not stored, the broker not answering, the range gone, a bug of ours) is
stored as the culprit's ``errors``; monitoring goes on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from collectors.kafka import KafkaOptions
from collectors.kafka.culprit import Located, OffsetRange, batch_ranges, locate_culprit, ranges_of
from collectors.kafka.spark import source_offsets
from monitor.daemon.tick import JobKey
from monitor.model import Engine, Finding, Sample, Scope
from monitor.store import iter_raw_documents
from rules.future import CARRIER, KAFKA_RANGES, RULE, with_culprit
from rules.replay import Instant

__all__ = ["CulpritLocator", "CulpritTarget", "Locate", "locate_flink"]

log = logging.getLogger(__name__)

#: :func:`collectors.kafka.culprit.locate_culprit`'s signature (a test may pass its own recorder of calls).
Locate = Callable[..., Located]


@dataclass(frozen=True, slots=True)
class CulpritTarget:
    """One cluster where jumps are located (from ``targets.kafka[].locate_event_time``).

    Attributes:
        options: the cluster (the lag collector's options; ``request_timeout_s`` is the locate's timeout).
        jobs: Spark query or Flink job names or ids located here; empty means every job.
        event_time_field: the JSON path of the event time, ``None`` for the record timestamp.
        max_bytes: bytes of keys and values read at most per jump.
    """

    options: KafkaOptions
    jobs: frozenset[str] = frozenset()
    event_time_field: str | None = None
    max_bytes: int = 1 << 20

    def wants(self, finding: Finding) -> bool:
        """Whether the finding's query is located in this cluster."""
        return not self.jobs or finding.job.job_id in self.jobs or (finding.job.name or "") in self.jobs


def _failed(target: CulpritTarget, ranges: tuple[OffsetRange, ...], why: str) -> dict[str, Any]:
    return Located(None, "fetch", target.event_time_field, ranges, errors=[why]).to_details()


def locate_flink(target: CulpritTarget, finding: Finding, locate: Locate = locate_culprit) -> dict[str, Any] | None:
    """The located record (:meth:`Located.to_details`) of a Flink source subtask's ``future_timestamp``
    finding, searched in the Kafka offsets its reader handed on around the watermark's jump
    (``details[KAFKA_RANGES]``); ``None`` for a finding without them (not a Kafka source, or a collector
    that does not read the offsets). Errors are in the result, never raised."""
    if finding.rule != RULE or KAFKA_RANGES not in finding.details:
        return None
    where = f"flink job {finding.job.name or finding.job.job_id} subtask {finding.scope.subtask}"
    ranges = ranges_of(finding.details.get(KAFKA_RANGES))
    if not ranges:
        return _failed(
            target, (), f"{where}: its Kafka reader's offsets did not move between the polls around the watermark's "
            "jump (nothing read to search)",
        )  # fmt: skip
    try:
        found = locate(
            target.options, ranges, event_time_field=target.event_time_field, max_bytes=target.max_bytes,
            timeout_s=target.options.request_timeout_s,
        )  # fmt: skip
    except Exception as exc:  # a bug must not stop the evaluation
        log.exception("locating the record of %s failed", where)
        return _failed(target, ranges, f"{where}: locating failed: {type(exc).__name__}: {exc}")
    log.info("%s: culprit record %s", where, found.record.to_details() if found.record else found.errors)
    return found.to_details()


class CulpritLocator:
    """Attaches the located record to ``future_timestamp`` findings of Spark queries (see the module docstring).

    Args:
        targets: the clusters, first match wins.
        locate: the locating function (default :func:`collectors.kafka.culprit.locate_culprit`).
    """

    def __init__(self, targets: Sequence[CulpritTarget], locate: Locate = locate_culprit) -> None:
        self._targets = list(targets)
        self._locate = locate
        self._known: dict[tuple[str, int], dict[str, Any]] = {}
        self._flink_known: dict[tuple[str, Scope, tuple[OffsetRange, ...]], dict[str, Any] | None] = {}

    def __bool__(self) -> bool:
        return bool(self._targets)

    def attach(self, session: Session, key: JobKey, samples: Sequence[Sample], instant: Instant) -> Instant:
        """``instant`` with the culprit attached to its job-level ``future_timestamp`` findings that name
        the batch that carried the record (``details["carrier_batch_id"]``), or, for a Flink job, to its source
        subtasks' findings that carry Kafka offsets (:func:`locate_flink`); other findings unchanged."""
        if not any(f.rule == RULE for f in instant.findings):
            return instant
        if key[0] is Engine.FLINK:
            return dataclasses.replace(instant, findings=[self._flink(f) for f in instant.findings])
        if key[0] is not Engine.SPARK:
            return instant
        out: list[Finding] = []
        for f in instant.findings:
            carrier = f.details.get(CARRIER)
            target = next((t for t in self._targets if t.wants(f)), None)
            if f.rule != RULE or not f.scope.is_job() or not isinstance(carrier, int) or target is None:
                out.append(f)
                continue
            known = self._known.get((key[1], carrier))
            if known is None:
                known = self._known[(key[1], carrier)] = self._located(session, key, samples, carrier, target)
            out.append(with_culprit(f, known))
        return dataclasses.replace(instant, findings=out)

    def _flink(self, finding: Finding) -> Finding:
        target = next((t for t in self._targets if t.wants(finding)), None)
        if target is None or finding.rule != RULE or KAFKA_RANGES not in finding.details:
            return finding
        cache = (finding.job.job_id, finding.scope, ranges_of(finding.details.get(KAFKA_RANGES)))
        if cache not in self._flink_known:
            self._flink_known[cache] = locate_flink(target, finding, self._locate)
        known = self._flink_known[cache]
        return with_culprit(finding, known) if known is not None else finding

    def _progress(
        self, session: Session, key: JobKey, samples: Sequence[Sample], batch: int
    ) -> Mapping[str, Any] | None:
        """The stored progress document of ``batch`` (``None`` when it is not stored)."""
        at = next((s.observed_at for s in samples if s.batch_id == batch and s.scope.is_job()), None)
        if at is None:
            return None
        for raw in iter_raw_documents(
            session, job_id=key[1], engine=Engine.SPARK, since=at, until=at + timedelta(milliseconds=1)
        ):
            doc = raw.document.get("progress", raw.document)
            if isinstance(doc, Mapping) and doc.get("batchId") == batch:
                return doc
        return None

    def _located(
        self, session: Session, key: JobKey, samples: Sequence[Sample], batch: int, target: CulpritTarget
    ) -> dict[str, Any]:
        where = f"spark query {key[1]} batch {batch}"
        try:
            progress = self._progress(session, key, samples, batch)
            if progress is None:
                return _failed(target, (), f"{where}: its progress document is not stored (no Kafka offsets to search)")
            ranges = tuple(
                r for src in source_offsets(progress, where) for r in batch_ranges(src.start_offsets, src.end_offsets)
            )
            if not ranges:
                return _failed(target, (), f"{where}: the batch read no Kafka offsets (no Kafka source range in its progress)")
            found = self._locate(
                target.options, ranges, event_time_field=target.event_time_field, max_bytes=target.max_bytes,
                timeout_s=target.options.request_timeout_s,
            )  # fmt: skip
        except Exception as exc:  # a bug or a bad document must not stop the evaluation
            log.exception("locating the record of %s failed", where)
            return _failed(target, (), f"{where}: locating failed: {type(exc).__name__}: {exc}")
        log.info("%s: culprit record %s", where, found.record.to_details() if found.record else found.errors)
        return found.to_details()
