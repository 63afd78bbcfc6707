"""A real Apache Kafka broker for tests: single-node KRaft, jars from Maven Central, one per test session.

Fixture (registered in ``tests/conftest.py``): ``kafka_broker`` (session scope) yields a
:class:`KafkaBroker` whose ``bootstrap`` is ``127.0.0.1:PORT``. Everything is done here, nothing needs to
be installed by hand beyond Java 17 and Maven (``.ci/system-deps.sh``):

1. **Jars**: ``tests/kafka/pom.xml`` names ``org.apache.kafka:kafka_2.13:4.4.0`` and
   ``org.apache.logging.log4j:log4j-slf4j-impl`` (so the broker logs through log4j2);
   ``mvn dependency:copy-dependencies`` copies the ~45 jars (43 MB) into
   ``~/.cache/tidegauge/kafka/4.4.0/lib`` (``TIDEGAUGE_KAFKA_CACHE`` overrides the root) once per
   machine; later runs reuse them. A half-finished download never counts: jars go to a temporary
   directory that is renamed into place.
2. **Storage**: ``kafka.tools.StorageTool random-uuid`` (stderr discarded: SLF4J warnings would otherwise
   end up inside the cluster id), then ``StorageTool format -t ID -c server.properties --standalone``.
3. **Broker**: ``java -Xmx512m -cp 'lib/*' kafka.Kafka server.properties`` with
   ``process.roles=broker,controller``, a PLAINTEXT client listener, a SASL_PLAINTEXT one (mechanism
   PLAIN, one user: :data:`SASL_USER`) and a controller listener on free 127.0.0.1 ports,
   replication factor and min ISR 1 for the internal topics, ``group.initial.rebalance.delay.ms=0``
   (consumers join at once), and a 1 s log-retention check interval (the retention tests delete
   records with ``delete_records`` instead of waiting for it anyway).
4. **Ready**: when an AdminClient lists the cluster's topics (about 5 s on an idle machine; up to
   ``START_TIMEOUT_S`` on a loaded one).
5. **Stop**: SIGTERM (a controlled shutdown, about 3 s), SIGKILL after 60 s; the data directory goes.

When Java or Maven is missing the tests skip under a bare ``pytest`` and fail under ``make test``
(:func:`tests.dependencies.missing`).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.dependencies import missing
from tests.maven_jars import MavenUnavailable, copy_dependencies

__all__ = ["KAFKA_VERSION", "KafkaBroker", "KafkaUnavailable", "ensure_kafka_jars", "kafka_broker"]

KAFKA_VERSION = "4.4.0"
#: The SASL/PLAIN user of the broker's SASL_PLAINTEXT listener (test credentials, loopback only).
SASL_USER = "tidegauge"
SASL_PASSWORD = "tg-test-password-0123"
POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
"""


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or the jars could not be resolved."""


def cache_root() -> Path:
    """Where the broker jars are cached: ``$TIDEGAUGE_KAFKA_CACHE`` or ``~/.cache/tidegauge/kafka``."""
    env = os.environ.get("TIDEGAUGE_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "tidegauge" / "kafka"


def ensure_kafka_jars(root: Path | None = None) -> Path:
    """The directory holding the broker's jars, resolved from Maven Central on first use.

    Raises:
        KafkaUnavailable: ``mvn`` is not installed or the resolution failed (its output is included).
    """
    try:
        return copy_dependencies(POM, (root or cache_root()) / KAFKA_VERSION / "lib", f"kafka_2.13-{KAFKA_VERSION}.jar")
    except MavenUnavailable as exc:
        raise KafkaUnavailable(str(exc)) from exc


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class KafkaBroker:
    """A running single-node KRaft broker.

    Attributes:
        lib: the jar directory.
        base_dir: temporary directory (config, data, log); removed by :meth:`stop`.
        port: client (PLAINTEXT) port on 127.0.0.1; ``bootstrap`` is ``127.0.0.1:port``.
        controller_port: the KRaft controller port.
        startup_seconds: wall time from format to ready (for reports; never asserted).
    """

    lib: Path
    base_dir: Path
    port: int
    controller_port: int
    sasl_port: int = 0
    process: subprocess.Popen[bytes] | None = None
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT listener (mechanism PLAIN, user :data:`SASL_USER`, password
        :data:`SASL_PASSWORD`)."""
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "server.log"

    def java(self, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        """Run a Kafka main class on the broker's class path (``StorageTool`` etc.)."""
        return subprocess.run(  # type: ignore[call-overload,no-any-return]
            ["java", "-cp", f"{self.lib}/*", *args], text=True, check=True, timeout=300, **kw
        )

    def properties(self) -> str:
        listeners = (
            f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}"
        )
        return "\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"listeners={listeners}",
            f"advertised.listeners={listeners}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{SASL_USER}="{SASL_PASSWORD}";',
            f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
            f"log.dirs={self.base_dir / 'data'}",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=2",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "num.partitions=1",
            "log.retention.check.interval.ms=1000",
            "auto.create.topics.enable=false",
            "",
        ])

    def start(self) -> None:
        """Format the storage, start the broker and wait until an AdminClient sees it.

        Raises:
            RuntimeError: the broker exited or did not answer within ``START_TIMEOUT_S`` (the log's tail
                is in the message).
        """
        started = time.monotonic()
        props = self.base_dir / "server.properties"
        props.write_text(self.properties())
        log4j = self.base_dir / "log4j2.properties"
        log4j.write_text(_LOG4J2.format(log=self.log_file))
        cluster_id = self.java(
            "kafka.tools.StorageTool", "random-uuid", capture_output=True, stdin=subprocess.DEVNULL
        ).stdout.strip().splitlines()[-1].strip()
        self.java(
            f"-Dlog4j2.configurationFile={log4j}", "kafka.tools.StorageTool", "format", "-t", cluster_id,
            "-c", str(props), "--standalone", capture_output=True,
        )
        out = (self.base_dir / "stdout.log").open("wb")
        self.process = subprocess.Popen(
            ["java", "-Xmx512m", "-Xms128m", f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{self.lib}/*",
             "kafka.Kafka", str(props)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        out.close()
        self._wait_ready(started)
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, started: float) -> None:
        from confluent_kafka.admin import AdminClient

        assert self.process is not None
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet_logger()})
        while time.monotonic() - started < START_TIMEOUT_S:
            if self.process.poll() is not None:
                raise RuntimeError(f"Kafka broker exited with {self.process.returncode}:\n{self.tail()}")
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    return
            except Exception:
                time.sleep(0.5)
                continue
        raise RuntimeError(f"Kafka broker did not answer within {START_TIMEOUT_S:.0f}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        text = ""
        for f in (self.base_dir / "stdout.log", self.log_file):
            if f.is_file():
                text += "\n".join(f.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def stop(self) -> None:
        """SIGTERM, wait, SIGKILL if needed; remove the directory. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.base_dir, ignore_errors=True)


def quiet_logger() -> logging.Logger:
    """A logger for librdkafka clients that drops everything (connection refusals while starting)."""
    log = logging.getLogger("tests.kafka_broker.librdkafka")
    log.propagate = False
    log.setLevel(logging.CRITICAL + 1)
    return log


def start_kafka() -> KafkaBroker:
    """Resolve the jars and start a broker (see the module docstring).

    Raises:
        KafkaUnavailable: Java or Maven missing, or the jars could not be resolved.
        RuntimeError: the broker did not start.
    """
    if shutil.which("java") is None:
        raise KafkaUnavailable("java is not installed: .ci/system-deps.sh installs openjdk-17-jre-headless")
    lib = ensure_kafka_jars()
    broker = KafkaBroker(
        lib, Path(tempfile.mkdtemp(prefix="tidegauge-kafka-")), free_port(), free_port(), sasl_port=free_port()
    )
    try:
        broker.start()
    except BaseException:
        broker.stop()
        raise
    return broker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """One real Kafka broker for the whole test session (see the module docstring)."""
    try:
        broker = start_kafka()
    except KafkaUnavailable as exc:
        missing("an Apache Kafka broker (Java 17, Maven)", str(exc))
    try:
        yield broker
    finally:
        broker.stop()
