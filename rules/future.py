"""Future-timestamp jump: a batch's event-time max (or watermark) is ahead of the batch's own time.

Spark semantics followed (``MicroBatchExecution`` / ``WatermarkTracker``): after each batch the watermark
becomes ``max(old watermark, max event time seen - delay)`` and never goes back; the progress of batch
``n`` reports the watermark batch ``n`` *ran with* (computed after batch ``n - 1``) and the event-time
stats (``eventTime.max``) of batch ``n``'s own rows. So one mis-dated row in batch ``n`` shows as
``event_time_max`` far ahead of the batch ``timestamp`` in batch ``n``, and as a watermark far ahead in
batch ``n + 1``; from then on every correctly dated row is older than the watermark and is dropped as late.
The batch ``timestamp`` (trigger time) stands in for "now": no wall clock is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from pydantic import Field

from monitor.model import Engine, Finding, Sample, Severity
from monitor.timefmt import BEYOND_RANGE, format_duration, format_instant_short, is_beyond_range
from rules.common import flink_scope_name, is_epoch, scope_name, since_index
from rules.history import JobHistory
from rules.jumps import DEFAULT_SKEW, UNITS_HIGH, ahead, batch_name, skew_start, when
from rules.leaps import DEFAULT_JUMP_FACTOR, DEFAULT_MIN_JUMP, find_leap
from rules.params import Duration, RuleParams
from rules.remedies import Cause, remedy

__all__ = [
    "CARRIER",
    "CULPRIT",
    "KAFKA_RANGES",
    "KAFKA_RANGES_FROM_START",
    "RULE",
    "UNITS_RULE",
    "FutureParams",
    "UnitsParams",
    "culprit_sentence",
    "evaluate_future",
    "evaluate_units",
    "with_culprit",
]

RULE = "future_timestamp"
#: ``details`` key of a batch-level finding: the batch whose rows carried the mis-dated record (Spark: the
#: batch with the event-time max ahead, or the one before the watermark moved).
CARRIER = "carrier_batch_id"
#: ``details`` key of the located record (:func:`with_culprit`; the shape of
#: ``collectors.kafka.culprit.Located.to_details``).
CULPRIT = "culprit"
#: ``details`` key of a Flink source subtask's finding: the Kafka offsets its reader handed on between the
#: polls around the watermark's jump, ``[{"topic", "partition", "start", "end"}]`` (``[start, end)``), the
#: ranges the record is in (from the subtasks' ``extra["kafka_offsets"]``, ``KafkaSourceReader`` ``currentOffset``).
KAFKA_RANGES = "kafka_offset_ranges"
#: ``details`` key: the partitions of :data:`KAFKA_RANGES` searched from offset 0 (``["topic[p]"]``): no poll
#: before the jump reported where their reader was.
KAFKA_RANGES_FROM_START = "kafka_ranges_from_log_start"
#: Polls before the first one ahead whose offsets start the range: the source's watermark follows a record
#: only at its next periodic emission (``pipeline.auto-watermark-interval``, 200 ms by default), so a poll
#: may already see the record's offset read and the watermark not yet moved; starting one poll earlier keeps
#: the record inside the range.
_POLLS_BEFORE = 2
UNITS_RULE = "event_time_units"
#: Event times outside [1971, UNITS_HIGH = 2200) while rows flow are a unit mismatch, not a clock problem.
UNITS_LOW = datetime(1971, 1, 1, tzinfo=UTC)


class FutureParams(RuleParams):
    """``future_timestamp`` parameters.

    Attributes:
        skew: how far ahead of the observation time an event time / watermark may be (default 1h).
        jump_factor: a watermark advance this many times the median per-batch advance is a jump...
        min_jump: ...if it is also at least this long (default 1h), and...
        jump_window: ...it happened within this much sample time before the newest batch (default 15m).
    """

    skew: Duration = DEFAULT_SKEW
    jump_factor: float = Field(DEFAULT_JUMP_FACTOR, gt=1.0)
    min_jump: Duration = DEFAULT_MIN_JUMP
    jump_window: Duration = timedelta(minutes=15)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """The jump window plus 15 minutes of usual advances before it."""
        return self.jump_window + timedelta(minutes=15), timedelta(0)


def _dropped_after(batches: Sequence[Sample]) -> tuple[int, int]:
    dropped = sum(b.dropped_by_watermark for b in batches if b.dropped_by_watermark)
    rows = sum(b.num_input_rows for b in batches if b.num_input_rows)
    return dropped, rows


def _surge_text(batches: Sequence[Sample]) -> str:
    dropped, rows = _dropped_after(batches)
    if not dropped:
        return ""
    return f" Since then {dropped} of {rows} input rows were dropped as late."


def _jump_remedy(engine: Engine, sample: Sample, skew: timedelta) -> str:
    return remedy(engine, Cause.FUTURE_JUMP, before=batch_name(sample), skew=format_duration(skew))


def _skew_finding(params: FutureParams, history: JobHistory, now: datetime) -> Finding | None:
    batches = history.batches
    start = skew_start(batches, params.skew)
    if start is not None:
        first = batches[start]
        value = ahead(first, params.skew)
        assert value is not None
        which = "event-time max" if value == first.event_time_max else "watermark"
        message = (
            f"{when(first)}: {which} {format_instant_short(value)} is "
            f"{format_duration(value - first.observed_at)} ahead of the observation time (allowed skew "
            f"{format_duration(params.skew)}); the watermark follows it and honest rows are dropped as late."
            f"{_surge_text(batches[start:])} {_jump_remedy(history.engine, first, params.skew)}"
        )
        dropped, rows = _dropped_after(batches[start:])
        # the rows of the batch whose event-time max is ahead carry the record; a watermark ahead was moved
        # by the batch before it
        carrier = first if which == "event-time max" else batches[start - 1] if start > 0 else None
        return Finding(
            RULE,
            Severity.CRITICAL,
            first.job,  # the run of the batch named (a later restart has another run id)
            message,
            now,
            batch_id=first.batch_id,
            details={
                "ahead_seconds": (value - first.observed_at).total_seconds(),
                "since_batch_id": first.batch_id,
                "dropped_since": dropped,
                "rows_since": rows,
                CARRIER: carrier.batch_id if carrier is not None else None,
            },
        )
    return None


def _kafka_offsets(sample: Sample) -> dict[tuple[str, int], int]:
    """A Flink subtask sample's Kafka reader position, ``(topic, partition) -> offset of the last record``."""
    out: dict[tuple[str, int], int] = {}
    entries = sample.extra.get("kafka_offsets")
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, Mapping) and isinstance(e.get("topic"), str):
            part, offset = e.get("partition"), e.get("offset")
            if isinstance(part, int) and isinstance(offset, int) and not isinstance(offset, bool):
                out[(e["topic"], part)] = offset
    return out


