"""INSERT ... ON CONFLICT on SQLite and PostgreSQL: the store's one insert-or-ignore and one upsert, and the
chunking of multi-row statements.

Used where a unique constraint is the guard against a concurrent writer (another transaction of this
process, or another instance of the fleet on the same PostgreSQL): samples by ``dedup_key``, outbox rows by
``(receiver, idempotency_key)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any, Final

from sqlalchemy import insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

__all__ = ["CHUNK", "chunks", "insert_ignoring", "insert_new", "upsert_statement"]

#: Rows per multi-row statement.
CHUNK: Final = 500


def chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    """``items`` in slices of :data:`CHUNK`."""
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


@functools.cache
def upsert_statement(dialect: str, table: Any, conflict: tuple[str, ...], update: tuple[str, ...]) -> Any:
    """``INSERT ... ON CONFLICT (conflict) DO UPDATE SET <update> = excluded.<update>`` of ``table`` for
    ``dialect`` (``sqlite`` or ``postgresql``; execute it with a list of rows), built once per arguments
    (building it costs more than running it)."""
    stmt = (sqlite.insert if dialect == "sqlite" else postgresql.insert)(table)
    return stmt.on_conflict_do_update(
        index_elements=list(conflict), set_={name: stmt.excluded[name] for name in update}
    )


def insert_ignoring(
    session: Session, row_class: Any, rows: list[dict[str, Any]], conflict: Sequence[str], *, count: bool = False
) -> int | None:
    """INSERT ``rows`` (column -> value) into ``row_class``'s table, skipping each row whose ``conflict``
    columns (a unique constraint or index) equal an existing or concurrently inserted row's (SQLite and
    PostgreSQL ``ON CONFLICT (...) DO NOTHING``; another dialect raises ``IntegrityError`` on such a row).

    Args:
        count: insert row by row and return how many were inserted (for the few rows of an outbox write);
            otherwise rows go in multi-row statements of 500 and ``None`` is returned.

    Returns:
        With ``count``, the number of rows inserted (duplicates skipped are not counted); else ``None``.
    """
    if not rows:
        return 0 if count else None
    dialect = session.get_bind().dialect.name
    table = row_class.__table__
    stmt: Any
    if dialect == "sqlite":
        stmt = sqlite.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    elif dialect == "postgresql":
        stmt = postgresql.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    else:
        stmt = insert(table)
    if count:  # RETURNING names the rows really inserted (rowcount is not reliable across drivers)
        keyed = stmt.returning(*(table.c[name] for name in conflict))
        return sum(len(session.execute(keyed, row).all()) for row in rows)
    for chunk in chunks(rows):
        session.execute(stmt, list(chunk))
    return None


def insert_new(session: Session, row_class: Any, rows: dict[str, dict[str, Any]], key: str) -> set[str]:
    """INSERT ``rows`` (their unique ``key`` column's value -> the row) into ``row_class``'s table, skipping
    those whose key is stored already (or inserted meanwhile by a concurrent transaction); returns the keys
    skipped.

    On SQLite and PostgreSQL one ``INSERT ... ON CONFLICT (key) DO NOTHING RETURNING key`` per
    :data:`CHUNK` rows (SQLAlchemy's "insertmanyvalues": multi-row ``VALUES``, no read first); elsewhere a
    read of the stored keys, then plain inserts of the others."""
    if not rows:
        return set()
    dialect = session.get_bind().dialect.name
    table = row_class.__table__
    if dialect not in ("sqlite", "postgresql"):
        stored: set[str] = set()
        for chunk in chunks(list(rows)):
            stored.update(session.scalars(select(table.c[key]).where(table.c[key].in_(chunk))))
        insert_ignoring(session, row_class, [r for k, r in rows.items() if k not in stored], [key])
        return stored
    stmt = _insert_new_statement(dialect, table, key)
    inserted: set[str] = set()
    for chunk in chunks(list(rows.values())):
        inserted.update(session.execute(stmt, list(chunk)).scalars())
    return set(rows) - inserted


@functools.cache
def _insert_new_statement(dialect: str, table: Any, key: str) -> Any:
    stmt = (sqlite.insert if dialect == "sqlite" else postgresql.insert)(table)
    return stmt.on_conflict_do_nothing(index_elements=[key]).returning(table.c[key])
