"""Fixtures of the differential tests: one local SparkSession shared by all of them."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def _spark_lifecycle() -> Iterator[None]:
    """Stops the shared session at the end of the test run."""
    yield
    from tests.differential.spark_runner import stop_spark_session

    stop_spark_session()


@pytest.fixture
def spark(_spark_lifecycle: None) -> SparkSession:
    """The process-wide local[2] SparkSession of ``spark_runner`` (created on first use, re-created if
    another test stopped it: ``getOrCreate`` elsewhere in the process returns this same session)."""
    from tests.differential.spark_runner import get_spark_session

    with warnings.catch_warnings():
        # Importing pyspark.sql runs pyspark.testing.utils.require_minimum_pandas_version(), which
        # warns (FutureWarning) that pandas >= 3 is not fully supported; the harness uses no pandas.
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        return get_spark_session()
