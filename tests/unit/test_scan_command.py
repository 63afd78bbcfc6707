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

from tests.cli import run_cli as run

DEMO_APP = "local-1795951957158"


def test_demo_text_shows_future_jump_and_drops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["scan", "--demo"], capsys)
    assert code == 0, err  # no --fail-on: findings do not change the exit code
    assert "Query wm_gt" in out
    # replayed batch by batch: the 2099 row of batch 6 is seen at batch 6 itself, and held until its run
    # terminated after batch 7 (a terminated query's alerts resolve)
    assert "CRITICAL future_timestamp [wm_gt] (held batches 6-7) batch 6 at 2026-11-29T11:32:48.289Z: event-time max " \
        "2099-01-01T00:00Z is 72 years ahead of the observation time" in out
    # the jump's Spark remedy (rules.remedies), with the batch to restart before
    assert "A longer delay does not help: filter rows whose event time is implausibly far ahead before " \
        "withWatermark (beyond current_timestamp() + 1 h, or in a backfill beyond the range replayed), and restart " \
        "from a checkpoint taken before batch 6" in out
    # batch 2 dropped 1 of the 11 rows of batches 0-2 (all within late_drop_surge's 10-min window)
    assert "(held batches 2-3) 1 of 11 input rows (9.1%) were dropped as late" in out
    # batch 8 ran with the 2098-12-31T23:50Z watermark: its drops are blamed on batch 6's future row
    assert "2 rows dropped at batch 8 because batch 6 at 2026-11-29T11:32:48.289Z carried a mis-dated row (event " \
        "time 2099-01-01T00:00Z, 72 years ahead of its observation time) that moved the watermark" in out
    # batches 6-7: the drops in the window (batches 2 and 4: 1 + 2 rows) came before the 2099 row; the
    # finding must not advise a longer delay beside future_timestamp's "A longer delay does not help"
    (surge_6_7,) = [line for line in out.splitlines() if "late_drop_surge [wm_gt] (held batches 6-7)" in line]
    assert "raise the withWatermark delay" not in surge_6_7
    assert surge_6_7.endswith(
        "3 of 20 input rows (15.0%) were dropped as late by the watermark in the last 10 min (2 batches, threshold "
        "1.0%); the 3 rows dropped at batches 2, 4 came before the mis-dated row and were late by the job's own "
        "delay, but the urgent problem is that batch 6 at 2026-11-29T11:32:48.289Z carried a mis-dated row (event "
        "time 2099-01-01T00:00Z, 72 years ahead of its observation time) that moved the watermark (see "
        "future_timestamp): every row after it is behind the watermark. A longer delay does not help: filter rows "
        "whose event time is implausibly far ahead before withWatermark (beyond current_timestamp() + 1 h, or in a "
        "backfill beyond the range replayed), and restart from a checkpoint taken before batch 6 (the watermark "
        "never goes back)."
    )
    # batches 8-9: batch 8's drops follow the jump, batches 2 and 4's came before it
    (surge_8_9,) = [line for line in out.splitlines() if "late_drop_surge [wm_gt] (held batches 8-9)" in line]
    assert "5 of 23 input rows (21.7%) were dropped as late by the watermark in the last 10 min (3 batches, " \
        "threshold 1.0%); 2 rows dropped at batch 8 because batch 6 at 2026-11-29T11:32:48.289Z carried a " \
        "mis-dated row (event time 2099-01-01T00:00Z, 72 years ahead of its observation time) that moved the " \
        "watermark (see future_timestamp): they are behind a watermark a mis-dated row set, not late; the 3 rows " \
        "dropped at batches 2, 4, before it, were late by the job's own delay. A longer delay does not help" in surge_8_9
    assert "raise the withWatermark delay" not in surge_8_9


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
        "batch_id", "timestamp", "num_input_rows", "watermark", "event_time_max", "dropped_by_watermark", "state_rows"
    }
    found = [(f["rule"], f["severity"], f["batch_id"], f["first_batch_id"], f["last_batch_id"]) for f in doc["findings"]]
    # runs are batches (0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11), then one without a batch; each run
    # terminated cleanly, which resolves the query's alerts; the next run's first batch brings them back
    assert [f for f in found if f[0] == "future_timestamp"] == [
        ("future_timestamp", "critical", 6, 6, 7), ("future_timestamp", "critical", 6, 8, 9),
        ("future_timestamp", "critical", 6, 10, 11),
    ]
    # drops in batches 2, 4, 8 (1, 2, 2 rows): every run from batch 2 on has a drop in its 10-min window
    assert [f[3:] for f in found if f[0] == "late_drop_surge"] == [(2, 3), (4, 5), (6, 7), (8, 9), (10, 11)]
    # restarts: a new run id from batch 2 on; a restart stays reported for 15 min, past the log's end
    assert ("target_health", "warning", None, 1, 11) in found
    assert all(f["query_id"] == query["id"] and f["message"] for f in doc["findings"])


