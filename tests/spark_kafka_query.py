"""Run the PySpark driver ``tests/integration/spark_kafka_app.py`` (a Structured Streaming query reading the
test broker through Spark's Kafka source) in its own process, as a user's driver runs, for the Kafka + Spark
integration tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.spark_kafka_jars import ensure_spark_kafka_jars

__all__ = ["DRIVER", "spark_kafka_query"]

DRIVER = REPO_ROOT / "tests" / "integration" / "spark_kafka_app.py"


@contextmanager
def spark_kafka_query(bootstrap: str, topic: str, out: Path, *extra_args: str) -> Iterator[str]:
    """Start the driver on ``topic`` writing under ``out`` (``progress.jsonl``, ``driver.log``); yields the
    spark-sql-kafka version once the query runs (at most 240 s); on exit asks it to stop (``out/stop``) and
    waits for it (kills it after 60 s). ``extra_args``: the driver's optional arguments."""
    import pyspark

    version, jars = ensure_spark_kafka_jars(pyspark.__version__)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    log = (out / "driver.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), bootstrap, topic, str(out), ",".join(map(str, jars)), *extra_args],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 240
        while not (out / "started").exists():
            assert proc.poll() is None, (out / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Spark query did not start"
            time.sleep(0.5)
        yield version
    finally:
        (out / "stop").write_text("")
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
