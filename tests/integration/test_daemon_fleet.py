"""Three real ``tidegauge run`` processes on one real PostgreSQL share six Spark PrometheusServlet targets
served from a recorded scrape on loopback (tests/fixtures/spark/prometheus_streaming_gauges_namespace_appname.txt).

Each instance's config points the same target names at URLs carrying its own name (``?instance=a``), so
the loopback server records which instance polled which target and when (start and end of each request).
Checked: the instances hold disjoint leases that together are all targets, spread evenly; no target is
ever polled by two instances at once (no two requests for one target from different instances overlap);
after ``kill -9`` of one instance its targets are polled again by the others once its leases expire
(``lease_ttl`` = 15 s here, plus a poll interval); after its restart the targets spread again; ``cluster
status --format json`` shows it; the database unreachable from one instance for 20 s (a proxy drops its
connections) hands its targets to the other and back, never polled by two at once; on SQLite a second ``run`` on the same file refuses with one line, exit 2.
"""

from __future__ import annotations

import contextlib
import math
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy.engine import make_url

from monitor.store import upgrade
from tests.conftest import REPO_ROOT
from tests.daemon_process import DaemonProcess, cluster_status, free_port, wait_for
from tests.servers import serve_handler

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.slow]

TARGETS = [f"t{i}" for i in range(6)]
NAMES = ("a", "b", "c")
POLL_S = 1.0
LEASE_TTL_S = 15.0  # 3 x 1 s, at least 15 s


@dataclass
class Polls:
    """Every request of the recorded target server: (target, instance, start, end) in monotonic seconds."""

    done: list[tuple[str, str, float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def since(self, t0: float) -> list[tuple[str, str, float, float]]:
        with self.lock:
            return [p for p in self.done if p[2] >= t0]

    def overlaps(self) -> list[tuple[tuple[str, str, float, float], tuple[str, str, float, float]]]:
        """Pairs of requests for one target from two instances that were in flight at the same time."""
        by_target: dict[str, list[tuple[str, str, float, float]]] = defaultdict(list)
        with self.lock:
            for p in self.done:
                by_target[p[0]].append(p)
        out = []
        for polls in by_target.values():
            polls.sort(key=lambda p: p[2])
            for i, p in enumerate(polls):
                for q in polls[i + 1 :]:
                    if q[2] >= p[3]:
                        break
                    if q[1] != p[1]:
                        out.append((p, q))
        return out


@pytest.fixture
def driver(spark_fixtures: Path) -> Iterator[tuple[str, Polls]]:
    body = (spark_fixtures / "prometheus_streaming_gauges_namespace_appname.txt").read_bytes()
    polls = Polls()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            started = time.monotonic()
            parts = urlsplit(self.path)
            target = parts.path.strip("/").split("/")[0]
            instance = parse_qs(parts.query).get("instance", ["?"])[0]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            with polls.lock:
                polls.done.append((target, instance, started, time.monotonic()))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serve_handler(Handler) as base:
        yield base, polls


def _config(base: str, instance: str) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {
            "spark_prometheus": [
                {"name": t, "url": f"{base}/{t}/metrics/prometheus?instance={instance}", "poll_interval": "1s"}
                for t in TARGETS
            ]
        },
        "evaluation_interval": "1s",
    }


def _holders(doc: dict[str, Any]) -> dict[str, str | None]:
    return {t["name"]: t["holder"] for t in doc["targets"] if t["name"] in TARGETS}


def _spread(doc: dict[str, Any], live: tuple[str, ...]) -> dict[str, str] | None:
    """The holders when every target is held by one of ``live`` and each of them holds one at least."""
    holders = _holders(doc)
    if set(holders) != set(TARGETS) or any(h not in live for h in holders.values()):
        return None
    if {h for h in holders.values()} != set(live):
        return None
    return {t: str(h) for t, h in holders.items()}


def test_three_instances_share_targets_survive_a_kill_and_rebalance(
    tmp_path: Path, postgres_url: str, driver: tuple[str, Polls]
) -> None:
    base, polls = driver
    upgrade(postgres_url)
    daemons: dict[str, DaemonProcess] = {}
    for name in NAMES:
        workdir = tmp_path / name
        workdir.mkdir()
        config = _config(base, name)
        config["database"] = postgres_url
        daemons[name] = DaemonProcess(config, postgres_url, workdir, instance=name)
    status_config = daemons["a"].config_path
    try:
        for daemon in daemons.values():
            daemon.start()
        spread = wait_for("targets spread over a, b, c", lambda: _spread(cluster_status(status_config), NAMES), 60.0)
        per = defaultdict(list)
        for target, holder in spread.items():
            per[holder].append(target)
        assert max(len(v) for v in per.values()) <= math.ceil(len(TARGETS) / 3) + 1

        # /healthz of each instance names it and lists only its targets, with held_since
        for name, daemon in daemons.items():
            health = daemon.health()
            assert health["instance"] == name
            shown = {t["name"] for t in health["targets"]}
            assert all(t["held_since"] for t in health["targets"])
            assert shown <= set(TARGETS)
        doc = cluster_status(status_config)
        assert sorted(i["name"] for i in doc["instances"]) == list(NAMES)
        assert sum(i["targets"] for i in doc["instances"]) == len(TARGETS) + 1  # and the "ingest" lease

        # kill -9 of b: its targets are polled by a or c again once its leases expire
        victim = "b"
        orphaned = sorted(per[victim])
        assert orphaned
        daemons[victim].kill9()
        killed = time.monotonic()

        def taken_over() -> bool:
            polled = {p[0] for p in polls.since(killed) if p[1] != victim}
            return set(orphaned) <= polled

        wait_for("b's targets polled again by a or c", taken_over, LEASE_TTL_S + POLL_S + 30.0)
        first = {t: min(p[2] for p in polls.since(killed) if p[0] == t and p[1] != victim) for t in orphaned}
        gap_s = max(first.values()) - killed
        print(f"kill -9 -> all of b's {len(orphaned)} targets polled again after {gap_s:.1f} s "
              f"(lease_ttl {LEASE_TTL_S:.0f} s + poll interval {POLL_S:.0f} s)")  # fmt: skip
        wait_for("a and c hold everything", lambda: _spread(cluster_status(status_config), ("a", "c")), 30.0)

        # b restarts under its name: the targets spread over three again
        daemons[victim].start()
        wait_for("targets spread over a, b, c again", lambda: _spread(cluster_status(status_config), NAMES), 60.0)
        for daemon in daemons.values():
            assert daemon.terminate() == 0
        assert cluster_status(status_config)["instances"] == []  # a clean stop leaves the fleet
    finally:
        for daemon in daemons.values():
            daemon.close()
    assert polls.overlaps() == []
    polled_by = defaultdict(set)
    for target, instance, _s, _e in polls.since(0.0):
        polled_by[target].add(instance)
    assert set(polled_by) == set(TARGETS)


def test_a_second_run_on_one_sqlite_file_refuses_with_one_line(tmp_path: Path, driver: tuple[str, Polls]) -> None:
    base, _polls = driver
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    first_dir, second_dir = tmp_path / "one", tmp_path / "two"
    first_dir.mkdir()
    second_dir.mkdir()
    first = DaemonProcess(_config(base, "one"), url, first_dir)
    try:
        first.start()
        second = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "run", "-c", str(DaemonProcess(_config(base, "two"), url,
             second_dir).config_path), "--db", url],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        lines = [line for line in second.stderr.splitlines() if line.startswith("tidegauge:")]
        assert len(lines) == 1, second.stderr
        assert "another `tidegauge run`" in lines[0] and "only one instance" in lines[0]
        assert first.terminate() == 0
        # the lock goes with the process: a kill -9 does not block the next start
        first.start()
        first.kill9()
        first.start()
        assert first.terminate() == 0
    finally:
        first.close()


