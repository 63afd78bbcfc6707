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

Every decoder is incremental: :meth:`StreamDecoder.decompress` takes the next compressed bytes and returns
the decompressed bytes that are complete so far, keeping an incomplete block or frame for the next call (an
in-progress file ends in the middle of one). Streams may be concatenated (lz4-java's end mark is followed
by another ``LZ4Block`` stream, snappy-java's header may repeat), as Spark's continuous input streams allow.

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
    "PLAIN_EXTENSIONS",
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
    """Incremental decompressor of one codec's stream."""

    def decompress(self, data: bytes) -> bytes:
        """Feed the next compressed bytes; return the decompressed bytes now complete.

        Raises:
            CodecError: corrupt data.
        """
        ...

    def finished(self) -> bool:
        """True when no frame or block is half-read (the input so far ends on a frame/block boundary)."""
        ...


class _ZstdDecoder:
    """Standard zstd frames one after the other; a truncated last frame yields what it has so far."""

    def __init__(self) -> None:
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._in_frame = False

    def decompress(self, data: bytes) -> bytes:
        out: list[bytes] = []
        try:
            while data:
                out.append(self._obj.decompress(data))
                self._in_frame = True
                if not self._obj.eof:
                    break
                data = self._obj.unused_data
                self._obj = self._dctx.decompressobj()
                self._in_frame = False
        except zstandard.ZstdError as exc:
            raise CodecError(f"corrupt zstd frame: {exc}") from None
        return b"".join(out)

    def finished(self) -> bool:
        return not self._in_frame


class _BufferedDecoder:
    """Base of the block formats: buffer input, decode each complete block."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def decompress(self, data: bytes) -> bytes:
        self._buf += data
        out: list[bytes] = []
        while True:
            piece = self._next_block()
            if piece is None:
                break
            out.append(piece)
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        return b"".join(out)

    def finished(self) -> bool:
        return len(self._buf) == self._pos

    def _next_block(self) -> bytes | None:
        """Decode the block at ``self._pos`` and advance, or return None if it is incomplete."""
        raise NotImplementedError


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
        end = pos + 4 + length
        if len(buf) < end:
            return None
        self._pos = end
        try:
            return bytes(cramjam.snappy.decompress_raw(bytes(buf[pos + 4 : end])))
        except cramjam.DecompressionError as exc:
            raise CodecError(f"corrupt snappy chunk: {exc}") from None


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
