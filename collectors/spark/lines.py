"""Cutting a stream of decompressed chunks into complete lines, in linear time, with every line bounded.

A JSON-lines reader that keeps the partial last line and prepends it to the next chunk (``pending + chunk``)
copies the partial line again for every chunk: a line without a newline costs O(n^2 / chunk) bytes copied
and searched (a 512 MiB line took 114 s). :class:`LineSplitter` keeps the partial line as a list of chunks,
searches each new chunk only, joins the pieces once when the line ends, and gives up on a line as soon as
it is longer than ``max_line_bytes``: from then on it only looks for that line's newline, holding nothing,
so a newline-less stream of any length is read in linear time and memory bounded by ``max_line_bytes``
plus one chunk.

Used by :mod:`collectors.spark.eventlog`; the line limit's default is
:data:`DEFAULT_MAX_LINE_BYTES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_MAX_LINE_BYTES", "LineSplitter", "Lines", "LongLine"]

#: Default longest line, 8 MiB. Spark writes one event per line; the longest ones are
#: ``SparkListenerSQLExecutionStart`` (the plan description) and ``SparkListenerEnvironmentUpdate`` (all
#: properties and the classpath), rarely above a few MiB even for very wide plans, and a streaming
#: progress event is a few KiB. 8 MiB leaves room for those and keeps a hostile line from costing more
#: than 8 MiB held (the 20 MB accepted before cost a 972 MiB peak once parsed).
DEFAULT_MAX_LINE_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class Lines:
    """Complete lines: ``data[:end]`` holds ``lines`` lines, each ending in ``\\n`` and at most the limit
    long; ``data`` starts at a line start. ``end`` bytes of the stream are consumed."""

    data: bytes
    end: int
    lines: int


@dataclass(frozen=True, slots=True)
class LongLine:
    """Bytes of a line longer than the limit, dropped: ``consumed`` bytes of the stream.

    Attributes:
        consumed: bytes of the stream this piece consumed (the line's bytes, and its newline when ``ended``).
        started: this piece is the start of the line (report it once, here).
        ended: the line's newline was found: the next piece starts a new line.
    """

    consumed: int
    started: bool
    ended: bool


@dataclass
class LineSplitter:
    """Cuts chunks into :class:`Lines` and :class:`LongLine` pieces (see the module docstring).

    Invariant: the bytes fed so far = the bytes consumed by the pieces returned + :attr:`pending_bytes`.

    Args:
        max_line_bytes: longest line kept, in bytes without its newline (a longer one is dropped).
        skipping: start inside a line already found too long (a reader resuming from a cursor saved there).
    """

    max_line_bytes: int
    skipping: bool = False
    _pending: list[bytes] = field(default_factory=list)
    _pending_len: int = 0

    @property
    def pending_bytes(self) -> int:
        """Bytes of the partial last line held (at most ``max_line_bytes``)."""
        return self._pending_len

    def feed(self, chunk: bytes) -> list[Lines | LongLine]:
        """Cut ``chunk`` (the next decompressed bytes); the partial last line is kept for the next call.

        Returns:
            The pieces now complete, in stream order. Work is linear in ``len(chunk)`` plus, when a line
            ends, the length of that line.
        """
        out: list[Lines | LongLine] = []
        if not chunk:
            return out
        if self.skipping:
            newline = chunk.find(b"\n")
            if newline < 0:
                out.append(LongLine(len(chunk), started=False, ended=False))
                return out
            out.append(LongLine(newline + 1, started=False, ended=True))
            self.skipping = False
            chunk = chunk[newline + 1 :]
        if self._pending:
            newline = chunk.find(b"\n")
            length = self._pending_len + (len(chunk) if newline < 0 else newline)
            if length > self.max_line_bytes:
                held = self._pending_len
                self._drop()
                if newline < 0:
                    self.skipping = True
                    out.append(LongLine(held + len(chunk), started=True, ended=False))
                    return out
                out.append(LongLine(held + newline + 1, started=True, ended=True))
                chunk = chunk[newline + 1 :]
            elif newline < 0:
                self._pending.append(chunk)
                self._pending_len += len(chunk)
                return out
            else:
                self._pending.append(chunk)
                chunk = b"".join(self._pending)  # once per line that ends: linear
                self._drop()
        self._cut(chunk, out)
        return out

    def take_pending(self) -> bytes:
        """The partial last line held, and forget it (a reader at the end of a complete file)."""
        data = b"".join(self._pending)
        self._drop()
        return data

    def _drop(self) -> None:
        self._pending = []
        self._pending_len = 0

    def _cut(self, data: bytes, out: list[Lines | LongLine]) -> None:
        """``data`` starts at a line start and nothing is pending."""
        if not data:
            return
        last = data.rfind(b"\n")
        end = last + 1
        if end and end <= self.max_line_bytes + 1:
            out.append(Lines(data, end, data.count(b"\n", 0, end)))  # no line in it can be too long
        elif end:
            self._cut_checked(data, end, out)
        rest = len(data) - end
        if rest > self.max_line_bytes:
            self.skipping = True
            out.append(LongLine(rest, started=True, ended=False))
        elif rest:
            self._pending = [data[end:] if end else data]
            self._pending_len = rest
        return

    def _cut_checked(self, data: bytes, end: int, out: list[Lines | LongLine]) -> None:
        """The complete lines ``data[:end]`` when some may be too long (a chunk longer than the limit): runs
        of good lines as :class:`Lines`, each long one as a :class:`LongLine`."""
        limit = self.max_line_bytes
        run_start = pos = 0
        find = data.find
        while pos < end:
            stop = find(b"\n", pos, end)
            if stop - pos > limit:
                if run_start < pos:
                    block = data[run_start:pos]
                    out.append(Lines(block, len(block), block.count(b"\n")))
                out.append(LongLine(stop + 1 - pos, started=True, ended=True))
                run_start = stop + 1
            pos = stop + 1
        if run_start < end:
            block = data[run_start:end]
            out.append(Lines(block, len(block), block.count(b"\n")))
