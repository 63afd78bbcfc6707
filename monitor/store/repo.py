"""Repository functions: the only way the rest of tidegauge reads and writes the store.

They take a :class:`sqlalchemy.orm.Session` and do not commit: the caller owns the transaction
(``with factory.begin() as session:``), so a poll's samples and its collector cursor can be committed
together, and a failure commits nothing. :func:`save_poll` additionally validates its whole input before
writing and runs inside a SAVEPOINT, so a bad poll leaves the session exactly as it was.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, cast

import zstandard
from sqlalchemy import Row, Select, delete, func, insert, select, update
from sqlalchemy.orm import Session, aliased

from monitor.model import Engine, JobRef, PollResult, Sample, SampleKind, Scope, ensure_utc
from monitor.store.episode_repo import purge_episodes_before
from monitor.store.keys import canonical_json, error_key, raw_document_key, sample_key, sha256_hex
from monitor.store.tables import (
    CollectorCursorRow,
    CollectorErrorRow,
    JobRow,
    RawDocumentRow,
    RunRow,
    SampleRow,
)
from monitor.store.upsert import CHUNK, chunks, insert_ignoring, insert_new, upsert_statement

__all__ = [
    "PurgeCounts",
    "RawDocument",
    "SaveCounts",
    "get_cursor",
    "get_cursors",
    "iter_raw_documents",
    "list_jobs",
    "load_recent_samples",
    "load_samples",
    "load_samples_after",
    "max_sample_id",
    "purge_before",
    "save_poll",
    "set_cursor",
    "set_cursors",
]

#: Codec of new raw documents. ``zlib`` is also readable (:func:`_decompress`).
RAW_CODEC: Final = "zstd"
_ZSTD_LEVEL: Final = 10
#: Rows per ``IN (...)`` list / executemany chunk (below SQLite's oldest 999-variable limit).

_MEASURES: Final = (
    "batch_id",
    "watermark",
    "event_time_min",
    "event_time_max",
    "event_time_avg",
    "num_input_rows",
    "input_rows_per_second",
    "processed_rows_per_second",
    "batch_duration_ms",
    "dropped_by_watermark",
    "state_rows_total",
    "state_rows_updated",
    "state_rows_removed",
    "state_memory_bytes",
    "lag_offsets",
    "lag_seconds",
    "idle_ms",
    "committed_offset",
    "log_end_offset",
    "backpressure_ratio",
    "restart_count",
    "checkpoints_failed",
    "watermark_end_of_input",
)


@dataclass(frozen=True, slots=True)
class SaveCounts:
    """How many rows :func:`save_poll` inserted (``*_inserted``) or overwrote (``samples_replaced``).

    Rows already stored under the same identity are counted in ``*_skipped``.
    """

    samples_inserted: int = 0
    samples_skipped: int = 0
    samples_replaced: int = 0
    raw_inserted: int = 0
    raw_skipped: int = 0
    errors_inserted: int = 0
    errors_skipped: int = 0


@dataclass(frozen=True, slots=True)
class RawDocument:
    """A stored raw engine document, as handed to :func:`save_poll` in ``PollResult.raw``.

    Attributes:
        job: the job it belongs to (``name``/``app_id`` as saved with the document).
        observed_at: aware UTC.
        kind: the collector's document kind, e.g. ``"progress"``.
        collector: collector name.
        document: the decoded JSON document.
    """

    job: JobRef
    observed_at: datetime
    kind: str
    collector: str
    document: dict[str, Any]


# ----------------------------------------------------------------------------------------------- helpers


def _existing_keys(session: Session, column: Any, keys: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for chunk in chunks(keys):
        found.update(session.scalars(select(column).where(column.in_(chunk))))
    return found


_compressors = threading.local()  # one compressor per thread (not safe to share; costly to make per document)


def _compress(data: bytes) -> bytes:
    compressor = getattr(_compressors, "zstd", None)
    if compressor is None:
        compressor = _compressors.zstd = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
    return cast(bytes, compressor.compress(data))


def _decompress(codec: str, payload: bytes) -> bytes:
    if codec == "zstd":
        return zstandard.ZstdDecompressor().decompress(payload)
    if codec == "zlib":
        return zlib.decompress(payload)
    raise ValueError(f"raw document stored with unknown codec {codec!r}")


class _Jobs:
    """Upserts jobs and runs for one save, caching primary keys."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._jobs: dict[tuple[str, str], JobRow] = {}
        self._runs: dict[tuple[int, str], RunRow] = {}

    def prefetch(self, jobs: Iterable[tuple[JobRef, datetime]]) -> None:
        """Load the stored rows of ``jobs`` (each with the time it was observed at) and of their runs with a
        few ``IN`` queries (per engine, per :data:`CHUNK` ids), and insert the jobs and runs not stored yet
        with multi-row inserts (:func:`insert_ignoring`: one stored meanwhile by another writer is kept), read
        back with the same ``IN`` queries, so that a poll of many jobs, new or not, costs a few statements,
        not two or four per job.

        A new job takes the name and app id of its first ``JobRef`` (:meth:`job_pk` then keeps the latest
        non-null ones); a new run's ``first_seen``/``last_seen`` its first time (:meth:`run_pk` widens them).
        """
        first: dict[tuple[str, str], JobRef] = {}
        runs_of: dict[tuple[str, str], dict[str, datetime]] = {}
        for job, observed_at in jobs:
            key = (job.engine.value, job.job_id)
            first.setdefault(key, job)
            if job.run_id is not None:
                runs_of.setdefault(key, {}).setdefault(job.run_id, observed_at)
        self._load_jobs(first)
        new_jobs = [
            {"engine": key[0], "job_id": key[1], "name": job.name, "app_id": job.app_id}
            for key, job in first.items()
            if key not in self._jobs
        ]
        if new_jobs:
            insert_ignoring(self._session, JobRow, new_jobs, ["engine", "job_id"])
            self._load_jobs(first)
        pairs = {
            (self._jobs[key].id, run_id): observed_at
            for key, run_ids in runs_of.items()
            for run_id, observed_at in run_ids.items()
            if (self._jobs[key].id, run_id) not in self._runs
        }
        self._load_runs(pairs)
        new_runs = [
            {"job_pk": pk, "run_id": run_id, "first_seen": observed_at, "last_seen": observed_at}
            for (pk, run_id), observed_at in pairs.items()
            if (pk, run_id) not in self._runs
        ]
        if new_runs:
            insert_ignoring(self._session, RunRow, new_runs, ["job_pk", "run_id"])
            self._load_runs(pairs)

    def _load_jobs(self, keys: Iterable[tuple[str, str]]) -> None:
        """Load the stored rows of the jobs ``(engine, job id)`` not loaded yet (``IN`` queries)."""
        wanted: dict[str, set[str]] = {}
        for engine, job_id in keys:
            if (engine, job_id) not in self._jobs:
                wanted.setdefault(engine, set()).add(job_id)
        for engine, ids in wanted.items():
            for chunk in chunks(sorted(ids)):
                for row in self._session.scalars(
                    select(JobRow).where(JobRow.engine == engine, JobRow.job_id.in_(chunk))
                ):
                    self._jobs[(engine, row.job_id)] = row

    def _load_runs(self, pairs: Iterable[tuple[int, str]]) -> None:
        """Load the stored rows of the runs ``(job pk, run id)`` not loaded yet (``IN`` queries)."""
        missing = [pair for pair in pairs if pair not in self._runs]
        if not missing:
            return
        job_pks = sorted({pk for pk, _ in missing})
        run_ids = sorted({run_id for _, run_id in missing})
        for pk_chunk in chunks(job_pks):
            for run_chunk in chunks(run_ids):
                for run in self._session.scalars(
                    select(RunRow).where(RunRow.job_pk.in_(pk_chunk), RunRow.run_id.in_(run_chunk))
                ):
                    self._runs.setdefault((run.job_pk, run.run_id), run)

    def job_pk(self, job: JobRef) -> int:
        key = (job.engine.value, job.job_id)
        row = self._jobs.get(key)
        if row is None:
            row = self._session.scalars(
                select(JobRow).where(JobRow.engine == key[0], JobRow.job_id == key[1])
            ).one_or_none()
            if row is None:
                row = JobRow(engine=key[0], job_id=key[1], name=job.name, app_id=job.app_id)
                self._session.add(row)
                self._session.flush()
            self._jobs[key] = row
        if job.name is not None and row.name != job.name:
            row.name = job.name
        if job.app_id is not None and row.app_id != job.app_id:
            row.app_id = job.app_id
        return row.id

    def run_pk(self, job: JobRef, observed_at: datetime) -> int | None:
        if job.run_id is None:
            return None
        job_pk = self.job_pk(job)
        key = (job_pk, job.run_id)
        row = self._runs.get(key)
        if row is None:
            row = self._session.scalars(
                select(RunRow).where(RunRow.job_pk == job_pk, RunRow.run_id == job.run_id)
            ).one_or_none()
            if row is None:
                row = RunRow(job_pk=job_pk, run_id=job.run_id, first_seen=observed_at, last_seen=observed_at)
                self._session.add(row)
                self._session.flush()
            self._runs[key] = row
        if observed_at < row.first_seen:
            row.first_seen = observed_at
        if observed_at > row.last_seen:
            row.last_seen = observed_at
        return row.id


