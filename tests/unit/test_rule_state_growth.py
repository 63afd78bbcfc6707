"""Table test of ``state_growth`` (rules.state_growth.evaluate_state_growth); each row's comment says why.

Batches one minute apart, 12:00-12:30 (31 points, the default 30m window); watermark advances one minute
per batch unless said otherwise. Defaults: min_points 6, min_watermark_steps 3, min_growth 5 %, monotone
share 0.8, critical_within 1h.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.model import Sample, Severity
from rules.history import RollingHistory, job_history
from rules.state_growth import StateGrowthParams, evaluate_state_growth, theil_sen_slope
from tests.rule_samples import T0, history, spark

NOW = T0 + timedelta(minutes=30)
M = range(31)


def run(state: list[int], removed: list[int | None] | None = None, wm_moves: bool = True) -> list[Sample]:
    removed = removed or [0] * len(state)
    return [
        spark(m, 10, (m - 10) if wm_moves else -10, m, state=s, removed=r)
        for m, (s, r) in enumerate(zip(state, removed, strict=True))
    ]


# (case, samples, params, expected severity or None)
TABLE: list[tuple[int, list[Sample], dict[str, object], Severity | None]] = [
    # 1. dropDuplicates("id") without event time: +100 rows/min, nothing removed, watermark moving 30 times
    (1, run([1000 + 100 * m for m in M]), {}, Severity.WARNING),
    # 2. same with limit_rows 5000: at 4000 rows and 100 rows/min the limit is 10 min away (<= 1h): CRITICAL
    (2, run([1000 + 100 * m for m in M]), {"limit_rows": 5000}, Severity.CRITICAL),
    # 3. limit 1,000,000 is 996,000 rows / 6000 per hour = 166 h away: still WARNING
    (3, run([1000 + 100 * m for m in M]), {"limit_rows": 1_000_000}, Severity.WARNING),
    # 4. saw-tooth: grows 4 batches, evicts 400 rows every 5th: eviction works -> healthy
    (4, run([1000 + 100 * (m % 5) for m in M], [400 if m % 5 == 0 and m else 0 for m in M]), {}, None),
    # 5. plateau at 5000 rows without removals: not growing -> healthy
    (5, run([5000 for _ in M]), {}, None),
    # 6. growing while the watermark is flat: nothing is old enough to evict yet -> not reported
    (6, run([1000 + 100 * m for m in M], wm_moves=False), {}, None),
    # 7. plateau with one doubled value (a foreachBatch running two actions doubles state metrics): the
    #    Theil-Sen slope is 0 -> healthy (least squares would see a positive trend from the outlier position)
    (7, run([10_000 if m == 25 else 5000 for m in M]), {}, None),
    # 8. dropDuplicatesWithinWatermark: ~2x the delay's worth of keys, removing as many as it adds -> healthy
    (8, run([1200 + 20 * (m % 2) for m in M], [100 for _ in M]), {}, None),
    # 9. +1 row/min on 10,000 = 0.3 % over the window < min_growth 5 %: noise, not a leak
    (9, run([10_000 + m for m in M]), {}, None),
    # 10. only 5 batches with a state size (< min_points 6): too little to fit a trend
    (10, run([1000 + 100 * m for m in range(5)]), {}, None),
]


@pytest.mark.parametrize(
    ("case", "samples", "params", "expected"), TABLE, ids=[f"state-{c[0]}" for c in TABLE]
)
def test_state_growth(
    case: int, samples: list[Sample], params: dict[str, object], expected: Severity | None
) -> None:
    found = evaluate_state_growth(StateGrowthParams.model_validate(params), history(samples), NOW)
    assert [f.severity for f in found] == ([] if expected is None else [expected])
    assert all(f.rule == "state_growth" and f.scope.is_job() for f in found)


def test_projection_message() -> None:
    (finding,) = evaluate_state_growth(
        StateGrowthParams(limit_rows=5000), history(run([1000 + 100 * m for m in M])), NOW
    )
    # 100 rows/min = 6000 rows/h; (5000 - 4000) / 100 = 10 min after the last batch at 12:30 -> 12:40
    assert "state rows grew from 1000 to 4000 in 30 min (Theil-Sen trend 6000 rows/h)" in finding.message
    assert "reaches the limit of 5000 rows in 10 min (about 2026-11-29T12:40Z)" in finding.message
    assert "dropDuplicates without the event-time column" in finding.message
    assert finding.details["seconds_to_limit"] == 600.0


def test_theil_sen_ignores_outliers() -> None:
    # slope 2 with two wild points: the median of pairwise slopes stays 2
    xs = [float(x) for x in range(10)]
    ys = [2 * x for x in xs]
    ys[3], ys[7] = 500.0, -400.0
    assert theil_sen_slope(xs, ys) == 2.0
    with pytest.raises(ValueError, match="two distinct x"):
        theil_sen_slope([1.0, 1.0], [1.0, 2.0])


def test_theil_sen_median_of_pairs_with_and_without_repeated_x() -> None:
    # distinct x: slopes 2, 2, 2, 100/3, 49, 96 -> median (2 + 100/3) / 2
    assert theil_sen_slope([0.0, 1.0, 2.0, 3.0], [0.0, 2.0, 4.0, 100.0]) == pytest.approx(53 / 3)
    # x = 1 twice (two batches at one time): that pair has no slope; 1, 5, 1, 1, -3 -> 1
    assert theil_sen_slope([0.0, 1.0, 1.0, 2.0], [0.0, 1.0, 5.0, 2.0]) == 1.0


def test_a_limit_far_beyond_the_trend_gives_no_date_and_no_overflow() -> None:
    # 6000 rows/h towards a limit of 2**63 - 1 rows: about 1.75e11 years away, beyond any datetime (this
    # raised OverflowError in timedelta before)
    (finding,) = evaluate_state_growth(
        StateGrowthParams(limit_rows=2**63 - 1), history(run([1000 + 100 * m for m in M])), NOW
    )
    assert finding.severity is Severity.WARNING
    assert f"does not reach the limit of {2**63 - 1} rows within 100 years" in finding.message
    assert finding.details["seconds_to_limit"] == pytest.approx((2**63 - 1 - 4000) / 100 * 60)


def test_limits_beyond_int64_are_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="limit_rows"):
        StateGrowthParams(limit_rows=2**63)


# ------------------------------------------------------------- kept as batches arrive (issue 16, scan speed)


def _rolling_findings(samples: list[Sample], params: StateGrowthParams, lookback: timedelta) -> list[list[str]]:
    """The rule's finding messages after each batch, from the window :class:`RollingHistory` keeps."""
    rolling = RollingHistory(lookback, timedelta(0))
    out = []
    for sample in samples:
        kept = rolling.extend([sample])
        assert kept is not None and kept.marks_kept
        out.append([f.message for f in evaluate_state_growth(params, kept, sample.observed_at)])
    return out


