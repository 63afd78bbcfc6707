"""Fixtures of the differential tests: one local SparkSession for the whole test session."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The process-wide local[2] SparkSession of ``spark_runner`` (stopped at the end of the run)."""
    from tests.differential.spark_runner import get_spark_session, stop_spark_session

    with warnings.catch_warnings():
        # Importing pyspark.sql runs pyspark.testing.utils.require_minimum_pandas_version(), which
        # warns (FutureWarning) that pandas >= 3 is not fully supported; the harness uses no pandas.
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        session = get_spark_session()
    yield session
    stop_spark_session()
