"""The environment variables through which ``tidegauge dashboard`` configures the Streamlit process (kept
off its command line, where ``ps`` shows them); read by :mod:`dashboard.data`."""

from __future__ import annotations

__all__ = ["DB_ENV", "PIPELINES_ENV", "REPORTS_ENV", "TOKEN_ENV"]

#: The database URL (may hold a password).
DB_ENV = "TIDEGAUGE_DASHBOARD_DB"
#: The dashboard token; without it the dashboard is read-only.
TOKEN_ENV = "TIDEGAUGE_DASHBOARD_TOKEN"  # noqa: S105 (a variable name)
#: A directory of generated report files for the Reports page.
REPORTS_ENV = "TIDEGAUGE_DASHBOARD_REPORTS"
#: The config's ``pipelines:`` section and ``rules.pipeline_freshness.target`` as JSON
#: (``{"target_s": 300.0, "pipelines": [...]}``), for the Pipelines page.
PIPELINES_ENV = "TIDEGAUGE_DASHBOARD_PIPELINES"
