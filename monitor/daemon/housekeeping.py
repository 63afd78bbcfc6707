"""The housekeeping stage: retention and the config file's silences.

:meth:`Housekeeping.clean_up` deletes samples, raw documents, collector errors and finding episodes older
than the retention (:func:`monitor.store.purge_before`); :meth:`Housekeeping.sync_silences` stores the
config file's silences that are not stored yet.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from monitor.alerts.silences import Silence
from monitor.daemon.tick import tick_time
from monitor.store import PurgeCounts, purge_before
from monitor.store.alert_repo import add_silence, list_silences

__all__ = ["Housekeeping"]

log = logging.getLogger(__name__)


class Housekeeping:
    """Retention and silences (see the module docstring).

    Args:
        sessions: the store's session factory.
        retention: what is older than this (relative to the tick's ``now``) is deleted by :meth:`clean_up`.
    """

    def __init__(self, sessions: sessionmaker[Session], retention: timedelta) -> None:
        self._sessions = sessions
        self._retention = retention

    def clean_up(self, now: datetime) -> PurgeCounts:
        """Delete stored samples, raw documents and collector errors older than ``now - retention``, and the
        finding episodes whose last instant is before it."""
        when = tick_time(now)
        with self._sessions.begin() as session:
            counts = purge_before(session, when - self._retention)
        if counts.samples or counts.raw_documents or counts.collector_errors or counts.episodes:
            log.info(
                "retention: deleted %d samples, %d raw documents, %d collector errors, %d finding episodes "
                "older than %s",
                counts.samples,
                counts.raw_documents,
                counts.collector_errors,
                counts.episodes,
                (when - self._retention).isoformat(),
            )
        return counts

    def sync_silences(self, silences: Sequence[Silence], now: datetime) -> int:
        """Store the config file's silences that are not stored yet (by id), starting at ``now`` (or at
        their end, if that is earlier). Returns how many were added."""
        when = tick_time(now)
        with self._sessions.begin() as session:
            stored = {s.id for s in list_silences(session)}
            added = 0
            for silence in silences:
                if silence.id in stored:
                    continue
                start = min(when, silence.ends_at)
                add_silence(session, dataclasses.replace(silence, starts_at=start, created_at=when), when)
                stored.add(silence.id)
                added += 1
        return added
