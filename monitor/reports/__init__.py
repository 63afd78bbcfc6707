"""Health reports: what a person reads about a period of a job's life.

- :mod:`monitor.reports.detailed` — the detailed per-job report (``tidegauge report``, the dashboard).
- :mod:`monitor.reports.scheduled` — the scheduled summaries delivered through the outbox.
- :mod:`monitor.reports.render` — rendering a report as text, Markdown and HTML.
- :mod:`monitor.reports.source` — reading a report's inputs (samples, alerts, episodes) from the store.
- :mod:`monitor.reports.flink`, :mod:`monitor.reports.kafka` — the ``check flink`` / ``check kafka`` reports.
"""

__all__ = ["DEFAULT_SINCE"]

#: The period an on-demand report covers by default (``tidegauge report --since``, the dashboard's Reports
#: page): back from the newest stored sample (:func:`monitor.facts.source.data_period`).
DEFAULT_SINCE = "7d"
