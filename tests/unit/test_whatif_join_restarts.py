"""Restarts of a stream-stream join: ``tidegauge whatif --join ... --restart-after / --run-kind`` and the
engine's left semi rule that only the first batch after a restart (or any batch whose late filter lags its
eviction watermark) shows.

The events are the rows of the hand-made differential cases 900202 (a left outer join restarted after
its second data batch) and 900203 (the same join as one Trigger.Once run per step) in
tests/differential/join_restarts.py, which real PySpark 4.3.0 ran with the same batches, watermarks,
output rows and state (FINDINGS.md JR1, JR2). The expected values are worked out by hand below (Spark's
rules: an input's watermark is ``max event time - its delay``, the global one the ``min`` over inputs,
never moving back; after a restart the per-input watermarks are lost and an input without rows since
counts as 0 under ``min``; a batch filters late rows against the previous batch's watermark; a side's
join state keeps the rows a future row of the other side can still match); none is recomputed with the
engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli as run

#: 2026-01-01T00:00:00Z in epoch ms.
T0_MS = 1_767_225_600_000

# Lines: 2 left k@10, 3 right k@12 (batch 0); 4 left k@20, 5 left j@21, 6 right k@30 (batch 1);
# 7 left k@31 (batch 2, no right row); 8 left k@22, 9 left x@50, 10 right k@24, 11 right x@45 (batch 3).
EVENTS = (
    "event_time,source,key,batch\n"
    "2026-01-01T00:00:10Z,left,k,0\n"
    "2026-01-01T00:00:12Z,right,k,0\n"
    "2026-01-01T00:00:20Z,left,k,1\n"
    "2026-01-01T00:00:21Z,left,j,1\n"
    "2026-01-01T00:00:30Z,right,k,1\n"
    "2026-01-01T00:00:31Z,left,k,2\n"
    "2026-01-01T00:00:22Z,left,k,3\n"
    "2026-01-01T00:00:50Z,left,x,3\n"
    "2026-01-01T00:00:24Z,right,k,3\n"
    "2026-01-01T00:00:45Z,right,x,3\n"
)

JOIN = [
    "--delay", "left=0s,right=5s", "--join", "left-outer", "--join-inputs", "left,right",
    "--join-lower", "5s", "--join-upper", "5s",
]  # fmt: skip


def _json(tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    events = tmp_path / "events.csv"
    events.write_text(EVENTS, encoding="utf-8")
    code, out, err = run(["whatif", str(events), *JOIN, *extra, "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _batches(doc: dict) -> list[tuple[object, ...]]:  # type: ignore[type-arg]
    return [
        (
            b["batch_id"],
            b["kind"],
            b["watermark_ms"] - T0_MS if b["watermark_ms"] else b["watermark_ms"],
            b["input_rows"],
            b["join"]["joined_rows"],
            b["join"]["null_padded_left_rows"],
            b["join"]["state_rows_left"],
            b["join"]["state_rows_right"],
        )
        for b in doc["batches"]
    ]


def test_restart_of_a_join_holds_the_watermark_and_joins_rows_a_live_query_drops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Batch 0: k@10|k@12 joined; left 10 s, right 12 - 5 = 7 s -> watermark 7 s (no-data batch 1).
    # Batch 2 (file batch 1): left 21 s, right 25 s -> 21 s; no-data batch 3 removes left k@10 and right
    # k@12 (no row past 21 s can match them). Restart after batch 3 (--restart-after 'after 1': the no-data batch after file batch 1): the per-input watermarks (21 s, 25 s)
    # are lost. Batch 4 reads left k@31 only (joins right k@30): left 31 s, right has no rows since the
    # restart and counts as 0 -> the watermark stays 21 s, so no no-data batch follows. Batch 5 filters
    # against 21 s: left k@22 and right k@24 are kept (a live query, at 25 s by then, drops both) and k@24
    # joins k@20 and k@22; x@50|x@45 joined; left 50 s, right 40 s -> 40 s. No-data batch 6 removes the
    # left rows below 35 s: j@21 never matched and comes out NULL-padded; left x@50 and right x@45 stay.
    doc = _json(tmp_path, ["--restart-after", "after 1"], capsys)
    assert _batches(doc) == [
        (0, "data", 0, 2, 1, 0, 1, 1),
        (1, "no-data", 7_000, 0, 0, 0, 1, 1),
        (2, "data", 7_000, 3, 0, 0, 3, 2),
        (3, "no-data", 21_000, 0, 0, 0, 2, 1),
        (4, "data", 21_000, 1, 1, 0, 3, 1),
        (5, "data", 21_000, 4, 3, 0, 5, 3),
        (6, "no-data", 40_000, 0, 0, 1, 1, 1),
    ]
    impact = doc["restart_impact"]
    assert impact["kept_only_with_restarts_lines"] == [8, 10]
    assert (impact["dropped_rows"], impact["dropped_rows_without_restarts"]) == (0, 2)
    # one live query: k@10|k@12, k@31|k@30, x@50|x@45 joined, k@20 and j@21 NULL-padded
    assert (impact["windows_emitted"], impact["windows_emitted_without_restarts"]) == (6, 5)
    assert (impact["no_data_batches"], impact["no_data_batches_without_restarts"]) == (3, 4)
    (held,) = impact["held_back"]
    assert (
        held["first_batch_id"],
        held["watermark_ms"] - T0_MS,
        held["watermark_without_restarts_ms"] - T0_MS,
    ) == (
        5,
        21_000,
        25_000,
    )
    assert held["waiting_for"] == ["right"]
    assert (doc["join"]["output_rows"], doc["join"]["joined_rows"]) == (6, 5)


def test_trigger_once_runs_of_a_join_never_pad_the_unmatched_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One batch per run, never a no-data batch: each batch filters and evicts against the watermark the
    # batch before it left (0, 7 s, 21 s, 21 s: after batch 2 the right input has no rows since its restart).
    # The last batch evicts only below 21 s - 5 s = 16 s, so j@21 stays in the left state and is never
    # output; k@20 joins k@24 instead of coming out NULL-padded.
    doc = _json(tmp_path, ["--run-kind", "once"], capsys)
    assert _batches(doc) == [
        (0, "data", 0, 2, 1, 0, 1, 1),
        (1, "data", 7_000, 3, 0, 0, 3, 2),
        (2, "data", 21_000, 1, 1, 0, 3, 1),
        (3, "data", 21_000, 4, 3, 0, 5, 3),
    ]
    impact = doc["restart_impact"]
    assert (impact["windows_emitted"], impact["windows_emitted_without_restarts"]) == (5, 5)
    assert (doc["join"]["output_rows"], doc["join"]["joined_rows"]) == (5, 5)
    assert [s["state_rows_end"] for s in doc["join"]["sides"]] == [5, 3]


def test_join_restart_text_says_what_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "events.csv"
    events.write_text(EVENTS, encoding="utf-8")
    code, out, err = run(["whatif", str(events), *JOIN, "--restart-after", "after 1"], capsys)
    assert code == 0, err
    assert "Join: left-outer join ON left.key = right.key" in out
    assert "Output rows: 6 = 5 joined + 1 left row(s) with NULLs" in out
    assert (
        "after the no-data batch after batch 1 (id 3): batch 2 (id 4) starts with the watermark "
        "2026-01-01T00:00:21Z from the checkpoint; the per-input watermarks (left 2026-01-01T00:00:21Z, "
        "right 2026-01-01T00:00:25Z) are lost"
    ) in out
    assert "input right had no rows since the restart and counts as 0 under policy min" in out
    assert "join output rows (joined and NULL-padded): 6 here, 5 in one live query" in out
    assert "expect NULL-padded rows to come out and join state to be removed that much later" in out
    assert "windows" not in out


# --- the engine: a left semi join's right row below its state watermark (FINDINGS.md JR4) -----------


def _semi_batches(seed: int) -> list[tuple[int, list[tuple[str, int]], int, int]]:
    """(batch id, left rows output as (key, seconds), state rows, state rows removed) per batch of the
    hand-made join restart ``seed``, replayed by the engine under its Trigger.Once runs."""
    from monitor.watermark.restart import replay_runs
    from tests.differential.join_restarts import hand_join_restart_scenarios
    from tests.differential.joins_harness import join_config, join_events
    from tests.differential.joins_scenarios import JoinScenario
    from tests.differential.restarts import engine_runs

    (scenario,) = [s for s in hand_join_restart_scenarios() if s.seed == seed]
    base = scenario.base
    assert isinstance(base, JoinScenario)
    events, flat = join_events(base)
    result = replay_runs(events, join_config(base), engine_runs(scenario)).replay
    out = []
    for b in result.batches:
        assert b.join is not None
        rows = sorted((flat[i][0], (int(flat[i][1] or 0) // 1000 - T0_MS) // 1000) for i in b.join.left_rows)
        out.append((b.batch_id, rows, b.state_rows, b.state_rows_removed))
    return out


def test_semi_join_right_row_below_its_state_watermark_misses_left_rows_of_its_own_batch() -> None:
    # Spark 900205 (one Trigger.Once run per step; lkey = rkey AND lt BETWEEN rt - 5 s AND rt + 1 s):
    # batch 2 filters late rows against 10 s and evicts against 30 s. Right b@28.5 is not late but
    # below the right state watermark (30 s - 1 s - 1 ms), so it is not stored; it outputs left b@26
    # (stored by batch 1, removed) but not left b@27 of its own batch, which stays in state.
    assert _semi_batches(900205) == [
        (0, [("x", 10)], 1, 0),
        (1, [("x", 30)], 3, 0),
        (2, [("b", 26)], 2, 2),
    ]


def test_semi_join_right_row_above_its_state_watermark_finds_both() -> None:
    # Spark 900207: the same with right b@29.5 (above 28.999 s): b@26 and b@27 are output
    assert _semi_batches(900207) == [
        (0, [("x", 10)], 1, 0),
        (1, [("x", 30)], 3, 0),
        (2, [("b", 26), ("b", 27)], 2, 2),
    ]


def test_restarts_with_a_chain_are_still_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "events.csv"
    events.write_text("event_time,batch\n2026-01-01T00:00:10Z,0\n2026-01-01T00:00:20Z,1\n", encoding="utf-8")
    argv = [
        "whatif",
        str(events),
        "--delay",
        "5s",
        "--window",
        "5s",
        "--then-window",
        "10s",
        "--restart-after",
        "0",
    ]
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert "they do not combine with --sweep, --target-completeness or --then-window yet" in err
