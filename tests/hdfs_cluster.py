"""A real HDFS for tests: Apache Hadoop's ``MiniDFSCluster`` (a NameNode and a DataNode in one JVM) on loopback.

Fixture (registered in ``tests/conftest.py``): ``hdfs_cluster`` (session scope) yields a :class:`HdfsCluster`
whose :attr:`~HdfsCluster.url` is ``hdfs://127.0.0.1:PORT`` (the NameNode's RPC port, for Spark's
``spark.eventLog.dir``) and :attr:`~HdfsCluster.webhdfs_url` ``webhdfs://127.0.0.1:HTTP_PORT`` (the
NameNode's HTTP port, where WebHDFS answers; tidegauge reads HDFS through it). Nothing needs installing by
hand beyond Java 17 and Maven (``.ci/system-deps.sh``):

1. **Jars**: ``tests/hdfs/pom.xml`` names ``org.apache.hadoop:hadoop-client-minicluster`` at the version of
   the Hadoop client PySpark bundles (``pyspark/jars/hadoop-client-api-<version>.jar``: 3.5.0 for PySpark
   4.3.0), so the cluster speaks exactly the protocol Spark's event-log writer speaks; plus JUnit 5's API
   (the shaded jar leaves it out, but ``MiniDFSCluster`` calls it) and ``slf4j-simple``.
   ``mvn dependency:copy-dependencies`` copies them (104 MB) into ``~/.cache/tidegauge/hadoop/<version>/lib``
   once per machine (:mod:`tests.maven_jars`).
2. **Start**: ``java -cp 'lib/*' org.apache.hadoop.test.MiniDFSClusterManager -format -nnport P -httpport H``
   (Hadoop's own command-line front end of ``MiniDFSCluster``, shipped in the minicluster jar), one DataNode,
   data under a temporary directory (``-Dtest.build.data``). ``MiniDFSCluster`` binds every server to
   127.0.0.1. WebHDFS is on by default (``dfs.webhdfs.enabled``); permissions are checked
   (``dfs.permissions.enabled``), the JVM's user (root in CI) is the superuser.
3. **Ready**: when ``-writeDetails`` has written its JSON and WebHDFS answers ``LISTSTATUS /`` (about 15 s
   on the shared 2-core box).
4. **Stop**: SIGTERM, SIGKILL after 30 s; :meth:`HdfsCluster.restart` starts it again on the same ports and
   data (no ``-format``): the tests stop the NameNode to see what a reader says while it is down.

When Java, Maven or PySpark (for the version) is missing the tests skip under a bare ``pytest`` and fail under
``make test`` (:func:`tests.dependencies.missing`).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.dependencies import missing
from tests.kafka_broker import free_port
from tests.maven_jars import MavenUnavailable, cache_root, copy_dependencies

__all__ = ["HdfsCluster", "HdfsUnavailable", "ensure_hadoop_jars", "hadoop_version", "hdfs_cluster", "start_hdfs"]

POM = Path(__file__).resolve().parent / "hdfs" / "pom.xml"
MAIN_CLASS = "org.apache.hadoop.test.MiniDFSClusterManager"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0


class HdfsUnavailable(RuntimeError):
    """Java, Maven or PySpark's Hadoop client is missing, or the jars did not resolve."""


def hadoop_version() -> str:
    """The version of the Hadoop client PySpark bundles (``pyspark/jars/hadoop-client-api-<v>.jar``).

    Raises:
        HdfsUnavailable: PySpark is not installed or ships no ``hadoop-client-api`` jar.
    """
    try:
        import pyspark
    except ImportError as exc:
        raise HdfsUnavailable("PySpark is not installed (the dev extra installs it)") from exc
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not jars:
        raise HdfsUnavailable(f"no hadoop-client-api-*.jar in {Path(pyspark.__file__).parent / 'jars'}")
    return jars[-1].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def ensure_hadoop_jars(version: str) -> Path:
    """The directory holding ``hadoop-client-minicluster`` ``version`` and what it needs (Maven Central).

    Raises:
        HdfsUnavailable: ``mvn`` is missing or the resolution failed.
    """
    try:
        return copy_dependencies(
            POM,
            cache_root() / "hadoop" / version / "lib",
            f"hadoop-client-minicluster-{version}.jar",
            {"hadoop.version": version},
        )
    except MavenUnavailable as exc:
        raise HdfsUnavailable(str(exc)) from exc


