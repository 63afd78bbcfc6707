"""Findings -> episodes: the one fold of a job's evaluated instants into finding episodes, for ``scan``
and the daemon alike.

The rules answer "what holds at this instant" (:func:`rules.replay.replay` yields one
:class:`~rules.replay.Instant` per batch or poll time). A finding (one :meth:`~monitor.model.Finding.fingerprint`)
that holds at consecutive instants is one *episode*: it begins at the first instant that has it and ends at
the first later instant that does not (``resolved``) or at the job's termination (``terminated``); while
the newest instant still has it, it is open. :class:`EpisodeFold` does this incrementally (the daemon
keeps one per job across ticks and restarts, seeded from the store's open episodes with
:func:`reopen`); :func:`episodes` folds a whole replay (``scan``).

:func:`held` says whether an episode lasted the rule's lifecycle ``for`` (the daemon's alert fires then;
``scan`` reports and both store only those), :func:`to_record` makes the stored
:class:`~monitor.model.FindingEpisode`, and :func:`link` joins an episode to the one that caused it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.model import EpisodeEnd, Finding, FindingEpisode, Severity, episode_id
from rules.registry import Evaluator, finding_order
from rules.replay import Instant

__all__ = ["CAUSED_BY", "Episode", "EpisodeFold", "episodes", "held", "link", "reopen", "to_record"]

#: The ``details`` key by which a finding names the finding that caused it: a rule name
#: (``"future_timestamp"``), or ``{"rule": name, "batch_id": n}`` to name its episode by the batch that
#: finding named when it first held, or ``{"rule": name, "engine": e, "job_id": j}`` to name the episode of
#: another job (``pipeline_freshness``: the job where a pipeline's staleness enters). :func:`link` resolves
#: it to that episode on the same job, or on the job named.
CAUSED_BY = "caused_by"


@dataclass(slots=True)
class Episode:
    """One stretch of instants during which a finding (one fingerprint) held without a break.

    Attributes:
        first: the finding as first seen (its ``batch_id`` is the batch it named then).
        last: the finding as last seen (the fullest message: how long, how many rows).
        first_at / last_at: the instants it first and last held.
        first_batch_id / last_batch_id: the job's newest batch at those instants.
        ended_by: why it ended, or ``None`` (it still held at the last instant).
        severity: the worst severity it had.
        history: its first instant was older than the history horizon when first evaluated.
        fingerprint: the finding's fingerprint.
    """

    first: Finding
    last: Finding
    first_at: datetime
    last_at: datetime
    first_batch_id: int | None
    last_batch_id: int | None
    ended_by: EpisodeEnd | None = None
    severity: Severity = Severity.OK
    history: bool = False
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = self.first.fingerprint()
        self.severity = max(self.severity, self.first.severity, self.last.severity)

    @property
    def id(self) -> str:
        """The stored episode's id (:func:`monitor.model.episode_id`)."""
        return episode_id(self.fingerprint, self.first_at)

    def key(self) -> tuple[str, str, int | None]:
        """``(rule, job id, batch the finding named when it first held)``: what scan and the daemon
        compare."""
        return (self.first.rule, self.first.job.job_id, self.first.batch_id)


class EpisodeFold:
    """Folds one job's instants (oldest first) into episodes as they come.

    Args:
        open_episodes: episodes still open from before (the daemon's, reopened from the store after a
            restart: :func:`reopen`); an instant with their finding extends them.
    """

    def __init__(self, open_episodes: Iterable[Episode] = ()) -> None:
        self.open: dict[str, Episode] = {e.fingerprint: e for e in open_episodes}

    def add(self, instant: Instant, *, history: bool = False) -> list[Episode]:
        """Fold ``instant`` in: its findings begin or extend episodes (``history`` marks those it begins);
        the open episodes it does not have end.

        Returns:
            The episodes that ended at ``instant`` (``ended_by`` set).
        """
        seen: set[str] = set()
        for finding in instant.findings:
            fp = finding.fingerprint()
            if fp in seen:
                continue
            seen.add(fp)
            episode = self.open.get(fp)
            if episode is None:
                self.open[fp] = Episode(
                    finding, finding, instant.at, instant.at, instant.batch_id, instant.batch_id,
                    history=history, fingerprint=fp,
                )  # fmt: skip
            else:
                episode.last, episode.last_at, episode.last_batch_id = finding, instant.at, instant.batch_id
                episode.severity = max(episode.severity, finding.severity)
        ended = [fp for fp in self.open if fp not in seen]
        done = [self.open.pop(fp) for fp in ended]
        end = EpisodeEnd.TERMINATED if instant.terminated else EpisodeEnd.RESOLVED
        for episode in done:
            episode.ended_by = end
        return done


def _order(episode: Episode) -> tuple[datetime, str, tuple[str, str, str, tuple[tuple[str, str], ...]]]:
    return episode.first_at, episode.first.rule, finding_order(episode.first)


def episodes(instants: Iterator[Instant] | Sequence[Instant], *, history: Iterable[bool] | None = None) -> list[Episode]:
    """Fold a job's instants into episodes (each finding reported once, with the first and last batch it
    held), ordered by first instant then rule; the last ones may still be open.

    Args:
        instants: one job's instants, oldest first.
        history: per instant, whether it was older than the history horizon (default: none was).
    """
    fold = EpisodeFold()
    done: list[Episode] = []
    flags = iter(history) if history is not None else None
    for instant in instants:
        done.extend(fold.add(instant, history=next(flags, False) if flags is not None else False))
    done.extend(fold.open.values())
    done.sort(key=_order)
    return done


