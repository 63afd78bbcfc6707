"""``tidegauge scan`` end to end (in process) over the bundled demo and recorded real files.

Expected values are read off the recorded log by hand (see test_spark_eventlog.py): 12 batches of query
wm_gt; batch 6 has eventTime.max 2099-01-01T00:00:00Z at batch time 2026-11-29T11:32:48.289Z, 72 years
ahead; batch 7's watermark is 2098-12-31T23:50:00Z; numRowsDroppedByWatermark is 1, 2, 2 in batches 2, 4, 8.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from monitor.cli import main

DEMO_APP = "local-1795951957158"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err


def test_demo_text_shows_future_jump_and_drops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["scan", "--demo"], capsys)
    assert code == 0, err  # no --fail-on: findings do not change the exit code
    assert "Query wm_gt" in out
    assert "batch 6: event-time max 2099-01-01T00:00Z is 72 years ahead of the batch time" in out
    assert "the watermark jumps to 2098-12-31T23:50Z in batch 7" in out
    assert "filter rows with event_time > now + 1 h before withWatermark" in out
    for batch, rows in ((2, "1 row"), (4, "2 rows"), (8, "2 rows")):
        assert f"batch {batch}: {rows} dropped as later than the watermark" in out
    assert "5 rows dropped by the watermark in total, in 3 batches (2, 4, 8)" in out


def test_demo_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["scan", "--demo", "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    (query,) = doc["queries"]
    assert query["id"] == "be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8" and query["name"] == "wm_gt"
    assert len(query["run_ids"]) == 7  # 7 QueryStartedEvent, each a new runId
    assert [b["batch_id"] for b in query["batches"]] == list(range(12))
    b6 = query["batches"][6]
    assert b6["timestamp"] == "2026-11-29T11:32:48.289Z"
    assert b6["event_time_max"] == "2099-01-01T00:00:00.000Z"
    assert b6["num_input_rows"] == 3 and b6["state_rows"] == 4
    assert query["batches"][7]["watermark"] == "2098-12-31T23:50:00.000Z"
    assert {k for b in query["batches"] for k in b} >= {
        "batch_id",
        "timestamp",
        "num_input_rows",
        "watermark",
        "event_time_max",
        "dropped_by_watermark",
        "state_rows",
    }
    found = [(f["rule"], f["severity"], f["batch_id"]) for f in doc["findings"]]
    assert ("future_timestamp", "critical", 6) in found
    assert [b for r, _, b in found if r == "late_rows_dropped"] == [2, 4, 8, None]
    assert all(f["query_id"] == query["id"] and f["message"] for f in doc["findings"])


@pytest.mark.parametrize(("fail_on", "expected"), [("critical", 1), ("warning", 1)])
def test_fail_on(capsys: pytest.CaptureFixture[str], fail_on: str, expected: int) -> None:
    assert run(["scan", "--demo", "--fail-on", fail_on], capsys)[0] == expected


def test_fail_on_not_reached(capsys: pytest.CaptureFixture[str], shared_fixtures: Path) -> None:
    # the Spark 3.1 excerpt: no watermark, 0 late rows, one batch -> no finding at all
    path = shared_fixtures / "spark" / "public" / "eventlog_local-1596020211915_streaming_excerpt.jsonl"
    code, out, _ = run(["scan", str(path), "--fail-on", "warning"], capsys)
    assert code == 0 and "Findings: none." in out


def test_future_skew_option(capsys: pytest.CaptureFixture[str]) -> None:
    # a skew of 100 years tolerates the 2099 row: no future finding, and the late rows of batch 8 are no
    # longer blamed on a future watermark
    code, out, _ = run(["scan", "--demo", "--future-skew", "36500d", "--format", "json"], capsys)
    rules = {f["rule"] for f in json.loads(out)["findings"]}
    assert code == 0 and "future_timestamp" not in rules and "late_rows_dropped" in rules


def test_bad_inputs_exit_2_and_others_still_scanned(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    src = spark_fixtures / "eventlog_v2_fixture" / f"eventlog_v2_{DEMO_APP}" / f"events_1_{DEMO_APP}.zstd"
    data = bytearray(src.read_bytes())
    for i in range(2000, 2040):
        data[i] ^= 0xFF
    corrupt = tmp_path / f"{DEMO_APP}.zstd"
    corrupt.write_bytes(bytes(data))
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    missing = tmp_path / "missing.json"
    good = spark_fixtures / "eventlog_trimmed.jsonl"
    code, out, err = run(["scan", str(corrupt), str(unknown), str(missing), str(good)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 3
    assert any(str(corrupt) in line and "corrupt zstd frame" in line for line in lines)
    assert any(str(unknown) in line and "unknown format" in line for line in lines)
    assert any(str(missing) in line and "no such file" in line for line in lines)
    assert "Query wm_gt" in out and "batch 6: event-time max" in out  # the good file was still scanned


def test_progress_files_object_array_and_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path, shared_fixtures: Path
) -> None:
    single = spark_fixtures / "progress_pt_idle_after_14s_b12.json"  # batchId 12 of query wm_metrics
    docs = [
        json.loads((shared_fixtures / "spark" / "public" / n).read_text())
        for n in ("sqsps_testProgress1_prettyJson.json", "sqsps_testProgress2_prettyJson_no_eventTime.json")
    ]
    array = tmp_path / "array.json"
    array.write_text(json.dumps(docs, indent=1))
    lines = tmp_path / "lines.json"
    lines.write_text("".join(json.dumps(d) + "\n" for d in docs))
    code, out, err = run(["scan", str(single), str(array), "--format", "json"], capsys)
    assert code == 0, err
    ids = [q["id"] for q in json.loads(out)["queries"]]
    # the public docs use placeholder ids ...01 and ...03 (see public-PROVENANCE.md)
    assert ids == [
        "92f2e0e5-46e5-49c6-98a8-cbd4e61d1c66",
        "00000000-0000-0000-0000-000000000001",
        "00000000-0000-0000-0000-000000000003",
    ]
    code, out2, _ = run(["scan", str(lines), "--format", "json"], capsys)
    assert code == 0 and [q["id"] for q in json.loads(out2)["queries"]] == ids[1:]


def test_bad_option_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["scan", "--demo", "--format", "xml"], capsys)
    assert code == 2 and "--format" in err
    code, _, err = run(["scan", "--demo", "--future-skew", "soon"], capsys)
    assert code == 2 and "--future-skew" in err


def test_scan_db_stores_samples_and_cursors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    from monitor.store import get_cursor, load_samples, open_store

    url = f"sqlite:///{tmp_path / 'tg.db'}"
    assert run(["db", "upgrade", "--db", url], capsys)[0] == 0
    logdir = tmp_path / "logs"
    shutil.copytree(spark_fixtures / "eventlog_v2_fixture", logdir)
    code, _, err = run(["scan", str(logdir), "--db", url], capsys)
    assert code == 0 and "stored" in err
    run(["scan", str(logdir), "--db", url], capsys)  # idempotent: stored once
    store = open_store(url)
    try:
        with store.sessions() as session:
            samples = load_samples(session, job_id="be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8")
            events = logdir / f"eventlog_v2_{DEMO_APP}" / f"events_1_{DEMO_APP}.zstd"
            cursor = get_cursor(session, "spark-eventlog", str(events.absolute()))
    finally:
        store.dispose()
    query_progress = [s for s in samples if s.scope.is_job() and s.kind.value == "progress"]
    assert [s.batch_id for s in query_progress] == list(range(12))
    assert cursor is not None and cursor["offset"] == 34496 and cursor["line_no"] == 34  # whole file read


def test_directory_is_expanded_and_unrelated_files_skipped(
    capsys: pytest.CaptureFixture[str], spark_fixtures: Path
) -> None:
    # real-4.3.0 holds the plain event log (query wm_gt be3a...), 4 progress files (query wm_gt e05f... of
    # another run, and 3 of wm_metrics 92f2...), and Prometheus/REST/listener files that are neither: those
    # are skipped with a warning, and the exit code stays 0
    code, out, err = run(["scan", str(spark_fixtures), "--format", "json"], capsys)
    assert code == 0
    names = sorted(q["name"] or "" for q in json.loads(out)["queries"])
    assert names.count("wm_gt") == 2 and "wm_metrics" in names  # the event log's wm_gt and the gt progress
    assert "prometheus_executors_endpoint.txt: unknown format" in err and "(skipped)" in err
    assert "tidegauge: error" not in err
