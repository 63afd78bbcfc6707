"""No-data batches decided by the data's arrival (issue 17), engine vs real PySpark 4.3.0: a CI sample of
:mod:`tests.differential.arrival` (``make differential-arrival N=...`` runs more).

Steps are written in groups and read one file per trigger, so at some triggers data waits (Spark runs no
no-data batch) and at others not; the engine decides from ``arrival_time``. The sample's seeds are ones where
the caught-up reading (a no-data batch after every batch that moved the watermark) gives other batches, so
the comparison fails if the engine ignored the arrival times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.differential.arrival import CI_SEEDS, generate_arrival, run_spark
from tests.differential.compare import compare, render, spark_views

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_no_data_batches_follow_arrival_as_in_spark(spark: SparkSession, seed: int) -> None:
    from tests.differential.engine_adapter import engine_views

    case = generate_arrival(seed)
    ours = spark_views(run_spark(spark, case), case.scenario)
    theirs = engine_views(case.scenario, case.arrival_ms_of_step())
    differences = compare(ours, theirs)
    assert not differences, f"\n{case.describe()}\n\n{render(ours, theirs, differences)}"
    # the seed exercises the decision: read as caught up (no arrival times) the engine would disagree
    assert compare(ours, engine_views(case.scenario)), "seed does not depend on arrival"