@dataclass
class HdfsCluster:
    """A running ``MiniDFSCluster``: one NameNode and one DataNode on 127.0.0.1.

    Attributes:
        lib: the jar directory.
        base_dir: temporary directory (data, logs); removed by :meth:`stop`.
        rpc_port: the NameNode's RPC port (``hdfs://127.0.0.1:rpc_port``).
        http_port: the NameNode's HTTP port (WebHDFS: ``http://127.0.0.1:http_port/webhdfs/v1``).
        startup_seconds: wall time of the last start (for reports; never asserted).
    """

    lib: Path
    base_dir: Path
    rpc_port: int
    http_port: int
    process: subprocess.Popen[bytes] | None = None
    startup_seconds: float = 0.0
    _removed: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        """``hdfs://127.0.0.1:<rpc port>`` (no trailing slash)."""
        return f"hdfs://127.0.0.1:{self.rpc_port}"

    @property
    def webhdfs_url(self) -> str:
        """``webhdfs://127.0.0.1:<http port>`` (no trailing slash)."""
        return f"webhdfs://127.0.0.1:{self.http_port}"

    @property
    def log_file(self) -> Path:
        """Where the JVM's output goes (appended across restarts)."""
        return self.base_dir / "minicluster.log"

    def rest(self, path: str, op: str, method: str = "GET", **params: str) -> bytes:
        """One WebHDFS request as the superuser (set-up only: tests read through tidegauge), following the
        NameNode's redirect to the DataNode; returns the body.

        Raises:
            urllib.error.URLError: not reachable, or a non-2xx status (``HTTPError``).
        """
        query = "&".join([f"op={op}", "user.name=root", *(f"{k}={v}" for k, v in params.items())])
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/webhdfs/v1{path}?{query}", method=method
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body: bytes = response.read()
        return body

    def put(self, path: str, data: bytes) -> None:
        """Create (or overwrite) ``path`` with ``data`` (parents are created)."""
        query = "op=CREATE&overwrite=true&user.name=root"
        url = f"http://127.0.0.1:{self.http_port}/webhdfs/v1{path}?{query}"
        request = urllib.request.Request(url, method="PUT")
        try:
            with urllib.request.urlopen(request, timeout=30):
                location = None
        except urllib.error.HTTPError as exc:  # 307 to the DataNode: urllib does not follow PUT redirects
            if exc.code != 307:
                raise
            location = exc.headers["Location"]
        if location is None:
            raise RuntimeError(f"WebHDFS CREATE {path}: no redirect to a DataNode")
        upload = urllib.request.Request(location, data=data, method="PUT")
        with urllib.request.urlopen(upload, timeout=60):
            pass

    def upload_tree(self, local: Path, remote: str) -> list[str]:
        """Copy every file under ``local`` to ``remote`` (an absolute HDFS path), keeping the layout.

        Returns:
            The HDFS paths written, sorted.
        """
        written = []
        for file in sorted(p for p in local.rglob("*") if p.is_file()):
            target = f"{remote.rstrip('/')}/{file.relative_to(local).as_posix()}"
            self.put(target, file.read_bytes())
            written.append(target)
        return written

    def start(self, *, fmt: bool = True) -> None:
        """Start the JVM (``fmt``: format a new file system; else reuse the data of the last run) and wait
        until WebHDFS answers.

        Raises:
            RuntimeError: the JVM exited or did not answer within ``START_TIMEOUT_S`` (the log's tail is in
                the message).
        """
        started = time.monotonic()
        details = self.base_dir / "details.json"
        details.unlink(missing_ok=True)
        out = self.log_file.open("ab")
        self.process = subprocess.Popen(
            ["java", "-Xmx512m", "-Xms64m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             f"-Dtest.build.data={self.base_dir / 'data'}", "-cp", f"{self.lib}/*", MAIN_CLASS,
             *(["-format"] if fmt else []), "-nnport", str(self.rpc_port), "-httpport", str(self.http_port),
             "-writeDetails", str(details)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=self.base_dir,
        )
        out.close()
        while time.monotonic() - started < START_TIMEOUT_S:
            if self.process.poll() is not None:
                raise RuntimeError(f"MiniDFSCluster exited with {self.process.returncode}:\n{self.tail()}")
            if details.is_file() and details.stat().st_size:
                try:
                    json.loads(self.rest("/", "LISTSTATUS"))
                except (OSError, ValueError):
                    pass
                else:
                    self.startup_seconds = time.monotonic() - started
                    return
            time.sleep(0.25)
        raise RuntimeError(f"MiniDFSCluster did not answer within {START_TIMEOUT_S:.0f}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the JVM's output."""
        if not self.log_file.is_file():
            return ""
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """Stop the JVM (SIGTERM, SIGKILL after ``STOP_TIMEOUT_S``) and keep the data (see :meth:`restart`)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def restart(self) -> None:
        """Start again after :meth:`kill` on the same ports with the same data."""
        self.start(fmt=False)

    def stop(self) -> None:
        """Stop the JVM and remove the data. Idempotent."""
        self.kill()
        if not self._removed:
            self._removed = True
            shutil.rmtree(self.base_dir, ignore_errors=True)


def start_hdfs() -> HdfsCluster:
    """Resolve the jars and start a cluster (see the module docstring).

    Raises:
        HdfsUnavailable: Java, Maven or PySpark missing, or the jars did not resolve.
        RuntimeError: the cluster did not start.
    """
    if shutil.which("java") is None:
        raise HdfsUnavailable("java is not installed: .ci/system-deps.sh installs openjdk-17-jre-headless")
    lib = ensure_hadoop_jars(hadoop_version())
    cluster = HdfsCluster(lib, Path(tempfile.mkdtemp(prefix="tidegauge-hdfs-")), free_port(), free_port())
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def hdfs_cluster() -> Iterator[HdfsCluster]:
    """One real MiniDFSCluster for the whole test session (see the module docstring)."""
    try:
        cluster = start_hdfs()
    except HdfsUnavailable as exc:
        missing("a MiniDFSCluster (Java 17, Maven, PySpark's Hadoop version)", str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()
