"""Files of Spark streaming progress JSON -> samples (for ``tidegauge scan``).

Accepted shapes (what people save from ``query.lastProgress`` / ``query.recentProgress`` / a listener):
one ``StreamingQueryProgress`` object (pretty-printed or not), a JSON array of them, or JSON lines (one
object per line). An element may also be a streaming listener event as written in an event log
(``{"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$...", ...}``). Parsing itself is
:mod:`collectors.spark.progress`'s job; this module only splits the file into documents.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from collectors.spark.progress import parse_listener_event, parse_progress
from monitor.errors import ProgressFormatError
from monitor.model import JobRef, Sample

__all__ = ["COLLECTOR_NAME", "looks_like_event_log", "read_progress_file"]

COLLECTOR_NAME = "spark-progress-file"


def looks_like_event_log(head: bytes) -> bool:
    """True if ``head`` (the first bytes of a plain file) starts like a Spark event log: ``{"Event":``."""
    return head.lstrip().startswith(b'{"Event":')


def _documents(path: Path, text: str) -> list[tuple[str, Any]]:
    stripped = text.strip()
    if not stripped:
        raise ProgressFormatError(f"{path}: empty file (expected progress JSON)")
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise ProgressFormatError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        docs: list[tuple[str, Any]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                docs.append((f"{path} line {number}", json.loads(line)))
            except json.JSONDecodeError as line_exc:
                raise ProgressFormatError(f"{path} line {number}: invalid JSON: {line_exc.msg}") from None
        return docs
    if isinstance(whole, list):
        return [(f"{path} [{i}]", doc) for i, doc in enumerate(whole)]
    return [(str(path), whole)]


def read_progress_file(
    path: Path, *, fallback_time: datetime | None = None
) -> tuple[list[Sample], list[tuple[JobRef, datetime, str, dict[str, Any]]]]:
    """Read every progress document in ``path``.

    Returns ``(samples, raw)``: the samples of all documents in file order, and the raw documents as
    ``PollResult.raw`` entries (job, time, kind, document).

    Raises:
        ProgressFormatError: the file is not JSON, or a document is not a progress object / streaming
            listener event (the message names the file and the line or array index).
        OSError: the file cannot be read.
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    samples: list[Sample] = []
    raw: list[tuple[JobRef, datetime, str, dict[str, Any]]] = []
    last_time = fallback_time
    for where, doc in _documents(path, text):
        if not isinstance(doc, Mapping):
            raise ProgressFormatError(f"{where}: expected a progress JSON object, got {type(doc).__name__}")
        if "Event" in doc:
            parsed = parse_listener_event(doc, collector=COLLECTOR_NAME, where=where, fallback_time=last_time)
        else:
            if "batchId" not in doc and "timestamp" not in doc:
                raise ProgressFormatError(
                    f"{where}: not a streaming progress object (no batchId/timestamp; keys: "
                    f"{', '.join(sorted(map(str, doc))[:8])})"
                )
            parsed = parse_progress(doc, collector=COLLECTOR_NAME, where=where)
        if parsed:
            first = parsed[0]
            last_time = first.observed_at
            samples.extend(parsed)
            raw.append((first.job, first.observed_at, first.kind.value, dict(doc)))
    return samples, raw
