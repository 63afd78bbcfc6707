"""Event-log collector over recorded real Spark logs (tests/fixtures/spark).

Expected values were read off the files by hand (``zstd -dc`` / a text editor), not from this code:
- real-4.3.0 ``eventlog_trimmed.jsonl`` is byte-identical to the decompressed
  ``eventlog_v2_fixture/eventlog_v2_local-1795951957158/events_1_local-1795951957158.zstd`` (34 496 bytes,
  34 lines). It holds 7 QueryStartedEvent, 12 QueryProgressEvent (batches 0-11) and 7
  QueryTerminatedEvent lines for query id be3a4786-..., one runId per start (a restart each time).
- batch 6 (runId 28ab916a-...) has eventTime.max 2099-01-01T00:00:00.000Z, timestamp
  2026-11-29T11:32:48.289Z, sources[0].numInputRows 3, no top-level numInputRows.
- batch 2 has one state operator with numRowsDroppedByWatermark 1, numRowsTotal 5.
- the public Spark 3.1 excerpt has one progress (batchId 7, 36 rows, ``numLateInputs`` 0, eventTime {}).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import zstandard

from collectors.spark.eventlog import (
    EventLogCollector,
    MemoryCursorStore,
    discover_event_logs,
)
from monitor.model import SampleKind

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
APP = "local-1795951957158"


def _query_samples(result):  # type: ignore[no-untyped-def]
    return [s for s in result.samples if s.scope.is_job()]


@pytest.fixture
def rolling_dir(spark_fixtures: Path) -> Path:
    return spark_fixtures / "eventlog_v2_fixture" / f"eventlog_v2_{APP}"


def test_rolling_dir_zstd_reads_every_streaming_event(rolling_dir: Path) -> None:
    result = EventLogCollector([rolling_dir.parent]).poll(NOW)
    assert result.errors == ()
    q = _query_samples(result)
    kinds = [s.kind for s in q]
    # 7 started + 12 progress + 7 terminated (counted in the file by hand)
    assert kinds.count(SampleKind.STARTED) == 7
    assert kinds.count(SampleKind.PROGRESS) == 12
    assert kinds.count(SampleKind.TERMINATED) == 7
    assert {s.job.app_id for s in q} == {APP}  # from the directory name eventlog_v2_<app>
    # 7 restarts: 7 distinct runIds for the one query id
    assert len({s.job.run_id for s in q}) == 7
    assert {s.job.job_id for s in q} == {"be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8"}
    b6 = next(s for s in q if s.batch_id == 6 and s.kind is SampleKind.PROGRESS)
    assert b6.event_time_max == datetime(2099, 1, 1, tzinfo=UTC)
    assert b6.observed_at == datetime(2026, 11, 29, 11, 32, 48, 289000, tzinfo=UTC)
    assert b6.num_input_rows == 3  # sum of sources[].numInputRows
    b2 = next(s for s in q if s.batch_id == 2 and s.kind is SampleKind.PROGRESS)
    assert (b2.dropped_by_watermark, b2.state_rows_total) == (1, 5)
    # raw documents: one per streaming event line
    assert len(result.raw) == 26


def test_terminated_event_takes_last_time_of_its_run(rolling_dir: Path) -> None:
    q = _query_samples(EventLogCollector([rolling_dir]).poll(NOW))
    # run 786befa6: last progress (batch 1) at 11:32:45.240; its QueryTerminatedEvent has no timestamp
    term = next(s for s in q if s.kind is SampleKind.TERMINATED and s.job.run_id.startswith("786befa6"))  # type: ignore[union-attr]
    assert term.observed_at == datetime(2026, 11, 29, 11, 32, 45, 240000, tzinfo=UTC)
    # run 58ee35ad only started (11:32:51.258) then terminated: the start time is its last time
    last = next(s for s in q if s.kind is SampleKind.TERMINATED and s.job.run_id.startswith("58ee35ad"))  # type: ignore[union-attr]
    assert last.observed_at == datetime(2026, 11, 29, 11, 32, 51, 258000, tzinfo=UTC)
    # the terminated event has no "name" field; the run's started event said "wm_gt"
    assert term.job.name == "wm_gt" and last.job.name == "wm_gt"


def test_plain_file_gives_same_samples_as_zstd(spark_fixtures: Path, rolling_dir: Path) -> None:
    plain = EventLogCollector([spark_fixtures / "eventlog_trimmed.jsonl"]).poll(NOW)
    zstd = EventLogCollector([rolling_dir]).poll(NOW)
    assert plain.errors == ()
    strip = [(s.kind, s.batch_id, s.observed_at, s.watermark, s.num_input_rows) for s in plain.samples]
    assert strip == [(s.kind, s.batch_id, s.observed_at, s.watermark, s.num_input_rows) for s in zstd.samples]


def test_without_raw_documents_the_samples_and_errors_are_the_same(tmp_path: Path, spark_fixtures: Path) -> None:
    path = tmp_path / "app-1"
    path.write_bytes(b"".join(_lines(spark_fixtures)) + b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent","progress":{"id":"q"}}\n')
    kept = EventLogCollector([path]).poll(NOW)
    dropped = EventLogCollector([path], keep_raw=False).poll(NOW)
    assert len(kept.raw) == 26 and dropped.raw == ()  # one per streaming event line
    assert dropped.samples == kept.samples and len(kept.samples) > 26
    assert [e.message for e in dropped.errors] == [e.message for e in kept.errors]
    assert len(kept.errors) == 1 and "progress.timestamp: missing" in kept.errors[0].message


def test_spark31_excerpt_num_late_inputs(recorded_fixtures: Path) -> None:
    path = recorded_fixtures / "spark" / "public" / "eventlog_local-1596020211915_streaming_excerpt.jsonl"
    q = _query_samples(EventLogCollector([path]).poll(NOW))
    progress = [s for s in q if s.kind is SampleKind.PROGRESS]
    assert len(progress) == 1
    p = progress[0]
    assert (p.batch_id, p.num_input_rows, p.dropped_by_watermark, p.watermark) == (7, 36, 0, None)
    # no QueryTerminatedEvent in the excerpt: started + progress only
    assert [s.kind for s in q] == [SampleKind.STARTED, SampleKind.PROGRESS]


def test_second_poll_reads_nothing_new(rolling_dir: Path) -> None:
    collector = EventLogCollector([rolling_dir])
    assert collector.poll(NOW).samples
    again = collector.poll(NOW)
    assert again.samples == () and again.errors == ()


def test_discover_skips_crc_and_appstatus(tmp_path: Path, rolling_dir: Path) -> None:
    target = tmp_path / f"eventlog_v2_{APP}"
    shutil.copytree(rolling_dir, target)
    (target / f".events_1_{APP}.zstd.crc").write_bytes(b"crc")
    files = discover_event_logs(tmp_path)
    assert [f.name for f in files] == [f"events_1_{APP}.zstd"]
    assert files[0].complete  # appstatus has no .inprogress suffix


def _lines(spark_fixtures: Path) -> list[bytes]:
    return (spark_fixtures / "eventlog_trimmed.jsonl").read_bytes().splitlines(keepends=True)


def test_incremental_tail_partial_line(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    # line 8 (1-based) is the first QueryProgressEvent (batch 0); lines 1-7 hold one QueryStartedEvent
    assert b"QueryProgressEvent" in lines[7] and b"QueryProgressEvent" not in b"".join(lines[:7])
    log = tmp_path / f"{APP}.inprogress"
    log.write_bytes(b"".join(lines[:7]) + lines[7][:100])  # half of the batch-0 line
    store = MemoryCursorStore()
    collector = EventLogCollector([log], store)
    first = collector.poll(NOW)
    assert first.errors == ()  # a partial last line of an in-progress file is not an error
    assert [s.kind for s in _query_samples(first)] == [SampleKind.STARTED]
    state = store.get(str(log.absolute()))
    assert state is not None and state["line_no"] == 7 and state["offset"] == len(b"".join(lines[:7]))
    with log.open("ab") as handle:
        handle.write(lines[7][100:])
    second = collector.poll(NOW)
    assert [(s.kind, s.batch_id) for s in _query_samples(second)] == [(SampleKind.PROGRESS, 0)]
    # a fresh collector with the same cursor store continues at line 9
    with log.open("ab") as handle:
        handle.write(lines[8])
    third = EventLogCollector([log], store).poll(NOW)
    assert [(s.kind, s.batch_id) for s in _query_samples(third)] == [(SampleKind.PROGRESS, 1)]


def test_incremental_tail_zstd_multiple_frames(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / f"{APP}.zstd.inprogress"
    comp = zstandard.ZstdCompressor()
    # Spark's zstd writer closes a frame on every flush: one frame per chunk of lines
    log.write_bytes(comp.compress(b"".join(lines[:7])) + comp.compress(lines[7])[:-6])  # truncated 2nd frame
    collector = EventLogCollector([log])
    first = collector.poll(NOW)
    assert first.errors == ()
    assert [s.kind for s in _query_samples(first)] == [SampleKind.STARTED]
    log.write_bytes(comp.compress(b"".join(lines[:7])) + comp.compress(lines[7]) + comp.compress(lines[8]))
    second = collector.poll(NOW)
    assert [(s.kind, s.batch_id) for s in _query_samples(second)] == [
        (SampleKind.PROGRESS, 0),
        (SampleKind.PROGRESS, 1),
    ]


def test_rewritten_file_is_read_again_and_reported(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / f"{APP}.inprogress"
    log.write_bytes(b"".join(lines[:9]))  # started + batches 0, 1
    collector = EventLogCollector([log])
    assert len([s for s in _query_samples(collector.poll(NOW)) if s.kind is SampleKind.PROGRESS]) == 2
    # rewritten shorter (e.g. the app restarted with spark.eventLog.overwrite)
    log.write_bytes(b"".join(lines[:8]))
    result = collector.poll(NOW)
    assert len(result.errors) == 1 and result.errors[0].retryable
    assert "rewritten" in result.errors[0].message and str(log) in result.errors[0].message
    assert [(s.kind, s.batch_id) for s in _query_samples(result)] == [
        (SampleKind.STARTED, None),
        (SampleKind.PROGRESS, 0),
    ]


def test_rotated_file_same_size_new_inode(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / f"{APP}.inprogress"
    log.write_bytes(b"".join(lines[:8]))
    collector = EventLogCollector([log])
    collector.poll(NOW)
    replacement = tmp_path / "new"
    replacement.write_bytes(b"".join(lines[:8]) + lines[8])
    replacement.replace(log)  # new inode under the old name
    result = collector.poll(NOW)
    assert any("rotated or rewritten" in e.message for e in result.errors)
    assert [s.batch_id for s in _query_samples(result) if s.kind is SampleKind.PROGRESS] == [0, 1]


def test_corrupt_zstd_is_an_error_naming_the_file_others_still_read(
    tmp_path: Path, rolling_dir: Path, spark_fixtures: Path
) -> None:
    data = bytearray((rolling_dir / f"events_1_{APP}.zstd").read_bytes())
    for i in range(2000, 2040):  # flip bytes in the middle of the (single) frame
        data[i] ^= 0xFF
    bad = tmp_path / f"{APP}.zstd"
    bad.write_bytes(bytes(data))
    good = tmp_path / "local-2.json"
    shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", good)
    result = EventLogCollector([bad, good]).poll(NOW)
    assert len(result.errors) == 1
    error = result.errors[0]
    assert str(bad) in error.message and "zstd" in error.message and not error.retryable
    assert len([s for s in _query_samples(result) if s.job.app_id == APP]) == 26  # App ID of its line 4


def test_truncated_last_line_of_complete_file_names_line(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / APP  # no .inprogress: the application ended, so the file must end with a newline
    log.write_bytes(b"".join(lines[:9]) + lines[9][:50])
    result = EventLogCollector([log]).poll(NOW)
    assert len(result.errors) == 1
    assert f"{log}: line 10: truncated line" in result.errors[0].message
    assert len([s for s in _query_samples(result) if s.kind is SampleKind.PROGRESS]) == 2


def test_invalid_streaming_line_names_line_and_continues(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / APP
    # shaped like an event ({"Event": ... }) but with 60 bytes taken out of its middle: invalid JSON
    log.write_bytes(b"".join(lines[:8]) + lines[8][:200] + lines[8][260:] + b"".join(lines[9:]))
    result = EventLogCollector([log]).poll(NOW)
    assert [e.message.split(": invalid JSON")[0] for e in result.errors] == [f"{log}: line 9"]
    assert len([s for s in _query_samples(result) if s.kind is SampleKind.PROGRESS]) == 11


def test_unknown_codec_and_missing_path(tmp_path: Path, spark_fixtures: Path) -> None:
    gz = tmp_path / f"{APP}.gz"
    gz.write_bytes(b"\x1f\x8b")
    result = EventLogCollector([gz, tmp_path / "missing", spark_fixtures / "eventlog_trimmed.jsonl"]).poll(NOW)
    messages = [e.message for e in result.errors]
    assert any(str(gz) in m and "unknown compression codec 'gz'" in m for m in messages)
    assert any("missing" in m and "no such file" in m for m in messages)
    assert len(result.samples) > 0


def test_iter_poll_advances_cursor_only_past_consumed_pieces(spark_fixtures: Path) -> None:
    path = spark_fixtures / "eventlog_trimmed.jsonl"
    store = MemoryCursorStore()
    # 4 KiB reads: the 34 496-byte file comes in several pieces
    collector = EventLogCollector([path], store, chunk_bytes=4096)
    pieces = collector.iter_poll(NOW)
    first = next(pieces)
    assert first.samples  # the first piece holds the QueryStartedEvent (line 5)
    pieces.close()  # the consumer stops (e.g. its database write failed) before asking for more
    assert store.get(str(path.absolute())) is None  # nothing was acknowledged
    again = collector.poll(NOW)
    assert again.samples[: len(first.samples)] == first.samples
    assert len([s for s in again.samples if s.scope.is_job()]) == 26  # all 26 streaming events
    assert collector.poll(NOW).samples == ()


def test_truncated_zstd_frame_of_complete_file(tmp_path: Path, rolling_dir: Path) -> None:
    data = (rolling_dir / f"events_1_{APP}.zstd").read_bytes()
    cut = tmp_path / f"{APP}.zstd"  # complete (no .inprogress) yet cut short
    cut.write_bytes(data[:-5])
    errors = EventLogCollector([cut]).poll(NOW).errors
    assert len(errors) == 1 and "truncated zstd stream" in errors[0].message and str(cut) in errors[0].message
    inprogress = tmp_path / f"{APP}.zstd.inprogress"  # the same bytes while the app runs: no error
    inprogress.write_bytes(data[:-5])
    assert EventLogCollector([inprogress]).poll(NOW).errors == ()


def test_growing_zstd_file_continues_its_decoder(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / f"{APP}.zstd.inprogress"
    comp = zstandard.ZstdCompressor()
    log.write_bytes(comp.compress(b"".join(lines[:8])))  # up to batch 0
    store = MemoryCursorStore()
    collector = EventLogCollector([log], store)
    assert [s.batch_id for s in _query_samples(collector.poll(NOW))] == [None, 0]
    with log.open("ab") as handle:  # Spark appends a frame per flush
        handle.write(comp.compress(lines[8]))
    second = collector.poll(NOW)
    assert [s.batch_id for s in _query_samples(second)] == [1]
    # only the new line was decompressed (not the first 8 lines again)
    assert collector.decompressed_bytes_read == len(lines[8])
    # a new collector (e.g. after a restart) with the stored cursor decompresses from the start
    with log.open("ab") as handle:
        handle.write(comp.compress(lines[9]))
    fresh = EventLogCollector([log], store)
    assert [s.kind for s in _query_samples(fresh.poll(NOW))] == [SampleKind.TERMINATED]


@pytest.mark.parametrize("codec", ["", ".zstd"])
def test_inprogress_renamed_at_app_end_is_not_read_twice(tmp_path: Path, spark_fixtures: Path, codec: str) -> None:
    lines = _lines(spark_fixtures)
    comp = zstandard.ZstdCompressor()

    def enc(data: bytes) -> bytes:
        return comp.compress(data) if codec else data

    running = tmp_path / f"{APP}{codec}.inprogress"
    running.write_bytes(enc(b"".join(lines[:9])))  # started, batch 0, batch 1
    collector = EventLogCollector([tmp_path])
    assert len(_query_samples(collector.poll(NOW))) == 3
    with running.open("ab") as handle:
        handle.write(enc(lines[9]))  # the terminated event, then Spark renames the file (same inode)
    running.rename(tmp_path / f"{APP}{codec}")
    result = collector.poll(NOW)
    assert result.errors == ()
    assert [s.kind for s in _query_samples(result)] == [SampleKind.TERMINATED]
    assert collector.poll(NOW).samples == ()


def _progress_count(result) -> int:  # type: ignore[no-untyped-def]
    return len([s for s in _query_samples(result) if s.kind is SampleKind.PROGRESS])


@pytest.mark.parametrize(
    ("line_index", "cut", "progress_left"),
    [
        (12, 60, 11),  # line 13, a progress event cut to 60 bytes: the StreamingQueryListener$ marker is gone
        (5, 200, 12),  # line 6, SparkListenerJobStart cut to 200 bytes (no streaming event lost)
    ],
)
def test_cut_line_is_an_error_naming_file_and_line(
    tmp_path: Path, spark_fixtures: Path, line_index: int, cut: int, progress_left: int
) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / APP
    log.write_bytes(b"".join(lines[:line_index]) + lines[line_index][:cut] + b"\n" + b"".join(lines[line_index + 1 :]))
    result = EventLogCollector([log]).poll(NOW)
    assert len(result.errors) == 1, result.errors
    assert result.errors[0].message.startswith(f"{log}: line {line_index + 1}: not a Spark event")
    assert not result.errors[0].retryable
    assert _progress_count(result) == progress_left  # the other lines of the file are still read


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 4096])
def test_garbage_line_in_zstd_log_is_found_at_any_chunk_size(
    tmp_path: Path, spark_fixtures: Path, chunk_bytes: int
) -> None:
    lines = _lines(spark_fixtures)
    data = b"".join(lines[:12]) + b"garbage {{{ not json\n" + b"".join(lines[12:])
    log = tmp_path / f"{APP}.zstd"
    log.write_bytes(zstandard.ZstdCompressor().compress(data))
    result = EventLogCollector([log], chunk_bytes=chunk_bytes).poll(NOW)
    assert [e.message.split(": not")[0] for e in result.errors] == [f"{log}: line 13"]
    assert _progress_count(result) == 12  # nothing lost: the garbage line was an extra one


def test_many_corrupt_lines_are_reported_up_to_a_limit(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / APP
    log.write_bytes(b"".join(lines[:4]) + b"x\n" * 25 + b"".join(lines[4:]))
    errors = EventLogCollector([log]).poll(NOW).errors
    assert len(errors) == 11  # 10 named lines (5..14), then one count of the other 15
    assert errors[0].message.startswith(f"{log}: line 5: ")
    assert "15 more lines" in errors[-1].message and "25 in all" in errors[-1].message


def test_crlf_and_blank_lines_are_not_corrupt(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = tmp_path / APP
    log.write_bytes(b"".join(line[:-1] + b"\r\n" for line in lines) + b"\n")
    result = EventLogCollector([log]).poll(NOW)
    assert result.errors == ()
    assert _progress_count(result) == 12


def test_app_id_comes_from_the_application_start_event(tmp_path: Path, spark_fixtures: Path) -> None:
    renamed = tmp_path / "my-copy.log"  # the file name says nothing about the app
    shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", renamed)
    samples = EventLogCollector([renamed]).poll(NOW).samples
    # line 4: {"Event":"SparkListenerApplicationStart",...,"App ID":"local-1795951957158",...} (no attempt id)
    assert {s.job.app_id for s in samples} == {APP}


def test_app_id_falls_back_to_file_name_and_survives_a_new_collector(tmp_path: Path, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    no_start = tmp_path / "app-77.log"
    no_start.write_bytes(b"".join(line for line in lines if b"SparkListenerApplicationStart" not in line))
    assert {s.job.app_id for s in EventLogCollector([no_start]).poll(NOW).samples} == {"app-77"}
    growing = tmp_path / "app-78.inprogress"
    growing.write_bytes(b"".join(lines[:5]))  # up to the first QueryStartedEvent (line 5)
    store = MemoryCursorStore()
    assert {s.job.app_id for s in EventLogCollector([growing], store).poll(NOW).samples} == {APP}
    with growing.open("ab") as handle:
        handle.write(b"".join(lines[5:]))
    later = EventLogCollector([growing], store).poll(NOW)  # a new process: the start line was read before
    assert later.samples and {s.job.app_id for s in later.samples} == {APP}