def _scanned_findings(samples: list[Sample], params: StateGrowthParams, lookback: timedelta) -> list[list[str]]:
    """The same, rescanning the window at every batch (:func:`rules.history.job_history`)."""
    out = []
    for n in range(1, len(samples) + 1):
        scanned = job_history(samples[:n], lookback, timedelta(0))
        assert scanned is not None and not scanned.marks_kept
        out.append([f.message for f in evaluate_state_growth(params, scanned, samples[n - 1].observed_at)])
    return out


@pytest.mark.parametrize(("case", "samples", "params", "expected"), TABLE, ids=[f"state-{c[0]}" for c in TABLE])
def test_the_window_kept_as_batches_arrive_gives_the_table_s_findings(
    case: int, samples: list[Sample], params: dict[str, object], expected: Severity | None
) -> None:
    validated = StateGrowthParams.model_validate(params)
    rolling = _rolling_findings(samples, validated, timedelta(hours=1))
    assert rolling == _scanned_findings(samples, validated, timedelta(hours=1))
    assert len(rolling[-1]) == (0 if expected is None else 1)


PARAM_SETS: list[dict[str, object]] = [
    {},
    {"min_points": 3, "min_watermark_steps": 1},
    {"window": "10m", "limit_rows": 3000},
    {"min_monotone_share": 0.5, "min_growth": 0.0},
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, -1, 0, 1, 2, 5, 50, 400]),  # state change (None: not reported)
            st.sampled_from([0, 0, 0, 0, 1, 7]),  # rows removed
            st.sampled_from(["up", "up", "flat", "none", "epoch", "down"]),  # watermark
            st.sampled_from([0.5, 1.0, 1.0, 3.0]),  # minutes to the next batch
        ),
        min_size=1,
        max_size=90,
    ),
    st.sampled_from(PARAM_SETS),
)
def test_the_window_kept_as_batches_arrive_finds_what_a_rescan_finds(
    steps: list[tuple[int | None, int, str, float]], params: dict[str, object]
) -> None:
    # random state sizes, removals, watermark moves (unknown, Spark's epoch, back) and trigger gaps: the
    # rule reading the kept window says exactly what it says rescanning the window, at every batch
    samples: list[Sample] = []
    minute, state, wm = 0.0, 1000, -10.0
    for change, removed, move, gap in steps:
        state = max(0, state + (change or 0))
        wm = wm + 1 if move == "up" else wm - 3 if move == "down" else wm
        watermark = None if move == "none" else datetime(1970, 1, 1, tzinfo=UTC) if move == "epoch" else wm
        samples.append(
            spark(minute, 10, watermark, minute, batch=len(samples), state=None if change is None else state,
                  removed=removed)
        )  # fmt: skip
        minute += gap
    validated = StateGrowthParams.model_validate(params)
    lookback = max(validated.window, timedelta(minutes=40))
    assert _rolling_findings(samples, validated, lookback) == _scanned_findings(samples, validated, lookback)
