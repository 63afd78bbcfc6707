"""Storage: SQLAlchemy 2.x tables and repository functions (SQLite by default, PostgreSQL for shared use).

Typical use (composition root)::

    store = open_store(url, environ=os.environ)      # refuses an outdated schema
    with store.sessions.begin() as session:          # one transaction
        save_poll(session, poll)
        set_cursor(session, "spark-eventlog", path, {"offset": n}, now)
    with store.sessions() as session:
        samples = load_samples(session, job_id=..., since=..., until=...)

Modules: :mod:`.engine` (engines, default path), :mod:`.migrate` (Alembic, schema check),
:mod:`.repo` (reads/writes), :mod:`.tables` (tables), :mod:`.types`, :mod:`.keys`, :mod:`.base`.
"""

from monitor.store.engine import (
    database_errors,
    default_db_path,
    default_db_url,
    make_engine,
    make_session_factory,
    redact_url,
)
from monitor.store.migrate import Store, check_schema, current, downgrade, head, open_store, upgrade
from monitor.store.repo import (
    RawDocument,
    SaveCounts,
    get_cursor,
    iter_raw_documents,
    list_jobs,
    load_samples,
    save_poll,
    set_cursor,
)

__all__ = [
    "RawDocument",
    "SaveCounts",
    "Store",
    "check_schema",
    "current",
    "database_errors",
    "default_db_path",
    "default_db_url",
    "downgrade",
    "get_cursor",
    "head",
    "iter_raw_documents",
    "list_jobs",
    "load_samples",
    "make_engine",
    "make_session_factory",
    "open_store",
    "redact_url",
    "save_poll",
    "set_cursor",
    "upgrade",
]
