"""Files of Spark streaming progress JSON -> samples (for ``tidegauge scan``).

Accepted shapes (what people save from ``query.lastProgress`` / ``query.recentProgress`` / a listener):
one ``StreamingQueryProgress`` object (pretty-printed or not), a JSON array of them, or JSON lines (one
object per line). An element may also be a streaming listener event as written in an event log
(``{"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$...", ...}``). Parsing itself is
:mod:`collectors.spark.progress`'s job; this module only splits the file into documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from collectors.spark.progress import load_json, parse_listener_event, parse_progress
from monitor.errors import ProgressFormatError
from monitor.model import JobRef, Sample

__all__ = [
    "COLLECTOR_NAME",
    "MAX_PROGRESS_FILE_BYTES",
    "ProgressFileRead",
    "looks_like_event_log",
    "progress_with_sources",
    "read_progress_file",
    "read_progress_files",
]

COLLECTOR_NAME = "spark-progress-file"
#: Largest progress file read, bytes (a file is one JSON document or array, parsed whole; ``recentProgress``
#: of a query is kilobytes; 10,000 progress objects about 40 MiB).
MAX_PROGRESS_FILE_BYTES = 256 * 1024 * 1024


def looks_like_event_log(head: bytes) -> bool:
    """True if ``head`` (the first bytes of a plain file) starts like a Spark event log: ``{"Event":``."""
    return head.lstrip().startswith(b'{"Event":')


def _split_lines(path: Path, text: str) -> tuple[list[tuple[str, Any]], list[str]] | None:
    """JSON lines: ``(documents, errors)`` with one error per line that is not JSON, or ``None`` when no
    line parses on its own as a JSON object (then the file is not JSON lines)."""
    docs: list[tuple[str, Any]] = []
    errors: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            docs.append((where, load_json(line, where)))
        except ProgressFormatError as exc:
            errors.append(f"{exc}; line skipped")
    if not any(isinstance(doc, Mapping) for _, doc in docs):
        return None
    return docs, errors


def _documents(path: Path, text: str) -> tuple[list[tuple[str, Any]], list[str]]:
    stripped = text.strip()
    if not stripped:
        raise ProgressFormatError(f"{path}: empty file (expected progress JSON)")
    try:
        whole = load_json(stripped, str(path))
    except ProgressFormatError:
        split = _split_lines(path, text)
        if split is None:
            raise
        return split
    if isinstance(whole, list):
        return [(f"{path}: element [{i}]", doc) for i, doc in enumerate(whole)], []
    return [(str(path), whole)], []


@dataclass(frozen=True, slots=True)
class ProgressFileRead:
    """What :func:`read_progress_file` found in one file.

    Attributes:
        samples: the samples of all good documents, in file order.
        raw: the good documents as ``PollResult.raw`` entries (job, time, kind, document).
        errors: one message per bad document of a multi-document file (JSON lines or array), naming the
            file and the line or element (``FILE: line 6: invalid JSON ...``); the other documents are kept.
    """

    samples: list[Sample]
    raw: list[tuple[JobRef, datetime, str, dict[str, Any]]]
    errors: list[str]


def _parse_document(where: str, doc: Any, last_time: datetime | None) -> list[Sample]:
    if not isinstance(doc, Mapping):
        raise ProgressFormatError(f"{where}: expected a progress JSON object, got {type(doc).__name__}")
    if "Event" in doc:
        return parse_listener_event(
            doc, collector=COLLECTOR_NAME, where=where, fallback_time=last_time, checked=True
        )
    if "batchId" not in doc and "timestamp" not in doc:
        raise ProgressFormatError(
            f"{where}: not a streaming progress object (no batchId/timestamp; keys: "
            f"{', '.join(sorted(map(str, doc))[:8])})"
        )
    return parse_progress(doc, collector=COLLECTOR_NAME, where=where, checked=True)


def read_progress_file(
    path: Path, *, fallback_time: datetime | None = None, max_bytes: int = MAX_PROGRESS_FILE_BYTES
) -> ProgressFileRead:
    """Read every progress document in ``path`` (UTF-8, with or without a byte-order mark), at most
    ``max_bytes`` of it (read so: a device or a file growing while read is refused at the bound too).

    A file of several documents (JSON lines, or a JSON array) keeps its good documents: each bad one (not
    JSON, not a progress object or listener event, a malformed field) is one entry of
    :attr:`ProgressFileRead.errors`.

    Raises:
        ProgressFormatError: the file is empty, larger than ``max_bytes`` or not JSON at all, its single
            document is not a progress object / streaming listener event, or none of its documents is (the
            message names the file and the line, element or field).
        OSError: the file cannot be read.
    """
    with path.open("rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ProgressFormatError(
            f"{path}: larger than {max_bytes:,} bytes, the most a progress file may have (it is parsed whole); "
            "scan the query's event log instead"
        )
    text = data.decode("utf-8-sig", errors="replace")
    documents, errors = _documents(path, text)
    single = len(documents) == 1 and not errors
    samples: list[Sample] = []
    raw: list[tuple[JobRef, datetime, str, dict[str, Any]]] = []
    last_time = fallback_time
    for where, doc in documents:
        try:
            parsed = _parse_document(where, doc, last_time)
        except ProgressFormatError as exc:
            if single:
                raise
            errors.append(f"{exc}; skipped")
            continue
        if parsed:
            first = parsed[0]
            last_time = first.observed_at
            samples.extend(parsed)
            raw.append((first.job, first.observed_at, first.kind.value, dict(doc)))
    if errors and not raw:
        more = f" (and {len(errors) - 1} more bad documents)" if len(errors) > 1 else ""
        raise ProgressFormatError(f"{errors[0]}{more}; no progress document in the file")
    return ProgressFileRead(samples, raw, errors)


def read_progress_files(paths: Sequence[Path]) -> tuple[list[ProgressFileRead], list[str]]:
    """:func:`read_progress_file` of each of ``paths``: the reads, in order, and one error per file that could
    not be read at all (naming the file); the bad documents of a file that was read are in its own
    :attr:`ProgressFileRead.errors`."""
    reads: list[ProgressFileRead] = []
    errors: list[str] = []
    for path in paths:
        try:
            reads.append(read_progress_file(path))
        except ProgressFormatError as exc:
            errors.append(str(exc))  # it names the file
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror or exc}")
    return reads, errors


def progress_with_sources(document: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``StreamingQueryProgress`` of a raw document (a listener event's ``progress``, or the document
    itself) when it lists its ``sources`` (Spark's ``SourceProgress``: offsets per source), else ``None``."""
    progress = document.get("progress", document)
    return progress if isinstance(progress, Mapping) and "sources" in progress else None
