"""A real Flink 2.3.0 standalone cluster for tests, from the PyPI distribution.

PyPI's ``apache-flink`` (the ``pyflink/bin`` scripts) plus ``apache-flink-libraries`` (``pyflink/lib``:
``flink-dist``, the web UI and REST) make a full distribution; ``make test`` installs both with
``pip install --no-deps``. ``FLINK_HOME`` is the installed ``pyflink/`` folder; ``FLINK_CONF_DIR`` is a
temporary directory whose ``config.yaml`` binds every endpoint to 127.0.0.1 on free ports and keeps logs,
pids and temp files inside it, so several clusters (and other test runs) never collide.

Use :func:`start_cluster` (a context manager) or :class:`FlinkCluster` directly::

    with start_cluster(tmp_path) as cluster:
        jar = compile_job(cluster.home, [source], tmp_path / "job")
        jid = cluster.run_jar(cluster.upload_jar(jar), "tidegauge.TestJob", "idle")
        cluster.get_json(f"/jobs/{jid}")

:func:`compile_job` compiles Java sources with the JDK's ``javac`` against ``flink-dist`` (no Maven
project). Startup takes about 20 s (``/overview`` answers, then a task manager registers); stopping about
10 s. The cluster is shared by a session fixture (``tests/integration/conftest.py``): keep to one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

__all__ = [
    "FLINK_VERSION",
    "FlinkCluster",
    "FlinkUnavailable",
    "compile_job",
    "find_flink_home",
    "flink_unavailable_reason",
    "start_cluster",
]

FLINK_VERSION = "2.3.0"


class FlinkUnavailable(RuntimeError):
    """The distribution, Java or a free port is missing, or the cluster did not come up in time."""


def find_flink_home() -> Path | None:
    """The installed ``pyflink/`` folder if it holds the scripts and ``lib/flink-dist-*.jar``, else ``None``."""
    try:
        import pyflink  # type: ignore[import-not-found]
    except ImportError:
        return None
    home = Path(pyflink.__file__).parent
    if not (home / "bin" / "start-cluster.sh").is_file() or not list((home / "lib").glob("flink-dist*.jar")):
        return None
    return home


def flink_unavailable_reason() -> str | None:
    """Why a cluster cannot start here (``None`` when it can): no distribution, no ``java``/``javac``."""
    if find_flink_home() is None:
        return (
            f"Flink distribution not installed (pip install --no-deps apache-flink=={FLINK_VERSION} "
            f"apache-flink-libraries=={FLINK_VERSION}; make test does it)"
        )
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} not found (a JDK 17 is needed; .ci/system-deps.sh installs it)"
    return None


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (bound together, so they differ)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class FlinkCluster:
    """One standalone cluster: a job manager and one task manager on loopback.

    Attributes:
        home: ``FLINK_HOME`` (the installed ``pyflink/`` folder).
        work: the temporary directory holding ``conf/``, ``log/``, ``tmp/``.
        slots: task slots of the task manager (the test job's six modes take 9; the rest is free for
            other tests sharing the session cluster).
        extra_config: more ``config.yaml`` keys (flat, e.g. ``{"metrics.fetcher.update-interval": 1000}``).
    """

    home: Path
    work: Path
    slots: int = 12
    extra_config: dict[str, Any] = field(default_factory=dict)
    rest_port: int = 0
    _started: bool = False

    @property
    def conf_dir(self) -> Path:
        """``FLINK_CONF_DIR``."""
        return self.work / "conf"

    @property
    def log_dir(self) -> Path:
        """Where the job manager and task manager write their logs."""
        return self.work / "log"

    @property
    def rest_url(self) -> str:
        """``http://127.0.0.1:<rest port>`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.rest_port}"

    def env(self) -> dict[str, str]:
        """The environment the ``bin/`` scripts run with."""
        env = dict(os.environ)
        env["FLINK_HOME"] = str(self.home)
        env["FLINK_CONF_DIR"] = str(self.conf_dir)
        env["FLINK_LOG_DIR"] = str(self.log_dir)
        env.pop("FLINK_ENV_JAVA_OPTS", None)
        return env

    def write_config(self) -> None:
        """Write ``conf/config.yaml`` (loopback, free ports, dirs inside :attr:`work`) and the log configs."""
        rpc, blob, data, rest, tm_rpc = _free_ports(5)
        self.rest_port = rest
        tmp = self.work / "tmp"
        for d in (self.conf_dir, self.log_dir, tmp, self.work / "pid", self.work / "web"):
            d.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": rpc,
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.rpc.port": tm_rpc,
            "taskmanager.data.port": data,
            "taskmanager.memory.process.size": "1280m",
            "taskmanager.numberOfTaskSlots": self.slots,
            "blob.server.port": blob,
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": rest,
            # the job manager and the task manager each start a metric query service: "0" = any free port
            "metrics.internal.query-service.port": "0",
            "env.log.dir": str(self.log_dir),
            "env.pid.dir": str(self.work / "pid"),
            "io.tmp.dirs": str(tmp),
            "web.tmpdir": str(self.work / "web"),
            "parallelism.default": 1,
        }
        # the JVM module flags the distribution ships (Flink needs them on Java 17, also in the CLI)
        shipped = yaml.safe_load((self.home / "conf" / "config.yaml").read_text()) or {}
        java_opts = shipped.get("env", {}).get("java", {}).get("opts", {}).get("all")
        if java_opts:
            config["env.java.opts.all"] = java_opts
        config.update(self.extra_config)
        lines = [f"{key}: {json.dumps(value) if isinstance(value, str) else value}" for key, value in config.items()]
        (self.conf_dir / "config.yaml").write_text("\n".join(lines) + "\n")
        (self.conf_dir / "workers").write_text("127.0.0.1\n")
        (self.conf_dir / "masters").write_text(f"127.0.0.1:{rest}\n")
        for name in ("log4j.properties", "log4j-console.properties", "log4j-cli.properties"):
            src = self.home / "conf" / name
            if src.is_file():
                shutil.copy(src, self.conf_dir / name)

    def _script(self, name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(self.home / "bin" / name), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def get_json(self, path: str, timeout: float = 5) -> Any:
        """GET ``rest_url + path`` and decode the JSON body.

        Raises:
            urllib.error.URLError / OSError: not reachable; ``HTTPError`` for a non-2xx status.
        """
        with urllib.request.urlopen(self.rest_url + path, timeout=timeout) as resp:
            return json.loads(resp.read())

    def start(self, timeout_s: float = 120) -> None:
        """Write the config, run ``bin/start-cluster.sh``, wait for ``/overview`` and a registered task
        manager with free slots.

        Raises:
            FlinkUnavailable: the scripts failed or the cluster was not up within ``timeout_s`` (the
                message carries the tail of the job manager log).
        """
        self.write_config()
        proc = self._script("start-cluster.sh")
        self._started = True
        if proc.returncode != 0:
            raise FlinkUnavailable(f"start-cluster.sh failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                overview = self.get_json("/overview", timeout=2)
            except (OSError, ValueError):
                time.sleep(0.5)
                continue
            if overview.get("taskmanagers", 0) >= 1 and overview.get("slots-available", 0) >= 1:
                return
            time.sleep(0.5)
        raise FlinkUnavailable(f"Flink not up after {timeout_s:.0f}s; log tail:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the job manager's and task manager's logs (for failure messages)."""
        out = []
        for log in sorted(self.log_dir.glob("*.log")):
            out.append(f"--- {log.name}\n{log.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)

    def stop(self) -> None:
        """``bin/stop-cluster.sh``; then kill what is left of this cluster's processes (by their pid files)."""
        if not self._started:
            return
        self._started = False
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._script("stop-cluster.sh", timeout=60)
        for pid_file in (self.work / "pid").glob("*.pid"):
            for line in pid_file.read_text().split():
                with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                    os.kill(int(line), signal.SIGKILL)

    def run_cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``bin/flink ARGS`` against this cluster (``-m 127.0.0.1:<rest port>`` is added)."""
        return self._script("flink", *args, timeout=timeout)

    def submit_cli(self, jar: Path, main_class: str, *args: str) -> str:
        """Submit ``jar`` detached with the CLI (``flink run -d``, ~7 s of client JVM) and return the job id.

        Raises:
            FlinkUnavailable: the CLI failed or printed no job id.
        """
        proc = self.run_cli("run", "-d", "-m", f"127.0.0.1:{self.rest_port}", "-c", main_class, str(jar), *args)
        for line in (proc.stdout + proc.stderr).splitlines():
            if "JobID" in line:
                return line.rsplit(" ", 1)[-1].strip()
        raise FlinkUnavailable(f"flink run failed (rc {proc.returncode}): {proc.stdout[-3000:]} {proc.stderr[-3000:]}")

    def upload_jar(self, jar: Path) -> str:
        """``POST /jars/upload``; returns the jar id for :meth:`run_jar`.

        Raises:
            FlinkUnavailable: the upload was refused.
        """
        with jar.open("rb") as fh:
            resp = httpx.post(
                f"{self.rest_url}/jars/upload",
                files={"jarfile": (jar.name, fh, "application/x-java-archive")},
                timeout=60,
            )
        if resp.status_code != 200:
            raise FlinkUnavailable(f"jar upload failed: HTTP {resp.status_code} {resp.text[:2000]}")
        return str(resp.json()["filename"]).rsplit("/", 1)[-1]

    def run_jar(self, jar_id: str, main_class: str, *args: str) -> str:
        """``POST /jars/<id>/run`` (the job manager builds the job graph); returns the new job id.

        Raises:
            FlinkUnavailable: the run was refused (the message carries Flink's errors).
        """
        resp = httpx.post(
            f"{self.rest_url}/jars/{jar_id}/run",
            json={"entryClass": main_class, "programArgsList": list(args)},
            timeout=120,
        )
        if resp.status_code != 200:
            raise FlinkUnavailable(f"jar run failed: HTTP {resp.status_code} {resp.text[:3000]}")
        return str(resp.json()["jobid"])

    def cancel(self, jid: str) -> None:
        """Cancel a job through the REST API (``PATCH /jobs/<jid>?mode=cancel``); unknown jobs are ignored."""
        req = urllib.request.Request(f"{self.rest_url}/jobs/{jid}?mode=cancel", method="PATCH")
        with contextlib.suppress(urllib.error.URLError, OSError):
            urllib.request.urlopen(req, timeout=5).close()

    def wait_for(self, predicate: Any, what: str, timeout_s: float = 90, interval_s: float = 1.0) -> Any:
        """Call ``predicate()`` until it returns something truthy (REST errors count as falsy).

        Raises:
            AssertionError: not within ``timeout_s`` (the message names ``what``).
        """
        deadline = time.monotonic() + timeout_s
        last_exc: Exception | None = None
        while time.monotonic() < deadline:
            try:
                value = predicate()
            except (OSError, ValueError, KeyError, IndexError) as exc:
                last_exc = exc
                value = None
            if value:
                return value
            time.sleep(interval_s)
        raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last error: {last_exc})")


def compile_job(home: Path, sources: Sequence[Path], out_dir: Path, bundled: Sequence[Path] = ()) -> Path:
    """Compile Java ``sources`` with ``javac --release 17`` against ``lib/*.jar`` and pack them into a jar.

    ``bundled`` jars (a connector, e.g. ``flink-sql-connector-kafka``) are on the compile class path and
    unpacked into the job's jar (a fat jar, as a Maven shade build would make).

    Returns:
        The jar path (``out_dir/job.jar``).

    Raises:
        FlinkUnavailable: ``javac`` or ``jar`` failed (the message carries their output).
    """
    classes = out_dir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join([*(str(p) for p in sorted((home / "lib").glob("*.jar"))), *map(str, bundled)])
    for jar_path in bundled:
        with zipfile.ZipFile(jar_path) as zf:
            keep = [n for n in zf.namelist() if n != "META-INF/MANIFEST.MF" and not n.endswith((".SF", ".RSA", ".DSA"))]
            zf.extractall(classes, keep)
    proc = subprocess.run(
        ["javac", "--release", "17", "-nowarn", "-cp", classpath, "-d", str(classes), *map(str, sources)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise FlinkUnavailable(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
    jar = out_dir / "job.jar"
    java_home = Path(shutil.which("javac") or "javac").resolve().parent
    jar_tool = java_home / "jar"
    proc = subprocess.run(
        [str(jar_tool) if jar_tool.exists() else "jar", "cf", str(jar), "-C", str(classes), "."],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise FlinkUnavailable(f"jar failed:\n{proc.stdout}\n{proc.stderr}")
    return jar


@contextlib.contextmanager
def start_cluster(work: Path, **kwargs: Any) -> Iterator[FlinkCluster]:
    """Start a cluster in ``work`` and stop it on exit (also when startup fails half-way).

    Raises:
        FlinkUnavailable: see :func:`flink_unavailable_reason` and :meth:`FlinkCluster.start`.
    """
    reason = flink_unavailable_reason()
    if reason is not None:
        raise FlinkUnavailable(reason)
    home = find_flink_home()
    assert home is not None
    cluster = FlinkCluster(home=home, work=work, **kwargs)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def cluster_fixture(tmp_root: Path) -> Iterator[FlinkCluster]:
    """The body of the session fixture ``flink_cluster`` (tests/conftest.py): one cluster for the whole run.

    Flink or a JDK missing: :func:`tests.dependencies.missing` (a skip, a failure under ``make test``).
    REST metrics refresh every second (``metrics.fetcher.update-interval``, 10 s by default) so tests wait less.
    """
    from tests.dependencies import missing

    reason = flink_unavailable_reason()
    if reason is not None:
        missing("Flink 2.3.0 with a JDK 17", reason)
    with start_cluster(tmp_root, extra_config={"metrics.fetcher.update-interval": 1000}) as cluster:
        yield cluster


#: The test job's modes (tests/flink_job/tidegauge/TestJob.java); each runs as its own job ``tg-<mode>``.
TEST_JOB_MODES = ("idle", "idle-withidleness", "idle-late", "late", "future", "failing")
TEST_JOB_SOURCE = Path(__file__).resolve().parent / "flink_job" / "tidegauge" / "TestJob.java"


def submit_test_jobs(cluster: FlinkCluster, work: Path) -> dict[str, str]:
    """Compile the test job, upload it once and run every mode of :data:`TEST_JOB_MODES`.

    Returns:
        ``mode -> job id``, after every job has left ``CREATED``/``INITIALIZING``.
    """
    jar = compile_job(cluster.home, [TEST_JOB_SOURCE], work)
    jar_id = cluster.upload_jar(jar)
    jids = {mode: cluster.run_jar(jar_id, "tidegauge.TestJob", mode) for mode in TEST_JOB_MODES}

    def started() -> bool:
        states = {j["jid"]: j["state"] for j in cluster.get_json("/jobs/overview")["jobs"]}
        return all(states.get(jid) not in (None, "CREATED", "INITIALIZING") for jid in jids.values())

    cluster.wait_for(started, "the test jobs to start")
    return jids
