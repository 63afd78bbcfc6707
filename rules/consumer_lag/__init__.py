"""Consumer lag, in one package: Burrow's partition evaluator (:mod:`.burrow`, a pure port of LinkedIn
Burrow's ``core/internal/evaluator``) the ``consumer_lag`` rule over Kafka lag samples (:mod:`.rule`) and the ``consumer_lag_seconds``
threshold (:mod:`.seconds`)."""

from rules.consumer_lag.burrow import (
    CommitObservation,
    LagStatus,
    PartitionLagEvaluation,
    compute_lag,
    evaluate_partition,
)
from rules.consumer_lag.rule import RULE, SEVERITY, LagParams, evaluate_lag
from rules.consumer_lag.seconds import RULE as SECONDS_RULE
from rules.consumer_lag.seconds import LagSecondsParams, evaluate_lag_seconds

__all__ = [
    "RULE",
    "SECONDS_RULE",
    "SEVERITY",
    "CommitObservation",
    "LagParams",
    "LagSecondsParams",
    "LagStatus",
    "PartitionLagEvaluation",
    "compute_lag",
    "evaluate_lag",
    "evaluate_lag_seconds",
    "evaluate_partition",
]
