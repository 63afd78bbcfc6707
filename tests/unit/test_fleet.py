"""A fleet of instances on one database (:mod:`monitor.daemon.fleet`), driven tick by tick with a fake
clock: leases spread evenly, an instance that stops renewing loses its targets after ``lease_ttl`` and
another takes them, a lost lease stores nothing, ``cluster status`` shows it. Several instances need
PostgreSQL (``FOR UPDATE SKIP LOCKED``); the one-instance cases run on SQLite too."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from monitor.commands.cluster import cluster_status
from monitor.daemon.fleet import Fleet, LeasedResource, lease_ttl
from monitor.model import Engine
from monitor.store.fleet_repo import (
    job_sources_of,
    list_instances,
    list_leases,
    record_job_sources,
    sourced_jobs,
)
from tests.alerting import (
    migrated_sessions,
    sessions_on_both_databases,  # noqa: F401 (the `sessions` fixture)
    sqlite_url,
)
from tests.cli import run_cli

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
POLL = timedelta(seconds=2)
TARGETS = [LeasedResource(f"t{i}", "spark-prometheus", POLL) for i in range(7)]
RECEIVERS = [LeasedResource("hook", None, timedelta(seconds=1))]


@pytest.fixture
def pg_sessions(postgres_url: str) -> Iterator[sessionmaker[Session]]:
    with migrated_sessions(postgres_url) as factory:
        yield factory


def instance(sessions: sessionmaker[Session], name: str) -> Fleet:
    return Fleet(sessions, name, "host-1", 100 + len(name), TARGETS, RECEIVERS)


def holders(sessions: sessionmaker[Session], now: datetime) -> dict[str, str | None]:
    with sessions() as session:
        return {lease.resource: lease.held_by(now) for lease in list_leases(session, "target")}


def test_lease_ttl_is_three_intervals_and_at_least_15s() -> None:
    assert lease_ttl(timedelta(seconds=2)) == timedelta(seconds=15)
    assert lease_ttl(timedelta(seconds=10)) == timedelta(seconds=30)


def test_one_instance_holds_everything(sessions: sessionmaker[Session]) -> None:
    a = instance(sessions, "a")
    assert a.tick(T0) == {"target": 7, "receiver": 1}
    assert set(a.held_targets()) == {t.name for t in TARGETS}
    assert a.held_receivers(T0) == {"hook"}
    assert set(holders(sessions, T0).values()) == {"a"}


@pytest.mark.integration
@pytest.mark.postgres
def test_three_instances_spread_evenly_and_disjointly(pg_sessions: sessionmaker[Session]) -> None:
    fleet = [instance(pg_sessions, n) for n in ("a", "b", "c")]
    now = T0
    for _ in range(4):  # a first takes everything; each join makes it give back what is over its share
        for member in fleet:
            member.tick(now)
        now += timedelta(seconds=1)
    held = [set(m.held_targets()) for m in fleet]
    assert set().union(*held) == {t.name for t in TARGETS}
    assert sum(len(h) for h in held) == len(TARGETS)  # disjoint
    assert max(len(h) for h in held) <= math.ceil(len(TARGETS) / 3) + 1
    assert min(len(h) for h in held) >= 1
    in_db = holders(pg_sessions, now)
    assert {t: m.name for m, h in zip(fleet, held, strict=True) for t in h} == in_db


@pytest.mark.integration
@pytest.mark.postgres
def test_a_late_joiner_gets_its_part(pg_sessions: sessionmaker[Session]) -> None:
    """a and b share the 7 targets (4 + 3); c joins with nothing free: a and b give back down to
    floor(7 / 3) = 2 each, and c takes the rest."""
    a, b, c = (instance(pg_sessions, n) for n in ("a", "b", "c"))
    now = T0
    for _ in range(3):
        a.tick(now)
        b.tick(now)
        now += timedelta(seconds=1)
    assert sorted(len(m.held_targets()) for m in (a, b)) == [3, 4]
    for _ in range(3):
        for member in (c, a, b):
            member.tick(now)
        now += timedelta(seconds=1)
    counts = sorted(len(m.held_targets()) for m in (a, b, c))
    assert sum(counts) == len(TARGETS)
    assert counts == [2, 2, 3]


@pytest.mark.integration
@pytest.mark.postgres
def test_an_instance_that_stops_renewing_loses_its_targets_after_lease_ttl(
    pg_sessions: sessionmaker[Session],
) -> None:
    a, b = instance(pg_sessions, "a"), instance(pg_sessions, "b")
    now = T0
    for _ in range(3):
        a.tick(now)
        b.tick(now)
        now += timedelta(seconds=1)
    orphaned = set(b.held_targets())
    assert orphaned
    killed_at = now - timedelta(seconds=1)  # b's last renewal
    ttl = lease_ttl(POLL)
    while now < killed_at + ttl:  # b is gone (kill -9): a alone ticks; b's leases have not expired yet
        a.tick(now)
        assert not orphaned & set(a.held_targets())
        now += timedelta(seconds=1)
    a.tick(now + timedelta(seconds=1))
    assert set(a.held_targets()) == {t.name for t in TARGETS}
    # b comes back: its lost leases are not renewed, its local view follows the database
    b.tick(now + timedelta(seconds=2))
    assert not set(b.held_targets()) & set(a.held_targets())


@pytest.mark.integration
@pytest.mark.postgres
def test_a_lost_lease_stores_nothing(pg_sessions: sessionmaker[Session]) -> None:
    a, b = instance(pg_sessions, "a"), instance(pg_sessions, "b")
    a.tick(T0)
    guard = a.poll_guard("t0")
    with pg_sessions.begin() as session:
        assert guard(session, T0 + timedelta(seconds=2))
    later = T0 + timedelta(seconds=2) + lease_ttl(POLL) + timedelta(seconds=1)
    b.tick(later)  # a did not renew: b takes everything
    assert "t0" in b.held_targets()
    with pg_sessions.begin() as session:
        assert not guard(session, later)
    assert "t0" not in a.held_targets()


@pytest.mark.integration
@pytest.mark.postgres
def test_an_open_evaluation_keeps_others_off_its_targets_without_stalling_their_polls(
    pg_sessions: sessionmaker[Session],
) -> None:
    """The evaluation tick's transaction locks its targets' leases (another instance cannot take them until
    it commits, even once expired) but the holder's polls renew them meanwhile: with the evaluation
    holding a write lock on the rows instead, each poll waited for the whole tick (measured by
    tests/benchmarks/bench_fleet.py: 1,000 queries, one instance, most connection samples "Lock:transactionid")."""
    a, b = instance(pg_sessions, "a"), instance(pg_sessions, "b")
    a.tick(T0)
    ttl = lease_ttl(POLL)
    with pg_sessions.begin() as evaluation:
        scope = a.evaluation_scope(evaluation, T0 + timedelta(seconds=1))
        assert scope is not None and scope.targets == {t.name for t in TARGETS}
        with pg_sessions.begin() as poll:
            poll.execute(text("SET LOCAL lock_timeout = '2s'"))  # waiting for the evaluation fails the test
            assert a.poll_guard("t0")(poll, T0 + timedelta(seconds=2))
        after_expiry = T0 + timedelta(seconds=2) + ttl + timedelta(seconds=1)
        b.tick(after_expiry)  # every lease of a expired, but the evaluation's rows are locked: skipped
        assert set(b.held_targets()) == set()
    b.tick(after_expiry + timedelta(seconds=1))  # the evaluation committed: b takes a's expired leases
    assert set(b.held_targets()) == {t.name for t in TARGETS}


@pytest.mark.integration
@pytest.mark.postgres
def test_targets_under_an_open_evaluation_are_given_back_only_after_it(pg_sessions: sessionmaker[Session]) -> None:
    """b joins while a evaluates: a released targets would stay locked by the evaluation, so b could not take
    them and nobody would poll them until it committed (measured: 6 of 12 targets held by nobody for 4 min
    during a long first tick). a keeps them until the evaluation ends, then gives back its share."""
    a, b = instance(pg_sessions, "a"), instance(pg_sessions, "b")
    a.tick(T0)
    with pg_sessions.begin() as evaluation:
        assert a.evaluation_scope(evaluation, T0 + timedelta(seconds=1)) is not None
        b.tick(T0 + timedelta(seconds=1))  # b is live, holds nothing: a is over its share
        a.tick(T0 + timedelta(seconds=2))
        assert set(a.held_targets()) == {t.name for t in TARGETS}  # nothing given back yet
        assert set(holders(pg_sessions, T0 + timedelta(seconds=2)).values()) == {"a"}
    a.tick(T0 + timedelta(seconds=3))  # the evaluation committed
    b.tick(T0 + timedelta(seconds=3))
    assert len(a.held_targets()) == 3 and len(b.held_targets()) == 4  # floor(7 / 2) kept while b starved


def test_job_sources_are_read_by_target(sessions: sessionmaker[Session]) -> None:
    """Only the jobs a given target stored are read, each with the target that evaluates it (the first by
    name of all that stored it, given or not); the rest of the table is not read."""
    with sessions.begin() as session:
        record_job_sources(session, "t4", [("spark", "only-t4"), ("spark", "t2-and-t4"), ("flink", "t4-and-t6")])
        record_job_sources(session, "t2", [("spark", "t2-and-t4"), ("spark", "only-t2")])
        record_job_sources(session, "t6", [("flink", "t4-and-t6")])
    with sessions() as session:
        assert job_sources_of(session, {"t4"}) == {
            ("spark", "only-t4"): "t4", ("spark", "t2-and-t4"): "t2", ("flink", "t4-and-t6"): "t4",
        }  # fmt: skip
        assert job_sources_of(session, {"t6"}) == {("flink", "t4-and-t6"): "t4"}
        assert job_sources_of(session, set()) == {}
        asked = {("spark", "only-t2"), ("spark", "never-stored"), ("flink", "only-t4"), ("flink", "t4-and-t6")}
        assert sourced_jobs(session, asked) == {("spark", "only-t2"), ("flink", "t4-and-t6")}


@pytest.mark.integration
@pytest.mark.postgres
def test_each_job_is_evaluated_by_one_instance_reading_only_its_targets_jobs(
    pg_sessions: sessionmaker[Session],
) -> None:
    """Two instances split the targets; each evaluation reads the job sources of its own targets only (not
    the whole table: that read grew with instances x jobs), yet every job is evaluated by exactly one
    instance: by the holder of the first target by name that stored it, and a job no target stored by the
    holder of the first target (the default)."""
    a, b = instance(pg_sessions, "a"), instance(pg_sessions, "b")
    a.tick(T0)
    b.tick(T0)
    a.tick(T0 + timedelta(seconds=1))
    b.tick(T0 + timedelta(seconds=1))
    held_a, held_b = set(a.held_targets()), set(b.held_targets())
    assert held_a | held_b == {t.name for t in TARGETS} and not held_a & held_b and held_a and held_b
    first_a, first_b = min(held_a), min(held_b)
    last_a, last_b = max(held_a), max(held_b)
    with pg_sessions.begin() as session:
        record_job_sources(session, last_a, [("spark", "a-only"), ("spark", "both")])
        record_job_sources(session, last_b, [("spark", "b-only"), ("spark", "both")])
        record_job_sources(session, first_a if first_a < first_b else first_b, [("spark", "both")])
    owner_of_both = "a" if first_a < first_b else "b"
    default_holder = "a" if "t0" in held_a else "b"
    jobs = [(Engine.SPARK, j) for j in ("a-only", "b-only", "both", "no-source")]
    owners: dict[str, list[str]] = {}
    with pg_sessions.begin() as session:
        scope_a = a.evaluation_scope(session, T0 + timedelta(seconds=2))
        assert scope_a is not None
        scope_a.resolve(jobs)
        assert set(scope_a.sources) == {("spark", "a-only"), ("spark", "both")}  # not b's jobs
        for key in jobs:
            if scope_a.owns_job(key):
                owners.setdefault(key[1], []).append("a")
    with pg_sessions.begin() as session:
        scope_b = b.evaluation_scope(session, T0 + timedelta(seconds=2))
        assert scope_b is not None
        assert set(scope_b.sources) == {("spark", "b-only"), ("spark", "both")}
        for key in jobs:  # no resolve first: owns_job asks about the unknown job itself
            if scope_b.owns_job(key):
                owners.setdefault(key[1], []).append("b")
    assert owners == {"a-only": ["a"], "b-only": ["b"], "both": [owner_of_both], "no-source": [default_holder]}


@pytest.mark.integration
@pytest.mark.postgres
def test_leave_frees_the_leases_at_once(pg_sessions: sessionmaker[Session]) -> None:
    a, b = instance(pg_sessions, "a"), instance(pg_sessions, "b")
    a.tick(T0)
    b.tick(T0)
    a.leave(T0 + timedelta(seconds=1))
    b.tick(T0 + timedelta(seconds=2))
    assert set(b.held_targets()) == {t.name for t in TARGETS}
    with pg_sessions() as session:
        assert [i.name for i in list_instances(session)] == ["b"]


@pytest.mark.integration
@pytest.mark.postgres
def test_cluster_status_document(pg_sessions: sessionmaker[Session]) -> None:
    a, b = instance(pg_sessions, "a"), instance(pg_sessions, "b")
    a.tick(T0)
    b.tick(T0)
    now = T0 + timedelta(seconds=1)
    with pg_sessions() as session:
        doc = cluster_status(list_instances(session), list_leases(session), now)
    assert [(i["name"], i["last_heartbeat"], i["targets"], i["alive"]) for i in doc["instances"]] == [
        ("a", "2026-12-01T12:00:00.000000Z", 7, True),
        ("b", "2026-12-01T12:00:00.000000Z", 0, True),
    ]
    assert doc["targets"][0] == {
        "name": "t0", "collector": "spark-prometheus", "holder": "a", "lease_until": "2026-12-01T12:00:15.000000Z",
        "held_since": "2026-12-01T12:00:00.000000Z", "lease_expired": False,
    }  # fmt: skip
    assert [r["holder"] for r in doc["receivers"]] == ["a"]
    with pg_sessions() as session:
        gone = cluster_status(list_instances(session), list_leases(session), T0 + timedelta(minutes=1))
    assert [i["alive"] for i in gone["instances"]] == [False, False]
    assert {t["holder"] for t in gone["targets"]} == {None}
    assert {t["last_holder"] for t in gone["targets"]} == {"a"}


def test_cluster_status_text_says_what_is_not_held_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An instance that stopped long ago (its heartbeat and leases expired): the text says so, per target."""
    url = sqlite_url(tmp_path)
    with migrated_sessions(url) as factory:
        instance(factory, "a").tick(datetime.now(UTC) - timedelta(minutes=5))
    code, out, err = run_cli(["cluster", "status", "--db", url], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "instances: 0 live of 1"
    assert "gone: no heartbeat for" in lines[1]
    assert lines[2] == "targets: 0 held of 7"
    assert lines[3].startswith("  t0 (spark-prometheus)  NOT HELD: the lease of a expired ")
    assert lines[3].endswith("no instance is live, so nothing polls or delivers it: start `tidegauge run`")