def _kafka_ranges(samples: Sequence[Sample], skew: timedelta) -> tuple[list[dict[str, Any]], list[str]] | None:
    """The Kafka offsets a source subtask read from before its watermark went ahead to the first poll that
    saw it ahead (``[start, end)`` per partition, :data:`KAFKA_RANGES` shape), and the partitions whose
    start is not known (no earlier poll in the history reported them: a one-shot check, or a jump older than
    the history): those are searched from offset 0 (the log's start; ListOffsets maxTimestamp finds the
    record without reading when the event time is the record timestamp). ``None`` when the subtask reports
    no Kafka offsets."""
    k = len(samples) - 1
    while k > 0 and ahead(samples[k - 1], skew) is not None:
        k -= 1
    end = _kafka_offsets(samples[k])
    if not end:
        return None
    before = [_kafka_offsets(s) for s in samples[max(0, k - _POLLS_BEFORE) : k]]
    out: list[dict[str, Any]] = []
    unknown: list[str] = []
    for (topic, part), last in sorted(end.items()):
        start = next((b[(topic, part)] for b in before if (topic, part) in b), None)
        if start is None:
            unknown.append(f"{topic}[{part}]")
        first = 0 if start is None else start + 1
        if last + 1 > first:
            out.append({"topic": topic, "partition": part, "start": first, "end": last + 1})
    return out, unknown