@pytest.mark.parametrize(("fail_on", "expected"), [("critical", 1), ("warning", 1)])
def test_fail_on(capsys: pytest.CaptureFixture[str], fail_on: str, expected: int) -> None:
    assert run(["scan", "--demo", "--fail-on", fail_on], capsys)[0] == expected


def test_fail_on_not_reached(capsys: pytest.CaptureFixture[str], recorded_fixtures: Path) -> None:
    # the Spark 3.1 excerpt: no watermark, 0 late rows, one batch -> no finding at all
    path = recorded_fixtures / "spark" / "public" / "eventlog_local-1596020211915_streaming_excerpt.jsonl"
    code, out, _ = run(["scan", str(path), "--fail-on", "warning"], capsys)
    assert code == 0 and "Findings: none." in out


def test_future_skew_option(capsys: pytest.CaptureFixture[str]) -> None:
    # a skew of 100 years tolerates the 2099 row: no future finding, and the late rows of batch 8 are no
    # longer blamed on a future watermark
    code, out, _ = run(["scan", "--demo", "--future-skew", "36500d", "--format", "json"], capsys)
    findings = json.loads(out)["findings"]
    assert code == 0 and "future_timestamp" not in {f["rule"] for f in findings}
    late = [f for f in findings if f["rule"] == "late_drop_surge"]
    assert late and not any("future event time" in f["message"] for f in late)


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
    assert "Query wm_gt" in out and "batch 6 at 2026-11-29T11:32:48.289Z: event-time max" in out  # still scanned


def test_progress_files_object_array_and_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path, recorded_fixtures: Path
) -> None:
    single = spark_fixtures / "progress_pt_idle_after_14s_b12.json"  # batchId 12 of query wm_metrics
    docs = [json.loads((recorded_fixtures / "spark" / "public" / n).read_text()) for n in (
        "sqsps_testProgress1_prettyJson.json", "sqsps_testProgress2_prettyJson_no_eventTime.json")]
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


def test_cut_event_log_line_exits_2_good_lines_and_files_still_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    good = spark_fixtures / "eventlog_trimmed.jsonl"
    lines = good.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "app-cut"  # line 13 (progress batch 2) cut to its first 60 bytes: no marker left
    cut.write_bytes(b"".join(lines[:12]) + lines[12][:60] + b"\n" + b"".join(lines[13:]))
    code, out, err = run(["scan", str(cut), "--format", "json"], capsys)
    assert code == 2
    assert err.startswith(f"tidegauge: error: {cut}: line 13: not a Spark event")
    (query,) = json.loads(out)["queries"]
    assert [b["batch_id"] for b in query["batches"]] == [0, 1, *range(3, 12)]  # batch 2 lost, others kept


