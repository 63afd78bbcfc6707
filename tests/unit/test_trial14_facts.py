"""Issue 14 trial findings 5, 6, 8, 10, 17 on the recorded Spark runs (tests/fixtures/spark/rule-cases,
values read off the logs: see PROVENANCE.md there and the scan table of each recording)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.model import MAX_TIME, Engine, FindingEpisode, JobRef, Scope, Severity, worst_episode
from monitor.reports.detailed import build_detailed_report
from monitor.text import batch_range as batch_span
from monitor.text import plural as count_text
from monitor.timefmt import format_instant, format_instant_short, is_beyond_range, seconds_between
from tests.unit.test_facts import spark_facts


def test_the_clamp_is_no_date_and_no_duration() -> None:
    # epoch_units b4's eventTime.max is +56135-05-22T09:20:00.000Z, stored as the model's latest time
    assert format_instant(MAX_TIME) == "beyond year 8999"
    assert format_instant_short(MAX_TIME) == "beyond year 8999"
    assert is_beyond_range(MAX_TIME) and not is_beyond_range(datetime(2099, 1, 1, tzinfo=UTC))
    assert seconds_between(MAX_TIME, datetime(2026, 12, 1, tzinfo=UTC)) is None
    assert seconds_between(datetime(2026, 12, 1, 0, 0, 10, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)) == 10.0


def test_epoch_units_freshness_and_lateness_are_unknown_beyond_the_clamp() -> None:
    f = spark_facts("epoch_units")
    fr = f.freshness
    # b1-b4 watermark 2024-03-01T11:50:55/11:51:55 (2.8 years behind); b5-b8 beyond the clamp: ahead
    assert (fr.batches, fr.ahead_batches, fr.beyond_range_batches, fr.first_ahead_batch) == (8, 4, 4, 5)
    assert fr.last_s is None and fr.last_beyond_range and fr.ahead_max_s is None
    # b4 at 09:46:42.000Z, watermark 2024-03-01T11:51:55.000Z: 2 years 275 days 21:54:47 = 86824487 s
    assert fr.p50_s == 86_824_487.0
    assert fr.ahead_cause is not None and fr.ahead_cause.batch_id == 4
    # the later rows are behind a watermark beyond year 8999: how late is unknown; without b4: never late
    assert f.lateness_p999_s is None
    assert f.lateness_mis_dated is not None and f.lateness_mis_dated.batch_id == 4
    assert f.lateness_without_mis_dated_s == 0.0
    r = build_detailed_report("t", f.since, f.until, [f]).jobs[0]
    assert r.freshness_ahead == ("4 of 8 batches from batch 5, beyond year 8999 (how far is unknown): moved there by "
                                 "batch 4's event time beyond year 8999 (an event time in the wrong unit)")
    assert r.lateness_note is not None and r.lateness_note.endswith("without it 0 s")
    assert "beyond year 8999 in batch 4" in r.recommendations[0].text


def test_last_batch_rows_ignore_the_terminated_event() -> None:
    # backfill_future_row b10 read 12 rows; its QueryTerminatedEvent (same time, no rows) comes after it
    f = spark_facts("backfill_future_row")
    assert (f.batches[-1].batch_id, f.last_input_rows) == (10, 12)


def test_lateness_driven_by_the_leap_row_says_so() -> None:
    # backfill_future_row b4 2024-03-02T12:02Z leaps 1 day; b6 eventTime.min 2024-03-01T12:03:00Z is 23 h 59 min behind
    f = spark_facts("backfill_future_row")
    assert f.lateness_p999_s == 86_340.0
    assert f.lateness_mis_dated is not None and f.lateness_mis_dated.batch_id == 4
    assert f.lateness_without_mis_dated_s == 0.0


def _episode(i: int, first_batch: int, sev: Severity) -> FindingEpisode:
    t0 = datetime(2026, 11, 29, 11, 32, 48, tzinfo=UTC) + timedelta(seconds=i)
    return FindingEpisode(
        id=f"e{i}", fingerprint="f", rule="future_timestamp", job=JobRef(Engine.SPARK, "j"), scope=Scope(),
        severity=sev, first_at=t0, last_at=t0 + timedelta(seconds=1), message="m", first_batch_id=first_batch,
        last_batch_id=first_batch + 1,
    )


def test_the_worst_episode_is_the_first_of_the_worst_severity() -> None:
    # wm_gt: future_timestamp batches 6-7, 8-9, 10-11 (critical) for one 2099 row: batch 6 names it
    eps = [_episode(5, 10, Severity.CRITICAL), _episode(1, 6, Severity.CRITICAL), _episode(3, 8, Severity.CRITICAL),
           _episode(0, 2, Severity.WARNING)]
    w = worst_episode(eps)
    assert w is not None and w.first_batch_id == 6


def test_counts_and_batch_spans_read_as_english() -> None:
    assert [count_text(1, "job"), count_text(2, "job"), count_text(1, "row"), count_text(1200, "row"),
            count_text(3, "batch")] == ["1 job", "2 jobs", "1 row", "1,200 rows", "3 batches"]
    assert [batch_span(4, 4), batch_span(6, 8), batch_span(None, 3)] == ["batch 4", "batches 6-8", "batch 3"]


def test_drop_causes_by_batch_and_jobs_outside_the_period() -> None:
    f = spark_facts("backfill_future_row")
    r = build_detailed_report("t", f.since, f.until, [f], outside_period=["public excerpt"])
    assert r.outside_note == "1 job has no sample in this period: public excerpt"
    firsts = [c.first_dropped_batch for c in r.jobs[0].drop_causes]
    assert firsts == sorted(firsts)
