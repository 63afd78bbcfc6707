"""Spark's Kafka source jars for the PySpark end-to-end test, from Maven Central, cached per machine.

``org.apache.spark:spark-sql-kafka-0-10_2.13`` of the installed PySpark version is resolved with
``tests/kafka/spark-sql-kafka-pom.xml`` and ``mvn dependency:copy-dependencies`` (only the four jars PySpark
does not ship: the source, the token provider, ``kafka-clients`` and ``commons-pool2``) into
``~/.cache/tidegauge/spark-sql-kafka/<version>/lib`` (``TIDEGAUGE_KAFKA_CACHE``'s parent overrides
``~/.cache/tidegauge``) and handed to Spark as ``spark.jars``. When Maven Central has no release of the
installed version yet (PySpark 4.3.0 is on PyPI before ``spark-sql-kafka`` 4.3.0 is on Maven Central), the
newest earlier release in :data:`FALLBACK_VERSIONS` that resolves is used, and the test says which.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["FALLBACK_VERSIONS", "ensure_spark_kafka_jars"]

POM = Path(__file__).resolve().parent / "kafka" / "spark-sql-kafka-pom.xml"
#: Tried in order after the installed version (newest first).
FALLBACK_VERSIONS = ("4.2.0", "4.1.1", "4.0.1")
_ARTIFACTS = "spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2"


def _root() -> Path:
    env = os.environ.get("TIDEGAUGE_KAFKA_CACHE")
    return (Path(env).parent if env else Path.home() / ".cache" / "tidegauge") / "spark-sql-kafka"


_MISSING = "NOT-ON-MAVEN-CENTRAL"
_RETRY_MISSING_S = 86_400.0


def _resolve(version: str, lib: Path) -> bool:
    if any(lib.glob(f"spark-sql-kafka-0-10_2.13-{version}.jar")):
        return True
    marker = lib.parent / _MISSING
    if marker.is_file() and time.time() - marker.stat().st_mtime < _RETRY_MISSING_S:
        return False  # tried within the day: do not ask Maven Central again on every run
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn (Maven) is not installed: .ci/system-deps.sh installs it")
    lib.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="lib-", dir=lib.parent))
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", f"-Dspark.version={version}",
         f"-DoutputDirectory={tmp}", "-DincludeScope=runtime", f"-DincludeArtifactIds={_ARTIFACTS}"],
        capture_output=True, text=True, timeout=900, check=False,
    )
    if proc.returncode != 0 or not any(tmp.glob("spark-sql-kafka-*.jar")):
        shutil.rmtree(tmp, ignore_errors=True)
        if "Could not find artifact" in proc.stdout + proc.stderr or "was not found" in proc.stdout + proc.stderr:
            marker.write_text(f"spark-sql-kafka {version} was not found on Maven Central\n")
        return False
    try:
        tmp.rename(lib)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


def ensure_spark_kafka_jars(spark_version: str) -> tuple[str, list[Path]]:
    """``(version used, jar paths)`` for Spark's Kafka source matching ``spark_version`` if Maven Central has
    it, else the newest fallback that resolves.

    Raises:
        RuntimeError: Maven is missing or no candidate version resolved.
    """
    for version in (spark_version, *[v for v in FALLBACK_VERSIONS if v != spark_version]):
        lib = _root() / version / "lib"
        if _resolve(version, lib):
            return version, sorted(lib.glob("*.jar"))
    raise RuntimeError(f"spark-sql-kafka for Spark {spark_version} (or {', '.join(FALLBACK_VERSIONS)}) did not resolve")