def test_bad_line_of_progress_json_lines_keeps_the_other_batches(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    # the 12 progress objects of the recorded event log (batches 0-11) as JSON lines; line 6 (batch 5) cut
    events = [json.loads(line) for line in (spark_fixtures / "eventlog_trimmed.jsonl").read_text().splitlines()]
    docs = [json.dumps(e["progress"]) for e in events if e["Event"].endswith("QueryProgressEvent")]
    path = tmp_path / "progress.jsonl"
    path.write_text("\n".join([*docs[:5], docs[5][:50], *docs[6:]]) + "\n")
    code, out, err = run(["scan", str(path), "--format", "json"], capsys)
    assert code == 2
    assert err.startswith(f"tidegauge: error: {path}: line 6: invalid JSON")
    (query,) = json.loads(out)["queries"]
    assert [b["batch_id"] for b in query["batches"]] == [0, 1, 2, 3, 4, *range(6, 12)]


def test_error_messages_name_file_line_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    # real progress (batch 0 of wm_metrics) with batchId made a string, and an event-log line without a timestamp
    doc = json.loads((spark_fixtures / "progress_pt_initial_idle_b0.json").read_text())
    badbid = tmp_path / "progress_badbid.json"
    badbid.write_text(json.dumps({**doc, "batchId": "x"}))
    lines = (spark_fixtures / "eventlog_trimmed.jsonl").read_text().splitlines(keepends=True)
    event = json.loads(lines[16])  # line 17: a QueryProgressEvent
    del event["progress"]["timestamp"]
    log = tmp_path / "app-shape"
    log.write_text("".join(lines[:16]) + json.dumps(event, separators=(",", ":")) + "\n" + "".join(lines[17:]))
    code, _, err = run(["scan", str(badbid), str(log)], capsys)
    assert code == 2
    assert f"tidegauge: error: {badbid}: field batchId: expected a number, got 'x'" in err
    assert f"tidegauge: error: {log}: line 17: field progress.timestamp: missing (expected an ISO-8601" in err
    assert "got None" not in err


def test_corrupt_first_frame_says_before_the_first_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    src = spark_fixtures / "eventlog_v2_fixture" / f"eventlog_v2_{DEMO_APP}" / f"events_1_{DEMO_APP}.zstd"
    data = bytearray(src.read_bytes())
    for i in range(20, 60):  # inside the first (and only) frame's data
        data[i] ^= 0xFF
    corrupt = tmp_path / f"{DEMO_APP}.zstd"
    corrupt.write_bytes(bytes(data))
    code, _, err = run(["scan", str(corrupt)], capsys)
    assert code == 2 and "before the first complete line" in err and "after line 0" not in err


def test_progress_json_with_bom_and_crlf_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    text = (spark_fixtures / "progress_pt_idle_after_14s_b12.json").read_text()  # batchId 12, query wm_metrics
    path = tmp_path / "progress_bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())  # as Windows Notepad saves it
    code, out, err = run(["scan", str(path), "--format", "json"], capsys)
    assert code == 0, err
    (query,) = json.loads(out)["queries"]
    assert query["name"] == "wm_metrics" and [b["batch_id"] for b in query["batches"]] == [12]


def test_inprogress_zstd_without_a_complete_frame_gets_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    src = spark_fixtures / "eventlog_v2_fixture" / f"eventlog_v2_{DEMO_APP}" / f"events_1_{DEMO_APP}.zstd"
    data = src.read_bytes()  # one zstd frame: its first half decompresses to no complete line
    growing = tmp_path / f"{DEMO_APP}.zstd.inprogress"
    growing.write_bytes(data[: len(data) // 2])
    code, out, err = run(["scan", str(growing)], capsys)
    assert code == 0  # an in-progress file may end anywhere
    assert f"tidegauge: note: {growing}: still being written" in err and "no complete event yet" in err
    assert "No streaming queries found." in out
    code, _, err = run(["scan", str(src)], capsys)  # a file with events: no note
    assert code == 0 and "note:" not in err


def test_text_shows_app_id_of_the_log_not_its_file_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    renamed = tmp_path / "edge3_app-copy"
    shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", renamed)
    code, out, _ = run(["scan", str(renamed)], capsys)
    assert code == 0
    assert f"(7 runs, app {DEMO_APP})" in out and "edge3_app-copy" not in out


def test_placeholder_watermark_shows_as_unset_but_stays_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    # the demo log's batch 0 (first batch of the query) reports watermark 1970-01-01T00:00:00.000Z (Spark's
    # "none computed yet"); batch 1 reports 2024-01-01T11:57:00.000Z, its first real watermark
    code, out, _ = run(["scan", "--demo"], capsys)
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("      ")}
    assert rows["0"][4:6] == ["-", "-"]  # watermark unset, no advance
    assert rows["1"][4:6] == ["2024-01-01T11:57:00.000Z", "-"]  # first real watermark: no "+54 years"
    assert rows["3"][5:7] == ["+8", "min"]  # 11:57 -> 12:05
    assert "1970" not in out
    code, out, _ = run(["scan", "--demo", "--format", "json"], capsys)
    b0, b1 = json.loads(out)["queries"][0]["batches"][:2]
    assert b0["watermark"] == "1970-01-01T00:00:00.000Z" and b0["watermark_is_placeholder"] is True
    assert b1["watermark_is_placeholder"] is False and b1["watermark_advance_ms"] is None


def test_fail_on_takes_only_severities_a_finding_can_have(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["scan", "--demo", "--fail-on", "ok"], capsys)
    assert code == 2 and "--fail-on: unknown severity 'ok'; allowed: info, warning, critical" in err
    assert run(["scan", "--demo", "--fail-on", "info"], capsys)[0] == 1  # the demo has warnings and a critical


def test_unknown_format_skipped_inside_a_directory_but_an_error_when_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", tmp_path / DEMO_APP)
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    code, out, err = run(["scan", str(tmp_path)], capsys)
    assert code == 0 and "Query wm_gt" in out
    assert f"tidegauge: warning: {notes}: unknown format" in err and "(skipped)" in err
    code, _, err = run(["scan", str(notes)], capsys)
    assert code == 2 and f"tidegauge: error: {notes}: unknown format" in err


def test_config_rules_section_is_used(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # the daemon's config file: scan replays with its rules (late_drop_surge off, a 100-year skew)
    config = tmp_path / "tidegauge.yaml"
    config.write_text("rules:\n  late_drop_surge: {enabled: false}\n  future_timestamp: {skew: 36500d}\n")
    code, out, err = run(["scan", "--demo", "-c", str(config), "--format", "json"], capsys)
    assert code == 0, err
    assert {f["rule"] for f in json.loads(out)["findings"]} == {"target_health"}
    # --future-skew on top of the file sets future_timestamp.skew back to 1 h
    code, out, _ = run(["scan", "--demo", "-c", str(config), "--future-skew", "1h", "--format", "json"], capsys)
    assert {f["rule"] for f in json.loads(out)["findings"]} == {"target_health", "future_timestamp"}
    config.write_text("rules:\n  watermark_stall: {for: soon}\n")
    code, _, err = run(["scan", "--demo", "-c", str(config)], capsys)
    assert code == 2 and "rules.watermark_stall.for" in err


def test_lifecycle_for_applies_as_in_the_daemon(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # late_drop_surge with `for: 1h`: the daemon would keep each episode pending (the demo log spans 10 s
    # of batch time) and notify none, so scan reports none; future_timestamp keeps its for 0
    config = tmp_path / "tidegauge.yaml"
    config.write_text("rules:\n  late_drop_surge: {for: 1h}\n")
    code, out, _ = run(["scan", "--demo", "-c", str(config), "--format", "json"], capsys)
    assert code == 0
    assert {f["rule"] for f in json.loads(out)["findings"]} == {"future_timestamp", "target_health"}


def test_folder_of_folders_is_an_error_naming_the_subdirectories(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    # a folder holding only folders of logs (and a README): nothing at its top level is scanned, so the
    # scan must not answer "Findings: none" with exit 0 as if the logs were healthy
    for name in ("job_a", "job_b"):
        (tmp_path / name).mkdir()
        shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", tmp_path / name / DEMO_APP)
    (tmp_path / "PROVENANCE.md").write_text("# where these came from\n")
    code, out, err = run(["scan", str(tmp_path)], capsys)
    assert code == 2 and out == ""  # not "Findings: none" when nothing was read
    assert f"tidegauge: error: {tmp_path}: no event log or progress file at its top level" in err
    assert "(job_a, job_b)" in err
    assert f"e.g. tidegauge scan {tmp_path}/job_a {tmp_path}/job_b" in err
    assert f"{tmp_path / 'PROVENANCE.md'}: not an event log: '.md' is no codec Spark writes" in err
    assert "unknown compression codec" not in err
    # next to a log, the same subdirectories are a warning and the log is scanned
    shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", tmp_path / DEMO_APP)
    code, out, err = run(["scan", str(tmp_path)], capsys)
    assert code == 0 and "Query wm_gt" in out
    assert f"tidegauge: warning: {tmp_path}: subdirectories not searched: job_a, job_b" in err
