"""Rebalance churn (issue 17 §4): the collector's comparison of a group's members and partition owners
between polls (collectors.kafka.churn), the samples, and the ``rebalance_churn`` rule. The broker is the
fake of tests/unit/test_kafka_never_committed.py; the real one is in tests/integration/test_kafka_collector.py."""

from __future__ import annotations

from datetime import timedelta

from collectors.kafka import group_samples
from collectors.kafka.admin import GroupDescription
from collectors.kafka.churn import Membership, churn
from monitor.model import Sample, Severity
from rules.consumer_lag import ChurnParams, evaluate_churn
from rules.history import job_history
from tests.unit.test_kafka_never_committed import T0, FakeBroker, collector


def m(owners: dict[tuple[str, int], str], state: str = "Stable") -> Membership:
    return Membership(frozenset(owners.values()), owners, state)


def test_churn_between_two_polls() -> None:
    a = m({("t", 0): "a", ("t", 1): "a"})
    assert churn(None, a) is None  # nothing to compare on the first poll
    same = churn(a, m({("t", 0): "a", ("t", 1): "a"}))
    assert same is not None and not same.rebalanced
    # b joined and took partition 1
    c = churn(a, m({("t", 0): "a", ("t", 1): "b"}))
    assert c is not None and (c.joined, c.left, c.moved, c.rebalanced) == (1, 0, 1, True)
    # a left, b restarted with a new member id (b2): both partitions moved
    c = churn(m({("t", 0): "a", ("t", 1): "b"}), m({("t", 0): "b2", ("t", 1): "b2"}))
    assert c is not None and (c.joined, c.left, c.moved) == (1, 2, 2)
    # caught in PreparingRebalance with the same members and owners: still a rebalance
    c = churn(a, m({("t", 0): "a", ("t", 1): "a"}, "PreparingRebalance"))
    assert c is not None and (c.moved, c.rebalancing, c.rebalanced) == (0, True, True)


class Churning(FakeBroker):
    """A group whose one member is replaced by a new member id at every poll (a crash-looping consumer)."""

    polls: int = 0

    def describe(self, groups):  # type: ignore[no-untyped-def]
        self.polls += 1
        member = f"consumer-{self.polls}"
        owners = ((("t", 0), member), (("t", 1), member))
        return {g: GroupDescription(g, "Stable", 1, (("t", 0), ("t", 1)), member_ids=(member,), owners=owners,
                                    group_type="classic") for g in groups}


def samples_of(count: int, every_s: int = 60) -> list[Sample]:
    b = Churning(log={("t", 0): (0, 50), ("t", 1): (0, 50)}, committed_offsets={("t", 0): 50, ("t", 1): 50})
    c = collector(b, lag_seconds="none")
    out: list[Sample] = []
    for i in range(count):
        now = T0 + timedelta(seconds=every_s * i)
        out += list(group_samples("prod", c.snapshot(now).groups[0], now))
    return out


def test_the_samples_carry_the_churn_from_the_second_poll() -> None:
    whole = [s for s in samples_of(3) if s.scope.is_job()]
    assert "rebalanced" not in whole[0].extra and whole[0].extra["group_type"] == "classic"
    assert {k: whole[1].extra[k] for k in ("rebalanced", "members_joined", "members_left", "partitions_moved")} == {
        "rebalanced": True, "members_joined": 1, "members_left": 1, "partitions_moved": 2,
    }


def test_rule_fires_above_max_rebalances_in_the_window() -> None:
    # polls every minute; each poll after the first sees a new member: 4 polls -> 3 rebalances (not more than 3)
    h = job_history(samples_of(4))
    assert h is not None
    assert evaluate_churn(ChurnParams(), h, T0 + timedelta(minutes=3)) == []
    h = job_history(samples_of(6))  # 5 rebalances in 5 min
    assert h is not None
    [f] = evaluate_churn(ChurnParams(), h, T0 + timedelta(minutes=5))
    assert f.severity is Severity.WARNING and f.scope.is_job()
    assert f.details == {"rebalances": 5, "polls": 5, "members_joined": 5, "members_left": 5, "partitions_moved": 10,
                         "window_seconds": 900.0, "group_type": "classic"}
    assert f.message.startswith(
        "consumer group g rebalanced at least 5 times in 15 min (more than 3; 5 of 5 polls from 2026-11-29T12:01Z to "
        "2026-11-29T12:05Z saw one) (classic protocol: each rebalance stops every member): 5 member join(s), "
        "5 leave(s), 10 partition move(s); 1 member(s) now. Find why members come and go:"
    )
    # a 3-minute window holds only the polls of the last 3 minutes (12:03, 12:04, 12:05): 3, not more than 3
    assert evaluate_churn(ChurnParams(window=timedelta(minutes=3)), h, T0 + timedelta(minutes=5)) == []


def test_a_steady_group_never_fires() -> None:
    b = FakeBroker(log={("t", 0): (0, 50), ("t", 1): (0, 50)}, committed_offsets={("t", 0): 50, ("t", 1): 50})
    c = collector(b, lag_seconds="none")
    out: list[Sample] = []
    for i in range(10):
        now = T0 + timedelta(seconds=60 * i)
        out += list(group_samples("prod", c.snapshot(now).groups[0], now))
    h = job_history(out)
    assert h is not None
    assert evaluate_churn(ChurnParams(max_rebalances=0), h, T0 + timedelta(minutes=9)) == []


def test_check_kafka_json_gives_the_churn_of_the_two_polls() -> None:
    import json

    from monitor.reports.kafka import KafkaReport, render_json

    b = Churning(log={("t", 0): (0, 50), ("t", 1): (0, 50)}, committed_offsets={("t", 0): 50, ("t", 1): 50})
    c = collector(b, lag_seconds="none")
    first = c.snapshot(T0).groups[0]
    assert json.loads(render_json(KafkaReport([first], [], 1)))["groups"][0]["churn"] is None
    second = c.snapshot(T0 + timedelta(seconds=10)).groups[0]
    g = json.loads(render_json(KafkaReport([second], [], 2)))["groups"][0]
    assert (g["group_type"], g["churn"]) == ("classic", {"rebalanced": True, "members_joined": 1, "members_left": 1,
                                                         "partitions_moved": 2})