def _scope_finding(params: FutureParams, history: JobHistory, now: datetime) -> list[Finding]:
    out: list[Finding] = []
    flink = history.engine is Engine.FLINK
    job = history.job.name or history.job.job_id
    for scope, samples in history.series.items():
        if flink and scope.source is None:
            continue  # downstream vertices only inherit a source's watermark: name where it entered
        value = ahead(samples[-1], params.skew)
        if value is None:
            continue
        newest = samples[-1]
        name = flink_scope_name(job, newest) if flink else scope_name(scope)
        details: dict[str, Any] = {"ahead_seconds": (value - newest.observed_at).total_seconds()}
        read = _kafka_ranges(samples, params.skew) if flink else None
        if read is not None:
            details[KAFKA_RANGES] = read[0]
            if read[1]:
                details[KAFKA_RANGES_FROM_START] = read[1]
        out.append(
            Finding(
                RULE,
                Severity.CRITICAL,
                history.job,
                f"{name}: watermark/event time {format_instant_short(value)} is "
                f"{format_duration(value - newest.observed_at)} ahead of the observation time "
                f"{format_instant_short(newest.observed_at)} (allowed skew {format_duration(params.skew)}): a record with a future "
                f"timestamp moved it. {_jump_remedy(history.engine, newest, params.skew)}",
                now,
                scope=scope,
                details=details,
            )
        )
    return out


