"""The metrics surface: the Prometheus exporter, the latest values it serves, and PromQL rule generation."""
