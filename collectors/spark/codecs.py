"""Streaming decompression of Spark event logs, one decoder per Spark ``CompressionCodec``.

Spark writes a compressed event log through ``CompressionCodec.compressedContinuousOutputStream``
(``org.apache.spark.io.CompressionCodec``); these are *not* always the standard frame formats:

============  =====================================================  ==========================================
short name    Spark codec / Java stream                              what this module decodes
============  =====================================================  ==========================================
``zstd``      ``ZStdCompressionCodec`` / zstd-jni                    standard zstd frames, several per file
              ``ZstdOutputStreamNoFinalizer(closeFrameOnFlush)``     (one per flush); ``zstandard`` streaming
``lz4``       ``LZ4CompressionCodec`` / lz4-java                     ``"LZ4Block"`` magic, 1-byte token, 3 LE
              ``LZ4BlockOutputStream``                               int32 (compressed, original, checksum),
                                                                     then a raw/LZ4 block; ``lz4.block``
``snappy``    ``SnappyCompressionCodec`` / snappy-java               ``"\\x82SNAPPY\\x00"`` + 2 BE int32
              ``SnappyOutputStream``                                 (version, compatible version), then BE
                                                                     int32 length + raw snappy block;
                                                                     ``cramjam.snappy.decompress_raw``
``lzf``       ``LZFCompressionCodec`` / ning-compress                ``"ZV"`` chunks: type 0 (BE uint16 length,
              ``LZFOutputStream``                                    stored) or 1 (BE uint16 compressed and
                                                                     original length, LZF data); LZF decoded
                                                                     here (no maintained Python library)
============  =====================================================  ==========================================

Every decoder is incremental: :meth:`StreamDecoder.feed` takes the next compressed bytes and
:meth:`StreamDecoder.read` returns the decompressed bytes that are complete so far, keeping an incomplete
block or frame for the next call (an in-progress file ends in the middle of one). Streams may be
concatenated (lz4-java's end mark is followed by another ``LZ4Block`` stream, snappy-java's header may
repeat), as Spark's continuous input streams allow.

Decompression is bounded (a file may be a bomb): :meth:`StreamDecoder.read` returns about ``max_bytes`` at a
time, never more than ``max_bytes`` plus one step's output, and leaves the rest of the input for the next
call. A zstd step is :data:`ZSTD_STEP_BYTES` of compressed input: zstd's densest block (an RLE block, 4 bytes
for 128 KiB) expands at most 32,768 times, so one step yields at most 8 MiB. A block of the other formats
is at most :data:`MAX_BLOCK_BYTES` decompressed (lz4-java's own maximum block size, ``1 << 25``), checked
from its header before it is decoded or even buffered. The decoder counts the compressed bytes it consumed
and the bytes it produced (:attr:`StreamDecoder.consumed_bytes`, :attr:`StreamDecoder.produced_bytes`), so a
reader can tell a bomb by its ratio.

The codec of a file comes from its name exactly as Spark's ``EventLogFileWriter.codecName`` does: strip
``.compact`` then ``.inprogress``, split on ``.``, and take the last part after the first (app ids contain
no dots). Spark would reject other extensions; tidegauge treats the text extensions ``json``, ``jsonl``,
``log``, ``txt`` as uncompressed too, so recorded logs saved under such names can be scanned.
"""

from __future__ import annotations

import struct
from typing import Protocol

import cramjam
import lz4.block
import zstandard

__all__ = [
    "CODECS",
    "MAX_BLOCK_BYTES",
    "PLAIN_EXTENSIONS",
    "ZSTD_STEP_BYTES",
    "CodecError",
    "StreamDecoder",
    "codec_for_name",
    "lzf_decompress",
    "new_decoder",
]

CODECS = ("zstd", "lz4", "snappy", "lzf")
PLAIN_EXTENSIONS = ("json", "jsonl", "log", "txt")
IN_PROGRESS = ".inprogress"
COMPACTED = ".compact"
#: Compressed bytes fed to zstd per step: at most 32,768 x 256 B = 8 MiB out (an RLE block is 4 bytes for
#: 128 KiB); measured on Spark-like logs (ratio ~23) this costs nothing (~2 GB/s either way).
ZSTD_STEP_BYTES = 256
#: Largest decompressed block of the block formats: lz4-java's ``LZ4BlockOutputStream`` refuses blocks over
#: ``1 << 25`` (32 MiB); snappy-java's and ning's blocks are far smaller (32 KiB and 64 KiB by default).
MAX_BLOCK_BYTES = 1 << 25


