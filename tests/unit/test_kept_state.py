"""A rule's state kept on a rolling history gives the answer of a rescan of the window (issue 16).

:func:`rules.history.kept_state` keeps ``consumer_lag``'s per-partition windows of commits and
``state_growth``'s :class:`rules.history.StateTrack` on a :class:`rules.history.RollingHistory`; each catches
up with the samples added since it was last read (:func:`rules.history.unread_from`). Here the same samples
are judged two ways at each instant: from the rolling history (the kept states) and from
:func:`rules.history.job_history` of everything so far (split from scratch, no kept state). The sequences
slide their windows (the front trimmed), leave gaps longer than the window (a kept state whose newest
sample was trimmed: rebuilt), repeat a poll (the same observation read twice), arrive out of order (the
scratch split sorts them; the rolling history is fed in time order, as the replay feeds it), and are read
at every instant or only every few (a state that fell behind catches up several samples at once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import pytest

from monitor.model import Finding, Sample
from rules.consumer_lag import LagParams, evaluate_lag
from rules.history import JobHistory, RollingHistory, job_history, unread_from
from rules.state_growth import StateGrowthParams, evaluate_state_growth
from tests.rule_samples import kafka, spark

Rule = Callable[[JobHistory, datetime], list[Finding]]


def _answers(finds: list[Finding]) -> list[tuple[object, ...]]:
    return sorted((f.rule, str(f.scope), f.severity.value, f.message, repr(f.details)) for f in finds)


def _both_ways(
    rounds: Sequence[Sequence[Sample]], rule: Rule, window: timedelta, stride: int
) -> tuple[list[list[tuple[object, ...]]], list[list[tuple[object, ...]]]]:
    """The rule's answers after every ``stride``-th round: from a rolling history fed round by round, and from
    the whole prefix split from scratch (shuffled: the split sorts it)."""
    rolling = RollingHistory(window, window)
    kept: list[list[tuple[object, ...]]] = []
    scratch: list[list[tuple[object, ...]]] = []
    so_far: list[Sample] = []
    for i, poll in enumerate(rounds):
        so_far.extend(poll)
        history = rolling.extend(sorted(poll, key=lambda s: s.observed_at))
        if i % stride != stride - 1 and i != len(rounds) - 1:
            continue
        assert history is not None and history.marks_kept
        now = max(s.observed_at for s in so_far)
        kept.append(_answers(rule(history, now)))
        shuffled = so_far[1::2] + so_far[0::2]  # out of order: the scratch split sorts
        fresh = job_history(shuffled, window, window)
        assert fresh is not None and not fresh.marks_kept
        scratch.append(_answers(rule(fresh, now)))
    return kept, scratch


def _lag_rounds() -> list[list[Sample]]:
    """90 polls 15 s apart of three partitions: partition 0 stalls (polls 10-29), recovers, then rewinds
    (poll 60 on); partition 1's lag grows, with unknown commits now and then and a gap (polls 35-54, longer
    than the window); partition 2 stops being owned at poll 70 (its offset unchanged since). Poll 20 is read
    twice (the same observations again, as separate samples)."""
    rounds: list[list[Sample]] = []
    for i in range(90):
        poll: list[Sample] = []
        c0 = 500 if 10 <= i < 30 else 2_000 + 100 * i if i < 60 else 1_000
        poll.append(kafka(15 * i, 0, c0, 5_000 + 100 * i))
        if not 35 <= i < 55:
            poll.append(kafka(15 * i, 1, None if i % 7 == 3 else 100 * i, 150 * i + 100))
        c2 = 50 * min(i, 70)
        p2 = kafka(15 * i, 2, c2, c2 + 40)
        poll.append(dataclasses.replace(p2, extra={"assigned": i < 70}))
        if i == 20:
            poll.extend(dataclasses.replace(s) for s in list(poll))
        rounds.append(poll)
    return rounds


@pytest.mark.parametrize("stride", [1, 4, 13])
def test_consumer_lag_kept_windows_give_the_rescanned_answer(stride: int) -> None:
    params = LagParams(window_samples=5, max_age=timedelta(minutes=2))
    kept, scratch = _both_ways(
        _lag_rounds(), lambda h, now: evaluate_lag(params, h, now), timedelta(minutes=3), stride
    )
    assert kept == scratch
    statuses = {d for answers in kept for (_, _, _, _, d) in answers}
    seen = {status for status in ("WARN", "STALL", "STOP", "REWIND") if any(status in str(d) for d in statuses)}
    # what the sequence exercises (read off _lag_rounds), so that two empty answers cannot agree
    if stride == 1:
        assert seen == {"WARN", "STALL", "STOP", "REWIND"}
    else:
        assert seen, "the sequence must find something at the instants read"


def _growth_rounds() -> list[list[Sample]]:
    """120 one-minute Spark batches: state grows with removals (eviction works) until minute 30, grows
    without any from 30 on while the watermark advances, then no batch from 70 to 105 (longer than the
    window: everything kept is trimmed), then growth again; batch 45 is read twice (the same batch from two
    inputs)."""
    rounds: list[list[Sample]] = []
    for m in range(120):
        if 70 <= m < 105:
            continue
        growing = m >= 30
        batch = spark(
            m, 100, wm=m - 10, tmax=m, batch=m, state=10_000 + 400 * m if growing else 10_000 + 100 * (m % 4),
            removed=0 if growing else (300 if m % 4 == 0 else 0),
        )  # fmt: skip
        rounds.append([batch, dataclasses.replace(batch)] if m == 45 else [batch])
    return rounds


@pytest.mark.parametrize("stride", [1, 5, 17])
def test_state_growth_kept_track_gives_the_rescanned_answer(stride: int) -> None:
    params = StateGrowthParams(window=timedelta(minutes=20))
    kept, scratch = _both_ways(
        _growth_rounds(), lambda h, now: evaluate_state_growth(params, h, now), timedelta(minutes=30), stride
    )
    assert kept == scratch
    assert any(answers for answers in kept)
    assert kept[0] == []  # (minute 0: nothing to fit yet)


def test_unread_from_finds_the_last_sample_read_by_identity() -> None:
    a, b, c = kafka(0, 0, 1, 2), kafka(15, 0, 2, 3), kafka(15, 1, 2, 3)
    twin = dataclasses.replace(b)  # equal to b, another observation
    assert twin == b and twin is not b
    samples = [a, b, c, twin]
    assert unread_from(samples, None) is None  # nothing read yet: build from the samples
    assert unread_from(samples, a) == 1
    assert unread_from(samples, b) == 2  # not its equal twin's position
    assert unread_from(samples, twin) == 4  # nothing new
    assert unread_from(samples[1:], a) is None  # trimmed off the front: rebuild
    assert unread_from([c, twin], b) is None  # a sample of the same time, no longer there
