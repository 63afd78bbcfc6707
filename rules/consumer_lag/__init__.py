"""Consumer lag, in one package: Burrow's partition evaluator (:mod:`.burrow`, a pure port of LinkedIn
Burrow's ``core/internal/evaluator``) and the ``consumer_lag`` rule over Kafka lag samples (:mod:`.rule`)."""

from rules.consumer_lag.burrow import (
    CommitObservation,
    LagStatus,
    PartitionLagEvaluation,
    compute_lag,
    evaluate_partition,
)
from rules.consumer_lag.rule import RULE, SEVERITY, LagParams, evaluate_lag

__all__ = [
    "RULE",
    "SEVERITY",
    "CommitObservation",
    "LagParams",
    "LagStatus",
    "PartitionLagEvaluation",
    "compute_lag",
    "evaluate_lag",
    "evaluate_partition",
]
