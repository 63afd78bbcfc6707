"""Storage: SQLAlchemy 2.x tables and repository functions (SQLite by default, PostgreSQL for shared use).

Typical use (composition root)::

    store = open_store(url, environ=os.environ)      # refuses an outdated schema
    with store.sessions.begin() as session:          # one transaction
        save_poll(session, poll)
        set_cursor(session, "spark-eventlog", path, {"offset": n}, now)
    with store.sessions() as session:
        samples = load_samples(session, job_id=..., since=..., until=...)

Modules: :mod:`.database` (SQLAlchemy engines, URLs, default path), :mod:`.store` (:class:`Store`), :mod:`.migrate` (Alembic, schema check),
:mod:`.repo` (reads/writes), :mod:`.episode_repo` (finding episodes), :mod:`.tables` (tables), :mod:`.types`, :mod:`.keys`, :mod:`.base`.
"""

from monitor.store.database import (
    check_store,
    database_errors,
    default_db_path,
    default_db_url,
    make_engine,
    make_session_factory,
    read_session,
    redact_url,
)
from monitor.store.episode_repo import EpisodeCounts, load_episodes, record_episodes
from monitor.store.migrate import check_schema, current, downgrade, head, upgrade
from monitor.store.repo import (
    PurgeCounts,
    RawDocument,
    SaveCounts,
    get_cursor,
    get_cursors,
    iter_raw_documents,
    list_jobs,
    load_recent_samples,
    load_samples,
    load_samples_after,
    max_sample_id,
    purge_before,
    save_poll,
    set_cursor,
    set_cursors,
)
from monitor.store.store import Store, open_store

__all__ = [
    "EpisodeCounts",
    "PurgeCounts",
    "RawDocument",
    "SaveCounts",
    "Store",
    "check_schema",
    "check_store",
    "current",
    "database_errors",
    "default_db_path",
    "default_db_url",
    "downgrade",
    "get_cursor",
    "get_cursors",
    "head",
    "iter_raw_documents",
    "list_jobs",
    "load_episodes",
    "load_recent_samples",
    "load_samples",
    "load_samples_after",
    "make_engine",
    "make_session_factory",
    "max_sample_id",
    "open_store",
    "purge_before",
    "read_session",
    "record_episodes",
    "redact_url",
    "save_poll",
    "set_cursor",
    "set_cursors",
    "upgrade",
]
