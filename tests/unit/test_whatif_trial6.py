"""``tidegauge whatif`` fixes from the new-user trial (notes trial6: items 2, 6, 10): a query on ``key`` over
a file without a key column, an impossible join range, an unused default delay, "late by 0s"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli as run

# two inputs, no key column
NO_KEY = (
    "event_time,batch,source\n"
    "1970-01-01T00:00:10Z,0,clicks\n"
    "1970-01-01T00:00:12Z,0,views\n"
    "1970-01-01T00:01:00Z,1,clicks\n"
    "1970-01-01T00:01:00Z,1,views\n"
)


def _file(tmp_path: Path, text: str) -> str:
    p = tmp_path / "events.csv"
    p.write_text(text, encoding="utf-8")
    return str(p)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--join", "inner", "--join-inputs", "clicks,views"], "--join"),
        (["--dedup", "key,event_time"], "--dedup"),
        (["--dedup", "key"], "--dedup"),
        (["--window", "1m", "--group-by-key"], "--group-by-key"),
        (["--session-gap", "1m"], "--session-gap"),
        (["--dedup", "key", "--then-window", "1m"], "--dedup"),
    ],
)
def test_a_query_on_key_over_a_file_without_key_is_a_named_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    path = _file(tmp_path, NO_KEY)
    code, out, err = run(["whatif", path, "--delay", "10s", *args], capsys)
    assert code == 2, out
    assert f"{option}" in err and f"{path} has no 'key' column" in err
    assert "Traceback" not in err


def test_a_window_without_key_still_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(["whatif", _file(tmp_path, NO_KEY), "--delay", "10s", "--window", "1m"], capsys)
    assert code == 0


def test_an_impossible_join_range_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = NO_KEY.replace("source\n", "source,key\n").replace("clicks\n", "clicks,k\n").replace("views\n", "views,k\n")
    path = _file(tmp_path, text)
    base = ["whatif", path, "--delay", "10s", "--join", "inner", "--join-inputs", "clicks,views"]
    code, _, err = run([*base, "--join-lower=-5m", "--join-upper=-5m"], capsys)
    assert code == 2
    assert (
        "--join-lower -5m --join-upper -5m: the condition inner join ON clicks.key = views.key AND "
        "clicks.event_time >= views.event_time + 5m AND clicks.event_time <= views.event_time - 5m can never hold"
    ) in err
    # a range of width 0 (lower + upper = 0) can hold: rows exactly 5 m apart
    code, _, _ = run([*base, "--join-lower=-5m", "--join-upper=5m"], capsys)
    assert code == 0


def test_an_unused_default_delay_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, NO_KEY)
    code, out, _ = run(["whatif", path, "--delay", "clicks=10s,views=1m,5m", "--window", "1m"], capsys)
    assert code == 0
    assert (
        "Note: --delay's default 5m applies to no input: every input (clicks, views) has its own delay. "
        "It is not used."
    ) in out
    code, out, _ = run(
        ["whatif", path, "--delay", "clicks=10s,views=1m,5m", "--window", "1m", "--format", "json"], capsys
    )
    assert json.loads(out)["notes"] == [
        "Note: --delay's default 5m applies to no input: every input (clicks, views) has its own delay. "
        "It is not used."
    ]


def test_a_row_exactly_at_the_watermark_is_not_late_by_0s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # delay 0: batch 0's max 10 s sets the watermark 10 s (a no-data batch runs with it); batch 1's row at 7 s
    # is in the window [5 s, 10 s), which ends at 10 s <= the watermark: late, by nothing
    path = _file(tmp_path, "event_time,batch\n1970-01-01T00:00:10Z,0\n1970-01-01T00:00:07Z,1\n")
    code, out, _ = run(["whatif", path, "--delay", "0s", "--window", "5s"], capsys)
    assert code == 0
    assert "late by 0s" not in out
    assert "batch 1: line 3 (event time 1970-01-01T00:00:07Z) late: its window ended exactly at the watermark, and Spark drops <=" in out


# Inputs a (delay 10s) and b (1m). Batch 1's rows at 2 min set the watermark min(1:50, 1:00) = 1:00 (b's row);
# batch 2's a@0:55 is late (window [50 s, 60 s) ends at 1:00). No row of b is read after b's 2-min row.
PER_INPUT = (
    "event_time,batch,source\n"
    "1970-01-01T00:00:10Z,0,a\n"
    "1970-01-01T00:00:10Z,0,b\n"
    "1970-01-01T00:02:00Z,1,a\n"
    "1970-01-01T00:02:00Z,1,b\n"
    "1970-01-01T00:00:55Z,2,a\n"
)


def test_an_ordinary_row_within_its_inputs_delay_is_not_blamed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial item 3: b's row is ordinary (input a is behind it, which is skew between inputs); no Cause block
    code, out, _ = run(["whatif", _file(tmp_path, PER_INPUT), "--delay", "a=10s,b=1m", "--window", "10s"], capsys)
    assert code == 0
    assert "rows dropped as late: 1" in out
    assert "Cause" not in out and "No delay fixes it" not in out


def test_the_cause_block_names_each_inputs_delay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # b's 5-min row sets the watermark min(4:50, 4:00) = 4:00; b's later rows (0:40, 0:50) never reach it.
    # The latest late row is a@0:30 (window ending 0:40, 3m20s before 4:00): keeping it needs every delay
    # 3m20.001s longer.
    text = (
        "event_time,batch,source\n"
        "1970-01-01T00:00:10Z,0,a\n1970-01-01T00:00:10Z,0,b\n"
        "1970-01-01T00:05:00Z,1,a\n1970-01-01T00:05:00Z,1,b\n"
        "1970-01-01T00:00:30Z,2,a\n1970-01-01T00:00:40Z,2,b\n"
        "1970-01-01T00:00:50Z,3,b\n1970-01-01T00:00:55Z,3,a\n"
    )
    code, out, _ = run(["whatif", _file(tmp_path, text), "--delay", "a=10s,b=1m", "--window", "10s"], capsys)
    assert code == 0
    assert "  line 5 (batch 1, source b): event time 1970-01-01T00:05:00Z set the first watermark, " in out
    assert "    the rows of b read after it reach at most 1970-01-01T00:00:50Z" in out
    assert (
        "  A larger delay would keep those rows: every input's delay raised by at least 3m20.001s "
        "(a 10s -> 3m30.001s, b 1m -> 4m20.001s)."
    ) in out
    assert "No delay fixes it" not in out


def test_left_semi_output_rows_add_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # clicks k1@10 s and k2@20 s are stored in batch 0; views k1@12 s and k2@25 s, 26 s match them in batch 1:
    # each click is output once (2 rows), when its first view arrives, and removed from state
    text = (
        "event_time,batch,source,key\n"
        "1970-01-01T00:00:10Z,0,clicks,k1\n1970-01-01T00:00:20Z,0,clicks,k2\n"
        "1970-01-01T00:00:12Z,1,views,k1\n1970-01-01T00:00:25Z,1,views,k2\n1970-01-01T00:00:26Z,1,views,k2\n"
    )
    args = ["--delay", "10s", "--join", "left-semi", "--join-inputs", "clicks,views", "--join-lower", "5m",
            "--join-upper", "5m"]
    code, out, _ = run(["whatif", _file(tmp_path, text), *args], capsys)
    assert code == 0
    assert (
        "Output rows: 2; 2 of them were clicks rows kept in state until a views row matched, output then and "
        "removed (a left semi join outputs each left row once)"
    ) in out


def test_a_chain_says_why_late_rows_and_spark_metric_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 5 s windows, delay 5 s: batch 2 filters against 11 s (16 s - 5 s); its rows at 4 s and 3 s are both in
    # window [0 s, 5 s): 2 late rows, one late group, which is what Spark's metric counts
    text = (
        "event_time,batch,source\n"
        "1970-01-01T00:00:01Z,0,a\n1970-01-01T00:00:03Z,0,a\n1970-01-01T00:00:07Z,0,a\n"
        "1970-01-01T00:00:16Z,1,a\n1970-01-01T00:00:02Z,1,a\n"
        "1970-01-01T00:00:31Z,2,a\n1970-01-01T00:00:04Z,2,a\n1970-01-01T00:00:03Z,2,a\n"
    )
    code, out, _ = run(
        ["whatif", _file(tmp_path, text), "--delay", "5s", "--window", "5s", "--then-window", "10s"], capsys
    )
    assert code == 0
    assert (
        "8 rows in, 2 dropped as late (Spark's numRowsDroppedByWatermark shows 1: it counts late groups, not rows)"
    ) in out


def test_backlog_without_a_batch_column_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, "event_time\n1970-01-01T00:00:10Z\n")
    code, _, err = run(["whatif", path, "--delay", "10s", "--window", "1m", "--backlog"], capsys)
    assert code == 2
    assert f"--backlog says how the file's batches arrived, but {path} has no 'batch' column" in err
