"""``tidegauge whatif`` fixes from the seventh new-user trial: what a dedup emitted and that dropDuplicates on
the key alone never evicts; the JSON batches' file batch numbers and placeholder watermark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli as run

# key a twice (the second a duplicate), then keys b and c: 3 rows pass, 1 duplicate dropped
DEDUP = (
    "event_time,key,batch\n"
    "2026-01-01T00:00:10Z,a,0\n"
    "2026-01-01T00:00:12Z,b,0\n"
    "2026-01-01T00:00:20Z,a,1\n"
    "2026-01-01T00:00:30Z,c,1\n"
)


def _file(tmp_path: Path, text: str, name: str = "events.csv") -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


@pytest.mark.parametrize("mode", ["key", "key,event_time", "within-watermark"])
def test_a_dedup_counts_the_rows_it_passed_on(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    code, out, err = run(["whatif", _file(tmp_path, DEDUP), "--delay", "1m", "--dedup", mode], capsys)
    assert code == 0, err
    # the second row of key a is a duplicate only when the key alone (or within the watermark) decides
    emitted = 4 if mode == "key,event_time" else 3
    assert f"  rows emitted: {emitted}\n" in out
    never_evicts = "dropDuplicates on the key alone never evicts" in out
    assert never_evicts == (mode == "key")
    code, out, err = run(
        ["whatif", _file(tmp_path, DEDUP), "--delay", "1m", "--dedup", mode, "--format", "json"], capsys
    )
    doc = json.loads(out)
    assert doc["summary"]["windows_emitted"] == sum(b["output_rows"] for b in doc["batches"]) == emitted


# file batches numbered 3, 5, 7: Spark's ids count the no-data batches between them too
GAPPED = (
    "event_time,batch\n"
    "2026-01-01T00:00:10Z,3\n"
    "2026-01-01T00:01:10Z,5\n"
    "2026-01-01T00:02:10Z,7\n"
)


@pytest.mark.parametrize("extra", [[], ["--restart-after", "5"]])
def test_json_data_batches_carry_the_file_batch_number_and_flag_the_placeholder_watermark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    code, out, err = run(
        ["whatif", _file(tmp_path, GAPPED), "--delay", "10s", "--window", "1m", "--format", "json", *extra], capsys
    )
    assert code == 0, err
    batches = json.loads(out)["batches"]
    assert [(b["kind"], b.get("batch")) for b in batches if b["kind"] == "data"] == [
        ("data", 3), ("data", 5), ("data", 7)
    ]
    assert all("batch" not in b for b in batches if b["kind"] == "no-data")
    assert [b["watermark_is_placeholder"] for b in batches][:2] == [True, False]
    assert batches[0]["watermark_ms"] == 0


# partition 0 goes quiet after 00:00:01 (arrival); partition 1 keeps going, then both stop
FLINK_IDLE = (
    "event_time,arrival_time,partition\n"
    "2026-01-01T00:00:00Z,2026-01-01T00:00:00.500Z,0\n"
    "2026-01-01T00:00:01Z,2026-01-01T00:00:01.500Z,1\n"
    + "".join(f"2026-01-01T00:00:{s:02d}Z,2026-01-01T00:00:{s:02d}.500Z,1\n" for s in range(2, 40, 2))
)


def test_flink_whatif_names_the_modelled_release_and_the_scope_of_each_idle_period(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, FLINK_IDLE)
    argv = ["whatif", path, "--engine", "flink", "--delay", "2s", "--window", "10s", "--idleness", "5s"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "Flink 2.3 semantics (the default; --flink-version to change)" in out.splitlines()[0]
    assert "  idle partitions (withIdleness): 1 period (processing time)" in out
    code, out, err = run([*argv, "--format", "json"], capsys)
    doc = json.loads(out)
    assert doc["flink_version"] == "2.3"
    periods = doc["summary"]["idle_periods"] if "summary" in doc else doc["idle_periods"]
    scopes = [(p["scope"], p["partition"]) for p in periods]
    assert ("partition", 0) in scopes and all((s == "all_partitions") == (p is None) for s, p in scopes)
    code, out, err = run([*argv, "--flink-version", "2.1", "--format", "json"], capsys)
    assert json.loads(out)["flink_version"] == "2.1"


def test_negative_processing_time_latency_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # event times 10 min ahead of the arrival clock: windows close (in event time) after they are emitted
    rows = "".join(
        f"2026-01-01T00:{10 + m:02d}:00Z,2026-01-01T00:{m:02d}:00Z\n" for m in range(0, 40, 5)
    )
    path = _file(tmp_path, "event_time,arrival_time\n" + rows)
    code, out, err = run(["whatif", path, "--delay", "1m", "--window", "5m", "--trigger", "1m"], capsys)
    assert code == 0, err
    (latency,) = [ln for ln in out.splitlines() if ln.startswith("  output latency (processing time")]
    assert "p50 -" in latency
    assert "    negative: windows were emitted at arrival times before their end in event time" in out


def _at(seconds: float) -> str:
    whole, frac = divmod(round(seconds * 1000), 1000)
    return f"2026-01-01T00:{whole // 60:02d}:{whole % 60:02d}.{frac:03d}Z"


# partition 1: three rows dated 100-102 s early on, then silent; partition 0: rows 0-5 s, a pause of 7 s,
# then rows dated 6 s and 7 s. With idleness 2 s both partitions are idle from 7.4 s: Flink 2.2+ flushes the
# watermark to partition 1's (100.999 s), so partition 0's two later rows are late.
ALL_IDLE = "event_time,arrival_time,partition\n" + "".join(
    [f"{_at(100 + i)},{_at(i * 0.5)},1\n" for i in range(3)]
    + [f"{_at(i)},{_at(i)},0\n" for i in range(6)]
    + [f"{_at(6)},{_at(12)},0\n", f"{_at(7)},{_at(12.5)},0\n"]
)


def test_late_elements_after_an_all_idle_flush_are_linked_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["whatif", _file(tmp_path, ALL_IDLE), "--engine", "flink", "--delay", "1s", "--window", "10s",
            "--idleness", "2s"]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert (
        "  2 late elements of partition 0 met the watermark 2026-01-01T00:01:40.999Z that the all-idle flush at "
        "2026-01-01T00:00:07.400Z (processing time) set"
    ) in out
    code, out, err = run([*argv, "--flink-version", "2.1"], capsys)
    assert code == 0, err
    assert "late elements (all their windows past end - 1 + allowed lateness): 0 " in out and "flush at" not in out


def test_a_key_only_dedup_says_its_state_never_evicts_in_a_chain_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["whatif", _file(tmp_path, DEDUP), "--delay", "1m", "--dedup", "key", "--then-window", "5m"], capsys
    )
    assert code == 0, err
    assert "  operator 1: dropDuplicates on the key alone never evicts" in out
