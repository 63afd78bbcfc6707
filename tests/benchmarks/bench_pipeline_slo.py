"""``pipeline_slo``'s cost per evaluation: one ``Evaluator.evaluate_pipelines`` over 3 days of two Spark jobs'
batches (the ``clicks`` pipeline of tests/pipeline_seed.py, ``pipeline_freshness`` on too), the first call
(every minute judged) and the later ones (the settled minutes kept), against the same without the SLO.

    PYTHONPATH=. python -m tests.benchmarks.bench_pipeline_slo
"""

from __future__ import annotations

import time

from monitor.model import Engine, JobRef
from rules.config import RulesConfig
from rules.pipeline import parse_pipelines
from rules.registry import Evaluator
from tests.pipeline_seed import SLO_PIPELINES
from tests.rule_samples import spark


def main() -> None:
    """Print the first and the fastest later evaluation for 60 s and 10 s batches, with and without the SLO."""
    a, b = JobRef(Engine.SPARK, "qa", name="a"), JobRef(Engine.SPARK, "qb", name="b")
    without = [{k: v for k, v in SLO_PIPELINES[0].items() if k != "slo"}]
    for step_s in (60, 10):
        n = 3 * 86400 // step_s
        first = [spark(i * step_s / 60, 10, i * step_s / 60 - 1, job=a, batch=i) for i in range(n)]
        second = [spark(i * step_s / 60, 10, i * step_s / 60 - 2, job=b, batch=i) for i in range(n)]
        for config in (SLO_PIPELINES, without):
            evaluator = Evaluator(RulesConfig.model_validate({"pipeline_freshness": {"target": "5m"}}),
                                  parse_pipelines(config))
            times = []
            for _ in range(3):
                start = time.perf_counter()
                evaluator.evaluate_pipelines([first, second])
                times.append(time.perf_counter() - start)
            print(f"batches every {step_s} s ({n} per job), slo {'on' if config is SLO_PIPELINES else 'off'}: "
                  f"first {times[0]:.3f} s, then {min(times[1:]):.3f} s")


if __name__ == "__main__":
    main()
