"""Spark event logs -> samples: read and tail single files, ``.inprogress`` files and rolling directories.

Layout (Spark's ``EventLogFileWriters.scala``):

- single file: ``<app>[_<attempt>][.<codec>][.inprogress]`` (``SingleEventLogFileWriter``); the
  ``.inprogress`` suffix is removed when the application ends.
- rolling directory (``spark.eventLog.rolling.enabled``): ``eventlog_v2_<app>/`` holding
  ``events_<n>_<app>[.<codec>]`` (``n`` = 1, 2, ...; a compacted one ends in ``.compact``) and a zero-byte
  ``appstatus_<app>[.inprogress]`` (``RollingEventLogFilesWriter``). Only the last events file can still
  grow; the application is complete once ``appstatus`` has lost ``.inprogress``.

Only the structured-streaming listener events are kept (``StreamingQueryListener$Query{Started,Progress,
Idle,Terminated}Event``); every other line is skipped without being parsed: the collector searches each
decompressed chunk for the bytes ``StreamingQueryListener$Query`` and only parses lines where they occur
within the first :data:`MARKER_WINDOW` bytes (the ``"Event"`` field Spark writes first).

The application id of a file's samples is the ``App ID`` of its ``SparkListenerApplicationStart`` line
(searched for in the first :data:`APP_START_WITHIN_LINES` lines, and kept in the file's cursor); without one
(a rolling directory's later files, a trimmed log) it comes from the file or directory name.

Corrupt lines are still found without parsing: every line Spark writes is one compact JSON object whose
first field is ``"Event"``, so it starts with ``{"Event":`` and ends with ``}`` (:data:`LINE_START`,
:data:`LINE_END`). Evidence: ``EventLoggingListener.logEvent`` writes
``JsonProtocol.sparkEventToJsonString(event)`` plus ``\n``; every ``*ToJson`` writer in Spark 4's
``JsonProtocol`` begins with ``g.writeStartObject(); g.writeStringField("Event", ...)``, and other events
(the streaming listener events among them) go through ``mapper.writeValue`` with ``SparkListenerEvent``'s
``@JsonTypeInfo(use = CLASS, include = PROPERTY, property = "Event")``, which Jackson writes as the first
property; the compact generator writes no spaces. All 265 lines of the recorded Spark 3.1 and 4.3.0 logs
(plain, zstd, lz4, snappy, lzf) have that shape. JSON escapes newlines inside strings, so every raw ``\n``
ends a line: a chunk of ``n`` lines is good when it starts with ``{"Event":``, its last line ends with ``}``
and ``}\n{"Event":`` occurs ``n - 1`` times (one ``bytes.count``); only a chunk that fails this is looked
at line by line. A line without that
shape (cut, garbage, binary) is a :class:`monitor.model.CollectorError` naming the file and line; the
other lines are read as usual. A ``\r`` before the ``\n`` and blank lines are tolerated.

Tailing: each file has a :class:`FileCursor` kept in a :class:`CursorStore` (in memory for ``scan``,
in the database for the daemon). A poll reads from the cursor's offset to the last newline; a partial last
line stays for the next poll. Offsets count *decompressed* bytes: a plain file is read from there with a
seek. A compressed file that is still being written keeps its decoder in memory between polls, so the next
poll only decompresses the new bytes; without it (a new process, or a cursor from the database) the file is
decompressed again from its start and the bytes before the offset are discarded. A file whose device/inode
changed, that shrank, or whose first bytes differ from what was read before was rotated or rewritten: it
is read again from the start and a retryable :class:`monitor.model.CollectorError` says so. When Spark
renames ``<app>[.codec].inprogress`` to ``<app>[.codec]`` at the end of the application, the file keeps its
inode, and the collector carries the cursor over to the new name instead of reading the file again.
On HDFS (:mod:`collectors.hdfs`) a growing file's listed size lags what can be read (Spark ``hflush``es,
the NameNode learns lengths at block ends and at close): such a file is read from the cursor's offset to the
DataNode's end every poll, never judged unchanged by its size, and its identity is its inode id.

A ``QueryTerminatedEvent`` carries no timestamp and no name in Spark; its sample takes the last time and the
name seen for that run (``id`` + ``runId``) or, when the collector never saw that run, the poll's ``now``
(and no name).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from collectors.http import ReadLimits
from collectors.spark.codecs import IN_PROGRESS, CodecError, StreamDecoder, codec_for_name, new_decoder
from collectors.spark.lines import DEFAULT_MAX_LINE_BYTES, LineSplitter, LongLine
from collectors.spark.plans import JOIN_NODE, TRANSFORM_WITH_STATE_NODE, plan_extras
from collectors.spark.progress import STREAMING_EVENT_NAMES, load_json, parse_listener_event, trigger_extras
from collectors.storage import (
    DEFAULT_STORE_LIMITS,
    Entry,
    LocalStorage,
    Storage,
    StorageError,
    StorageReason,
    open_storage,
)
from monitor.errors import ProgressFormatError
from monitor.model import (
    MAX_ID_CHARS,
    CollectorError,
    ErrorKind,
    JobRef,
    PollResult,
    Sample,
    check_name,
)

__all__ = [
    "BOMB_MIN_BYTES",
    "COLLECTOR_NAME",
    "DEFAULT_MAX_POLL_BYTES",
    "DEFAULT_MAX_RATIO",
    "LINE_END",
    "LINE_START",
    "MARKER",
    "MARKER_WINDOW",
    "REAL_TIME_SCAN",
    "CursorStore",
    "EventLogCollector",
    "EventLogFile",
    "FileCursor",
    "MemoryCursorStore",
    "discover_event_logs",
    "is_rolling_dir",
]

COLLECTOR_NAME = "spark-eventlog"
MARKER = b"StreamingQueryListener$Query"
#: In the physical plan Spark logs for each batch (``SparkListenerSQLExecutionStart``): the scan node of a
#: query in real-time mode (``RealTimeStreamScanExec``, planned by ``MicroBatchExecution`` for a
#: ``RealTimeTrigger``, Spark 4.1+). The execution's description names the run (``runId = <uuid>``).
REAL_TIME_SCAN = b"RealTimeStreamScan"
#: The trigger that plans :data:`REAL_TIME_SCAN` (:func:`collectors.spark.progress.trigger_extras`).
REAL_TIME_TRIGGER = "RealTimeTrigger"
SQL_EXECUTION_START = b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",'
_RUN_ID_IN_DESCRIPTION = re.compile(rb"runId = ([0-9a-fA-F-]{36})")
MARKER_WINDOW = 200
LINE_START = b'{"Event":'
LINE_END = b"}"
_JOINT = LINE_END + b"\n" + LINE_START  # between two good lines
APP_START = b'{"Event":"SparkListenerApplicationStart",'
APP_START_WITHIN_LINES = 1000  # look for it only in chunks that begin before this line
MAX_LINE_ERRORS = 10  # corrupt lines reported per file and poll; the rest are counted in one more error
ROLLING_DIR_PREFIX = "eventlog_v2_"
EVENTS_FILE_PREFIX = "events_"
APPSTATUS_PREFIX = "appstatus_"
HEAD_BYTES = 4096
CHUNK_BYTES = 1 << 20
COMPRESSED_READ_DIVISOR = 16
_NOT_BLANK = re.compile(rb"\S")  # a run of blank lines (a bomb of newlines) is skipped at C speed
#: Decompressed bytes read per poll (all files of a target), 64 MiB: a Spark application writes far less
#: between two polls (a busy one a few MiB a minute), so only a backlog (a first scan of old logs) is read
#: over several polls. It bounds a poll's time (~0.2-0.5 s of reading) and what it holds for the store.
DEFAULT_MAX_POLL_BYTES = 64 << 20
#: Largest decompressed/stored ratio of a file before it is a bomb. Spark's JSON event logs compress 5-50x
#: with zstd/lz4/snappy/lzf (recorded: 10-25x); a file of repeated bytes compresses 10,000x and more (zstd's
#: RLE block: 32,768x). A plain file's stored size is its allocated blocks (a sparse file stores nothing).
DEFAULT_MAX_RATIO = 1000
#: Decompressed bytes of a file read before its ratio is judged (a tiny file's ratio says nothing).
BOMB_MIN_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class FileCursor:
    """Where reading one event-log file stopped.

    Attributes:
        identity: ``"<st_dev>:<st_ino>"`` of the file when it was read.
        head_sha256: SHA-256 hex of the file's first ``head_len`` bytes (as stored, i.e. compressed).
        head_len: how many leading bytes ``head_sha256`` covers (``min(size, 4096)``).
        size: file size in bytes (as stored) when it was read.
        offset: bytes of the *decompressed* stream consumed: the end of the last complete line read.
        line_no: complete lines consumed (the next line is ``line_no + 1``, 1-based).
        app_id: the application id read from the file's ``SparkListenerApplicationStart`` line, once read.
        in_long_line: ``offset`` is inside a line longer than the limit, already reported: the reader drops
            the bytes up to that line's newline.
        set_aside: why the file is not read until it changes (``"codec"``: unknown codec; ``"bomb"``: it
            decompresses to more than the ratio allows), or ``None``.
        mtime_ns: the file's modification time (ns since the epoch) when it was set aside: a change of
            size or of mtime reads it again.
    """

    identity: str
    head_sha256: str
    head_len: int
    size: int
    offset: int
    line_no: int
    app_id: str | None = None
    in_long_line: bool = False
    set_aside: str | None = None
    mtime_ns: int | None = None

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state for a :class:`CursorStore` (the optional fields only when set)."""
        state: dict[str, Any] = {
            "v": 1,
            "identity": self.identity,
            "head_sha256": self.head_sha256,
            "head_len": self.head_len,
            "size": self.size,
            "offset": self.offset,
            "line_no": self.line_no,
        }
        if self.app_id is not None:
            state["app_id"] = self.app_id
        if self.in_long_line:
            state["in_long_line"] = True
        if self.set_aside is not None:
            state["set_aside"] = self.set_aside
            state["mtime_ns"] = self.mtime_ns
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FileCursor | None:
        """Inverse of :meth:`to_state`; ``None`` for a state of another version or shape (read again)."""
        try:
            if state.get("v") != 1:
                return None
            return cls(
                identity=str(state["identity"]),
                head_sha256=str(state["head_sha256"]),
                head_len=int(state["head_len"]),
                size=int(state["size"]),
                offset=int(state["offset"]),
                line_no=int(state["line_no"]),
                app_id=str(state["app_id"]) if state.get("app_id") is not None else None,
                in_long_line=state.get("in_long_line") is True,
                set_aside=str(state["set_aside"]) if state.get("set_aside") is not None else None,
                mtime_ns=int(state["mtime_ns"]) if state.get("mtime_ns") is not None else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


class CursorStore(Protocol):
    """Keeps one opaque JSON state per target (an event-log file path) for one collector."""

    def get(self, target: str) -> dict[str, Any] | None:
        """The state saved for ``target``, or ``None``."""
        ...

    def set(self, target: str, state: dict[str, Any]) -> None:
        """Save ``state`` for ``target`` (replacing any previous one)."""
        ...

    def prefetch(self, targets: Iterable[str]) -> None:
        """A hint before a poll reads the files ``targets``: a store in a database reads their states at
        once (only these: a poll reads its own files' cursors); ``get`` of any other key must still work."""
        ...


@dataclass
class MemoryCursorStore:
    """A :class:`CursorStore` in a dict (for ``scan`` without ``--db`` and for tests)."""

    states: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(self, target: str) -> dict[str, Any] | None:
        """The state saved for ``target``, or ``None``."""
        return self.states.get(target)

    def set(self, target: str, state: dict[str, Any]) -> None:
        """Save ``state`` for ``target``."""
        self.states[target] = dict(state)

    def prefetch(self, targets: Iterable[str]) -> None:
        """Nothing to read ahead: the states are in memory."""


@dataclass(frozen=True, slots=True)
class EventLogFile:
    """One event-log file to read.

    Attributes:
        path: the file's path in its :class:`collectors.storage.Storage` (a local path as given, or the
            store's ``bucket/key``).
        app_id: Spark application id (and attempt) from the file or directory name; the collector replaces
            it with the one of the file's ``SparkListenerApplicationStart`` line when it finds one.
        complete: the file will not grow any more (a single file without ``.inprogress``; a rolling file
            that is not the last one, or whose ``appstatus`` file lost ``.inprogress``). A complete file
            must end with a newline; an incomplete one may end in a partial line.
        entry: the file as listed (size, identity), when it came from a listing.
    """

    path: str
    app_id: str | None
    complete: bool
    entry: Entry | None = None

    @property
    def name(self) -> str:
        """The file name (last path segment)."""
        return self.entry.name if self.entry is not None else self.path.rstrip("/").rsplit("/", 1)[-1]


def _events_index(name: str) -> int | None:
    if not name.startswith(EVENTS_FILE_PREFIX):
        return None
    head = name[len(EVENTS_FILE_PREFIX) :].split("_", 1)[0]
    return int(head) if head.isdigit() else None


@dataclass(frozen=True, slots=True)
class _Rolling:
    """A rolling directory's files in reading order, whether it is finished, and the first gap in its
    ``events_<n>_`` indexes (``None``: none; the files from the gap on are left for a later listing)."""

    files: list[EventLogFile]
    finished: bool
    gap_before: int | None = None


def _rolling_files(directory: str, entries: Sequence[Entry]) -> _Rolling:
    """``eventlog_v2_<app>/`` from its listing: events files by index, from the last ``.compact`` one on.

    Indexes must follow each other (Spark rolls ``n`` to ``n + 1``): a missing one means the listing lags
    the writes, and the files after the gap are not read until it fills (:attr:`_Rolling.gap_before`).
    """
    dir_name = directory.rstrip("/").rsplit("/", 1)[-1]
    app_id = dir_name[len(ROLLING_DIR_PREFIX) :] or None
    indexed: list[tuple[int, Entry]] = []
    in_progress = False
    for entry in entries:
        name = entry.name
        if name.startswith(".") or entry.is_dir:
            continue
        if name.startswith(APPSTATUS_PREFIX):
            in_progress = in_progress or name.endswith(IN_PROGRESS)
            continue
        index = _events_index(name)
        if index is not None:
            indexed.append((index, entry))
    indexed.sort(key=lambda item: (item[0], item[1].name))
    compact = [i for i, (_, e) in enumerate(indexed) if e.name.endswith(".compact")]
    if compact:
        indexed = indexed[compact[-1] :]
    gap_before = None
    for (a, _), (b, _) in itertools.pairwise(indexed):
        if b > a + 1:
            gap_before = a + 1
            indexed = [(i, e) for i, e in indexed if i < b]
            break
    out: list[EventLogFile] = []
    for i, (_, entry) in enumerate(indexed):
        last = i == len(indexed) - 1
        growing = last and (in_progress or gap_before is not None)
        out.append(EventLogFile(entry.path, app_id, complete=not growing, entry=entry))
    return _Rolling(out, finished=not in_progress and gap_before is None, gap_before=gap_before)


def is_rolling_dir(path: Path | str, storage: Storage | None = None, entries: Sequence[Entry] | None = None) -> bool:
    """Spark's ``isEventLogDir`` (name prefix), and it holds at least one ``events_<n>_`` file
    (``entries``: its listing, when already made)."""
    text = str(path)
    if not text.rstrip("/").rsplit("/", 1)[-1].startswith(ROLLING_DIR_PREFIX):
        return False
    if entries is None:
        entries = (storage or LocalStorage()).ls(text)
    return any(_events_index(entry.name) is not None for entry in entries)


def _single_file(entry: Entry) -> EventLogFile:
    name = entry.name
    complete = not name.endswith(IN_PROGRESS)
    app_id = name.split(".", 1)[0] or None
    return EventLogFile(entry.path, app_id, complete, entry)


def discover_event_logs(path: Path | str, storage: Storage | None = None) -> list[EventLogFile]:
    """The event-log files under ``path``, in reading order.

    ``path`` (in ``storage``, the local file system by default) may be one file, a rolling directory
    ``eventlog_v2_<app>`` (holding ``events_<n>_`` files), or a directory of event logs
    (``spark.eventLog.dir``): its single files and rolling directories, in name order. Hidden files (Hadoop's
    ``.crc`` files) and ``appstatus_*`` markers are skipped; other subdirectories are not entered.

    Raises:
        StorageError: ``path`` does not exist (reason ``NOT_FOUND``: "no such file or directory") or the
            store cannot be listed.
    """
    return _Discovery(storage or LocalStorage(), str(path)).files()


def _name_family(name: str) -> str:
    """The part of an event-log name before its time-ordered id: ``eventlog_v2_`` for rolling directories,
    else up to the first ``-`` or ``_`` (``app-``, ``local-``, ``application_``), else the whole name."""
    if name.startswith(ROLLING_DIR_PREFIX):
        return ROLLING_DIR_PREFIX
    cut = min((i for i in (name.find("-"), name.find("_")) if i >= 0), default=len(name) - 1)
    return name[: cut + 1]


@dataclass
class _Discovery:
    """Lists one target (``root`` in ``storage``) poll after poll.

    On an object store, a finished rolling directory (its ``appstatus`` without ``.inprogress``) is listed
    once and remembered (``finished``): its objects cannot change any more, so later polls do not list it.
    ``gaps`` holds the rolling directories whose last listing lagged (a missing ``events_<n>_``).

    On a store that lists after a given name (S3's ``StartAfter``), the root (``spark.eventLog.dir``) is
    listed in full on the first poll and every ``full_listing_every`` polls; the polls between list only the
    names after the newest one known of all, and for each other family of names (:func:`_name_family`:
    ``eventlog_v2_``, ``app-``, ``local-``, ``application_``...) the names after its newest one (Spark's application ids grow with time: ``app-<yyyyMMddHHmmss>-<n>``,
    ``local-<ms>``, ``application_<ms>_<n>``), and look up the final name of each known single-file
    ``.inprogress`` log (one HEAD each). An application whose id sorts before the newest known one (random
    ids, e.g. ``spark-<uuid>`` on Kubernetes), a new family sorting before the newest name (but rolling
    directories) and a deleted object are found by the next full listing.
    """

    storage: Storage
    root: str
    full_listing_every: int = 10
    finished: dict[str, list[EventLogFile]] = field(default_factory=dict)
    gaps: list[tuple[str, int]] = field(default_factory=list)
    root_dir: Entry | None = None
    known: dict[str, Entry] | None = None  # the root's entries by name (stores that list after a name)
    polls_since_full: int = 0

    def _list_root(self) -> list[Entry]:
        """The root's entries: in full, or the known ones plus what changed (see the class docstring)."""
        st = self.storage
        if not st.can_list_after or self.root.rsplit("/", 1)[-1].startswith(ROLLING_DIR_PREFIX):
            return st.ls(self.root)  # (events_10_ sorts before events_9_: a rolling directory is listed whole)
        self.polls_since_full += 1
        if self.known is None or self.polls_since_full >= self.full_listing_every:
            listing = st.ls(self.root)
            self.known = {e.name: e for e in listing}
            self.polls_since_full = 0
            return listing
        newest: dict[str, str] = {}
        for name in self.known:
            family = _name_family(name)
            newest[family] = max(newest.get(family, ""), name)
        top = max(self.known, default="")
        # after the newest name of all (its family, and any name sorting after every known one)...
        queries = {"": top}
        # ...and after the newest of each other family, rolling directories included when none is known yet
        queries.update({f: after for f, after in newest.items() if f != _name_family(top)})
        if ROLLING_DIR_PREFIX not in newest and top >= ROLLING_DIR_PREFIX:
            queries[ROLLING_DIR_PREFIX] = ""
        for family, after in sorted(queries.items()):
            for entry in st.ls_after(self.root, after, family):
                self.known[entry.name] = entry
        for name, entry in list(self.known.items()):
            final = name.removesuffix(IN_PROGRESS)
            if entry.is_dir or final == name or final in self.known:
                continue
            try:
                closed = st.info(st.join(self.root, final))
            except StorageError as exc:
                if exc.reason is StorageReason.NOT_FOUND:
                    continue  # still running
                raise
            self.known[final] = closed
            del self.known[name]
        return sorted(self.known.values(), key=lambda e: e.name)

    def _rolling(self, entry: Entry, entries: Sequence[Entry] | None = None) -> list[EventLogFile]:
        cached = self.finished.get(entry.path)
        if cached is not None:
            return cached
        rolling = _rolling_files(entry.path, entries if entries is not None else self.storage.ls(entry.path))
        if rolling.gap_before is not None:
            self.gaps.append((entry.path, rolling.gap_before))
        if rolling.finished and self.storage.immutable:
            self.finished[entry.path] = rolling.files
        return rolling.files

    def files(self) -> list[EventLogFile]:
        """The files of the target, as :func:`discover_event_logs` says. Raises :class:`StorageError`."""
        self.gaps = []
        cached = self.finished.get(self.root)
        if cached is not None:
            return cached
        listing: list[Entry] | None = None
        top = self.root_dir
        if top is None and not isinstance(self.storage, LocalStorage):
            # on a store, list first: a listing names its error (a HEAD answers with a bare status)
            listing = self._list_root()
            if listing:
                top = Entry(self.root, self.root.rsplit("/", 1)[-1], is_dir=True, size=0)
            else:
                self.known = None
        if top is None:
            top = self.storage.info(self.root)
        if not top.is_dir:
            return [_single_file(top)]
        self.root_dir = top  # a directory stays one: later polls list it without asking again
        if listing is None:
            listing = self._list_root()
        if is_rolling_dir(self.root, entries=listing):
            return self._rolling(top, listing)
        out: list[EventLogFile] = []
        for entry in listing:
            if entry.name.startswith("."):
                continue
            if entry.is_dir:
                if entry.name.startswith(ROLLING_DIR_PREFIX):
                    files = self._rolling(entry)
                    out.extend(files)
            elif not entry.name.startswith(APPSTATUS_PREFIX):
                out.append(_single_file(entry))
        return out


@dataclass
class _FileRead:
    samples: list[Sample] = field(default_factory=list)
    errors: list[CollectorError] = field(default_factory=list)
    raw: list[tuple[JobRef, datetime, str, dict[str, Any]]] = field(default_factory=list)
    corrupt_lines: int = 0  # lines of the file without an event's shape so far (this poll)


@dataclass
class _Live:
    """The decoder of a compressed file not read to its end (still growing, or stopped at the poll's
    budget), kept between polls: where the file was read to (``file_pos``), the cursor it matches
    (``offset``, ``line_no``) and the splitter holding the decompressed partial last line."""

    identity: str
    decoder: StreamDecoder
    file_pos: int
    offset: int
    line_no: int
    splitter: LineSplitter


@dataclass
class _Start:
    """Identity of an open file and where to resume (from its cursor)."""

    identity: str
    head_sha256: str
    head_len: int
    size: int
    offset: int
    line_no: int
    unchanged: bool
    adopted: bool = False  # the cursor was the one of this file's former ``.inprogress`` name
    app_id: str | None = None  # from the file's SparkListenerApplicationStart line, once read
    set_aside: str | None = None  # the file is set aside (unchanged since): why
    mtime_ns: int | None = None
    stored_bytes: int | None = None  # bytes the file occupies on disk (st_blocks * 512), when known
    in_long_line: bool = False


class EventLogCollector:
    """Tails Spark event logs (see the module docstring) and returns streaming-query samples.

    Args:
        paths: event-log files and/or directories (see :func:`discover_event_logs`), re-listed every poll
            so that new files (a new rolling ``events_<n+1>_...``) are picked up.
        cursors: where cursors are kept; a fresh :class:`MemoryCursorStore` if omitted.
        chunk_bytes: read size in bytes for plain files (compressed files are read ``chunk_bytes / 16`` at a
            time); memory use is bounded by the decompressed chunk plus the longest line, whatever the file
            size.
        keep_raw: return each parsed event document in ``PollResult.raw`` (for the store); ``False`` (``scan``
            without ``--db``) drops it once its samples are made: ``raw`` stays empty.
        storage_options: for targets given as URLs, the fsspec file system's options (credentials
            resolved), see :func:`collectors.storage.open_storage`.
        full_listing_every: on S3, list a directory of event logs in full every this many polls (the polls
            between list only the names after the newest known one: see ``_Discovery``).
        max_line_bytes: longest line read, bytes (default :data:`~collectors.spark.lines.DEFAULT_MAX_LINE_BYTES`,
            8 MiB); a longer line is a ``line_too_long`` error naming the file and line, skipped in linear time
            without being held, and the rest of the file is read.
        max_poll_bytes: decompressed bytes a poll reads over all files (default
            :data:`DEFAULT_MAX_POLL_BYTES`); the poll stops there (the files after it wait), saves the
            cursor, sets :attr:`more_to_read`, and the next poll continues. Raised to ``max_line_bytes +
            chunk_bytes`` if below, so that a poll always gets past at least one whole line.
        max_ratio: a file that decompresses to more than this many times the bytes it stores (a compressed
            file, judged after :data:`BOMB_MIN_BYTES`; a sparse plain file, judged on its size) is a ``bomb``
            error and is set aside, unread, until it changes (size or mtime).
        store_limits: for targets given as URLs, the request and poll deadlines and the bytes one answer of
            the store may have (:mod:`collectors.storage`; default :data:`~collectors.storage.DEFAULT_STORE_LIMITS`):
            each poll starts the poll deadline anew.

    Memory is bounded by ``chunk_bytes`` plus ``max_line_bytes`` plus one decompression step (at most 8 MiB,
    :mod:`collectors.spark.codecs`), whatever the file; a consumer that keeps every piece of a poll (the
    daemon stores a poll in one transaction) holds at most ``max_poll_bytes`` worth of samples.

    Attributes:
        name: ``"spark-eventlog"`` (``Sample.collector``).
        decompressed_bytes_read: decompressed event-log bytes looked at by the last poll (for benchmarks).
        waiting_files: the files of the last poll that are still being written and hold no complete line
            yet (e.g. a ``.zstd.inprogress`` whose first frame Spark has not flushed): not an error, but a
            reader may want to say why nothing was found.
        more_to_read: the last poll stopped at ``max_poll_bytes``: polling again reads more now.
    """

    name: str = COLLECTOR_NAME

    def __init__(
        self,
        paths: Sequence[Path | str],
        cursors: CursorStore | None = None,
        *,
        chunk_bytes: int = CHUNK_BYTES,
        keep_raw: bool = True,
        storage_options: Mapping[str, Any] | None = None,
        full_listing_every: int = 10,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_poll_bytes: int = DEFAULT_MAX_POLL_BYTES,
        max_ratio: int = DEFAULT_MAX_RATIO,
        store_limits: ReadLimits = DEFAULT_STORE_LIMITS,
    ) -> None:
        self.paths = [p if isinstance(p, Path) else str(p) for p in paths]
        self.keep_raw = keep_raw
        self.cursors: CursorStore = cursors if cursors is not None else MemoryCursorStore()
        self.chunk_bytes = chunk_bytes
        self.max_line_bytes = max_line_bytes
        self.max_poll_bytes = max(max_poll_bytes, max_line_bytes + chunk_bytes)
        self.max_ratio = max_ratio
        self.decompressed_bytes_read = 0
        self.more_to_read = False
        self.waiting_files: list[str] = []
        self._last_seen: dict[tuple[str, str | None], datetime] = {}
        self._real_time_runs: set[str] = set()  # run ids whose batches plan a RealTimeStreamScanExec
        self._plans: dict[str, dict[str, Any]] = {}  # run id -> what its plan adds to extra (plans.plan_extras)
        self._run_names: dict[tuple[str, str | None], str] = {}
        self._live: dict[str, _Live] = {}
        # per root: its discovery (or why it cannot be read at all), the files seen by the last poll, and
        # the complete immutable files read to their end (not looked at again while their identity holds)
        self._roots: list[tuple[str, _Discovery | StorageError]] = []
        for p in self.paths:
            try:
                storage, fs_path = open_storage(p, storage_options, store_limits)
                self._roots.append((str(p), _Discovery(storage, fs_path, full_listing_every)))
            except StorageError as exc:
                self._roots.append((str(p), exc))
        self._seen: dict[str, set[str]] = {}
        self._done: set[tuple[str, str, int]] = set()

    def poll(self, now: datetime, *, to_end: bool = False) -> PollResult:
        """Read what is new in every file since the last poll, as one result (see :meth:`iter_poll`).

        Args:
            now: the poll's time (aware UTC).
            to_end: poll again while a poll stops at ``max_poll_bytes`` (``scan``: read the files whole);
                :attr:`waiting_files` then lists those of every poll.

        Never raises for a bad file: a missing path, unknown codec, corrupt compressed data, a bomb, invalid
        JSON, a line too long or a truncated last line of a complete file is a :class:`CollectorError`
        naming the file (and the line), and the other files are still read.
        """
        samples: list[Sample] = []
        errors: list[CollectorError] = []
        raw: list[tuple[JobRef, datetime, str, dict[str, Any]]] = []
        waiting: list[str] = []
        while True:
            for piece in self.iter_poll(now):
                samples.extend(piece.samples)
                errors.extend(piece.errors)
                raw.extend(piece.raw)
            waiting.extend(p for p in self.waiting_files if p not in waiting)
            if not (to_end and self.more_to_read):
                break
        self.waiting_files = waiting
        return PollResult(tuple(samples), tuple(errors), tuple(raw))

    def iter_poll(self, now: datetime) -> Iterator[PollResult]:
        """Read what is new, yielding one result per chunk read (memory bounded by the chunk size).

        A file's cursor is advanced past a yielded piece when the consumer asks for the next one (or when
        the file is done), so a consumer that stores each piece before continuing loses nothing if it stops
        or fails midway: the next poll reads the unconsumed rest again. Errors are reported as in
        :meth:`poll`.
        """
        self.decompressed_bytes_read = 0
        self.more_to_read = False
        self.waiting_files = []
        for root, discovery in self._roots:
            if isinstance(discovery, StorageError):
                kind = discovery.error_kind(root=True)
                yield PollResult(errors=(self._error(root, str(discovery), now, kind, retryable=discovery.retryable),))
                continue
            if self.more_to_read:
                return
            discovery.storage.begin_poll()
            try:
                files = discovery.files()
            except StorageError as exc:
                yield PollResult(errors=(self._error(root, str(exc), now, exc.error_kind(root=True), retryable=exc.retryable),))
                continue
            storage = discovery.storage
            for directory, index in discovery.gaps:
                message = (
                    f"{storage.display(directory)}: the listing shows later events files but not events_{index}_: "
                    "waiting for the listing to catch up before reading on"
                )
                yield PollResult(errors=(self._error(storage.display(directory), message, now, ErrorKind.LISTING, retryable=True),))
            keys = {storage.key(f.path) for f in files}
            for gone in sorted(self._seen.get(root, set()) - keys):
                if gone + IN_PROGRESS in keys or gone.removesuffix(IN_PROGRESS) in keys:
                    continue  # renamed at the end of the application
                message = f"{gone}: deleted since the last poll (what was read from it is kept)"
                yield PollResult(errors=(self._error(gone, message, now, ErrorKind.DELETED),))
            self._seen[root] = keys
            # the cursors of the files to read (and of their in-progress names: a renamed file adopts its cursor)
            to_read = [
                key for key, entry in ((storage.key(f.path), f.entry) for f in files)
                if entry is None or (key, entry.identity, entry.size) not in self._done
            ]  # fmt: skip
            self.cursors.prefetch([*to_read, *(k + IN_PROGRESS for k in to_read if not k.endswith(IN_PROGRESS))])
            for log_file in files:
                if self.more_to_read:
                    return  # the budget is spent: this file and the next ones are read by the next poll
                key = storage.key(log_file.path)
                entry = log_file.entry
                if entry is not None and (key, entry.identity, entry.size) in self._done:
                    continue
                try:
                    yield from self._iter_file(storage, log_file, log_file.path == discovery.root, now)
                except StorageError as exc:  # listed, then gone, throttled or refused while being read
                    kind = exc.error_kind(root=log_file.path == discovery.root)
                    yield PollResult(errors=(self._error(storage.display(log_file.path), str(exc), now, kind, retryable=exc.retryable),))
                except Exception as exc:  # one file's failure (an OS error, a bug) must not stop the others
                    path = storage.display(log_file.path)
                    what = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}" if str(exc) else type(exc).__name__
                    message = f"{path}: cannot read: {what}"
                    yield PollResult(errors=(self._error(path, message, now, ErrorKind.INTERNAL, retryable=True),))

    @staticmethod
    def _error(
        path: str, message: str, now: datetime, kind: ErrorKind, *, retryable: bool = False
    ) -> CollectorError:
        return CollectorError(COLLECTOR_NAME, path, message, now, retryable=retryable, kind=kind)

    def _start(
        self, target: str, shown: str, handle: BinaryIO, opened: Entry, now: datetime, *, size_known: bool = True
    ) -> tuple[_Start, CollectorError | None]:
        """Identify the open file (``opened``: its entry as opened; ``target``: its cursor key, ``shown``: its
        name in messages) and decide where to start from its stored cursor.

        ``size_known=False`` (a growing file on HDFS, whose listed size lags what can be read): the file is
        the same one when its identity (inode id) and first bytes are, and it is always read from the
        cursor's offset on (a ranged read that returns nothing when nothing was appended)."""
        head = handle.read(HEAD_BYTES)
        identity = opened.identity
        head_sha = hashlib.sha256(head).hexdigest()
        state = self.cursors.get(target)
        if state is None and not target.endswith(IN_PROGRESS):
            # Spark renames app.zstd.inprogress -> app.zstd when the app ends: same inode, same cursor
            state = self.cursors.get(target + IN_PROGRESS)
            if state is not None and state.get("identity") != identity:
                state = None
            if state is not None and target + IN_PROGRESS in self._live:
                self._live[target] = self._live.pop(target + IN_PROGRESS)
            adopted = state is not None
        else:
            adopted = False
        cursor = FileCursor.from_state(state) if state is not None else None
        start = _Start(
            identity, head_sha, len(head), opened.size, 0, 0, unchanged=False, adopted=adopted,
            mtime_ns=opened.mtime_ns, stored_bytes=opened.stored_bytes,
        )
        if cursor is None:
            return start, None
        same = (
            cursor.identity == identity
            and (opened.size >= cursor.size or not size_known)
            and len(head) >= cursor.head_len
            and hashlib.sha256(head[: cursor.head_len]).hexdigest() == cursor.head_sha256
        )
        if not same:
            notice = self._error(
                shown,
                f"{shown}: file was rotated or rewritten since the last poll (was {cursor.size} bytes, now "
                f"{opened.size}); reading it again from the start",
                now,
                ErrorKind.ROTATED,
                retryable=True,
            )
            return start, notice
        start.offset, start.line_no, start.app_id = cursor.offset, cursor.line_no, cursor.app_id
        start.in_long_line = cursor.in_long_line
        start.unchanged = size_known and opened.size == cursor.size
        if cursor.set_aside is not None:  # set aside until it changes: its size or its mtime
            start.unchanged = start.unchanged and opened.mtime_ns == cursor.mtime_ns
            start.set_aside = cursor.set_aside if start.unchanged else None
        return start, None

    def _save(
        self, target: str, start: _Start, size: int, offset: int, line_no: int, *, in_long_line: bool = False
    ) -> None:
        self.cursors.set(
            target,
            FileCursor(
                start.identity, start.head_sha256, start.head_len, size, offset, line_no, start.app_id,
                in_long_line=in_long_line,
                set_aside=start.set_aside,
                mtime_ns=start.mtime_ns if start.set_aside is not None else None,
            ).to_state(),
        )

    def _set_aside(
        self, target: str, shown: str, start: _Start, why: ErrorKind, message: str, now: datetime, offset: int,
        line_no: int,
    ) -> PollResult:
        """Set the file aside (not read again until its size or mtime changes) with one error saying why."""
        start.set_aside = why.value
        self._save(target, start, start.size, offset, line_no)
        return PollResult(errors=(self._error(shown, f"{message}; set aside until the file changes", now, why),))

    def _is_bomb(self, produced: int, stored: int) -> bool:
        """``produced`` decompressed bytes from ``stored`` bytes exceed :attr:`max_ratio` (judged from
        :data:`BOMB_MIN_BYTES` on)."""
        return produced >= BOMB_MIN_BYTES and produced > self.max_ratio * max(stored, 1)

    def _iter_file(
        self, storage: Storage, log_file: EventLogFile, is_root: bool, now: datetime
    ) -> Iterator[PollResult]:
        """Read one file from its cursor (``is_root``: the file is the whole target, so a file that cannot
        be opened makes the target unreachable; otherwise it is one bad file among others).

        On an object store, a file whose listed identity and size equal its cursor's cannot have changed
        (objects are written whole): it is not opened (no request)."""
        target = storage.key(log_file.path)
        shown = storage.display(log_file.path)
        codec_error: CodecError | None = None
        try:
            codec = codec_for_name(log_file.name)
        except CodecError as exc:
            codec, codec_error = None, exc
        listed = log_file.entry
        growing = storage.hflush and not log_file.complete  # HDFS: read past the (lagging) listed size
        if storage.immutable and listed is not None:
            state = self.cursors.get(target)
            if state is not None and (state.get("identity"), state.get("size")) == (listed.identity, listed.size):
                if log_file.complete:
                    self._done.add((target, listed.identity, listed.size))
                return
        try:
            handle, opened = storage.open(log_file.path, listed, growing=growing)
        except StorageError as exc:
            kind = exc.error_kind(root=is_root)
            message = f"{shown}: cannot read: {str(exc).removeprefix(shown + ': ')}"
            yield PollResult(errors=(self._error(shown, message, now, kind, retryable=exc.retryable),))
            return
        log_file = dataclasses.replace(log_file, path=shown)  # its name in the messages of every line
        path = shown
        with handle:
            start, notice = self._start(target, shown, handle, opened, now, size_known=not growing)
            live = self._live.pop(target, None)  # taken: a pass that stops midway must not leave it behind
            if notice is not None:
                yield PollResult(errors=(notice,))
            if start.unchanged:
                if not log_file.complete and start.line_no == 0 and start.set_aside is None:
                    self.waiting_files.append(path)
                if live is not None and not log_file.complete:
                    self._live[target] = live
                if start.adopted:  # under its final name
                    self._save(target, start, start.size, start.offset, start.line_no, in_long_line=start.in_long_line)
                if storage.immutable and log_file.complete:
                    self._done.add((target, opened.identity, opened.size))
                return
            if codec_error is not None:
                yield self._set_aside(target, path, start, ErrorKind.CODEC, f"{path}: {codec_error}", now, 0, 0)
                return
            if codec is None and start.stored_bytes is not None and self._is_bomb(start.size, start.stored_bytes):
                message = (
                    f"{path}: a sparse file: {start.size} bytes stored in {start.stored_bytes} "
                    f"(more than {self.max_ratio}x; not a Spark event log)"
                )
                yield self._set_aside(target, path, start, ErrorKind.BOMB, message, now, start.offset, start.line_no)
                return
            offset, line_no = start.offset, start.line_no
            skip = 0
            splitter = LineSplitter(self.max_line_bytes, skipping=start.in_long_line)
            decoder: StreamDecoder | None = None
            if codec is None:
                handle.seek(offset)
            elif live is not None and (live.identity, live.offset, live.line_no) == (start.identity, offset, line_no):
                # continue the previous pass's decoder where it stopped: no re-decompression
                decoder, splitter = live.decoder, live.splitter
                handle.seek(live.file_pos)
            else:
                decoder = new_decoder(codec)
                handle.seek(0)
                skip = offset  # decompressed bytes already consumed
            read = handle.read
            # compressed JSON expands 5-50x: read less so each decompressed chunk stays near chunk_bytes
            read_size = self.chunk_bytes if codec is None else max(4096, self.chunk_bytes // COMPRESSED_READ_DIVISOR)
            corrupt = 0
            stopped = False  # at the poll's budget
            if start.app_id is not None:
                log_file = dataclasses.replace(log_file, app_id=start.app_id)
            while True:
                if not skip and self.decompressed_bytes_read >= self.max_poll_bytes:
                    stopped = True
                    break
                try:
                    if decoder is None:
                        chunk = read(read_size)
                        if not chunk:
                            break
                    else:
                        chunk = decoder.read(self.chunk_bytes)
                        if not chunk:
                            block = read(read_size)
                            if not block:
                                break
                            decoder.feed(block)
                            continue
                        if self._is_bomb(decoder.produced_bytes, decoder.consumed_bytes):
                            message = (
                                f"{path}: a {codec} bomb: {decoder.consumed_bytes} compressed bytes decompress to "
                                f"{decoder.produced_bytes} and more (over {self.max_ratio}x; {_after(line_no)})"
                            )
                            yield self._set_aside(target, path, start, ErrorKind.BOMB, message, now, offset, line_no)
                            return
                except (CodecError, OSError) as exc:
                    what = str(exc) if isinstance(exc, CodecError) else f"cannot read: {exc}"
                    message = f"{path}: {what} ({_after(line_no)}, decompressed byte {offset})"
                    yield PollResult(errors=(self._error(path, message, now, ErrorKind.FILE),))
                    if isinstance(exc, CodecError):
                        # quarantined: not read again (nor reported again) until the file changes
                        self._save(target, start, start.size, offset, line_no)
                    return
                if skip:
                    if len(chunk) <= skip:
                        skip -= len(chunk)
                        continue
                    chunk = chunk[skip:]
                    skip = 0
                self.decompressed_bytes_read += len(chunk)
                piece = _FileRead(corrupt_lines=corrupt)
                for part in splitter.feed(chunk):
                    if isinstance(part, LongLine):
                        if part.started:
                            self._long_line(path, line_no + 1, now, piece)
                        offset += part.consumed
                        line_no += part.ended
                        continue
                    data, complete_end, lines = part.data, part.end, part.lines
                    if start.app_id is None and line_no < APP_START_WITHIN_LINES:
                        start.app_id = _app_start_id(data, complete_end)
                        if start.app_id is not None:
                            log_file = dataclasses.replace(log_file, app_id=start.app_id)
                    self._events_in(log_file, data, complete_end, lines, line_no, now, piece)
                    line_no += lines
                    offset += complete_end
                corrupt = piece.corrupt_lines
                if piece.samples or piece.errors:
                    yield PollResult(tuple(piece.samples), tuple(piece.errors), tuple(piece.raw))
                    self._save(target, start, handle.tell(), offset, line_no, in_long_line=splitter.skipping)
            if corrupt > MAX_LINE_ERRORS:
                yield PollResult(
                    errors=(
                        self._error(
                            path,
                            f"{path}: {corrupt - MAX_LINE_ERRORS} more lines that are not Spark events or are too "
                            f"long were skipped ({corrupt} in all)",
                            now,
                            ErrorKind.LINE,
                        ),
                    )
                )
            if stopped:
                # the rest of the file is read by the next poll; a cursor size short of the file's says so
                self.more_to_read = True
                size = offset if decoder is None else decoder.consumed_bytes
                self._save(target, start, min(size, start.size), offset, line_no, in_long_line=splitter.skipping)
                if decoder is not None:
                    self._live[target] = _Live(start.identity, decoder, handle.tell(), offset, line_no, splitter)
                return
            if decoder is not None and log_file.complete and not decoder.finished():
                yield PollResult(
                    errors=(
                        self._error(
                            path,
                            f"{path}: truncated {codec} stream: the last frame/block is incomplete ({_after(line_no)}) "
                            "in a complete event log",
                            now,
                            ErrorKind.FILE,
                        ),
                    )
                )
            elif splitter.pending_bytes and log_file.complete:
                yield PollResult(
                    errors=(
                        self._error(
                            path,
                            f"{path}: line {line_no + 1}: truncated line ({splitter.pending_bytes} bytes without a "
                            "newline at the end of a complete event log)",
                            now,
                            ErrorKind.LINE,
                        ),
                    )
                )
            self._save(target, start, handle.tell(), offset, line_no, in_long_line=splitter.skipping)
            if storage.immutable and log_file.complete and handle.tell() == opened.size:
                self._done.add((target, opened.identity, opened.size))
            if not log_file.complete and line_no == 0:
                self.waiting_files.append(path)
            if decoder is not None and not log_file.complete:
                self._live[target] = _Live(start.identity, decoder, handle.tell(), offset, line_no, splitter)

    def _long_line(self, path: str, line_no: int, now: datetime, result: _FileRead) -> None:
        """Report line ``line_no``, longer than :attr:`max_line_bytes` (counted with the corrupt lines)."""
        result.corrupt_lines += 1
        if result.corrupt_lines <= MAX_LINE_ERRORS:
            result.errors.append(
                self._error(
                    path,
                    f"{path}: line {line_no}: longer than {self.max_line_bytes} bytes (the line limit, "
                    "max_line_bytes); line skipped",
                    now,
                    ErrorKind.LINE_TOO_LONG,
                )
            )

    def _events_in(
        self,
        log_file: EventLogFile,
        data: bytes,
        end: int,
        lines: int,
        base_line_no: int,
        now: datetime,
        result: _FileRead,
    ) -> None:
        """Parse the streaming events among the ``lines`` complete lines ``data[:end]`` (``data`` starts at
        a line start); a chunk with a line not shaped like an event goes line by line (:meth:`_lines_in`)."""
        if (
            not data.startswith(LINE_START)
            or data[end - 2 : end - 1] != LINE_END
            or data.count(_JOINT, 0, end) != lines - 1
        ):
            self._lines_in(log_file, data, end, base_line_no, now, result)
            return
        find = data.find
        rfind = data.rfind
        count = data.count
        for node, note in (
            (REAL_TIME_SCAN, self._note_real_time),
            (JOIN_NODE, self._note_plan),
            (TRANSFORM_WITH_STATE_NODE, self._note_plan),
        ):
            scan = find(node, 0, end)
            while scan >= 0:  # (one C-speed search per chunk; none in a log without such a plan)
                line_end = find(b"\n", scan, end)
                line_end = end if line_end < 0 else line_end
                note(data[rfind(b"\n", 0, scan) + 1 : line_end])
                scan = find(node, line_end, end)
        pos = 0
        counted_pos = 0
        line_no = base_line_no  # lines before counted_pos
        while True:
            hit = find(MARKER, pos, end)
            if hit < 0:
                return
            start = rfind(b"\n", 0, hit) + 1
            stop = find(b"\n", hit, end)
            pos = stop + 1
            if hit - start > MARKER_WINDOW:
                continue
            line_no += count(b"\n", counted_pos, start)
            counted_pos = start
            self._parse_line(log_file, data[start:stop], line_no + 1, now, result)

    def _lines_in(
        self,
        log_file: EventLogFile,
        data: bytes,
        end: int,
        base_line_no: int,
        now: datetime,
        result: _FileRead,
    ) -> None:
        """The slow path of :meth:`_events_in`: check each line's shape, parse the streaming ones."""
        path = log_file.path
        line_no = base_line_no
        pos = 0
        search = _NOT_BLANK.search
        while pos < end:
            filled = search(data, pos, end)
            if filled is None:
                return  # only blank lines are left
            line_start = data.rfind(b"\n", pos, filled.start()) + 1 or pos
            line_no += data.count(b"\n", pos, line_start)
            pos = line_start
            stop = data.find(b"\n", pos, end)
            line = data[pos:stop]
            pos = stop + 1
            line_no += 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip():
                continue
            if not (line.startswith(LINE_START) and line.endswith(LINE_END)):
                result.corrupt_lines += 1
                if result.corrupt_lines <= MAX_LINE_ERRORS:
                    preview = line[:60].decode("utf-8", errors="replace")
                    cut = "..." if len(line) > 60 else ""
                    result.errors.append(
                        self._error(
                            path,
                            f"{path}: line {line_no}: not a Spark event (a line must be one JSON object "
                            f"starting with {{\"Event\": and ending with }}; {len(line)} bytes: "
                            f"{preview!r}{cut}); line skipped",
                            now,
                            ErrorKind.LINE,
                        )
                    )
                continue
            marker = line.find(MARKER, 0, MARKER_WINDOW + len(MARKER))
            if 0 <= marker <= MARKER_WINDOW:
                self._parse_line(log_file, line, line_no, now, result)
            else:
                if REAL_TIME_SCAN in line:
                    self._note_real_time(line)
                if JOIN_NODE in line or TRANSFORM_WITH_STATE_NODE in line:
                    self._note_plan(line)

    def _note_real_time(self, line: bytes) -> None:
        """Remember the run of a ``SparkListenerSQLExecutionStart`` line whose plan has a
        ``RealTimeStreamScanExec`` (its description's ``runId = <uuid>``): that run's batches are marked
        ``extra["trigger"] = "real_time"`` (:meth:`_parse_line`)."""
        if MARKER in line[: MARKER_WINDOW + len(MARKER)]:
            return  # a streaming event whose text happens to name the node
        found = _RUN_ID_IN_DESCRIPTION.search(line)
        if found is not None:
            self._real_time_runs.add(found.group(1).decode("ascii").lower())

    def _note_plan(self, line: bytes) -> None:
        """Remember what a ``SparkListenerSQLExecutionStart`` line's plan says about its run's state (the
        description's ``runId = <uuid>``; read once per run: every batch plans the same operators): the
        stream-stream join and the ``transformWithState`` time modes (:func:`collectors.spark.plans.plan_extras`),
        which that run's batches then carry in ``extra`` (:data:`monitor.model.JOIN_PLAN_EXTRA`, read by
        ``rules.join_state``; :data:`monitor.model.TWS_TIME_MODES_EXTRA`, read by
        ``rules.common.watermark_unused``). A line that is not such an event, or whose plan does not parse,
        is passed over."""
        if not line.startswith(SQL_EXECUTION_START):
            return
        found = _RUN_ID_IN_DESCRIPTION.search(line)
        if found is None:
            return
        run_id = found.group(1).decode("ascii").lower()
        if run_id in self._plans:
            return
        try:
            event = load_json(line, "SparkListenerSQLExecutionStart")
        except ProgressFormatError:
            self._plans[run_id] = {}
            return
        description = event.get("physicalPlanDescription") if isinstance(event, dict) else None
        # (a plan that does not parse is remembered too: it is not read again at every batch)
        self._plans[run_id] = plan_extras(description) if isinstance(description, str) else {}

    def _parse_line(
        self, log_file: EventLogFile, line: bytes, line_no: int, now: datetime, result: _FileRead
    ) -> None:
        path = log_file.path
        where = f"{path}: line {line_no}"
        try:
            event = load_json(line, where)
        except ProgressFormatError as exc:
            kind = ErrorKind.FIELD if exc.field is not None else ErrorKind.LINE
            result.errors.append(self._error(path, str(exc), now, kind))
            return
        if not isinstance(event, dict) or event.get("Event") not in STREAMING_EVENT_NAMES:
            return
        run_key = _run_key(event)
        fallback = self._last_seen.get(run_key, now) if run_key is not None else now
        # QueryTerminatedEvent has no name: the samples take the one the run's other events carried
        fallback_name = self._run_names.get(run_key) if run_key is not None else None
        try:
            samples = parse_listener_event(
                event,
                collector=COLLECTOR_NAME,
                where=where,
                app_id=log_file.app_id,
                fallback_time=fallback,
                fallback_name=fallback_name,
                checked=True,  # by load_json
            )
        except ProgressFormatError as exc:
            result.errors.append(self._error(path, str(exc), now, ErrorKind.FIELD))
            return
        except Exception as exc:  # a parser bug: quarantine the line, keep reading (and say so)
            what = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}" if str(exc) else type(exc).__name__
            result.errors.append(self._error(path, f"{where}: internal error, line skipped ({what})", now, ErrorKind.INTERNAL))
            return
        if not samples:
            return
        first = samples[0]
        run_id = first.job.run_id.lower() if first.job.run_id is not None else None
        added: dict[str, Any] = {}
        if run_id in self._real_time_runs:
            added.update(trigger_extras(REAL_TIME_TRIGGER))
        if run_id is not None:
            added.update(self._plans.get(run_id, {}))
        if added:
            samples = [dataclasses.replace(s, extra={**s.extra, **added}) if s.scope.is_job() else s for s in samples]
        key = (first.job.job_id, first.job.run_id)
        if first.job.name is not None:
            self._run_names[key] = first.job.name
        self._last_seen[key] = first.observed_at
        result.samples.extend(samples)
        if self.keep_raw:
            result.raw.append((first.job, first.observed_at, first.kind.value, event))


