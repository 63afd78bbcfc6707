"""SQLAlchemy declarative base shared by every table module.

``MetaData(naming_convention=...)`` gives constraints stable names, so Alembic migrations are stable
across SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base; all tidegauge tables hang off ``Base.metadata``."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