class CodecError(ValueError):
    """The compressed bytes are corrupt, or the codec is unknown. The caller adds the file name."""


def codec_for_name(file_name: str) -> str | None:
    """The codec short name encoded in an event-log file name, ``None`` for an uncompressed log.

    Follows Spark's ``EventLogFileWriter.codecName``: ``app-1.zstd.inprogress`` -> ``"zstd"``,
    ``events_1_app-1.lz4`` -> ``"lz4"``, ``events_2_app-1.zstd.compact`` -> ``"zstd"``, ``app-1`` -> ``None``.
    ``.json``/``.jsonl``/``.log``/``.txt`` also mean uncompressed (a tidegauge extension of Spark's rule).

    Raises:
        CodecError: the extension names no codec Spark writes (e.g. ``app-1.gz``).
    """
    name = file_name
    if name.endswith(COMPACTED):
        name = name[: -len(COMPACTED)]
    if name.endswith(IN_PROGRESS):
        name = name[: -len(IN_PROGRESS)]
    parts = name.split(".")
    if len(parts) < 2:
        return None
    ext = parts[-1].lower()
    if ext in CODECS:
        return ext
    if ext in PLAIN_EXTENSIONS:
        return None
    raise CodecError(f"unknown compression codec {parts[-1]!r} (Spark writes {', '.join(CODECS)})")


class StreamDecoder(Protocol):
    """Incremental, bounded decompressor of one codec's stream."""

    consumed_bytes: int  # compressed bytes decoded so far (fed and not merely buffered)
    produced_bytes: int  # decompressed bytes returned so far

    def feed(self, data: bytes) -> None:
        """Add the next compressed bytes (kept until :meth:`read` decodes them)."""
        ...

    def read(self, max_bytes: int) -> bytes:
        """Decompressed bytes, about ``max_bytes`` (at most ``max_bytes`` plus one step or block); ``b""``
        when the input fed so far holds no more complete output.

        Raises:
            CodecError: corrupt data, or a block larger than :data:`MAX_BLOCK_BYTES`.
        """
        ...

    def decompress(self, data: bytes) -> bytes:
        """:meth:`feed` then :meth:`read` everything (unbounded: for small inputs and tests).

        Raises:
            CodecError: corrupt data.
        """
        ...

    def finished(self) -> bool:
        """True when no frame or block is half-read (the input so far ends on a frame/block boundary)."""
        ...


class _Decoder:
    """What every decoder shares: the counters and :meth:`decompress`."""

    def __init__(self) -> None:
        self.consumed_bytes = 0
        self.produced_bytes = 0

    def read(self, max_bytes: int) -> bytes:
        raise NotImplementedError

    def feed(self, data: bytes) -> None:
        raise NotImplementedError

    def decompress(self, data: bytes) -> bytes:
        self.feed(data)
        out: list[bytes] = []
        while piece := self.read(1 << 30):
            out.append(piece)
        return b"".join(out)


class _ZstdDecoder(_Decoder):
    """Standard zstd frames one after the other; a truncated last frame yields what it has so far.

    Input is fed to zstd :data:`ZSTD_STEP_BYTES` at a time, so one step yields at most 8 MiB.
    """

    def __init__(self) -> None:
        super().__init__()
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._in_frame = False
        self._input = b""
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos < len(self._input):
            self._input = self._input[self._pos :] + data
        else:
            self._input = data
        self._pos = 0

    def read(self, max_bytes: int) -> bytes:
        out: list[bytes] = []
        size = 0
        view = memoryview(self._input)
        try:
            while size < max_bytes and self._pos < len(view):
                step = view[self._pos : self._pos + ZSTD_STEP_BYTES]
                self._pos += len(step)
                self.consumed_bytes += len(step)
                data: bytes | memoryview = step
                while data:
                    piece = self._obj.decompress(data)
                    self._in_frame = True
                    if piece:
                        out.append(piece)
                        size += len(piece)
                    if not self._obj.eof:
                        break
                    data = self._obj.unused_data  # the next frame starts within this step
                    self._obj = self._dctx.decompressobj()
                    self._in_frame = False
        except zstandard.ZstdError as exc:
            raise CodecError(f"corrupt zstd frame: {exc}") from None
        finally:
            view.release()
        self.produced_bytes += size
        return b"".join(out)

    def finished(self) -> bool:
        return not self._in_frame and self._pos >= len(self._input)


