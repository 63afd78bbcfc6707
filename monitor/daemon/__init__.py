"""The monitoring daemon: its composition root and its long-running parts.

- :mod:`monitor.daemon.compose` — the composition root (``tidegauge run``): reads the config, the
  environment and the wall clock, wires the parts below and starts/stops them in order.
- :mod:`monitor.daemon.runtime` — the poll → ingest → evaluate → dispatch → report stages over one store.
- :mod:`monitor.daemon.service` — the one start/stop contract every long-running part follows.
- :mod:`monitor.daemon.ingest` and :mod:`monitor.daemon.web` — the HTTP surface (listener pushes,
  ``/metrics``, ``/healthz``).
"""
