"""What every stage of the daemon shares: a job's key in the in-memory histories and the tick's time.

The scheduler (:mod:`monitor.daemon.compose`) reads the clock once per tick and hands ``now`` to each
stage; :func:`tick_time` is the one check of it.
"""

from __future__ import annotations

from datetime import datetime

from monitor.model import Engine, ensure_utc

__all__ = ["JobKey", "job_target", "tick_time"]

JobKey = tuple[Engine, str]
"""A job's identity in histories: (engine, job id); run ids change on restart, jobs don't."""


def job_target(key: JobKey) -> str:
    """``spark/q-1``: the job as a cursor-table target (the per-job evaluation cursors)."""
    return f"{key[0].value}/{key[1]}"


def tick_time(now: datetime) -> datetime:
    """The tick's ``now`` in UTC.

    Raises:
        ValueError: ``now`` is naive or missing.
    """
    when = ensure_utc(now, "now")
    if when is None:
        raise ValueError("now is required")
    return when
