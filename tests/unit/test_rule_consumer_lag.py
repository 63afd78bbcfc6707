"""Table test of ``consumer_lag`` (rules.consumer_lag.evaluate_lag, wrapping Burrow's evaluator in
rules.consumer_lag.burrow); each row's comment says why. Polls every 15 s; window 10 observations; allowed_lag 0.
A row is a partition's (committed offset, log-end offset) per poll."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from monitor.model import Sample, Severity
from rules.consumer_lag import LagParams, evaluate_lag
from tests.rule_samples import T0, history, kafka

Poll = tuple[int | None, int | None]


def polls(rows: list[Poll], partition: int = 0) -> list[Sample]:
    return [kafka(15 * i, partition, c, e) for i, (c, e) in enumerate(rows)]


AFTER_LAST = T0 + timedelta(seconds=150)  # 15 s after the 10th poll (at 135 s)

# (case, polls, now, params, expected (status, severity) or None)
TABLE: list[tuple[int, list[Poll], object, dict[str, object], tuple[str, Severity] | None]] = [
    # 1. consumer catching up, lag 0 at the newest poll: OK (Burrow: zero lag is never an error)
    (1, [(100 * i, 100 * i + max(0, 50 - 10 * i)) for i in range(10)], AFTER_LAST, {}, None),
    # 2. commits advance but lag grows every poll (100, 150, ... 550): WARN -> warning
    (2, [(100 * i, 150 * i + 100) for i in range(10)], AFTER_LAST, {}, ("WARN", Severity.WARNING)),
    # 3. committed offset stuck at 500 while the log grows: STALL -> critical (not STOP: the last
    #    observation is 15 s old, less than the window's 135 s span)
    (3, [(500, 600 + 10 * i) for i in range(10)], AFTER_LAST, {}, ("STALL", Severity.CRITICAL)),
    # 4. the last observation is 300 s old, more than the window's 135 s span, and the consumer was never
    #    caught up (log-end always above its commits): STOP -> critical
    (
        4,
        [(100 * i, 100 * i + 40) for i in range(10)],
        T0 + timedelta(seconds=135 + 300),
        {},
        ("STOP", Severity.CRITICAL),
    ),
    # 5. offsets 0..800 then back to 200 at the newest poll (the log at 2000): went back from 800 and did
    #    not recover, lag never 0 -> REWIND -> critical
    (
        5,
        [(100 * i, 1000 + 100 * i) for i in range(9)] + [(200, 2000)],
        AFTER_LAST,
        {},
        ("REWIND", Severity.CRITICAL),
    ),
    # 6. a constant residual lag of 1 (a transactional producer's commit marker after the last record):
    #    caught up, not growth -> nothing (a naive "lag > 0 and not decreasing" rule says WARN)
    (6, [(100 * i, 100 * i + 1) for i in range(10)], AFTER_LAST, {}, None),
    # 7. no committed offset (-1 from the broker -> None): lag unknown, not 0 and not huge -> nothing
    (7, [(None, 100 * i) for i in range(10)], AFTER_LAST, {}, None),
    # 8. lag 50 and not decreasing, but allowed_lag 100: never an error below it (Burrow allowed-lag)
    (8, [(100 * i, 100 * i + 50) for i in range(10)], AFTER_LAST, {"allowed_lag": 100}, None),
]


@pytest.mark.parametrize(
    ("case", "rows", "now", "params", "expected"), TABLE, ids=[f"lag-{c[0]}" for c in TABLE]
)
def test_consumer_lag(
    case: int, rows: list[Poll], now: object, params: dict[str, object], expected: tuple[str, Severity] | None
) -> None:
    assert hasattr(now, "tzinfo")
    found = evaluate_lag(LagParams.model_validate(params), history(polls(rows)), now)  # type: ignore[arg-type]
    assert [(f.details["status"], f.severity) for f in found] == ([] if expected is None else [expected])
    assert all(
        f.rule == "consumer_lag" and f.scope.labels() == {"source": "orders", "partition": "0"} for f in found
    )


def test_partitions_are_judged_separately_and_messages_name_them() -> None:
    samples = polls([(500, 600 + 10 * i) for i in range(10)], partition=3) + polls(
        [(100 * i, 100 * i) for i in range(10)], partition=4
    )
    (finding,) = evaluate_lag(LagParams(), history(samples), AFTER_LAST)
    assert finding.scope.partition == 3
    assert finding.message.startswith(
        "source `orders` partition 3: committed offset stuck at 500 over 10 observations"
    )
    assert "lag is 190" in finding.message  # 600 + 90 - 500


def unowned(rows: list[Poll], partition: int = 0) -> list[Sample]:
    """Polls of a partition no live member owns (the collector's ``extra["assigned"] = False``)."""
    return [dataclasses.replace(s, extra={"assigned": False}) for s in polls(rows, partition)]


# (case, samples, now, expected status or None); polls every 15 s as above
OWNERSHIP: list[tuple[int, list[Sample], object, str | None]] = [
    # 1. one observation is no trend: lag 40 at the first poll is neither STALL nor WARN (Burrow judges a
    #    window of commits; a single point "never decreases" trivially)
    (1, polls([(100, 140)]), T0 + timedelta(seconds=15), None),
    # 2. the group's members left after the commit at 15 s (offset 200, then unchanged, lag 40 constant):
    #    nothing can commit any more, so the window ends at 15 s; at 150 s, 135 s since the last commit is
    #    more than the window's 15 s span and the consumer was not caught up -> STOP (owned, the same polls
    #    are STALL: case 3 of the table above)
    (2, polls([(100, 140)]) + unowned([(200, 240)] * 9)[1:], AFTER_LAST, "STOP"),
    # 3. the same polls while a member owns the partition: each poll is a re-commit of 200, lag 40 never
    #    decreasing -> WARN (Burrow; not STOP: commits keep coming); an offset that never moved at all over
    #    the window -> STALL
    (3, polls([(100, 140)] + [(200, 240)] * 9), AFTER_LAST, "WARN"),
    (5, polls([(200, 240)] * 10), AFTER_LAST, "STALL"),
    # 4. an empty group that is caught up (lag 0) is never an error, however long ago it committed
    (4, unowned([(200, 200)] * 10), AFTER_LAST, None),
]


@pytest.mark.parametrize(("case", "samples", "now", "expected"), OWNERSHIP, ids=[f"own-{c[0]}" for c in OWNERSHIP])
def test_commit_windows_follow_ownership(case: int, samples: list[Sample], now: object, expected: str | None) -> None:
    found = evaluate_lag(LagParams(), history(samples), now)  # type: ignore[arg-type]
    assert [f.details["status"] for f in found] == ([] if expected is None else [expected])


def test_a_single_commit_of_an_empty_group_is_no_trend_until_it_is_old() -> None:
    one = unowned([(100, 140)])
    assert evaluate_lag(LagParams(), history(one), T0) == []  # judged at its own time: nothing yet
    (f,) = evaluate_lag(LagParams(), history(one), T0 + timedelta(seconds=15))
    assert f.details["status"] == "STOP"