def held(episode: Episode, evaluator: Evaluator) -> bool:
    """Whether the episode lasted its rule's lifecycle ``for`` (:meth:`Evaluator.timing`): the daemon's
    alert fires then; ``scan`` reports it; both store it."""
    return episode.last_at - episode.first_at >= evaluator.timing(episode.first.rule).for_duration


def _text(details: Mapping[str, Any], key: str) -> str | None:
    value = details.get(key)
    return value if isinstance(value, str) and value else None


def to_record(episode: Episode, *, notified: bool = False) -> FindingEpisode:
    """The episode as stored: the last finding's message, scope, labels and details (plus ``batch_id``,
    the batch the finding named when it first held), the worst severity, ``cause`` / ``remedy`` from the
    finding's ``details`` when it gives them as text. Links are added by :func:`link`.

    Args:
        notified: whether its alert notified (the daemon: it held for ``for`` and was not history).
    """
    last = episode.last
    details = {**last.details, "batch_id": episode.first.batch_id}
    return FindingEpisode(
        id=episode.id,
        fingerprint=episode.fingerprint,
        rule=last.rule,
        job=last.job,
        scope=last.scope,
        severity=episode.severity,
        first_at=episode.first_at,
        last_at=episode.last_at,
        message=last.message,
        first_batch_id=episode.first_batch_id,
        last_batch_id=episode.last_batch_id,
        cause=_text(details, "cause"),
        remedy=_text(details, "remedy"),
        notified=notified,
        history=episode.history,
        ended_by=episode.ended_by,
        labels=dict(last.labels),
        details=details,
    )


def reopen(record: FindingEpisode) -> Episode:
    """A stored open episode as the daemon's fold holds it (after a restart), so the next instant with its
    finding extends it rather than beginning another."""
    details = dict(record.details)
    named = details.get("batch_id")
    first = Finding(
        record.rule, record.severity, record.job, record.message, record.first_at, record.scope,
        batch_id=named if isinstance(named, int) else None, labels=dict(record.labels), details=details,
    )  # fmt: skip
    last = dataclasses.replace(first, observed_at=record.last_at, batch_id=None)
    return Episode(
        first, last, record.first_at, record.last_at, record.first_batch_id, record.last_batch_id,
        severity=record.severity, history=record.history, fingerprint=record.fingerprint,
    )  # fmt: skip


def _cause_wanted(record: FindingEpisode) -> tuple[str, int | None, str, str] | None:
    """``(rule, batch_id, engine, job_id)`` of the cause ``record`` names (its own job unless named)."""
    engine, job_id = record.job.engine.value, record.job.job_id
    value = record.details.get(CAUSED_BY)
    if isinstance(value, str) and value:
        return value, None, engine, job_id
    if isinstance(value, Mapping) and isinstance(value.get("rule"), str):
        batch = value.get("batch_id")
        other_engine, other_job = value.get("engine"), value.get("job_id")
        if isinstance(other_engine, str) and isinstance(other_job, str):
            engine, job_id = other_engine, other_job
        return value["rule"], batch if isinstance(batch, int) else None, engine, job_id
    return None


def link(records: Sequence[FindingEpisode], known: Sequence[FindingEpisode] = ()) -> list[FindingEpisode]:
    """``records`` with ``caused_by`` / ``causes`` filled where a finding names its cause
    (``details["caused_by"]``, see :data:`CAUSED_BY`).

    The cause is the episode of the named rule on the same job (engine and job id; or the job the finding
    names, ``{"rule", "engine", "job_id"}``) that began at or before
    the effect — the latest to begin among those whose first finding named the given ``batch_id`` (the batch
    that carried the row, :meth:`rules.jumps.Jump.details`), else the latest to begin — among ``records``
    and ``known`` (episodes stored before, e.g. by an earlier tick).

    Returns:
        ``records`` in the same order (a cause in ``known`` gets its ``causes`` through the store's link
        rows, from the effect's ``caused_by``).
    """
    pool = [*known, *records]
    caused_by: dict[str, list[str]] = {}
    causes: dict[str, list[str]] = {}
    for effect in records:
        wanted = _cause_wanted(effect)
        if wanted is None:
            continue
        rule, batch, engine, job_id = wanted
        candidates = [
            c for c in pool
            if c.rule == rule and c.id != effect.id and c.job.engine.value == engine
            and c.job.job_id == job_id and c.first_at <= effect.first_at
        ]  # fmt: skip
        named = [c for c in candidates if c.details.get("batch_id") == batch]
        candidates = named or candidates
        if not candidates:
            continue
        cause = max(candidates, key=lambda c: (c.first_at, c.id))
        caused_by.setdefault(effect.id, []).append(cause.id)
        causes.setdefault(cause.id, []).append(effect.id)
    if not caused_by:
        return list(records)
    return [
        dataclasses.replace(
            r,
            caused_by=tuple(sorted({*r.caused_by, *caused_by.get(r.id, ())})),
            causes=tuple(sorted({*r.causes, *causes.get(r.id, ())})),
        )
        for r in records
    ]
