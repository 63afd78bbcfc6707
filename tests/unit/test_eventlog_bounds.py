"""Event-log reading under hostile files (issue 19): bounded lines, bounded decompression, a per-poll budget,
bombs and unknown codecs set aside until the file changes, and no write lock held while the daemon reads.

Good lines are the recorded real Spark 4.3.0 log ``eventlog_trimmed.jsonl`` (34 lines; 12 QueryProgressEvent
lines, batches 0-11, read off the file by hand: see tests/unit/test_spark_eventlog.py). Hostile bytes are
made here (newlines, ``x``, NULs); sizes are written out, not computed by the code under test.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import zstandard

from collectors.spark.codecs import CodecError, new_decoder
from collectors.spark.eventlog import EventLogCollector, FileCursor, MemoryCursorStore
from collectors.spark.lines import Lines, LineSplitter, LongLine
from monitor.config import parse_config
from monitor.daemon.poll import PollStage, StoreCursors, Target
from monitor.errors import ConfigError
from monitor.metrics.latest import LatestSamples
from monitor.model import ErrorKind, PollResult, SampleKind
from monitor.redaction import Redactor
from monitor.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
APP = "local-1795951957158"
MIB = 1 << 20
BATCHES = list(range(12))  # the recorded log's progress batches


def _good(spark_fixtures: Path) -> bytes:
    return (spark_fixtures / "eventlog_trimmed.jsonl").read_bytes()


def _batches(result: PollResult) -> list[int]:
    return [
        s.batch_id
        for s in result.samples
        if s.scope.is_job() and s.kind is SampleKind.PROGRESS and s.batch_id is not None
    ]


# --- LineSplitter -----------------------------------------------------------------------------------------


def _fed(splitter: LineSplitter, chunks: list[bytes]) -> list[Lines | LongLine]:
    return [part for chunk in chunks for part in splitter.feed(chunk)]


def test_lines_across_chunks_are_joined_once_complete() -> None:
    parts = _fed(LineSplitter(10), [b"ab", b"c\nde", b"f\n"])
    assert [(p.data[: p.end], p.lines) for p in parts if isinstance(p, Lines)] == [(b"abc\n", 1), (b"def\n", 1)]


def test_a_long_line_across_chunks_is_dropped_once_and_not_held() -> None:
    splitter = LineSplitter(10)
    parts = _fed(splitter, [b"123456", b"7890123", b"45", b"6\nok\n"])
    # 8 + 7 + 2 + 1 bytes of the long line (and its newline) consumed, started once, ended once
    assert parts == [
        LongLine(13, started=True, ended=False),
        LongLine(2, started=False, ended=False),
        LongLine(2, started=False, ended=True),
        Lines(b"ok\n", 3, 1),
    ]
    assert splitter.pending_bytes == 0


def test_a_newline_less_stream_holds_at_most_the_limit() -> None:
    splitter = LineSplitter(100)
    held = []
    consumed = 0
    for _ in range(1000):
        for part in splitter.feed(b"x" * 64):
            assert isinstance(part, LongLine)
            consumed += part.consumed
        held.append(splitter.pending_bytes)
    assert max(held) <= 100 and consumed + splitter.pending_bytes == 64_000


def test_a_long_line_inside_one_chunk_is_cut_out() -> None:
    parts = _fed(LineSplitter(4), [b"ok\n" + b"y" * 9 + b"\nfine\n"])
    assert parts == [Lines(b"ok\n", 3, 1), LongLine(10, started=True, ended=True), Lines(b"fine\n", 5, 1)]


def test_a_splitter_resumed_inside_a_long_line_skips_to_its_end() -> None:
    assert _fed(LineSplitter(10, skipping=True), [b"zzz\nok\n"]) == [
        LongLine(4, started=False, ended=True),
        Lines(b"ok\n", 3, 1),
    ]


# --- bounded decompression ---------------------------------------------------------------------------------


def _newline_bomb(size: int, level: int = 19) -> bytes:
    cctx = zstandard.ZstdCompressor(level=level)
    chunk = cctx.compressobj()
    out = [chunk.compress(b"\n" * MIB) for _ in range(size // MIB)]
    out.append(chunk.flush())
    return b"".join(out)


def test_zstd_read_is_bounded_whatever_the_ratio() -> None:
    bomb = _newline_bomb(64 * MIB)
    assert len(bomb) < 64 * 1024  # the file is small: the ratio is the attack
    decoder = new_decoder("zstd")
    decoder.feed(bomb)
    sizes = []
    while piece := decoder.read(MIB):
        sizes.append(len(piece))
    # never more than 1 MiB plus one step (256 compressed bytes -> at most 8 MiB), never all 64 MiB at once
    assert sum(sizes) == 64 * MIB and max(sizes) <= 9 * MIB and len(sizes) >= 8
    assert decoder.produced_bytes == 64 * MIB and decoder.consumed_bytes == len(bomb)


def test_lz4_block_claiming_more_than_32_mib_is_refused_before_buffering() -> None:
    header = b"LZ4Block" + bytes([0x20]) + struct.pack("<iii", 100, 1 << 30, 0)  # 1 GiB original
    with pytest.raises(CodecError, match="more than the 32 MiB a block may hold"):
        new_decoder("lz4").decompress(header + b"\x00" * 100)


def test_snappy_chunk_claiming_more_than_32_mib_is_refused() -> None:
    stream = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    varint = bytes([0x80, 0x80, 0x80, 0x80, 0x04])  # 1 << 30 uncompressed
    with pytest.raises(CodecError, match="block may hold"):
        new_decoder("snappy").decompress(stream + struct.pack(">i", 10) + varint + b"\x00" * 5)


# --- the collector ------------------------------------------------------------------------------------------


def test_an_over_long_line_is_one_error_naming_file_and_line_and_the_rest_is_stored(
    tmp_path: Path, spark_fixtures: Path
) -> None:
    log = tmp_path / f"{APP}.jsonl"
    log.write_bytes(b'{"Event":"x' + b"y" * (3 * MIB) + b'"}\n' + _good(spark_fixtures))
    result = EventLogCollector([log], max_line_bytes=MIB).poll(NOW)
    assert [(e.kind, e.message) for e in result.errors] == [
        (
            ErrorKind.LINE_TOO_LONG,
            f"{log}: line 1: longer than 1048576 bytes (the line limit, max_line_bytes); line skipped",
        )
    ]
    assert _batches(result) == BATCHES


def test_a_long_line_split_across_polls_is_reported_once_and_resumed_after(
    tmp_path: Path, spark_fixtures: Path
) -> None:
    good = _good(spark_fixtures).splitlines(keepends=True)
    log = tmp_path / f"{APP}.inprogress"
    log.write_bytes(b"".join(good[:7]) + b"z" * (2 * MIB))  # line 8 too long, still being written
    store = MemoryCursorStore()
    first = EventLogCollector([log], store, max_line_bytes=MIB).poll(NOW)
    assert [(e.kind, e.message.split(": ", 1)[1]) for e in first.errors] == [
        (ErrorKind.LINE_TOO_LONG, "line 8: longer than 1048576 bytes (the line limit, max_line_bytes); line skipped")
    ]
    state = store.get(str(log.absolute()))
    assert state is not None and state["in_long_line"] is True and state["line_no"] == 7
    with log.open("ab") as out:
        out.write(b"z" * MIB + b"\n" + b"".join(good[7:]))
    second = EventLogCollector([log], store, max_line_bytes=MIB).poll(NOW)  # a new process, same cursors
    assert second.errors == ()
    assert _batches(second) == BATCHES


def test_a_poll_stops_at_its_budget_and_the_next_polls_continue(tmp_path: Path, spark_fixtures: Path) -> None:
    good = _good(spark_fixtures)
    filler = (b" " + b"\n" * 1023) * 1024 * 3  # 3 MiB of blank lines (tolerated), then the recorded log
    for name, data in ((f"{APP}.jsonl", filler + good), (f"{APP}.zstd", zstandard.ZstdCompressor().compress(filler + good))):
        log = tmp_path / name
        log.write_bytes(data)
        store = MemoryCursorStore()
        collector = EventLogCollector(
            [log], store, max_poll_bytes=MIB, max_line_bytes=64 * 1024, chunk_bytes=64 * 1024
        )
        batches: list[int] = []
        polls = 0
        while polls == 0 or collector.more_to_read:
            result = collector.poll(NOW)
            assert result.errors == ()
            batches.extend(_batches(result))
            # the budget, plus the chunk that crossed it (at most a chunk and one 8 MiB decompression step)
            assert collector.decompressed_bytes_read <= MIB + MIB + 8 * MIB
            polls += 1
        assert polls >= 2 and batches == BATCHES
        assert collector.poll(NOW).samples == ()  # then nothing is new


def test_scan_style_poll_to_end_reads_the_whole_file(tmp_path: Path, spark_fixtures: Path) -> None:
    log = tmp_path / f"{APP}.jsonl"
    log.write_bytes(b"\n" * (3 * MIB) + _good(spark_fixtures))
    collector = EventLogCollector([log], max_poll_bytes=MIB, max_line_bytes=64 * 1024, chunk_bytes=64 * 1024)
    assert _batches(collector.poll(NOW, to_end=True)) == BATCHES and not collector.more_to_read


def test_a_budget_below_the_line_limit_still_gets_past_a_long_line(tmp_path: Path, spark_fixtures: Path) -> None:
    log = tmp_path / f"{APP}.jsonl"
    log.write_bytes(b'{"Event":"' + b"v" * (3 * MIB) + b'"}\n' + _good(spark_fixtures))  # 3 MiB: under the limit
    collector = EventLogCollector([log], max_poll_bytes=MIB, max_line_bytes=4 * MIB)
    result = collector.poll(NOW, to_end=True)  # would never end if a poll could stop inside every line
    assert result.errors == ()  # an event's shape, not a streaming one, and not too long: skipped unparsed
    assert _batches(result) == BATCHES


def test_a_zstd_bomb_is_set_aside_once_until_it_changes(tmp_path: Path, spark_fixtures: Path) -> None:
    bomb = tmp_path / "app-bomb.zstd"
    bomb.write_bytes(_newline_bomb(64 * MIB))
    good = tmp_path / f"{APP}.jsonl"
    good.write_bytes(_good(spark_fixtures))
    collector = EventLogCollector([tmp_path])
    first = collector.poll(NOW)
    assert [(e.kind, e.target) for e in first.errors] == [(ErrorKind.BOMB, str(bomb))]
    assert "zstd bomb" in first.errors[0].message and "set aside until the file changes" in first.errors[0].message
    assert _batches(first) == BATCHES  # the other file is read
    assert collector.poll(NOW).errors == ()  # not read, nor reported, again
    os.utime(bomb, ns=(1, 1))  # changed (mtime): judged again, once
    assert [e.kind for e in collector.poll(NOW).errors] == [ErrorKind.BOMB]
    assert collector.poll(NOW).errors == ()


def test_a_sparse_file_is_a_bomb_judged_without_reading_it(tmp_path: Path) -> None:
    sparse = tmp_path / "app-sparse"
    with sparse.open("wb") as out:
        out.truncate(4 << 30)
    if sparse.stat().st_blocks * 512 * 1000 >= 4 << 30:  # pragma: no cover - a filesystem without holes
        pytest.fail("this filesystem does not keep sparse files sparse")
    collector = EventLogCollector([sparse])
    result = collector.poll(NOW)
    assert [e.kind for e in result.errors] == [ErrorKind.BOMB]
    assert "a sparse file: 4294967296 bytes stored in" in result.errors[0].message
    assert collector.decompressed_bytes_read == 0
    assert collector.poll(NOW).errors == ()


def test_an_unknown_codec_is_reported_once_until_the_file_changes(tmp_path: Path) -> None:
    gz = tmp_path / f"{APP}.gz"
    gz.write_bytes(b"\x1f\x8b")
    store = MemoryCursorStore()
    first = EventLogCollector([gz], store).poll(NOW)
    assert [(e.kind, e.message) for e in first.errors] == [
        (
            ErrorKind.CODEC,
            f"{gz}: unknown compression codec 'gz' (Spark writes zstd, lz4, snappy, lzf); set aside until the "
            "file changes",
        )
    ]
    assert EventLogCollector([gz], store).poll(NOW).errors == ()  # a new process with the stored cursor
    gz.write_bytes(b"\x1f\x8b\x08")
    assert [e.kind for e in EventLogCollector([gz], store).poll(NOW).errors] == [ErrorKind.CODEC]


def test_cursor_state_keeps_the_new_fields_and_reads_old_states() -> None:
    cursor = FileCursor("1:2", "ab", 4, 10, 5, 1, None, in_long_line=True, set_aside="bomb", mtime_ns=7)
    assert FileCursor.from_state(cursor.to_state()) == cursor
    old = {"v": 1, "identity": "1:2", "head_sha256": "ab", "head_len": 4, "size": 10, "offset": 5, "line_no": 1}
    assert FileCursor.from_state(old) == FileCursor("1:2", "ab", 4, 10, 5, 1)


# --- the daemon's poll stage: no write lock while reading ---------------------------------------------------


class _ProbingSource:
    """Reads an event log and, between its pieces, tries to take SQLite's write lock from another connection."""

    def __init__(self, inner: EventLogCollector, db_path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.db_path = db_path
        self.lock_free: list[bool] = []

    def poll(self, now: datetime) -> PollResult:  # pragma: no cover - the poll stage uses iter_poll
        raise AssertionError("PollStage.poll must use iter_poll")

    def iter_poll(self, now: datetime) -> Iterator[PollResult]:
        for piece in self.inner.iter_poll(now):
            yield piece
            conn = sqlite3.connect(self.db_path, timeout=0)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
                self.lock_free.append(True)
            except sqlite3.OperationalError:
                self.lock_free.append(False)
            finally:
                conn.close()


def test_the_poll_stage_holds_no_write_lock_while_the_collector_reads(
    tmp_path: Path, spark_fixtures: Path, store: Store
) -> None:
    logs = tmp_path / "events"
    logs.mkdir()
    # two files: the collector yields a piece per file, so the probe runs after a piece was handed over
    (logs / f"{APP}.jsonl").write_bytes(_good(spark_fixtures))
    (logs / "local-2.jsonl").write_bytes(_good(spark_fixtures))
    cursors = StoreCursors(store.sessions, "spark-eventlog")
    source = _ProbingSource(EventLogCollector([logs], cursors), tmp_path / "tg.db")
    target = Target("logs", source, timedelta(seconds=1), cursors)
    stage = PollStage(store.sessions, [target], LatestSamples(), lambda: 0.0, Redactor)
    result = stage.poll(target, NOW)
    assert len(source.lock_free) >= 2 and all(source.lock_free)
    assert sorted(_batches(result)) == sorted(BATCHES * 2)
    # the cursors were stored with the samples: the next poll reads nothing new
    assert stage.poll(target, NOW).samples == ()


# --- configuration ------------------------------------------------------------------------------------------


def test_event_log_target_limits_are_configurable_and_checked() -> None:
    target = {"name": "logs", "path": "/var/log/spark-events"}
    default = parse_config({"targets": {"spark_event_logs": [target]}}).targets.spark_event_logs[0]
    assert (default.max_line_bytes, default.max_poll_bytes, default.max_ratio) == (8 * MIB, 64 * MIB, 1000)
    limits = {"max_line_bytes": 1024, "max_poll_bytes": 4096, "max_ratio": 50}
    custom = parse_config({"targets": {"spark_event_logs": [{**target, **limits}]}}).targets.spark_event_logs[0]
    assert (custom.max_line_bytes, custom.max_poll_bytes, custom.max_ratio) == (1024, 4096, 50)
    with pytest.raises(ConfigError, match=r"spark_event_logs\[0\]\.max_line_bytes"):
        parse_config({"targets": {"spark_event_logs": [{**target, "max_line_bytes": 0}]}})