class CuttableProxy:
    """A loopback TCP proxy to PostgreSQL for one instance: :meth:`cut` closes its connections and
    refuses new ones (the database unreachable from that instance only) until :meth:`restore`."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = upstream_port
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = int(self._server.getsockname()[1])
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    client.close()
                    continue
                upstream = socket.create_connection(("127.0.0.1", self._upstream))
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._server.close()


def test_database_unreachable_from_one_instance_for_20_s(
    tmp_path: Path, postgres_url: str, driver: tuple[str, Polls]
) -> None:
    """b loses the database for 20 s (a proxy drops its connections): its leases expire, a takes its
    targets; after recovery b takes its share again, and no target was polled by two at once or held twice."""
    base, polls = driver
    upgrade(postgres_url)
    url = make_url(postgres_url)
    assert url.port is not None
    proxy = CuttableProxy(url.port)
    via_proxy = url.set(port=proxy.port).render_as_string(hide_password=False)
    daemons: dict[str, DaemonProcess] = {}
    for name, db in (("a", postgres_url), ("b", via_proxy)):
        workdir = tmp_path / name
        workdir.mkdir()
        config = {**_config(base, name), "database": postgres_url}
        daemons[name] = DaemonProcess(config, db, workdir, instance=name)
    status_config = daemons["a"].config_path
    try:
        for daemon in daemons.values():
            daemon.start()
        before = wait_for("targets spread over a, b", lambda: _spread(cluster_status(status_config), ("a", "b")), 60.0)
        cut_at = time.monotonic()
        proxy.cut()
        wait_for("a holds everything", lambda: _spread(cluster_status(status_config), ("a",)), LEASE_TTL_S + 30.0)
        time.sleep(max(0.0, 20.0 - (time.monotonic() - cut_at)))  # the outage lasts 20 s
        proxy.restore()
        after = wait_for("targets spread over a, b again", lambda: _spread(cluster_status(status_config), ("a", "b")), 90.0)
        for daemon in daemons.values():
            assert daemon.terminate() == 0
    finally:
        for daemon in daemons.values():
            daemon.close()
        proxy.close()
    assert sorted(before) == sorted(after) == TARGETS
    assert polls.overlaps() == []
