"""Consumer-lag evaluator: Burrow's 16 evaluator vectors plus tidegauge's additions.

The vectors are ``tests/fixtures/kafka/burrow/burrow_evaluator_testvectors.json``, converted from
Burrow's ``caching_test.go``; each carries upstream's comment saying why its status is right, and the
expected outcome of each individual rule, which we check too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules.consumer_lag import CommitObservation, LagStatus, compute_lag, evaluate_partition
from rules.consumer_lag.burrow import surely_ok
from tests.conftest import RECORDED_FIXTURES

VECTORS = RECORDED_FIXTURES / "kafka/burrow/burrow_evaluator_testvectors.json"


def _cases() -> list[dict[str, Any]]:
    return list(json.loads(VECTORS.read_text())["cases"])


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"burrow-{c['index']}")
def test_burrow_vectors(case: dict[str, Any]) -> None:
    window = [CommitObservation(o["offset"], o["timestamp_ms"], o["lag"]) for o in case["offsets"]]
    result = evaluate_partition(
        window,
        case["brokerOffsets"],
        case["currentLag"],
        now_ms=case["timeNow_s"] * 1000,  # upstream: timestamps are ms, timeNow is seconds
        allowed_lag=case["allowedLag"],
    )
    assert result.status == LagStatus(case["status"]), case["comment"]
    for rule, expected in case["expected"].items():
        assert result.checks[rule] == expected, f"{rule}: {case['comment']}"
    # the rule's pre-check never skips a vector whose status is a finding
    if surely_ok(window, case["brokerOffsets"], case["currentLag"], case["timeNow_s"] * 1000, case["allowedLag"]):
        assert case["status"] in ("OK", "UNKNOWN"), case["comment"]


def test_the_pre_check_decides_the_vectors_with_a_lag_at_zero_or_caught_up_in_the_window() -> None:
    decided = [
        c["index"] for c in _cases()
        if surely_ok([CommitObservation(o["offset"], o["timestamp_ms"], o["lag"]) for o in c["offsets"]],
                     c["brokerOffsets"], c["currentLag"], c["timeNow_s"] * 1000, c["allowedLag"])
    ]  # fmt: skip
    ok = [c["index"] for c in _cases() if c["status"] in ("OK", "UNKNOWN")]
    assert decided and set(decided) <= set(ok)


def test_vectors_are_all_there() -> None:
    # Burrow's table has 16 vectors (indices 0..15); a truncated fixture must not pass silently.
    assert [c["index"] for c in _cases()] == list(range(16))


# Numbered table of tidegauge's additions; each comment says why the answer is right.
T0 = 1_000_000_000_000
ADDITIONS: list[tuple[int, list[CommitObservation], list[int], int | None, int, LagStatus]] = [
    # 1. No committed offset: lag is unknown, not 0 and not the log-end offset.
    (1, [], [500], None, T0, LagStatus.UNKNOWN),
    # 2. Zero current lag is never an error even with a window that would otherwise say STOP
    #    (last commit long ago).
    (
        2,
        [CommitObservation(10, T0 - 600_000, 5), CommitObservation(20, T0 - 500_000, 5)],
        [20],
        0,
        T0,
        LagStatus.OK,
    ),
    # 3. Transactional residual lag of 1: offsets advance, lag is constantly 1 (the commit marker), and a
    #    naive "lag never decreases" rule would say WARN; it is caught up.
    (
        3,
        [CommitObservation(o, T0 - 50_000 + i * 10_000, 1) for i, o in enumerate(range(100, 600, 100))],
        [600],
        1,
        T0,
        LagStatus.OK,
    ),
    # 4. The same window with a constant lag of 2 is a slow consumer (WARN): the residual rule is for 1 only.
    (
        4,
        [CommitObservation(o, T0 - 50_000 + i * 10_000, 2) for i, o in enumerate(range(100, 600, 100))],
        [600],
        2,
        T0,
        LagStatus.WARN,
    ),
]


@pytest.mark.parametrize(
    ("n", "window", "broker", "lag", "now_ms", "expected"),
    ADDITIONS,
    ids=lambda v: str(v) if isinstance(v, int) else None,
)
def test_tidegauge_additions(
    n: int,
    window: list[CommitObservation],
    broker: list[int],
    lag: int | None,
    now_ms: int,
    expected: LagStatus,
) -> None:
    assert evaluate_partition(window, broker, lag, now_ms).status is expected, f"case {n}"
    if surely_ok(window, broker, lag, now_ms):
        assert expected in (LagStatus.OK, LagStatus.UNKNOWN), f"case {n}: the pre-check skipped a finding"


@pytest.mark.parametrize(
    ("log_end", "committed", "expected"),
    [
        (100, 90, 10),
        (100, 100, 0),
        (100, 105, 0),  # committed read after the log-end offset (sampling skew): clamped, not -5
        (100, -1, None),  # Kafka's "no committed offset" marker: unknown
        (100, None, None),
        (None, 5, None),
    ],
)
def test_compute_lag(log_end: int | None, committed: int | None, expected: int | None) -> None:
    assert compute_lag(log_end, committed) == expected