def _jump_finding(params: FutureParams, history: JobHistory, now: datetime) -> Finding | None:
    batches = history.batches
    if len(batches) < 5:
        return None
    cutoff = batches[-1].observed_at - params.jump_window
    recent = since_index(batches, cutoff)
    # the watermark never goes back (Spark checkpoints it): if it moved less than min_jump over the
    # window (from the batch before it to the newest), no single advance inside can be a jump
    first_wm = next(
        (wm for k in range(max(0, recent - 1), len(batches)) if (wm := batches[k].watermark) is not None), None
    )
    last_wm = next((b.watermark for b in reversed(batches) if b.watermark is not None), None)
    if first_wm is None or last_wm is None or last_wm - first_wm < params.min_jump:
        return None
    tail = batches[max(0, recent - 21) :]  # the window plus up to 20 advances before it
    known = [(b, b.watermark) for b in tail if b.watermark is not None and not is_epoch(b.watermark)]
    for i in range(len(known) - 1, 0, -1):
        cur, wm = known[i]
        if cur.observed_at < cutoff:
            break
        advance = wm - known[i - 1][1]
        if advance < params.min_jump:
            continue
        prior = [b[1] - a[1] for a, b in pairwise(known[max(0, i - 21) : i])]
        positive = sorted(p for p in prior if p > timedelta(0))
        if len(positive) < 3:
            continue
        usual = positive[len(positive) // 2]
        if advance < usual * params.jump_factor:
            continue
        message = (
            f"{when(cur)}: the watermark jumped {format_duration(advance)} "
            f"to {format_instant_short(wm)}, {advance / usual:.0f} times its usual per-batch advance of "
            f"{format_duration(usual)}: a row with a future event time came in the batch before."
            f"{_surge_text([k[0] for k in known[i:]])} {_jump_remedy(history.engine, known[i - 1][0], params.skew)}"
        )
        return Finding(
            RULE,
            Severity.CRITICAL,
            cur.job,  # the run of the batch named
            message,
            now,
            batch_id=cur.batch_id,
            details={
                "advance_seconds": advance.total_seconds(),
                "usual_advance_seconds": usual.total_seconds(),
                CARRIER: known[i - 1][0].batch_id,
            },
        )
    return None


def _leap_finding(params: FutureParams, history: JobHistory, now: datetime) -> Finding | None:
    leap = find_leap(history.batches, params.min_jump, params.jump_factor, history.event_max_top)
    if leap is None:
        return None
    batch = leap.batch
    assert batch.event_time_max is not None
    usual = f", usually +{format_duration(leap.usual)} per batch" if leap.usual is not None else ""
    delay = f", beyond the watermark delay of {format_duration(leap.delay)}" if leap.delay is not None else ""
    if leap.followed_at is not None:
        moved = f" +{format_duration(leap.watermark_advance)}" if leap.watermark_advance is not None else ""
        follow = (
            f" The watermark followed in batch {leap.followed_at.batch_id}{moved} (to "
            f"{format_instant_short(leap.followed_at.watermark)})" if leap.followed_at.watermark is not None else ""
        )
    else:
        follow = " The watermark follows in the next batch"
    after = history.batches[leap.index + 1 :]
    dropped, rows = _dropped_after(after)
    drops = f" and {dropped} of the {rows} rows since were dropped as late." if dropped else "."
    message = (
        f"batch {batch.batch_id} at {format_instant_short(batch.observed_at)}: event-time max {format_instant_short(batch.event_time_max)} "
        f"leapt {format_duration(leap.leap)} beyond the data's own progression (newest event time before: "
        f"{format_instant_short(leap.previous_max)}{usual}{delay}), while the rows after it continue the old progression: "
        f"a mis-dated row (processing time cannot show it: every event time here is in the past).{follow}{drops} "
        f"{_jump_remedy(history.engine, batch, params.skew)}"
    )
    return Finding(
        RULE,
        Severity.CRITICAL,
        batch.job,
        message,
        now,
        batch_id=batch.batch_id,
        details={
            "leap_seconds": leap.leap.total_seconds(),
            "usual_advance_seconds": leap.usual.total_seconds() if leap.usual is not None else None,
            "since_batch_id": batch.batch_id,
            "watermark_followed_in_batch": leap.followed_at.batch_id if leap.followed_at is not None else None,
            "dropped_since": dropped,
            "rows_since": rows,
            CARRIER: batch.batch_id,
        },
    )


def evaluate_future(params: FutureParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``future_timestamp`` findings of one job (``CRITICAL``).

    Spark (``WatermarkTracker``: the watermark is ``max event time - delay`` and never goes back): the job's
    newest batch has an event-time max or watermark more than ``skew`` ahead of its own observation time
    — the finding names the first batch of that stretch and the late drops since; otherwise an event-time
    leap beyond the data's own progression (:func:`rules.leaps.find_leap`: a backfill's mis-dated row,
    invisible against processing time), named at the batch that carried it; otherwise a watermark
    advance within ``jump_window`` that is ``jump_factor`` times the usual per-batch advance and at least
    ``min_jump``. Flink (per-subtask ``currentOutputWatermark``): each subtask whose newest watermark is
    ahead is named — on source vertices only, where the record entered (``BoundedOutOfOrdernessWatermarks``
    emits ``max timestamp - delay - 1``, so one future-dated record moves the source's watermark and every
    operator downstream inherits it). The job-level check on Flink reads the job watermark (the last
    vertex's minimum input watermark); ``watermarkLag`` going negative is the same jump seen from the
    source. A Flink source subtask whose samples carry its Kafka reader's offsets (``extra["kafka_offsets"]``)
    gets :data:`KAFKA_RANGES`: the offsets read around the jump, where the record is. Values from year 2200
    on are left to ``event_time_units``. ``now`` stamps findings.
    """
    found = _skew_finding(params, history, now) or _leap_finding(params, history, now) or _jump_finding(params, history, now)
    return ([found] if found is not None else []) + _scope_finding(params, history, now)


def _shown_instant(text: Any) -> str:
    """An ISO-8601 instant of the details as the messages show instants (the text itself if not one)."""
    try:
        return format_instant_short(datetime.fromisoformat(str(text)))
    except ValueError:
        return str(text)


def _located_text(record: Mapping[str, Any], field_path: str | None) -> str:
    key = f", key {record['key']!r}" if record.get("key") is not None else ", no key"
    event = _shown_instant(record.get("event_time"))
    if field_path is not None:
        event = f"event time {event} (field {field_path} = {record.get('event_time_raw')!r})"
    else:
        event = f"event time {event} (the record timestamp)"
    stamp = (
        f"; record timestamp {_shown_instant(record['timestamp'])} ({record.get('timestamp_type')})"
        if record.get("timestamp") and field_path is not None
        else ""
    )
    return (
        f"topic {record.get('topic')} partition {record.get('partition')} offset {record.get('offset')}{key}, "
        f"{event}{stamp}"
    )


def culprit_sentence(culprit: Mapping[str, Any]) -> str:
    """One sentence naming the located record, from its JSON details (``Located.to_details`` shape:
    ``record`` {topic, partition, offset, key, timestamp, timestamp_type, event_time, event_time_raw},
    ``method``, ``event_time_field``, ``scanned``, ``complete``, ``errors``): ``The record: topic t
    partition 0 offset 30, key 'k30': event time '2099-01-01T00:00:00' in field ts (...)``, or why it could
    not be located."""
    record = culprit.get("record")
    errors = [str(e) for e in culprit.get("errors") or []]
    if not isinstance(record, Mapping):
        why = errors[0] if errors else "nothing readable in the batch's offsets"
        return f"The record could not be located: {why}."
    how = (
        "found by ListOffsets maxTimestamp"
        if culprit.get("method") == "max_timestamp"
        else f"the latest-dated of {culprit.get('scanned')} records read from the batch's offsets"
    )
    cut = "" if culprit.get("complete", True) else " (the read was cut short by its bound: a later-dated record may follow)"
    return (
        f"The record: {_located_text(record, culprit.get('event_time_field'))}; {how}{cut}. Delete or fix it "
        "at its producer, or skip that offset when restarting."
    )


def with_culprit(finding: Finding, culprit: Mapping[str, Any]) -> Finding:
    """``finding`` with the located record: ``details["culprit"]`` = ``culprit`` (JSON-safe) and
    :func:`culprit_sentence` appended to the message. Identity (rule, labels, scope) is unchanged."""
    return replace(
        finding,
        message=f"{finding.message} {culprit_sentence(culprit)}",
        details={**finding.details, CULPRIT: dict(culprit)},
    )


class UnitsParams(RuleParams):
    """``event_time_units`` parameters: only the common keys."""


def _units_message(value: datetime, where: str, engine: Engine, before: str) -> str | None:
    if is_epoch(value) or UNITS_LOW <= value < UNITS_HIGH:
        return None
    if value < UNITS_LOW:
        return (
            f"{where}: event time {format_instant_short(value)} is before 1971 while rows flow: seconds read as milliseconds "
            f"(epoch seconds in the data, parsed as milliseconds). {remedy(engine, Cause.SECONDS_AS_MILLIS)}"
        )
    shown = format_instant_short(value)  # "beyond year 8999" at the parsers' stand-in (monitor.timefmt)
    return (
        f"{where}: event time {shown} is after 2200 while rows flow: milliseconds read as seconds "
        f"(epoch milliseconds in the data, parsed as seconds). {remedy(engine, Cause.MILLIS_AS_SECONDS, before=before)}"
    )


def evaluate_units(params: UnitsParams, history: JobHistory, now: datetime) -> list[Finding]:
    """Current ``event_time_units`` finding (``CRITICAL``): the newest batch with rows has an event-time
    max (or, for per-subtask samples, a watermark) before 1971 or from 2200 on; or the job's watermark is
    from 2200 on (the mis-read row came earlier; the finding names its batch while it is in the history). Spark's null marker (exactly
    1970-01-01, see :func:`rules.common.is_epoch`) is not a unit problem (``watermark_stall`` names it)."""
    out: list[Finding] = []
    data = next((b for b in reversed(history.batches) if b.num_input_rows), None)
    if data is not None:
        for value in (data.event_time_max, data.event_time_min):
            text = (
                _units_message(value, f"batch {data.batch_id}", history.engine, batch_name(data))
                if value is not None
                else None
            )
            if text is not None:
                out.append(
                    Finding(UNITS_RULE, Severity.CRITICAL, history.job, text, now, batch_id=data.batch_id)
                )
                break
    newest = history.batches[-1] if history.batches else None
    if not out and newest is not None and newest.watermark is not None and newest.watermark >= UNITS_HIGH:
        # the mis-read row is behind us, but the watermark it moved stays (it never goes back)
        carrier = next(
            (b for b in history.batches if b.event_time_max is not None and b.event_time_max >= UNITS_HIGH), None
        )
        where = f"since batch {carrier.batch_id}" if carrier is not None else f"batch {newest.batch_id}"
        shown = BEYOND_RANGE if is_beyond_range(newest.watermark) else f"at {format_instant_short(newest.watermark)}"
        text = (
            f"{where}: the watermark is {shown}, moved there by an event time read with the wrong unit "
            "(epoch milliseconds parsed as seconds). Every later row is older than it and is dropped as late. "
            + remedy(history.engine, Cause.MILLIS_AS_SECONDS, before=batch_name(carrier or newest))
        )
        batch_id = carrier.batch_id if carrier is not None else newest.batch_id
        out.append(Finding(UNITS_RULE, Severity.CRITICAL, history.job, text, now, batch_id=batch_id))
    for scope, samples in history.series.items():
        wm = samples[-1].watermark
        text = (
            _units_message(wm, scope_name(scope), history.engine, batch_name(samples[-1])) if wm is not None else None
        )
        if text is not None:
            out.append(Finding(UNITS_RULE, Severity.CRITICAL, history.job, text, now, scope=scope))
    return out
