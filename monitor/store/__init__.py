"""Storage: SQLAlchemy 2.x tables and repository functions (SQLite by default, PostgreSQL for shared use)."""