def _validated_raw(poll: PollResult) -> list[tuple[JobRef, datetime, str, bytes]]:
    out: list[tuple[JobRef, datetime, str, bytes]] = []
    for index, (job, observed_at, kind, document) in enumerate(poll.raw):
        what = f"PollResult.raw[{index}]"
        when = ensure_utc(observed_at, f"{what} observed_at")
        assert when is not None
        if not isinstance(document, dict):
            raise ValueError(f"{what} document must be a JSON object (dict), got {type(document).__name__}")
        out.append((job, when, kind, canonical_json(document, f"{what} document")))
    return out


def _poll_collector(poll: PollResult, collector: str | None) -> str:
    if collector is not None:
        return collector
    names = {s.collector for s in poll.samples} | {e.collector for e in poll.errors}
    if len(names) == 1:
        return names.pop()
    if poll.raw:
        raise ValueError(
            "save_poll: cannot tell which collector read the raw documents "
            f"(samples/errors name {sorted(names) or 'none'}); pass collector="
        )
    return "unknown"


def _sample_values(sample: Sample, job_pk: int, run_pk: int | None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "job_pk": job_pk,
        "run_pk": run_pk,
        "job_name": sample.job.name,
        "app_id": sample.job.app_id,
        "observed_at": sample.observed_at,
        "kind": sample.kind.value,
        "collector": sample.collector,
        "scope_source": sample.scope.source,
        "scope_partition": sample.scope.partition,
        "scope_subtask": sample.scope.subtask,
        "scope_operator": sample.scope.operator,
        "extra": dict(sample.extra),
    }
    for name in _MEASURES:
        values[name] = getattr(sample, name)
    return values


