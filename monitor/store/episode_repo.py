"""Repository functions for finding episodes (:class:`monitor.model.FindingEpisode`) and their links.

Like :mod:`monitor.store.repo`, every function takes a :class:`~sqlalchemy.orm.Session` and does not
commit: the caller owns the transaction, so the daemon stores an instant's episodes with its alert
transitions and evaluation cursors in one.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from monitor.model import Engine, EpisodeEnd, FindingEpisode, JobRef, Scope, Severity, ensure_utc
from monitor.store.alert_tables import AlertRow
from monitor.store.episode_tables import FindingEpisodeLinkRow, FindingEpisodeRow

__all__ = ["EpisodeCounts", "load_episodes", "purge_episodes_before", "record_episodes"]

_CHUNK: Final = 500


@dataclass(frozen=True, slots=True)
class EpisodeCounts:
    """What :func:`record_episodes` did: rows ``inserted``, ``extended`` (an open episode's last instant
    moved on, or it ended) and ``unchanged`` (stored already as given: a re-scan)."""

    inserted: int = 0
    extended: int = 0
    unchanged: int = 0


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def _json_safe(details: Mapping[str, Any]) -> dict[str, Any]:
    """``details`` as the JSON column gives it back (times ISO-8601, enums by value, tuples as lists,
    NaN/infinity as ``null``), so a re-read compares equal."""
    text = json.dumps(details, default=_json_default, sort_keys=True)
    loaded = json.loads(text, parse_constant=lambda _: None)
    assert isinstance(loaded, dict)
    return loaded


def _values(episode: FindingEpisode) -> dict[str, Any]:
    job, scope = episode.job, episode.scope
    return {
        "id": episode.id,
        "fingerprint": episode.fingerprint,
        "rule": episode.rule,
        "engine": job.engine.value,
        "job_id": job.job_id,
        "run_id": job.run_id,
        "job_name": job.name,
        "scope_source": scope.source,
        "scope_partition": scope.partition,
        "scope_subtask": scope.subtask,
        "scope_operator": scope.operator,
        "labels": dict(episode.labels),
        "severity": episode.severity.label(),
        "first_at": episode.first_at,
        "last_at": episode.last_at,
        "first_batch_id": episode.first_batch_id,
        "last_batch_id": episode.last_batch_id,
        "message": episode.message,
        "cause": episode.cause,
        "remedy": episode.remedy,
        "notified": episode.notified,
        "history": episode.history,
        "ended_by": None if episode.ended_by is None else episode.ended_by.value,
        "details": _json_safe(episode.details),
    }


#: Columns that follow the newest reading of an episode (the one with the later ``last_at``).
_FOLLOW_LAST: Final = ("run_id", "job_name", "last_at", "last_batch_id", "message", "cause", "remedy", "ended_by",
                       "details")


def _merge(row: FindingEpisodeRow, new: dict[str, Any]) -> bool:
    """Fold a new reading of a stored episode into its row; whether anything changed.

    The later ``last_at`` wins the columns that describe the end (a re-read of fewer batches never shortens
    an episode); the severity is the worse; ``notified`` once true stays true; ``history`` and the first
    instant are as first stored."""
    before = {name: getattr(row, name) for name in (*_FOLLOW_LAST, "severity", "notified")}
    if new["last_at"] > row.last_at or (new["last_at"] == row.last_at and row.ended_by is None):
        for name in _FOLLOW_LAST:
            setattr(row, name, new[name])
    if Severity.parse(new["severity"]) > Severity.parse(row.severity):
        row.severity = new["severity"]
    row.notified = bool(row.notified or new["notified"])
    return any(getattr(row, name) != value for name, value in before.items())


def record_episodes(session: Session, episodes: Iterable[FindingEpisode]) -> EpisodeCounts:
    """Insert or extend ``episodes`` by id (idempotent: storing the same episodes again changes nothing).

    A stored episode read again is extended (its later ``last_at`` / ``last_batch_id`` / message /
    ``ended_by`` win, the worse severity wins, ``notified`` is sticky, ``history`` stays as first stored).
    ``caused_by`` / ``causes`` become link rows (a link to an episode not stored is left out). Does not commit.

    Returns:
        How many rows were inserted, extended or left as they were.
    """
    given = {e.id: e for e in episodes}
    if not given:
        return EpisodeCounts()
    ids = list(given)
    rows: dict[str, FindingEpisodeRow] = {}
    for chunk in _chunks(ids):
        rows.update((r.id, r) for r in session.scalars(select(FindingEpisodeRow).where(FindingEpisodeRow.id.in_(chunk))))
    inserted = extended = unchanged = 0
    for episode_id_, episode in given.items():
        values = _values(episode)
        row = rows.get(episode_id_)
        if row is None:
            session.add(FindingEpisodeRow(**values))
            inserted += 1
        elif _merge(row, values):
            extended += 1
        else:
            unchanged += 1
    session.flush()
    wanted = {(cause, e.id) for e in given.values() for cause in e.caused_by}
    wanted |= {(e.id, effect) for e in given.values() for effect in e.causes}
    if wanted:
        linked = sorted({i for pair in wanted for i in pair})
        known: set[str] = set()
        existing: set[tuple[str, str]] = set()
        for chunk in _chunks(linked):
            known.update(session.scalars(select(FindingEpisodeRow.id).where(FindingEpisodeRow.id.in_(chunk))))
            existing.update(
                (r.cause_id, r.effect_id)
                for r in session.scalars(
                    select(FindingEpisodeLinkRow).where(FindingEpisodeLinkRow.effect_id.in_(chunk))
                )
            )
        for cause, effect in sorted(wanted - existing):
            if cause in known and effect in known:
                session.add(FindingEpisodeLinkRow(cause_id=cause, effect_id=effect))
        session.flush()
    return EpisodeCounts(inserted, extended, unchanged)


def _to_episode(row: FindingEpisodeRow, caused_by: tuple[str, ...], causes: tuple[str, ...]) -> FindingEpisode:
    return FindingEpisode(
        id=row.id,
        fingerprint=row.fingerprint,
        rule=row.rule,
        job=JobRef(Engine(row.engine), row.job_id, run_id=row.run_id, name=row.job_name),
        scope=Scope(row.scope_source, row.scope_partition, row.scope_subtask, row.scope_operator),
        severity=Severity.parse(row.severity),
        first_at=row.first_at,
        last_at=row.last_at,
        message=row.message,
        first_batch_id=row.first_batch_id,
        last_batch_id=row.last_batch_id,
        cause=row.cause,
        remedy=row.remedy,
        caused_by=caused_by,
        causes=causes,
        notified=bool(row.notified),
        history=bool(row.history),
        ended_by=None if row.ended_by is None else EpisodeEnd(row.ended_by),
        labels={str(k): str(v) for k, v in (row.labels or {}).items()},
        details=dict(row.details or {}),
    )


def load_episodes(
    session: Session,
    *,
    engine: Engine | str | None = None,
    job_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    open_only: bool = False,
) -> list[FindingEpisode]:
    """Stored episodes overlapping ``[since, until)`` (an episode overlaps when ``last_at >= since`` and
    ``first_at < until``; ``None``: unbounded), of one engine / job when given, ordered by ``first_at``
    then id, with their ``caused_by`` / ``causes`` links. ``open_only``: only those still open.

    Raises:
        ValueError: a naive time, or an unknown engine name.
    """
    start, end = ensure_utc(since, "since"), ensure_utc(until, "until")
    stmt = select(FindingEpisodeRow)
    if engine is not None:
        stmt = stmt.where(FindingEpisodeRow.engine == Engine(engine).value)
    if job_id is not None:
        stmt = stmt.where(FindingEpisodeRow.job_id == job_id)
    if start is not None:
        stmt = stmt.where(FindingEpisodeRow.last_at >= start)
    if end is not None:
        stmt = stmt.where(FindingEpisodeRow.first_at < end)
    if open_only:
        stmt = stmt.where(FindingEpisodeRow.ended_by.is_(None))
    rows = list(session.scalars(stmt.order_by(FindingEpisodeRow.first_at, FindingEpisodeRow.id)))
    caused_by: dict[str, list[str]] = {}
    causes: dict[str, list[str]] = {}
    ids = [r.id for r in rows]
    for chunk in _chunks(ids):
        links = select(FindingEpisodeLinkRow).where(
            or_(FindingEpisodeLinkRow.cause_id.in_(chunk), FindingEpisodeLinkRow.effect_id.in_(chunk))
        )
        for link in session.scalars(links):
            caused_by.setdefault(link.effect_id, []).append(link.cause_id)
            causes.setdefault(link.cause_id, []).append(link.effect_id)
    return [
        _to_episode(r, tuple(sorted(set(caused_by.get(r.id, ())))), tuple(sorted(set(causes.get(r.id, ())))))
        for r in rows
    ]


def purge_episodes_before(session: Session, cutoff: datetime) -> int:
    """Delete the episodes whose last instant is before ``cutoff`` (retention, as for samples), their
    links, and the alerts' references to them (``alerts.episode_id`` becomes ``NULL``). Does not commit.

    Returns:
        The number of episodes deleted.

    Raises:
        ValueError: ``cutoff`` is naive.
    """
    when = ensure_utc(cutoff, "cutoff")
    assert when is not None
    old = select(FindingEpisodeRow.id).where(FindingEpisodeRow.last_at < when)
    session.execute(
        delete(FindingEpisodeLinkRow)
        .where(or_(FindingEpisodeLinkRow.cause_id.in_(old), FindingEpisodeLinkRow.effect_id.in_(old)))
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(AlertRow).where(AlertRow.episode_id.in_(old)).values(episode_id=None)
        .execution_options(synchronize_session=False)
    )  # fmt: skip
    result = session.execute(
        delete(FindingEpisodeRow).where(FindingEpisodeRow.last_at < when).execution_options(synchronize_session=False)
    )
    session.flush()
    return int(getattr(result, "rowcount", 0) or 0)
