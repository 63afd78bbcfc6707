"""Column types shared by the table modules.

:class:`UTCDateTime` keeps the project's one time convention in the database: every ``datetime`` written
must be timezone-aware, is stored in UTC and comes back timezone-aware UTC, on PostgreSQL
(``timestamp with time zone``) and on SQLite (which has no time-zone type: values are stored as naive
UTC text ``YYYY-MM-DD HH:MM:SS.ffffff``, which sorts in time order, and re-tagged UTC on the way out).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = ["BigIntPK", "UTCDateTime"]

#: 64-bit integer primary key that still autoincrements on SQLite (only ``INTEGER PRIMARY KEY`` is the
#: rowid alias there; ``BIGINT PRIMARY KEY`` would not autoincrement).
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A ``DateTime(timezone=True)`` that only accepts aware datetimes and always returns aware UTC.

    Microsecond precision on both dialects (PostgreSQL ``timestamptz`` and SQLite text).

    Raises:
        ValueError: on bind, when a naive ``datetime`` is given (it would be ambiguous).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Aware -> UTC (naive UTC for SQLite, which cannot store an offset)."""
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"refusing to store naive datetime {value!r}: datetimes must be aware UTC")
        utc = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return utc.replace(tzinfo=None)
        return utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Stored value -> aware UTC ``datetime`` (naive values are UTC by construction)."""
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime from the database, got {type(value).__name__}")
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
