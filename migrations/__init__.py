"""Alembic migrations of the tidegauge database (run them with ``tidegauge db upgrade``).

Shipped as package data so an installed wheel can migrate; :mod:`monitor.store.migrate` builds the Alembic
configuration programmatically from this directory.
"""
