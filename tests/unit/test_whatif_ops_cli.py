"""``tidegauge whatif`` with per-input delays, a stream-stream join and a chain of stateful operators.

Every expected value below is worked out by hand from the small event files (Spark's rules: an input's
watermark is ``max event time - its delay``, the global one the ``min`` over inputs and never moving
back; a batch filters late rows against the previous batch's watermark and evicts against its own; a
join's state value watermark is ``watermark - bound - 1 ms``); none is recomputed with the engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli as run

# Two inputs, each in every batch; the 40 s rows of batch 2 are late (windows ending 50 s <= 60 s).
TWO_INPUTS = (
    "event_time,batch,source\n"
    "1970-01-01T00:01:00Z,0,a\n"
    "1970-01-01T00:01:00Z,0,b\n"
    "1970-01-01T00:02:00Z,1,a\n"
    "1970-01-01T00:01:30Z,1,b\n"
    "1970-01-01T00:00:40Z,2,a\n"
    "1970-01-01T00:00:40Z,2,b\n"
)

# clicks (left) and views (right) joined on key. Lines: 2 clicks@10 k1, 3 views@12 k1, 4 clicks@30 k2,
# 5 views@60 k3, 6 clicks@5 k1 (late: <= 7 s), 7 clicks@120 k4, 8 views@120 k4, 9 views@15 k3 (late: <= 20 s).
JOIN = (
    "event_time,batch,source,key\n"
    "1970-01-01T00:00:10Z,0,clicks,k1\n"
    "1970-01-01T00:00:12Z,0,views,k1\n"
    "1970-01-01T00:00:30Z,0,clicks,k2\n"
    "1970-01-01T00:01:00Z,1,views,k3\n"
    "1970-01-01T00:00:05Z,1,clicks,k1\n"
    "1970-01-01T00:02:00Z,2,clicks,k4\n"
    "1970-01-01T00:02:00Z,2,views,k4\n"
    "1970-01-01T00:00:15Z,2,views,k3\n"
)

# One input; line 8 (4 s, batch 2) is late at operator 1 (window [0 s, 5 s) closed at 11 s).
CHAIN = (
    "event_time,batch,source\n"
    "1970-01-01T00:00:01Z,0,a\n"
    "1970-01-01T00:00:03Z,0,a\n"
    "1970-01-01T00:00:07Z,0,a\n"
    "1970-01-01T00:00:16Z,1,a\n"
    "1970-01-01T00:00:02Z,1,a\n"
    "1970-01-01T00:00:31Z,2,a\n"
    "1970-01-01T00:00:04Z,2,a\n"
)


def _file(tmp_path: Path, text: str) -> str:
    p = tmp_path / "events.csv"
    p.write_text(text, encoding="utf-8")
    return str(p)


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    code, out, err = run([*argv, "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


# --- per-input delays ---------------------------------------------------------------------------


@pytest.mark.parametrize("delay", ["a=10s,b=30s", "b=30s,10s"])
def test_per_input_delays_set_each_inputs_watermark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], delay: str
) -> None:
    # after batch 0: a 60-10 = 50 s, b 60-30 = 30 s -> min 30 s; after the data batch 1: a 120-10 = 110 s,
    # b 90-30 = 60 s -> 60 s. One delay of 10 s for both would give 50 s and 80 s.
    doc = _json(["whatif", _file(tmp_path, TWO_INPUTS), "--delay", delay, "--window", "10s"], capsys)
    assert [(b["batch_id"], b["kind"], b["watermark_ms"], b["late_rows"], b["state_rows"]) for b in doc["batches"]] == [
        (0, "data", 0, 0, 1),
        (1, "no-data", 30_000, 0, 1),
        (2, "data", 30_000, 0, 3),
        (3, "no-data", 60_000, 0, 3),
        (4, "data", 60_000, 2, 3),
    ]
    assert doc["summary"]["dropped_by_source"] == {"a": 1, "b": 1}
    assert doc["summary"]["final_watermark_ms"] == 60_000


def test_per_input_delays_named_in_the_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["whatif", _file(tmp_path, TWO_INPUTS), "--delay", "b=30s,10s", "--window", "10s"], capsys)
    assert code == 0
    assert "window 10s tumbling, append, policy min, delays b 30s (other inputs 10s)" in out.splitlines()[0]
    assert "rows dropped as late: 2 (33.333%); by source: a=1, b=1" in out


def test_one_delay_still_applies_to_every_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(["whatif", _file(tmp_path, TWO_INPUTS), "--delay", "10s", "--window", "10s"], capsys)
    assert [b["watermark_ms"] for b in doc["batches"]] == [0, 50_000, 50_000, 80_000, 80_000]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--delay", "a=10s,c=5s", "--window", "10s"],
            "--delay c=...: no input 'c' in the events (inputs in the source column: a, b)",
        ),
        (["--delay", "a=10s", "--window", "10s"], "--delay gives no delay for input 'b'"),
        (["--delay", "a=10s", "--window", "10s"], "; inputs in the source column: a, b"),
        (["--delay", "a=10s,a=5s", "--window", "10s"], "--delay 'a=10s,a=5s': input 'a' is given twice"),
        (["--delay", "a=10s,5s,1s", "--window", "10s"], "two delays without an input name"),
        (["--delay", "a=ten", "--window", "10s"], "--delay a=: cannot parse 'ten'"),
        (["--delay", "a=10s,b=1s", "--window", "10s", "--sweep", "1s,5s"], "--sweep varies one delay"),
    ],
)
def test_bad_per_input_delays_name_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(["whatif", _file(tmp_path, TWO_INPUTS), *argv], capsys)
    assert code == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err


# --- stream-stream join ---------------------------------------------------------------------------

_JOIN = ["--delay", "clicks=10s,views=5s", "--join", "left-outer", "--join-inputs", "clicks,views"]
_RANGE = ["--join-lower", "5s", "--join-upper", "5s"]


def test_join_per_batch_and_per_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Watermarks: after batch 0 clicks 30-10 = 20 s, views 12-5 = 7 s -> 7 s; after the data batch 2
    # views 60-5 = 55 s -> 20 s; after batch 4 clicks 110 s, views 115 s -> 110 s. State watermarks
    # (wm - 5 s - 1 ms): batch 3 removes clicks@10 (matched) and views@12; batch 5 removes clicks@30
    # (never matched: one NULL-padded row) and views@60.
    doc = _json(["whatif", _file(tmp_path, JOIN), *_JOIN, *_RANGE], capsys)
    got = [
        (
            b["batch_id"],
            b["kind"],
            b["watermark_ms"],
            b["input_rows"],
            b["join"]["late_left_rows"],
            b["join"]["late_right_rows"],
            b["join"]["state_rows_left"],
            b["join"]["state_rows_right"],
            b["join"]["joined_rows"],
            b["join"]["null_padded_left_rows"],
        )
        for b in doc["batches"]
    ]
    assert got == [
        (0, "data", 0, 3, 0, 0, 2, 1, 1, 0),
        (1, "no-data", 7_000, 0, 0, 0, 2, 1, 0, 0),
        (2, "data", 7_000, 2, 1, 0, 2, 2, 0, 0),
        (3, "no-data", 20_000, 0, 0, 0, 1, 1, 0, 0),
        (4, "data", 20_000, 3, 0, 1, 2, 2, 1, 0),
        (5, "no-data", 110_000, 0, 0, 0, 1, 1, 0, 1),
    ]
    j = doc["join"]
    assert (j["type"], j["left"], j["right"], j["lower_ms"], j["upper_ms"]) == (
        "left_outer", "clicks", "views", 5_000, 5_000,
    )
    assert (j["output_rows"], j["joined_rows"]) == (3, 2)
    assert j["sides"] == [
        {
            "input": "clicks", "side": "left", "delay_ms": 10_000, "rows": 4, "late_rows": 1,
            "state_rows_peak": 2, "state_rows_end": 1, "evicted_rows": 2, "null_padded_rows": 1,
            "state_bounded": True,
        },
        {
            "input": "views", "side": "right", "delay_ms": 5_000, "rows": 4, "late_rows": 1,
            "state_rows_peak": 2, "state_rows_end": 1, "evicted_rows": 2, "null_padded_rows": 0,
            "state_bounded": True,
        },
    ]
    assert doc["summary"]["dropped_by_source"] == {"clicks": 1, "views": 1}
    assert [(e["batch_id"], e["line"], e["source"], e["lateness_ms"]) for e in doc["late_row_details"]] == [
        (2, 6, "clicks", 2_000),
        (4, 9, "views", 5_000),
    ]


def test_join_text_says_which_input_drops_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["whatif", _file(tmp_path, JOIN), *_JOIN, *_RANGE], capsys)
    assert code == 0
    assert (
        "Join: left-outer join ON clicks.key = views.key AND clicks.event_time >= views.event_time - 5s "
        "AND clicks.event_time <= views.event_time + 5s"
    ) in out
    assert (
        "  clicks (left side, delay 10s): 4 rows, 1 dropped as late; state rows: peak 2, at the end 1, "
        "2 removed by its state watermark"
    ) in out
    assert (
        "  views (right side, delay 5s): 4 rows, 1 dropped as late; state rows: peak 2, at the end 1, "
        "2 removed by its state watermark"
    ) in out
    assert "Output rows: 3 = 2 joined + 1 clicks row(s) with NULLs" in out
    # the file says batch 2 (Spark ran no-data batches between: its batch id is 4)
    assert "batch 2: line 9 (event time 1970-01-01T00:00:15Z source views) late by 5s" in out
    assert "never shrinks" not in out


def test_join_without_range_says_state_never_shrinks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a key-only inner join: no state watermark, so no no-data batch runs and every row stays in state.
    # Without the no-data batches each data batch filters against the previous data batch's watermark
    # (0, then 7 s), so clicks@5 (> 0) and views@15 (> 7 s) are not late here: left clicks@10, @30, @5,
    # @120; right views@12, @60, @120, @15. Joined (key only): k1 in batch 0 (clicks@10), k1 in batch 1
    # (clicks@5 with the stored views@12), k4 in batch 2.
    argv = ["whatif", _file(tmp_path, JOIN), "--delay", "clicks=10s,views=5s", "--join", "inner",
            "--join-inputs", "clicks,views"]
    doc = _json(argv, capsys)
    assert [(b["kind"], b["watermark_ms"], b["join"]["state_rows_left"], b["join"]["state_rows_right"])
            for b in doc["batches"]] == [("data", 0, 2, 1), ("data", 7_000, 3, 2), ("data", 20_000, 4, 4)]
    assert doc["join"]["joined_rows"] == 3
    assert doc["summary"]["dropped_rows"] == 0
    assert [s["state_bounded"] for s in doc["join"]["sides"]] == [False, False]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert (
        "  clicks's state never shrinks: no range condition bounds it, so every clicks row is kept for ever; "
        "add --join-lower (clicks.event_time >= views.event_time - X)"
    ) in out
    assert "  views's state never shrinks" in out and "add --join-upper" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--delay", "1s", "--join", "inner", "--join-inputs", "clicks"], "--join-inputs must name the two sides"),
        (["--delay", "1s", "--join", "inner", "--join-inputs", "clicks,"], "a side is missing"),
        (["--delay", "1s", "--join", "inner"], "--join needs --join-inputs LEFT,RIGHT"),
        (["--delay", "1s", "--join-inputs", "clicks,views", "--window", "5s"], "--join-inputs needs --join TYPE"),
        (["--delay", "1s", "--join", "inner", "--join-inputs", "clicks,orders"],
         "--join-inputs: no input 'orders' in the events (inputs in the source column: clicks, views)"),
        (["--delay", "1s", "--join", "cross", "--join-inputs", "clicks,views"], "--join must be one of inner"),
        (["--delay", "1s", "--join", "left-outer", "--join-inputs", "clicks,views"],
         "Add: clicks.event_time >= views.event_time - INTERVAL"),
        (["--delay", "1s", "--join", "inner", "--join-inputs", "clicks,views", "--window", "5s"],
         "--join cannot be combined with --window"),
        (["--engine", "flink", "--delay", "1s", "--window", "5s", "--join", "inner"],
         "--join: only for --engine spark"),
        (["--engine", "flink", "--delay", "clicks=1s,views=2s", "--window", "5s"],
         "--delay NAME=DURATION (per-input delays): only for --engine spark"),
        (["--delay", "1s", "--join", "inner", "--join-inputs", "clicks,views", "--group-by-key"],
         "--group-by-key is for windows"),
    ],
)
def test_bad_join_options_name_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(["whatif", _file(tmp_path, JOIN), *argv], capsys)
    assert code == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err


# --- chains ---------------------------------------------------------------------------------------

_CHAIN = ["--delay", "5s", "--window", "5s", "--then-window", "10s"]


def test_chain_per_operator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # operator 1 (5 s windows): watermarks 0, 2 s, 2 s, 11 s, 11 s, 26 s. Batch 3 closes [0,5) (3 rows)
    # and [5,10) (1 row); operator 2 puts them at window_time 4.999999 s / 9.999999 s into [0,10), which
    # closes in the same batch (10 s <= 11 s): count 2, 4 rows. Batch 4: the 4 s row is late at
    # operator 1 ([0,5) closed). Batch 5 closes [15,20) -> operator 2's [10,20) (1 row).
    doc = _json(["whatif", _file(tmp_path, CHAIN), *_CHAIN], capsys)
    ch = doc["chain"]
    assert ch["allow_multiple"] is True
    assert [
        (b["batch_id"], b["kind"], b["watermark_ms"], [(o["late_rows"], o["state_rows"], o["output_rows"])
                                                       for o in b["operators"]])
        for b in ch["batches"]
    ] == [
        (0, "data", 0, [(0, 2, 0), (0, 0, 0)]),
        (1, "no-data", 2_000, [(0, 2, 0), (0, 0, 0)]),
        (2, "data", 2_000, [(0, 3, 0), (0, 0, 0)]),
        (3, "no-data", 11_000, [(0, 1, 2), (0, 0, 1)]),
        (4, "data", 11_000, [(1, 2, 0), (0, 0, 0)]),
        (5, "no-data", 26_000, [(0, 1, 1), (0, 0, 1)]),
    ]
    assert [b["emitted"] for b in ch["batches"] if b["emitted"]] == [
        [{"start_ms": 0, "end_ms": 10_000, "count": 2, "rows": 4}],
        [{"start_ms": 10_000, "end_ms": 20_000, "count": 1, "rows": 1}],
    ]
    assert [
        (o["operator"], o["spark_name"], o["input_rows"], o["late_rows"], o["dropped_by_watermark_metric"],
         o["state_rows_peak"], o["state_rows_end"], o["output_rows"])
        for o in ch["operators"]
    ] == [(1, "stateStoreSave", 7, 1, 1, 3, 1, 3), (2, "stateStoreSave", 3, 0, 0, 0, 0, 2)]
    assert doc["summary"]["dropped_rows_by_operator"] == [1, 0]
    assert doc["summary"]["dropped_by_source"] == {"a": 1}
    assert [(e["batch_id"], e["line"]) for e in doc["late_row_details"]] == [(4, 8)]


def test_chain_without_allow_multiple_drops_at_operator_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # allowMultiple=false: operator 2 filters against the current batch's watermark, so the windows
    # operator 1 emits in batches 3 and 5 (ending 5 s, 10 s <= 11 s; 20 s <= 26 s) are late there:
    # 3 rows, 2 distinct groups ([0,10) and [10,20)); nothing reaches the sink.
    argv = ["whatif", _file(tmp_path, CHAIN), *_CHAIN, "--no-allow-multiple"]
    doc = _json(argv, capsys)
    assert [(o["late_rows"], o["dropped_by_watermark_metric"], o["output_rows"]) for o in doc["chain"]["operators"]] == [
        (1, 1, 3),
        (3, 2, 0),
    ]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert "rows dropped as late by operator: operator 1: 1; operator 2: 3; operator 1 by source: a=1" in out
    assert "operator 2 dropped 3 rows that operator 1 emitted" in out
    assert "spark.sql.streaming.statefulOperator.allowMultiple=true" in out
    assert "Windows emitted by operator 2: 0" in out


def test_chain_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["whatif", _file(tmp_path, CHAIN), *_CHAIN], capsys)
    assert code == 0
    assert "window 5s tumbling -> window 10s tumbling over operator 1's output, policy min, allowMultiple true" in out
    assert (
        "  operator 1, window 5s tumbling (stateStoreSave): 7 rows in, 1 dropped as late "
        "(numRowsDroppedByWatermark 1); state rows: peak 3, at the end 1; 3 rows out"
    ) in out
    assert "Windows emitted by operator 2: 2 ([1970-01-01T00:00:00Z,1970-01-01T00:00:10Z)=2 (rows: 4)" in out


def test_dedup_then_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # dropDuplicates(key, event_time) then 10 s windows: every row has key k, so rows with the same event
    # time would be duplicates (none here). Late at the dedup: 2 s in batch 2 (<= 2 s) and
    # 4 s in batch 4 (<= 11 s). Passed: 1, 3, 7, 16, 31 s; operator 2 closes [0,10) (3 rows) in batch 3
    # and [10,20) (1 row) in batch 5; [30,40) stays open. (Without a key column whatif stops: exit 2.)
    keyed = CHAIN.replace("source\n", "source,key\n").replace(",a\n", ",a,k\n")
    doc = _json(["whatif", _file(tmp_path, keyed), "--delay", "5s", "--dedup", "key,event_time",
                 "--then-window", "10s"], capsys)
    ops = doc["chain"]["operators"]
    assert [(o["spark_name"], o["late_rows"], o["output_rows"]) for o in ops] == [
        ("dedupe", 2, 5),
        ("stateStoreSave", 0, 2),
    ]
    emitted = [w for b in doc["chain"]["batches"] for w in b["emitted"]]
    assert [(w["start_ms"], w["end_ms"], w["count"], w["rows"]) for w in emitted] == [
        (0, 10_000, 3, 3), (10_000, 20_000, 1, 1),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--delay", "5s", "--window", "5s", "--then-window", "10s", "--then-group-by-key"],
         "--then-group-by-key needs operator 1 to output the key"),
        (["--delay", "5s", "--window", "5s", "--then-group-by-key"], "--then-group-by-key is for a chain"),
        (["--delay", "5s", "--session-gap", "5s", "--then-window", "10s"],
         "--then-window: chain: operator 1 must be a tumbling/sliding window or a dedup"),
        (["--delay", "5s", "--window", "5s", "--output-mode", "update", "--then-window", "10s"],
         "--then-window: chain: operator 1 must use output_mode='append'"),
        (["--delay", "5s", "--window", "5s", "--then-window", "10s,1s,1s"], "--then-window '10s,1s,1s'"),
        (["--delay", "5s", "--window", "5s", "--then-window", "1x"], "--then-window: unknown unit"),
        (["--delay", "5s", "--window", "5s", "--then-window", "10s", "--sweep", "1s"],
         "--sweep is not available with --then-window"),
    ],
)
def test_bad_chain_options_name_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(["whatif", _file(tmp_path, CHAIN), *argv], capsys)
    assert code == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err


def test_join_bound_may_be_negative(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --join-lower -5s: clicks.event_time >= views.event_time + 5s (a click at least 5 s after the view)
    argv = ["whatif", _file(tmp_path, JOIN), "--delay", "10s", "--join", "inner", "--join-inputs", "clicks,views",
            "--join-lower", "-5s", "--join-upper", "20s"]
    doc = _json(argv, capsys)
    assert (doc["join"]["lower_ms"], doc["join"]["upper_ms"]) == (-5_000, 20_000)
    assert doc["join"]["condition"] == (
        "inner join ON clicks.key = views.key AND clicks.event_time >= views.event_time + 5s "
        "AND clicks.event_time <= views.event_time + 20s"
    )


# MultiStatefulOperatorsSuite "stream-stream time interval left outer join -> aggregation, append mode" (Spark's
# own test, translated as case 5 of tests/unit/test_watermark_chain_suite.py): left.eventTime BETWEEN
# right.eventTime - 40 s AND right.eventTime + 30 s, leftOuter, withWatermark 2 min / 4 min,
# groupBy(window(left.eventTime, 30 s)).count(); two MultiAddData steps, CheckNewAnswer after each.
SUITE_JOIN_AGG = (
    "event_time,source,key,batch\n"
    "2020-01-01T00:00:00Z,left,abc,0\n"  # no join partner: NULL-padded, counted once the watermark passes
    "2020-01-02T00:00:00Z,left,abc,0\n"  # joined with A
    "2020-01-02T01:00:00Z,left,abc,0\n"  # joined with B
    "2020-01-02T00:00:10Z,right,abc,0\n"  # A
    "2020-01-02T00:59:59Z,right,abc,0\n"  # B
    "2020-01-02T02:00:00Z,right,abc,0\n"  # C
    "2020-01-05T00:00:00Z,left,abc,1\n"  # joined with D
    "2020-01-05T00:00:10Z,right,abc,1\n"  # D
)


def test_join_then_window_replays_spark_s_suite_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["whatif", _file(tmp_path, SUITE_JOIN_AGG), "--delay", "left=2m,right=4m", "--join", "left-outer",
            "--join-inputs", "left,right", "--join-lower", "40s", "--join-upper", "30s", "--then-window", "30s"]
    doc = _json([*argv, "--format", "json"], capsys)
    emitted = [
        [(w["start_ms"], w["end_ms"], w["count"]) for w in b["emitted"]] for b in doc["chain"]["batches"]
    ]
    day1, day2 = 1_577_836_800_000, 1_577_923_200_000  # 2020-01-01 and 2020-01-02 00:00 UTC
    # CheckNewAnswer after step 1: ([2020-01-01 00:00, +30 s), 1), ([2020-01-02 00:00, +30 s), 1); after step 2:
    # ([2020-01-02 01:00, +30 s), 1) -- each emitted by the no-data batch that follows the step
    assert [w for ws in emitted for w in ws] == [
        (day1, day1 + 30_000, 1), (day2, day2 + 30_000, 1), (day2 + 3_600_000, day2 + 3_630_000, 1)
    ]
    assert [i for i, ws in enumerate(emitted) if ws] == [1, 3]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "operator 1: stream-stream join (left-outer join ON left.key = right.key" in out
    assert "operator 2 reads the join's output watermark, not the global one" in out


# batch 0 sets the watermark to 10:00 - delay; batch 1's left row at 09:58 is late with a delay under 2 min
LATE_LEFT = (
    "event_time,source,key,batch\n"
    "2026-01-01T10:00:00Z,left,k,0\n"
    "2026-01-01T10:00:00Z,right,k,0\n"
    "2026-01-01T09:58:00Z,left,k,1\n"
)
JOIN_ARGS = ["--join", "inner", "--join-inputs", "left,right", "--join-lower", "5m", "--join-upper", "5m"]


def test_a_join_sweeps_its_delay_and_recommends_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, LATE_LEFT)
    doc = _json(["whatif", path, "--delay", "0s", *JOIN_ARGS, "--sweep", "0s,1m,2m,5m", "--format", "json"], capsys)
    # the row is late while 09:58 <= 10:00 - delay: delays 0 s, 1 min and 2 min (<=) drop it
    assert [(s["delay_ms"], s["dropped_rows"]) for s in doc["sweep"]] == [
        (0, 1), (60_000, 1), (120_000, 1), (300_000, 0)
    ]
    doc = _json(["whatif", path, *JOIN_ARGS, "--sweep", "0s,1m,2m,5m", "--target-completeness", "100",
                 "--format", "json"], capsys)  # fmt: skip
    # the smallest delay that keeps it: 10:00 - delay < 09:58, i.e. 2 min + 1 ms (read off its lateness)
    assert doc["recommendation"]["delay_ms"] == 120_001
