"""Spark event-log codecs over real files written by PySpark 4.3.0 (tests/fixtures/spark-codecs).

Expected values come from the plain (uncompressed) log of the same query and from PROVENANCE.md there:
each compressed file must decompress to 40 JSON lines holding the same four streaming events.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.spark.codecs import CodecError, codec_for_name, lzf_decompress, new_decoder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "spark-codecs"
FILES = {
    "zstd": "local-1795956037602.zstd",
    "lz4": "local-1795956042426.lz4",
    "snappy": "local-1795956047235.snappy",
    "lzf": "local-1795956051510.lzf",
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Spark's EventLogFileWriter.codecName: strip .compact then .inprogress, last dot-part after the first
        ("local-1795956037602", None),
        ("local-1795956037602.zstd", "zstd"),
        ("local-1795956037602.lz4.inprogress", "lz4"),
        ("events_1_local-1795956037602.snappy", "snappy"),
        ("events_3_local-1795956037602.lzf.compact", "lzf"),
        ("application_1_0001_1.inprogress", None),
        # tidegauge's extension: text extensions are plain logs (Spark would fail on them)
        ("eventlog_trimmed.jsonl", None),
    ],
)
def test_codec_for_name(name: str, expected: str | None) -> None:
    assert codec_for_name(name) == expected


def test_unknown_codec_extension() -> None:
    with pytest.raises(CodecError, match="unknown compression codec 'gz'"):
        codec_for_name("local-1.gz")


def _plain_lines() -> list[bytes]:
    return (FIXTURES / "local-1795956025902").read_bytes().splitlines()


def _streaming(lines: list[bytes]) -> list[bytes]:
    return [line for line in lines if b"StreamingQueryListener$Query" in line[:120]]


@pytest.mark.parametrize("codec", sorted(FILES))
@pytest.mark.parametrize("piece", [1 << 20, 997, 7])
def test_real_spark_file_decodes_in_any_pieces(codec: str, piece: int) -> None:
    data = (FIXTURES / FILES[codec]).read_bytes()
    decoder = new_decoder(codec)
    out = b"".join(decoder.decompress(data[i : i + piece]) for i in range(0, len(data), piece))
    lines = out.splitlines()
    assert out.endswith(b"\n") and len(lines) == 40
    streaming = _streaming(lines)
    assert len(streaming) == 4
    # the streaming lines differ from the plain app's only in ids and times; compare their event names
    assert [s.split(b",")[0] for s in streaming] == [s.split(b",")[0] for s in _streaming(_plain_lines())]


@pytest.mark.parametrize("codec", sorted(FILES))
def test_truncated_real_file_yields_a_prefix(codec: str) -> None:
    data = (FIXTURES / FILES[codec]).read_bytes()
    full = new_decoder(codec).decompress(data)
    partial = new_decoder(codec).decompress(data[: len(data) // 2])
    assert full.startswith(partial) and len(partial) < len(full)


def test_lzf_literal_and_overlapping_back_reference() -> None:
    # hand-made per liblzf: ctrl 2 -> 3 literals "abc"; ctrl 0xA0 = len 5 (+2 = 7), distance 0x000+2+1 = 3
    assert lzf_decompress(b"\x02abc\xa0\x02", 10) == b"abcabcabca"
    with pytest.raises(CodecError):
        lzf_decompress(b"\x02abc\xa0\x09", 10)  # distance 10 points before the start


def test_corrupt_lz4_magic() -> None:
    data = bytearray((FIXTURES / FILES["lz4"]).read_bytes())
    data[0:8] = b"XXXXXXXX"
    with pytest.raises(CodecError, match="LZ4Block"):
        new_decoder("lz4").decompress(bytes(data))


@pytest.mark.parametrize("codec", sorted(FILES))
def test_finished_tells_a_cut_stream(codec: str) -> None:
    data = (FIXTURES / FILES[codec]).read_bytes()
    whole = new_decoder(codec)
    whole.decompress(data)
    assert whole.finished()  # the real file ends on a frame/block boundary
    cut = new_decoder(codec)
    cut.decompress(data[:-5])
    assert not cut.finished()
