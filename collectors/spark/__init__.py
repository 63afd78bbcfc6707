"""Spark Structured Streaming collectors: event logs, listener push, driver PrometheusServlet."""