# ------------------------------------------------------------------------------------------------ writes


def save_poll(
    session: Session, poll: PollResult, *, collector: str | None = None, replace: bool = False
) -> SaveCounts:
    """Store one :class:`~monitor.model.PollResult`: upsert its jobs and runs, insert its samples, raw
    documents and errors.

    Idempotent: a sample whose identity (engine, job id, run id, collector, kind, batch id, scope,
    observed_at; see :func:`monitor.store.keys.sample_key`) is already stored is skipped, so re-reading the
    same batch twice stores it once. With ``replace=True`` (replaying raw documents through a fixed
    parser) an already stored sample's values are overwritten instead. Raw documents are identified by job,
    collector, kind, time and content hash; errors by collector, target, message and time. Duplicates
    inside ``poll`` are stored once (the first wins).

    Runs' ``first_seen``/``last_seen`` widen to the saved times; jobs' ``name``/``app_id`` take the latest
    non-null values. Does not commit.

    Args:
        collector: the name stored with the raw documents; by default the single collector named by the
            poll's samples and errors.

    Raises:
        ValueError: bad input (naive raw-document time, ``extra`` or a document not storable as JSON,
            raw documents whose collector cannot be told); nothing of the poll is written.
        sqlalchemy.exc.SQLAlchemyError: the database failed; the poll's writes are rolled back to the
            savepoint taken on entry (earlier work in ``session`` is kept).
    """
    raw_collector = _poll_collector(poll, collector)
    raw = _validated_raw(poll)
    for index, sample in enumerate(poll.samples):
        canonical_json(sample.extra, f"PollResult.samples[{index}].extra")
    if poll.samples:
        _hold_sample_write_lock(session)  # see max_sample_id
    with session.begin_nested():
        return _save(session, poll, raw, raw_collector, replace)


