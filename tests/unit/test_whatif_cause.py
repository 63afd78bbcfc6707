"""What-if names the cause (issue 10, section 4): the row that moved the watermark, that no delay
fixes it, and what does (filter the row, ``--max-future-skew``), each with the replayed figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.watermark import EventsTable, Tumbling, WatermarkConfig, replay
from monitor.watermark.diagnose import diagnose
from monitor.watermark.sweep import sweep
from tests.cli import run_cli as _run

BASE_S = 1_767_225_600  # 2026-01-01T00:00:00Z
SEC_US = 1_000_000
YEAR_2099_S = 4_070_908_800  # 2099-01-01T00:00:00Z


def _stream(n: int = 40, bad_at: int | None = 7, bad_s: int = YEAR_2099_S) -> str:
    """CSV: one row every 10 s arriving 2 s after its event time; row ``bad_at`` is mis-dated."""
    lines = ["event_time,arrival_time"]
    for i in range(n):
        t = BASE_S + 10 * i
        et = bad_s if i == bad_at else t
        lines.append(f"{et},{t + 2}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def misdated_csv(tmp_path: Path) -> Path:
    p = tmp_path / "events.csv"
    p.write_text(_stream(), encoding="utf-8")
    return p


def test_whatif_names_the_row_that_moved_the_watermark_and_the_fixes(
    misdated_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: only "N% dropped"; nothing said which row, or what would fix it
    args = [
        "whatif",
        str(misdated_csv),
        "--time-unit",
        "s",
        "--delay",
        "1m",
        "--window",
        "1m",
        "--trigger",
        "10s",
    ]
    code, out, err = _run([*args, "--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    cause = doc["cause"]
    [row] = cause["misdated_rows"]
    # the 8th data row is on line 9 (header = line 1); it arrives at 00:01:12 -> trigger tick 00:01:20
    assert (row["line"], row["event_time"]) == (9, "2099-01-01T00:00:00Z")
    assert row["batch_id"] == next(
        b["batch_id"] for b in doc["batches"] if b["processing_time_ms"] == (BASE_S + 80) * 1000
    )
    dropped = doc["summary"]["dropped_rows"]
    assert dropped > 20 and cause["dropped_by_misdated_rows"] == dropped
    # no delay fixes it: 73 years would be needed
    assert cause["delay_needed_ms"] > 70 * 365 * 86_400_000
    # filtering that row or --max-future-skew does, and the replayed figure says so
    assert cause["without_misdated_rows"]["dropped_rows"] == 0
    skew = cause["max_future_skew"]
    assert skew["max_future_skew_ms"] == 60_000  # the other rows are never ahead of processing time
    assert (skew["summary"]["dropped_rows"], skew["summary"]["future_filtered_rows"]) == (0, 1)
    code, text, _ = _run(args, capsys)
    assert "Cause: 1 row moved the watermark" in text
    assert "line 9 (batch" in text and "event time 2099-01-01T00:00:00Z moved the watermark" in text
    assert "No delay fixes it: keeping those rows needs a delay of at least 73 years" in text
    assert "Filtering that row out before withWatermark: 0 rows (0.000%) dropped" in text
    assert "--max-future-skew 1m (filter(event_time <= current_timestamp() + INTERVAL 60 SECONDS)" in text
    assert "late by 73 years" in text  # the lateness in a readable unit, not 26662d23h...


def test_the_delays_tried_all_fail_and_the_cause_is_still_named(
    misdated_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["whatif", str(misdated_csv), "--time-unit", "s", "--window", "1m", "--trigger", "10s", "--sweep",
            "1m,1h,7d", "--target-completeness", "99"]
    code, text, _ = _run(args, capsys)
    assert code == 0
    # the useful answer leads: the row, then the delay the target needs without it (no delay at all: the
    # other rows arrive in order), then, labelled, the 73 years it would need with the row kept
    row = text.index("Cause (at delay 7d, the largest tried): 1 row moved the watermark")
    assert text.index("line 9 (batch") > row
    without = text.index(
        "Smallest delay for 99.0% completeness without the mis-dated row (line 9, filtered out before "
        "withWatermark): 0s (drops 0 of 39 rows = 0.000% <= 1.000%"
    )
    kept = text.index(
        "With the mis-dated row kept (for comparison, not a fix): 26662d23h58m0.001s (73 years) (drops 0 of 40 rows"
    )
    assert row < without < kept < text.index("   delay   dropped")  # before the sweep table
    assert "Smallest delay for 99.0% completeness: " not in text  # 73 years is never THE recommendation
    # JSON: the recommendation is the one without the row; the one with it sits beside it, labelled
    code, out, _ = _run([*args, "--format", "json"], capsys)
    rec = json.loads(out)["recommendation"]
    assert (rec["delay_ms"], rec["misdated_rows"], rec["smallest_candidate_ms"]) == (0, [9], 60_000)
    # the delay with the row kept is the 26662d23h58m0.001s the text shows
    assert rec["with_misdated_rows"]["delay_ms"] == ((26662 * 24 + 23) * 60 + 58) * 60_000 + 1


def test_a_steady_stream_with_a_small_delay_has_no_misdated_row() -> None:
    # late rows because the delay is too small, not because of one row: no row is "ahead"
    rng = np.random.default_rng(3)
    t = (BASE_S + np.arange(300) * 5 + rng.integers(-40, 1, 300)) * SEC_US
    ev = EventsTable.from_columns(np.asarray(t, dtype=np.int64), batch=np.arange(300) // 3)
    cfg = WatermarkConfig(delay_ms=5_000, window=Tumbling(10_000))
    d = diagnose(ev, cfg)
    assert d.dropped_rows > 0 and d.movers
    assert d.misdated == () and d.delay_needed_ms is None and d.without_misdated is None


def test_a_row_hidden_behind_another_misdated_row_is_found_in_the_next_round() -> None:
    # 2099 first, then 2098: while the 2099 row is there the 2098 row moves nothing
    t = [BASE_S + 10 * i for i in range(30)]
    t[5] = YEAR_2099_S
    t[12] = YEAR_2099_S - 365 * 86_400
    ev = EventsTable.from_columns(np.asarray(t, dtype=np.int64) * SEC_US, batch=list(range(30)))
    d = diagnose(ev, WatermarkConfig(delay_ms=60_000, window=Tumbling(60_000)))
    assert sorted(m.line for m in d.misdated) == [6, 13]
    assert d.without_misdated is not None and d.without_misdated.dropped_rows == 0


def test_a_backfill_row_in_the_past_cannot_be_caught_by_a_skew_filter(tmp_path: Path) -> None:
    # a 2024 backfill processed in 2026: one row +24 h ahead of the stream but not of processing time
    old = 1_704_067_200  # 2024-01-01
    lines = ["event_time,arrival_time"] + [
        f"{old + 10 * i + (86_400 if i == 4 else 0)},{BASE_S + 10 * i}" for i in range(30)
    ]
    p = tmp_path / "backfill.csv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from monitor.watermark.io import load_events

    ev = load_events(p, time_unit="s")
    cfg = WatermarkConfig(delay_ms=60_000, window=Tumbling(60_000), trigger_ms=10_000)
    d = diagnose(ev, cfg)
    assert [m.line for m in d.misdated] == [6]
    assert d.without_misdated is not None and d.without_misdated.dropped_rows == 0
    assert d.skew_fix is None and "no more than other rows" in d.skew_unavailable
    # and indeed no delay up to a few hours helps
    assert all(s.dropped_rows > 0 for s in sweep(ev, cfg, [60_000, 3_600_000, 6 * 3_600_000]))


def test_under_min_policy_the_mover_is_the_last_input_to_reach_the_watermark() -> None:
    # input a jumps to 2099 in batch 1; input b only in batch 3: the min watermark jumps after batch 3
    t = [BASE_S, BASE_S + 1, YEAR_2099_S, BASE_S + 2, BASE_S + 3, YEAR_2099_S + 5, BASE_S + 4, BASE_S + 5]
    src = ["a", "b", "a", "b", "a", "b", "a", "b"]
    batch = [0, 0, 1, 1, 2, 3, 4, 4]
    ev = EventsTable.from_columns(np.asarray(t, dtype=np.int64) * SEC_US, batch=batch, source=src)
    d = diagnose(ev, WatermarkConfig(delay_ms=60_000, window=Tumbling(60_000)))
    assert [m.line for m in d.misdated][:1] == [6]  # row index 5 (input b, batch 3) set the min
    assert d.misdated[0].source == "b"


def test_event_time_latency_with_a_source_column_is_not_the_skew_between_inputs() -> None:
    # Input b's rows lag input a's by 10 minutes. Under the min policy the watermark follows b, so
    # the delay's event-time cost is measured on b's clock: it must equal what b alone gives.
    # Before: measured against a's (the fastest) max event time, it read ~10 minutes too high.
    n = 60
    a = [(BASE_S + 10 * i) * SEC_US for i in range(n)]
    b = [(BASE_S - 600 + 10 * i) * SEC_US for i in range(n)]
    cfg = WatermarkConfig(delay_ms=30_000, window=Tumbling(60_000))
    both = EventsTable.from_columns(
        np.asarray([x for pair in zip(a, b, strict=True) for x in pair], dtype=np.int64),
        batch=[i for i in range(n) for _ in (0, 1)],
        source=["a", "b"] * n,
    )
    alone = EventsTable.from_columns(np.asarray(b, dtype=np.int64), batch=list(range(n)))
    s_both, s_alone = replay(both, cfg).summary, replay(alone, cfg).summary
    assert s_both.windows_emitted == s_alone.windows_emitted > 0
    assert s_both.event_time_latency == s_alone.event_time_latency
    assert s_both.latency_batches == s_alone.latency_batches
    assert s_both.event_time_latency.max_ms is not None and s_both.event_time_latency.max_ms < 120_000


def test_latency_batches_json_keys_name_batches_not_ms(
    misdated_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        [
            "whatif",
            str(misdated_csv),
            "--time-unit",
            "s",
            "--delay",
            "1m",
            "--window",
            "1m",
            "--trigger",
            "10s",
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0
    keys = set(json.loads(out)["summary"]["latency_batches"])
    assert keys == {"count", "p50_batches", "p95_batches", "max_batches"}