class _BufferedDecoder(_Decoder):
    """Base of the block formats: buffer input, decode each complete block."""

    def __init__(self) -> None:
        super().__init__()
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def read(self, max_bytes: int) -> bytes:
        out: list[bytes] = []
        size = 0
        while size < max_bytes:
            before = self._pos
            piece = self._next_block()
            if piece is None:
                break
            self.consumed_bytes += self._pos - before
            out.append(piece)
            size += len(piece)
        self.produced_bytes += size
        return b"".join(out)

    def finished(self) -> bool:
        return len(self._buf) == self._pos

    def _next_block(self) -> bytes | None:
        """Decode the block at ``self._pos`` and advance, or return None if it is incomplete."""
        raise NotImplementedError


def _check_block(what: str, compressed_len: int, original_len: int, pos: int) -> None:
    """Refuse a block header whose lengths exceed :data:`MAX_BLOCK_BYTES` (before buffering the block)."""
    if original_len > MAX_BLOCK_BYTES or compressed_len > MAX_BLOCK_BYTES + (MAX_BLOCK_BYTES >> 3):
        raise CodecError(
            f"corrupt {what} stream: block at offset {pos} claims {max(compressed_len, original_len)} bytes "
            f"(more than the {MAX_BLOCK_BYTES >> 20} MiB a block may hold)"
        )


_LZ4_MAGIC = b"LZ4Block"
_LZ4_HEADER = struct.Struct("<iii")
_LZ4_METHOD_RAW = 0x10
_LZ4_METHOD_LZ4 = 0x20


class _Lz4BlockDecoder(_BufferedDecoder):
    """lz4-java ``LZ4BlockOutputStream``: magic, token (method | level), LE compressed/original/checksum.

    A block with method RAW and both lengths 0 is the end mark; another stream may follow (Spark reads
    with ``stopOnEmptyBlock = false``). The xxhash32 checksum is not verified (LZ4 decoding fails on most
    corruption and the JSON parse catches the rest).
    """

    def _next_block(self) -> bytes | None:
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 21:
            return None
        if buf[pos : pos + 8] != _LZ4_MAGIC:
            raise CodecError(f"corrupt lz4 stream: expected 'LZ4Block' magic at block offset {pos}")
        method = buf[pos + 8] & 0xF0
        compressed_len, original_len, _checksum = _LZ4_HEADER.unpack_from(buf, pos + 9)
        if compressed_len < 0 or original_len < 0 or method not in (_LZ4_METHOD_RAW, _LZ4_METHOD_LZ4):
            raise CodecError(f"corrupt lz4 block header (method {method:#x}, lengths {compressed_len})")
        _check_block("lz4", compressed_len, original_len, pos)
        end = pos + 21 + compressed_len
        if len(buf) < end:
            return None
        payload = bytes(buf[pos + 21 : end])
        self._pos = end
        if method == _LZ4_METHOD_RAW:
            return payload
        try:
            result = lz4.block.decompress(payload, uncompressed_size=original_len)
        except lz4.block.LZ4BlockError as exc:
            raise CodecError(f"corrupt lz4 block: {exc}") from None
        if len(result) != original_len:
            raise CodecError("corrupt lz4 block: decoded length differs from the header")
        return bytes(result)


_SNAPPY_MAGIC = b"\x82SNAPPY\x00"


