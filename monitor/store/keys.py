"""Identity keys (``dedup_key`` columns) and the canonical JSON encoding of stored documents.

A key is the SHA-256 hex digest of a JSON array of the identity fields, prefixed by a version tag; JSON
keeps ``None`` distinct from ``""`` and ``0``. Times enter as integer epoch microseconds (exact).
Changing what a key covers is a schema change: bump the tag and write a migration recomputing the keys.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from monitor.model import CollectorError, JobRef, Sample

__all__ = ["canonical_json", "error_key", "raw_document_key", "sample_key", "sha256_hex"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _epoch_us(value: datetime) -> int:
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def sha256_hex(data: bytes) -> str:
    """SHA-256 hex digest (64 lower-case hex characters)."""
    return hashlib.sha256(data).hexdigest()


def _key(*parts: Any) -> str:
    return sha256_hex(json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode())


def canonical_json(document: Any, what: str) -> bytes:
    """Encode ``document`` as canonical JSON bytes (UTF-8, sorted keys, no spaces, no NaN/Infinity).

    Raises:
        ValueError: the document is not JSON-serializable or holds NaN/Infinity; ``what`` names it.
    """
    try:
        text = json.dumps(
            document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not storable as JSON: {exc}") from None
    return text.encode()


def sample_key(sample: Sample) -> str:
    """Identity of a sample: job (engine, job id, run id), collector, kind, batch id, scope, observed_at.

    Measured values are not part of it: the same observation read twice has the same key.
    """
    job, scope = sample.job, sample.scope
    return _key(
        "sample-v1",
        job.engine.value,
        job.job_id,
        job.run_id,
        sample.collector,
        sample.kind.value,
        sample.batch_id,
        scope.source,
        scope.partition,
        scope.subtask,
        scope.operator,
        _epoch_us(sample.observed_at),
    )


def raw_document_key(
    job: JobRef, observed_at: datetime, kind: str, collector: str, content_sha256: str
) -> str:
    """Identity of a raw document: job (engine, job id, run id), collector, kind, time and content hash."""
    return _key(
        "raw-v1",
        job.engine.value,
        job.job_id,
        job.run_id,
        collector,
        kind,
        _epoch_us(observed_at),
        content_sha256,
    )


def error_key(error: CollectorError) -> str:
    """Identity of a collector error: collector, target, message and time."""
    return _key("error-v1", error.collector, error.target, error.message, _epoch_us(error.observed_at))