def _save(
    session: Session,
    poll: PollResult,
    raw: list[tuple[JobRef, datetime, str, bytes]],
    raw_collector: str,
    replace: bool,
) -> SaveCounts:
    jobs = _Jobs(session)
    jobs.prefetch([*((s.job, s.observed_at) for s in poll.samples), *((job, at) for job, at, _, _ in raw)])

    sample_rows: dict[str, dict[str, Any]] = {}
    for sample in poll.samples:
        key = sample_key(sample)
        if key in sample_rows:
            continue
        job_pk = jobs.job_pk(sample.job)
        run_pk = jobs.run_pk(sample.job, sample.observed_at)
        sample_rows[key] = {"dedup_key": key, **_sample_values(sample, job_pk, run_pk)}
    if replace:
        existing = _existing_keys(session, SampleRow.dedup_key, list(sample_rows))
        insert_ignoring(session, SampleRow, [v for k, v in sample_rows.items() if k not in existing], ["dedup_key"])
    else:
        existing = insert_new(session, SampleRow, sample_rows, "dedup_key")
    replaced = 0
    if replace and existing:
        ids: dict[str, int] = {}
        for chunk in chunks(sorted(existing)):
            stmt = select(SampleRow.dedup_key, SampleRow.id).where(SampleRow.dedup_key.in_(chunk))
            ids.update((key, pk) for key, pk in session.execute(stmt))
        updates = [{**sample_rows[k], "id": ids[k]} for k in existing]
        for chunk in chunks(updates):
            session.execute(update(SampleRow), list(chunk))
        replaced = len(updates)

    raw_rows: dict[str, dict[str, Any]] = {}
    for job, observed_at, kind, data in raw:
        digest = sha256_hex(data)
        key = raw_document_key(job, observed_at, kind, raw_collector, digest)
        if key in raw_rows:
            continue
        raw_rows[key] = {
            "dedup_key": key,
            "job_pk": jobs.job_pk(job),
            "run_pk": jobs.run_pk(job, observed_at),
            "job_name": job.name,
            "app_id": job.app_id,
            "observed_at": observed_at,
            "kind": kind,
            "collector": raw_collector,
            "codec": RAW_CODEC,
            "content_sha256": digest,
            "payload": _compress(data),
        }
    raw_existing = insert_new(session, RawDocumentRow, raw_rows, "dedup_key")

    error_rows: dict[str, dict[str, Any]] = {}
    for error in poll.errors:
        key = error_key(error)
        error_rows.setdefault(
            key,
            {
                "dedup_key": key,
                "collector": error.collector,
                "target": error.target,
                "message": error.message,
                "observed_at": error.observed_at,
                "retryable": error.retryable,
            },
        )
    errors_existing = insert_new(session, CollectorErrorRow, error_rows, "dedup_key")
    session.flush()
    return SaveCounts(
        samples_inserted=len(sample_rows) - len(existing),
        samples_skipped=0 if replace else len(existing),
        samples_replaced=replaced,
        raw_inserted=len(raw_rows) - len(raw_existing),
        raw_skipped=len(raw_existing),
        errors_inserted=len(error_rows) - len(errors_existing),
        errors_skipped=len(errors_existing),
    )


def set_cursor(session: Session, collector: str, target: str, state: dict[str, Any], now: datetime) -> None:
    """Record where ``collector`` stopped reading ``target`` (opaque JSON ``state``) at ``now`` (aware UTC).

    Save it in the same transaction as the poll it belongs to, so the cursor only advances with the data.
    One target of :func:`set_cursors`.

    Raises:
        ValueError: ``state`` is not storable as JSON, or ``now`` is naive.
    """
    set_cursors(session, collector, {target: state}, now)


