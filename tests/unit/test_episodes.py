"""Findings -> episodes (rules.episodes, the one fold scan and the daemon share) and the store's episode
API (Store.record_episodes / Store.episodes): written-out instants, expected episodes written out."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from monitor.model import Engine, EpisodeEnd, Finding, JobRef, Scope, Severity, episode_id
from monitor.store import Store
from rules.episodes import EpisodeFold, episodes, link, reopen, to_record
from rules.replay import Instant

T0 = datetime(2026, 12, 1, 9, 43, 23, tzinfo=UTC)
JOB = JobRef(Engine.SPARK, "q-1", run_id="r-1", name="clicks")
S = timedelta(seconds=10)


def _stall(severity: Severity = Severity.WARNING, message: str = "flat") -> Finding:
    return Finding("watermark_stall", severity, JOB, message, T0, scope=Scope(source="clicks"), batch_id=3)


def _jump() -> Finding:
    return Finding("future_timestamp", Severity.CRITICAL, JOB, "2099 row", T0, batch_id=2)


#: batch 2 at T0 carries the jump; the stall holds at batches 3-5 (worse at 4), is gone at 6, back at 7;
#: the query terminates after batch 7
INSTANTS = [
    Instant(T0, 2, [_jump()]),
    Instant(T0 + S, 3, [_jump(), _stall()]),
    Instant(T0 + 2 * S, 4, [_stall(Severity.CRITICAL, "flat 20 s")]),
    Instant(T0 + 3 * S, 5, [_stall(message="flat 30 s")]),
    Instant(T0 + 4 * S, 6, []),
    Instant(T0 + 5 * S, 7, [_stall(message="flat again")]),
    Instant(T0 + 5 * S, 7, [], terminated=True),
]


def _summary(eps: list[object]) -> list[tuple[object, ...]]:
    return [
        (e.first.rule, e.first_at, e.last_at, e.first_batch_id, e.last_batch_id, e.severity, e.ended_by, e.last.message)  # type: ignore[attr-defined]
        for e in eps
    ]


EXPECTED = [
    ("future_timestamp", T0, T0 + S, 2, 3, Severity.CRITICAL, EpisodeEnd.RESOLVED, "2099 row"),
    ("watermark_stall", T0 + S, T0 + 3 * S, 3, 5, Severity.CRITICAL, EpisodeEnd.RESOLVED, "flat 30 s"),
    ("watermark_stall", T0 + 5 * S, T0 + 5 * S, 7, 7, Severity.WARNING, EpisodeEnd.TERMINATED, "flat again"),
]


def test_fold_makes_episodes_with_first_and_last_batch() -> None:
    assert _summary(episodes(INSTANTS)) == EXPECTED  # type: ignore[arg-type]


def test_incremental_fold_across_ticks_and_a_restart_equals_the_whole_fold() -> None:
    # the daemon: instants 0-2 in one tick, then a restart (the open stall reopened from its stored record),
    # then the rest
    fold = EpisodeFold()
    done = [e for i in INSTANTS[:3] for e in fold.add(i)]
    (stall,) = fold.open.values()
    fold = EpisodeFold([reopen(to_record(stall))])
    done += [e for i in INSTANTS[3:] for e in fold.add(i)]
    assert not fold.open
    assert [to_record(e).id for e in done] == [to_record(e).id for e in episodes(INSTANTS)]
    assert [(e.first_at, e.last_at, e.first_batch_id, e.last_batch_id, e.ended_by) for e in done] == [
        (t[1], t[2], t[3], t[4], t[6]) for t in EXPECTED
    ]


def test_record_id_is_the_fingerprint_and_first_instant() -> None:
    first = episodes(INSTANTS)[0]
    record = to_record(first)
    assert record.id == episode_id(_jump().fingerprint(), T0)
    assert (record.rule, record.first_batch_id, record.last_batch_id, record.details["batch_id"]) == (
        "future_timestamp", 2, 3, 2,
    )  # fmt: skip


def test_link_names_the_cause_on_the_same_job() -> None:
    jump, stall, _ = (to_record(e) for e in episodes(INSTANTS))
    effect = dataclasses.replace(stall, details={**stall.details, "caused_by": {"rule": "future_timestamp", "batch_id": 2}})
    linked_jump, linked_stall = link([jump, effect])
    assert (linked_jump.causes, linked_stall.caused_by) == ((stall.id,), (jump.id,))
    other = dataclasses.replace(jump, job=JobRef(Engine.SPARK, "q-2"))
    assert link([other, effect])[1].caused_by == ()


def test_store_records_once_and_extends_an_open_episode(store: Store) -> None:
    fold = EpisodeFold()
    for instant in INSTANTS[:3]:
        fold.add(instant)
    jump_done = episodes(INSTANTS[:3])[0]
    open_stall = fold.open[_stall().fingerprint()]
    first = [to_record(jump_done), to_record(open_stall)]
    assert store.record_episodes(first).inserted == 2
    assert store.record_episodes(first) == type(store.record_episodes([]))(0, 0, 2)  # a re-scan: nothing new
    whole = [to_record(e) for e in episodes(INSTANTS)]
    counts = store.record_episodes(whole)
    assert (counts.inserted, counts.extended, counts.unchanged) == (1, 1, 1)
    stored = store.episodes(engine="spark", job_id="q-1")
    assert [(e.rule, e.first_batch_id, e.last_batch_id, e.ended_by, e.severity) for e in stored] == [
        ("future_timestamp", 2, 3, EpisodeEnd.RESOLVED, Severity.CRITICAL),
        ("watermark_stall", 3, 5, EpisodeEnd.RESOLVED, Severity.CRITICAL),
        ("watermark_stall", 7, 7, EpisodeEnd.TERMINATED, Severity.WARNING),
    ]
    # episodes overlapping a period: the second stall only, and none of another job
    assert [e.first_batch_id for e in store.episodes(since=T0 + 4 * S, until=T0 + 6 * S)] == [7]
    assert store.episodes(job_id="q-2") == []
