"""Running ``tidegauge run`` as a real subprocess on loopback ports, for the daemon's integration tests.

Waiting uses short polls with a deadline (:func:`wait_for`), never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO_ROOT

T = TypeVar("T")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 30.0, interval_s: float = 0.1) -> T:
    """Call ``probe`` until it returns something other than ``None`` (or ``False``); fail after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def metric_values(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """``(labels, value)`` of every sample named ``name`` in a Prometheus text exposition."""
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out.append((dict(sample.labels), float(sample.value)))
    return out


class DaemonProcess:
    """``python -m monitor.cli run -c <config> --db <url>`` in a subprocess (stderr to ``log_path``).

    Args:
        config: the YAML config as a dict (written to ``workdir/config.yaml``).
        db_url: database URL (upgraded by the caller).
        workdir: where the config and the log go.
        env: extra environment variables (secrets).
        instance: ``--instance NAME`` (one of a fleet on one PostgreSQL database).
    """

    def __init__(
        self,
        config: dict[str, Any],
        db_url: str,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        instance: str | None = None,
    ):
        self.instance = instance
        self.config_path = workdir / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.db_url = db_url
        self.port = int(config["server"]["port"])
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "daemon.log"
        self.env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, ready_timeout_s: float = 30.0) -> None:
        """Start and wait for ``/healthz`` to answer 200."""
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n===== start {self.starts} =====\n".encode())
        log.flush()
        argv = [sys.executable, "-m", "monitor.cli", "run", "-c", str(self.config_path), "--db", self.db_url]
        if self.instance:
            argv += ["--instance", self.instance]
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

        def ready() -> bool | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            try:
                return True if httpx.get(f"{self.base}/healthz", timeout=1.0).status_code == 200 else None
            except httpx.TransportError:
                return None

        wait_for("the daemon to answer /healthz", ready, ready_timeout_s)

    def health(self) -> dict[str, Any]:
        """The ``/healthz`` document."""
        body: dict[str, Any] = httpx.get(f"{self.base}/healthz", timeout=5.0).json()
        return body

    def metrics(self) -> str:
        """The ``/metrics`` text."""
        response = httpx.get(f"{self.base}/metrics", timeout=5.0)
        response.raise_for_status()
        return response.text

    def terminate(self, timeout_s: float = 15.0, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send ``sig`` (SIGTERM); return the exit code (fails if it does not exit within ``timeout_s``)."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"daemon did not exit within {timeout_s}s of {sig.name}:\n{self.log()}") from None

    def kill9(self) -> None:
        """SIGKILL (no clean-up at all) and reap."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self) -> None:
        """Kill the process if it is still running (test teardown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log(self) -> str:
        """What the daemon wrote so far."""
        return self.log_path.read_text() if self.log_path.exists() else ""


def cluster_status(config_path: Path, timeout_s: float = 60.0) -> dict[str, Any]:
    """``tidegauge cluster status -c CONFIG --format json`` run as a subprocess: ``{"instances": [{"name",
    "last_heartbeat", "targets", ...}], "targets": [{"name", "collector", "holder", "lease_until", ...}], ...}``
    (fails if the command fails)."""
    done = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "cluster", "status", "-c", str(config_path), "--format", "json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s, check=True,
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def outbox_states(db_url: str) -> list[str]:
    """The state of every outbox row in the database at ``db_url`` (a daemon's, read from outside it)."""
    from sqlalchemy import select

    from monitor.store import make_engine, make_session_factory
    from monitor.store.alert_tables import OutboxRow

    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            return list(s.scalars(select(OutboxRow.state)))
    finally:
        engine.dispose()