class _SnappyStreamDecoder(_BufferedDecoder):
    """snappy-java ``SnappyOutputStream``: 16-byte header, then BE int32 length + raw snappy chunks."""

    def _next_block(self) -> bytes | None:
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 8:
            return None
        if buf[pos : pos + 8] == _SNAPPY_MAGIC:
            if len(buf) - pos < 16:
                return None
            self._pos = pos + 16
            return b""
        (length,) = struct.unpack_from(">i", buf, pos)
        if length < 0:
            raise CodecError(f"corrupt snappy stream: negative chunk length at offset {pos}")
        _check_block("snappy", length, _snappy_length(buf, pos + 4), pos)
        end = pos + 4 + length
        if len(buf) < end:
            return None
        self._pos = end
        try:
            return bytes(cramjam.snappy.decompress_raw(bytes(buf[pos + 4 : end])))
        except cramjam.DecompressionError as exc:
            raise CodecError(f"corrupt snappy chunk: {exc}") from None


def _snappy_length(buf: bytearray, pos: int) -> int:
    """The uncompressed length a raw snappy block starts with (a little-endian base-128 varint of at most
    5 bytes); 0 when the bytes buffered so far do not hold all of it."""
    value = 0
    for shift in range(0, 35, 7):
        if pos >= len(buf):
            return 0
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        pos += 1
    raise CodecError("corrupt snappy chunk: uncompressed length varint longer than 5 bytes")


class _LzfStreamDecoder(_BufferedDecoder):
    """ning-compress ``LZFOutputStream``: ``ZV`` + type 0 (stored) or 1 (LZF) chunks."""

    def _next_block(self) -> bytes | None:
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 5:
            return None
        if buf[pos] != 0x5A or buf[pos + 1] != 0x56:  # "ZV"
            raise CodecError(f"corrupt lzf stream: expected 'ZV' chunk header at offset {pos}")
        kind = buf[pos + 2]
        if kind == 0:
            length = (buf[pos + 3] << 8) | buf[pos + 4]
            end = pos + 5 + length
            if len(buf) < end:
                return None
            self._pos = end
            return bytes(buf[pos + 5 : end])
        if kind != 1:
            raise CodecError(f"corrupt lzf stream: unknown chunk type {kind} at offset {pos}")
        if len(buf) - pos < 7:
            return None
        length = (buf[pos + 3] << 8) | buf[pos + 4]
        original = (buf[pos + 5] << 8) | buf[pos + 6]
        end = pos + 7 + length
        if len(buf) < end:
            return None
        self._pos = end
        return lzf_decompress(bytes(buf[pos + 7 : end]), original)


def lzf_decompress(data: bytes, original_len: int) -> bytes:
    """Decode one raw LZF block (liblzf format, as ning-compress ``ChunkDecoder`` reads it).

    Control byte ``c < 32``: ``c + 1`` literal bytes follow. Otherwise a back reference: length
    ``c >> 5`` (7 means "add the next byte"), plus 2; distance ``((c & 31) << 8) + next byte + 1``.

    Raises:
        CodecError: a reference points before the start, the input ends early, or the result has a
            different length than ``original_len``.
    """
    out = bytearray()
    i, n = 0, len(data)
    try:
        while i < n:
            ctrl = data[i]
            i += 1
            if ctrl < 32:
                end = i + ctrl + 1
                if end > n:
                    raise CodecError("corrupt lzf block: literal run past the end")
                out += data[i:end]
                i = end
                continue
            length = ctrl >> 5
            if length == 7:
                length += data[i]
                i += 1
            ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
            i += 1
            length += 2
            if ref < 0:
                raise CodecError("corrupt lzf block: back reference before the start")
            if ref + length <= len(out):
                out += out[ref : ref + length]
            else:
                for k in range(length):
                    out.append(out[ref + k])
    except IndexError:
        raise CodecError("corrupt lzf block: input ends inside a back reference") from None
    if len(out) != original_len:
        raise CodecError(f"corrupt lzf block: decoded {len(out)} bytes, header says {original_len}")
    return bytes(out)


def new_decoder(codec: str) -> StreamDecoder:
    """A fresh incremental decoder for ``codec`` (one of :data:`CODECS`).

    Raises:
        CodecError: unknown codec.
    """
    if codec == "zstd":
        return _ZstdDecoder()
    if codec == "lz4":
        return _Lz4BlockDecoder()
    if codec == "snappy":
        return _SnappyStreamDecoder()
    if codec == "lzf":
        return _LzfStreamDecoder()
    raise CodecError(f"unknown compression codec {codec!r} (Spark writes {', '.join(CODECS)})")
