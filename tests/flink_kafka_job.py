"""The Flink Kafka test job (``tests/flink_job/tidegauge/KafkaCulpritJob.java``): Flink's Kafka connector
from Maven Central (``tests/flink_kafka/pom.xml``: ``org.apache.flink:flink-sql-connector-kafka``, the shaded
build, cached under ``~/.cache/tidegauge/flink-sql-connector-kafka/<version>/lib``) bundled into the job's jar.
"""

from __future__ import annotations

from pathlib import Path

from tests.flink_cluster import FlinkCluster, compile_job
from tests.maven_jars import MavenUnavailable, cache_root, copy_dependencies

__all__ = ["CONNECTOR_VERSION", "KAFKA_JOB_CLASS", "SPLITS_JOB_CLASS", "connector_jar", "submit_kafka_job"]

CONNECTOR_VERSION = "5.0.0-2.2"
KAFKA_JOB_CLASS = "tidegauge.KafkaCulpritJob"
#: ``tests/flink_job/tidegauge/KafkaSplitsJob.java``: four partitions on two source subtasks (tests/flink_split_record.py)
SPLITS_JOB_CLASS = "tidegauge.KafkaSplitsJob"
_HERE = Path(__file__).resolve().parent
_POM = _HERE / "flink_kafka" / "pom.xml"


def connector_jar() -> Path:
    """``flink-sql-connector-kafka-<version>.jar`` (resolved by Maven on first use).

    Raises:
        tests.maven_jars.MavenUnavailable: ``mvn`` is missing or Maven Central did not serve it.
    """
    name = f"flink-sql-connector-kafka-{CONNECTOR_VERSION}.jar"
    lib = cache_root() / "flink-sql-connector-kafka" / CONNECTOR_VERSION / "lib"
    return copy_dependencies(_POM, lib, name, {"connector.version": CONNECTOR_VERSION}) / name


def submit_kafka_job(
    cluster: FlinkCluster, work: Path, bootstrap: str, topic: str, *args: str, main_class: str = KAFKA_JOB_CLASS
) -> str:
    """Compile the Kafka job ``main_class`` (``tests/flink_job/tidegauge/<class>.java``) with the connector
    bundled, upload and run it on ``cluster`` with ``bootstrap topic *args``; its job id.

    Maven or the connector missing: :func:`tests.dependencies.missing` (a skip, a failure under ``make test``).
    """
    from tests.dependencies import missing

    try:
        connector = connector_jar()
    except MavenUnavailable as exc:
        missing(f"Flink's Kafka connector {CONNECTOR_VERSION} (Maven Central)", str(exc))
    source = _HERE / "flink_job" / Path(*main_class.split(".")).with_suffix(".java")
    jar = compile_job(cluster.home, [source], work, bundled=[connector])
    return cluster.run_jar(cluster.upload_jar(jar), main_class, bootstrap, topic, *args)