def set_cursors(session: Session, collector: str, states: Mapping[str, dict[str, Any]], now: datetime) -> None:
    """Record where ``collector`` stopped reading each target of ``states`` (target -> opaque JSON state), all
    with ``updated_at = now`` (aware UTC), in one batched upsert (``INSERT ... ON CONFLICT (collector, target)
    DO UPDATE`` as one ``executemany`` per :data:`CHUNK` targets on SQLite and PostgreSQL; elsewhere one
    ``SELECT`` of the stored targets, then batched inserts and updates).

    Save them in the same transaction as the poll they belong to, so a cursor only advances with the data.

    Raises:
        ValueError: a state is not storable as JSON (naming its target), or ``now`` is naive; nothing is written.
    """
    when = ensure_utc(now, "now")
    if when is None:
        raise ValueError("set_cursors: now is required")
    rows = []
    for target, state in states.items():
        canonical_json(state, f"cursor state of {collector} {target}")
        rows.append({"collector": collector, "target": target, "state": dict(state), "updated_at": when})
    if not rows:
        return
    table: Any = CollectorCursorRow.__table__
    dialect = session.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        stmt = upsert_statement(dialect, table, ("collector", "target"), ("state", "updated_at"))
        for chunk in chunks(rows):
            session.execute(stmt, list(chunk))
    else:
        ids = {
            target: pk
            for chunk in chunks(sorted(states))
            for target, pk in session.execute(
                select(CollectorCursorRow.target, CollectorCursorRow.id).where(
                    CollectorCursorRow.collector == collector, CollectorCursorRow.target.in_(chunk)
                )
            )
        }
        new_rows = [row for row in rows if row["target"] not in ids]
        changed = [{"id": ids[row["target"]], **row} for row in rows if row["target"] in ids]
        for chunk in chunks(new_rows):
            session.execute(insert(table), list(chunk))
        for chunk in chunks(changed):
            session.execute(update(CollectorCursorRow), list(chunk))


@dataclass(frozen=True, slots=True)
class PurgeCounts:
    """How many rows :func:`purge_before` deleted, per table."""

    samples: int = 0
    raw_documents: int = 0
    collector_errors: int = 0
    episodes: int = 0


def purge_before(session: Session, cutoff: datetime) -> PurgeCounts:
    """Delete samples, raw documents and collector errors observed before ``cutoff`` (retention), and the
    finding episodes whose last instant is before it (:func:`monitor.store.episode_repo.purge_episodes_before`).

    Jobs, runs and collector cursors are kept (a cursor must outlive the data it read past, or the
    collector would read the file again). Does not commit.

    Args:
        cutoff: aware UTC; rows with ``observed_at < cutoff`` go.

    Raises:
        ValueError: ``cutoff`` is naive.
    """
    when = ensure_utc(cutoff, "cutoff")
    assert when is not None
    counts = []
    for row_class in (SampleRow, RawDocumentRow, CollectorErrorRow):
        result = session.execute(
            delete(row_class).where(row_class.observed_at < when).execution_options(synchronize_session=False)
        )
        counts.append(int(getattr(result, "rowcount", 0) or 0))
    counts.append(purge_episodes_before(session, when))
    session.flush()
    return PurgeCounts(*counts)


# ------------------------------------------------------------------------------------------------- reads


def get_cursor(session: Session, collector: str, target: str) -> dict[str, Any] | None:
    """The state last saved by :func:`set_cursor` for ``collector`` and ``target``, or ``None``."""
    return session.scalars(
        select(CollectorCursorRow.state).where(
            CollectorCursorRow.collector == collector, CollectorCursorRow.target == target
        )
    ).one_or_none()


