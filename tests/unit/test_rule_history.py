"""rules.history.job_history: the split every rule reads (batches, per-scope series, lifecycle, idle).

The fast path (poll rounds repeating the same scopes are split by slicing) must give exactly what the
general pass gives; unsorted input is sorted; a batch read twice is kept once; lookbacks trim by time
before the job's newest sample."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from monitor.model import SampleKind, Scope
from rules import history as history_module
from rules.history import job_history
from tests.rule_samples import T0, flink, kafka, lifecycle, source, spark


def test_fast_path_equals_general_split() -> None:
    polled = [kafka(15 * i, p, 100 * i, 100 * i + p) for i in range(20) for p in range(3)]
    fast = job_history(polled)
    assert fast is not None
    assert history_module._periodic_groups(
        polled, [(s.scope.source, s.scope.partition, None, None) for s in polled]
    )
    general = history_module.JobHistory(job=polled[-1].job)
    keys = [(s.scope.source, s.scope.partition, s.scope.subtask, s.scope.operator) for s in polled]
    assert history_module._periodic_groups(polled, keys) is not None  # the fast path applies here
    groups = dict(history_module._groups(polled, keys, general))
    assert fast.series == {v[0].scope: v for v in groups.values()}
    assert [len(v) for v in fast.series.values()] == [20, 20, 20]  # 20 polls of each partition


def test_a_missing_scope_in_one_round_falls_back_to_the_general_pass() -> None:
    polled = [flink(m, s, m) for m in range(5) for s in (None, 0, 1) if not (m == 2 and s == 1)]
    h = job_history(polled)
    assert h is not None
    assert len(h.batches) == 5
    assert [len(v) for v in h.series.values()] == [5, 4]  # subtask 1 missed the round at minute 2


def test_unsorted_input_lifecycle_and_duplicates() -> None:
    samples = [spark(m, 10, m - 10, m) for m in range(6)] + [source(m, "clicks", 10) for m in range(6)]
    samples += [spark(3, 10, -7, 3), lifecycle(0, SampleKind.STARTED, "r1")]  # batch 3 read twice
    random.Random(7).shuffle(samples)
    h = job_history(samples)
    assert h is not None
    assert [b.batch_id for b in h.batches] == [0, 1, 2, 3, 4, 5]
    assert [s.observed_at for s in h.series[Scope(source="clicks")]] == [
        T0 + timedelta(minutes=m) for m in range(6)
    ]
    assert [s.kind for s in h.lifecycle] == [SampleKind.STARTED]


def test_lookbacks_trim_before_the_newest_sample() -> None:
    samples = [x for m in range(31) for x in (spark(m, 10, m - 10, m), source(m, "clicks", 10))]
    h = job_history(samples, timedelta(minutes=20), timedelta(minutes=5))
    assert h is not None
    # newest at 12:30: batches from 12:10 (21 of them), the source series from 12:25 (6)
    assert (len(h.batches), len(h.series[Scope(source="clicks")])) == (21, 6)


@pytest.mark.parametrize("case", ["never_seen_input", "backfill_future_row", "epoch_units", "backfill_fast"])
def test_rolling_history_equals_job_history_at_every_step(case: str) -> None:
    # the replay's incremental history must be what job_history makes of the same prefix: the recorded
    # logs (never_seen_input: query and per-source progress, starts, terminations, three runs; the
    # backfills and epoch_units: late drops and state removals), judged with a 10-s window so that
    # trimming happens
    from rules.history import RollingHistory
    from tests.rule_samples import recorded_case

    samples = recorded_case(case)
    window, series_window = timedelta(seconds=10), timedelta(seconds=5)
    rolling = RollingHistory(window, series_window)
    for i in range(len(samples)):
        got = rolling.extend(samples[i : i + 1])
        want = job_history(samples[: i + 1], window, series_window)
        assert got is not None and want is not None
        assert (got.job, got.batches, got.lifecycle, got.idle, got.newest_at) == (
            want.job, want.batches, want.lifecycle, want.idle, want.newest_at
        )
        assert dict(got.series) == dict(want.series)
        maxes = [b.event_time_max for b in want.batches if b.event_time_max is not None]
        expected = (maxes[-1], max(maxes[:-1]) if len(maxes) > 1 else None) if maxes else None
        assert got.event_max_top == expected  # the sliding maximum find_leap's fast path reads
        # the marks late_drop_surge and state_growth read: the newest kept batch that dropped / removed rows
        drops = [b.observed_at for b in want.batches if b.dropped_by_watermark]
        removals = [b.observed_at for b in want.batches if b.state_rows_removed]
        assert got.marks_kept
        assert (got.newest_drop_at, got.newest_removal_at) == (
            drops[-1] if drops else None, removals[-1] if removals else None
        )