def _app_start_id(data: bytes, end: int) -> str | None:
    """``App ID`` (``_`` + ``App Attempt ID`` when present, as in Spark's log file names) of the
    ``SparkListenerApplicationStart`` line among the complete lines ``data[:end]``, or ``None``.

    Spark writes that event once, near the top of the first event-log file (after ``SparkListenerLogStart``
    and the executor/environment events); it is the only line parsed besides the streaming ones. A line that
    is not valid JSON or has no string ``App ID``, or one the store cannot hold as an id
    (:func:`monitor.model.check_name`), gives ``None`` (the file name is used then).
    """
    hit = data.find(APP_START, 0, end)
    if hit < 0 or (hit and data[hit - 1 : hit] != b"\n"):
        return None
    stop = data.find(b"\n", hit, end)
    try:
        event = load_json(data[hit:stop], "SparkListenerApplicationStart")
    except ProgressFormatError:
        return None
    app_id = event.get("App ID") if isinstance(event, dict) else None
    if not isinstance(app_id, str) or not app_id:
        return None
    attempt = event.get("App Attempt ID")
    full = f"{app_id}_{attempt}" if isinstance(attempt, str) and attempt else app_id
    try:
        return check_name(full, "App ID", MAX_ID_CHARS)
    except ValueError:
        return None  # not an id the store can hold: the file name names the application


def _after(line_no: int) -> str:
    """Where in the decompressed stream, for messages: ``after line 12`` / ``before the first line``."""
    return f"after line {line_no}" if line_no else "before the first complete line"


def _run_key(event: dict[str, Any]) -> tuple[str, str | None] | None:
    doc = event.get("progress") if isinstance(event.get("progress"), dict) else event
    assert isinstance(doc, dict)
    query_id = doc.get("id")
    run_id = doc.get("runId")
    if not isinstance(query_id, str):
        return None
    return query_id, run_id if isinstance(run_id, str) else None