def get_cursors(
    session: Session, collector: str, targets: Collection[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The states saved by :func:`set_cursor` / :func:`set_cursors` for ``collector``: target -> state, of
    every target (``targets=None``: one query) or only of ``targets`` (one query per :data:`CHUNK` of them;
    targets with no state are absent). A poll of many files reads their states at once, not one query per
    file."""
    stmt = select(CollectorCursorRow.target, CollectorCursorRow.state).where(CollectorCursorRow.collector == collector)
    if targets is None:
        return {target: state for target, state in session.execute(stmt)}
    return {
        target: state
        for chunk in chunks(sorted(targets))
        for target, state in session.execute(stmt.where(CollectorCursorRow.target.in_(chunk)))
    }


def list_jobs(session: Session, engine: Engine | None = None) -> list[JobRef]:
    """All stored jobs (``run_id=None``; latest ``name``/``app_id``), ordered by engine then job id."""
    stmt = select(JobRow).order_by(JobRow.engine, JobRow.job_id)
    if engine is not None:
        stmt = stmt.where(JobRow.engine == engine.value)
    return [
        JobRef(engine=Engine(r.engine), job_id=r.job_id, name=r.name, app_id=r.app_id)
        for r in session.scalars(stmt)
    ]


def _time_conditions(column: Any, since: datetime | None, until: datetime | None) -> list[Any]:
    since = ensure_utc(since, "since")
    until = ensure_utc(until, "until")
    conditions: list[Any] = []
    if since is not None:
        conditions.append(column >= since)
    if until is not None:
        conditions.append(column < until)
    return conditions


def load_samples(
    session: Session,
    job_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    engine: Engine | None = None,
) -> list[Sample]:
    """Stored samples in ``[since, until)`` (aware UTC; ``None`` = unbounded), oldest first.

    Filters by ``job_id`` and/or ``engine`` when given. Each returned :class:`~monitor.model.Sample`
    equals the one saved (``None`` stays ``None``, times are aware UTC, ``extra`` is restored).

    Raises:
        ValueError: ``since`` or ``until`` is naive.
    """
    stmt = _sample_select().order_by(SampleRow.observed_at, SampleRow.id)
    if job_id is not None:
        stmt = stmt.where(JobRow.job_id == job_id)
    if engine is not None:
        stmt = stmt.where(JobRow.engine == engine.value)
    stmt = stmt.where(*_time_conditions(SampleRow.observed_at, since, until))
    interned: dict[Any, Any] = {}
    return [
        _to_sample(row, row.job_engine, row.job_job_id, row.run_run_id, interned)
        for row in session.execute(stmt.execution_options(yield_per=_LOAD_BATCH_ROWS))
    ]


#: The PostgreSQL advisory lock that every transaction storing samples holds shared (:func:`save_poll`) and
#: :func:`max_sample_id` takes exclusively for a moment ("tgsa").
SAMPLE_WRITE_LOCK: Final = 0x74677361


def _hold_sample_write_lock(session: Session, *, exclusive: bool = False) -> None:
    """On PostgreSQL: take :data:`SAMPLE_WRITE_LOCK` until the transaction ends (shared by writers)."""
    if session.get_bind().dialect.name == "postgresql":
        lock = func.pg_advisory_xact_lock if exclusive else func.pg_advisory_xact_lock_shared
        session.execute(select(lock(SAMPLE_WRITE_LOCK)))


def max_sample_id(session: Session) -> int:
    """The highest sample row id below which every row is stored for good (0 for none): a watermark for
    :func:`load_recent_samples` and :func:`load_samples_after`. Call it in a short transaction of its own.

    Ids are taken when a row is inserted, not when its transaction commits: with several writers (polls in
    parallel, other instances) a row with a lower id can commit after one with a higher id, and a reader
    that moved past the higher id would never load it. On PostgreSQL the read is made under
    :data:`SAMPLE_WRITE_LOCK` taken exclusively: it waits for the sample writes in flight (each holds it
    shared) and holds new ones back for the moment of the read, so every id up to the one returned is
    committed or will never be. SQLite has one writer at a time."""
    _hold_sample_write_lock(session, exclusive=True)
    return int(session.scalar(select(func.max(SampleRow.id))) or 0)


def load_recent_samples(
    session: Session, lookback: timedelta, engine: Engine | None = None, *, upto_id: int | None = None
) -> dict[tuple[Engine, str], list[Sample]]:
    """Each job's samples from its newest sample back ``lookback`` (inclusive), oldest first.

    The window is anchored at each job's own newest ``observed_at``, not at a clock, so a job whose data
    stopped arriving (or a recorded event log) still has its last stretch of history evaluated.

    Args:
        lookback: the window length.
        engine: only jobs of this engine.
        upto_id: only rows with id ``<= upto_id`` (from :func:`max_sample_id`, read first), so that a caller
            can continue with :func:`load_samples_after` without missing or repeating a row.

    Returns:
        ``{(engine, job_id): [samples...]}`` for every job with at least one sample.

    Raises:
        ValueError: ``lookback`` is negative.
    """
    if lookback < timedelta(0):
        raise ValueError("load_recent_samples: lookback must not be negative")
    # Two steps, so that only the window's rows are read (each an index range scan on
    # ix_samples_job_pk_observed_at): each job's newest time, then its rows from newest - lookback. The
    # cutoff is computed here, not in SQL: date arithmetic differs between SQLite and PostgreSQL.
    newest_q = select(SampleRow.job_pk, func.max(SampleRow.observed_at)).group_by(SampleRow.job_pk)
    if upto_id is not None:
        newest_q = newest_q.where(SampleRow.id <= upto_id)
    if engine is not None:
        newest_q = newest_q.join(JobRow, SampleRow.job_pk == JobRow.id).where(JobRow.engine == engine.value)
    out: dict[tuple[Engine, str], list[Sample]] = {}
    interned: dict[Any, Any] = {}
    for job_pk, job_newest in session.execute(newest_q.order_by(SampleRow.job_pk)).all():
        stmt = (
            _sample_select()
            .where(SampleRow.job_pk == job_pk, SampleRow.observed_at >= job_newest - lookback)
            .order_by(SampleRow.observed_at, SampleRow.id)
        )
        if upto_id is not None:
            stmt = stmt.where(SampleRow.id <= upto_id)
        for row in session.execute(stmt.execution_options(yield_per=_LOAD_BATCH_ROWS)):
            eng, jid = row.job_engine, row.job_job_id
            out.setdefault((Engine(eng), jid), []).append(_to_sample(row, eng, jid, row.run_run_id, interned))
    return out


def load_samples_after(
    session: Session, after_id: int, upto_id: int | None = None
) -> tuple[dict[tuple[Engine, str], list[Sample]], int]:
    """Samples stored after row id ``after_id`` (whatever their ``observed_at``), by job, oldest first; with
    ``upto_id`` (from :func:`max_sample_id`) only up to it.

    Returns:
        ``(samples by (engine, job id), the row id to continue after)``: ``upto_id`` when given, else the
        highest row id seen (``after_id`` when there is nothing new).
    """
    stmt = _sample_select().where(SampleRow.id > after_id).order_by(SampleRow.id)
    if upto_id is not None:
        stmt = stmt.where(SampleRow.id <= upto_id)
    out: dict[tuple[Engine, str], list[Sample]] = {}
    top = after_id if upto_id is None else max(after_id, upto_id)
    interned: dict[Any, Any] = {}
    for row in session.execute(stmt.execution_options(yield_per=_LOAD_BATCH_ROWS)):
        top = max(top, row.id)
        eng, jid = row.job_engine, row.job_job_id
        out.setdefault((Engine(eng), jid), []).append(_to_sample(row, eng, jid, row.run_run_id, interned))
    for samples in out.values():
        samples.sort(key=lambda s: s.observed_at)
    return out, top


_TIMES: Final = ("watermark", "event_time_min", "event_time_max", "event_time_avg")
"""The datetime measures of :data:`_MEASURES` (shared between equal values by a load: :func:`_to_sample`)."""
_LOAD_BATCH_ROWS = 2000  # rows fetched at a time when loading histories (bounded buffering)


def _sample_select() -> Select[Any]:
    """The sample loaders' query: every ``samples`` column with the job's engine and id and the run id
    (labelled ``job_engine``, ``job_job_id``, ``run_run_id``), as plain rows: no ORM objects are built
    (they cost more than the :class:`Sample` made from them)."""
    run = aliased(RunRow)
    return (
        select(
            *SampleRow.__table__.columns,
            JobRow.engine.label("job_engine"),
            JobRow.job_id.label("job_job_id"),
            run.run_id.label("run_run_id"),
        )
        .join(JobRow, SampleRow.job_pk == JobRow.id)
        .outerjoin(run, SampleRow.run_pk == run.id)
    )


def _to_sample(
    row: Row[Any], engine: str, job_id: str, run_id: str | None, interned: dict[Any, Any] | None = None
) -> Sample:
    """A row of :func:`_sample_select` as a :class:`Sample`. With ``interned``, equal :class:`JobRef` /
    :class:`Scope` values, times and collector names are shared between the samples of one load (a daemon
    holds millions of them: about 460 bytes each before times and names were shared)."""
    m = row._mapping  # read by key (C-level), not by attribute
    job_key = ("job", engine, job_id, run_id, m["job_name"], m["app_id"])
    scope_key = ("scope", m["scope_source"], m["scope_partition"], m["scope_subtask"], m["scope_operator"])
    job = interned.get(job_key) if interned is not None else None
    if job is None:
        job = JobRef(Engine(engine), job_id, run_id=run_id, name=m["job_name"], app_id=m["app_id"])
        if interned is not None:
            interned[job_key] = job
    scope = interned.get(scope_key) if interned is not None else None
    if scope is None:
        scope = Scope(
            source=m["scope_source"],
            partition=m["scope_partition"],
            subtask=m["scope_subtask"],
            operator=m["scope_operator"],
        )
        if interned is not None:
            interned[scope_key] = scope
    measures = {name: m[name] for name in _MEASURES}
    observed_at = m["observed_at"]
    collector = m["collector"]
    if interned is not None:
        # the samples of one batch share its time, a stalled watermark repeats: one object each
        observed_at = interned.setdefault(observed_at, observed_at)
        for name in _TIMES:
            value = measures[name]
            if value is not None:
                measures[name] = interned.setdefault(value, value)
        collector = interned.setdefault(collector, collector)
    return Sample(
        job=job,
        observed_at=observed_at,
        kind=SampleKind(m["kind"]),
        collector=collector,
        scope=scope,
        extra=dict(m["extra"]),
        **measures,
    )


def iter_raw_documents(
    session: Session,
    job_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    engine: Engine | None = None,
    collector: str | None = None,
    kind: str | None = None,
) -> Iterator[RawDocument]:
    """Stored raw documents in ``[since, until)``, oldest first, decoded (streamed in chunks).

    Used to replay history through a fixed parser (then :func:`save_poll` with ``replace=True``).

    Raises:
        ValueError: ``since``/``until`` naive, or a stored payload has an unknown codec.
    """
    run = aliased(RunRow)
    stmt = (
        select(RawDocumentRow, JobRow.engine, JobRow.job_id, run.run_id)
        .join(JobRow, RawDocumentRow.job_pk == JobRow.id)
        .outerjoin(run, RawDocumentRow.run_pk == run.id)
        .order_by(RawDocumentRow.observed_at, RawDocumentRow.id)
        .execution_options(yield_per=CHUNK)
    )
    if job_id is not None:
        stmt = stmt.where(JobRow.job_id == job_id)
    if engine is not None:
        stmt = stmt.where(JobRow.engine == engine.value)
    if collector is not None:
        stmt = stmt.where(RawDocumentRow.collector == collector)
    if kind is not None:
        stmt = stmt.where(RawDocumentRow.kind == kind)
    stmt = stmt.where(*_time_conditions(RawDocumentRow.observed_at, since, until))
    for row, eng, jid, rid in session.execute(stmt):
        job = JobRef(Engine(eng), jid, run_id=rid, name=row.job_name, app_id=row.app_id)
        yield RawDocument(job, row.observed_at, row.kind, row.collector, _decode(row))


def _decode(row: RawDocumentRow) -> dict[str, Any]:
    document = json.loads(_decompress(row.codec, row.payload))
    if not isinstance(document, dict):
        raise ValueError(f"raw document {row.id} is not a JSON object")
    return document
