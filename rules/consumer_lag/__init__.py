"""Consumer lag, in one package: Burrow's partition evaluator (:mod:`.burrow`, a pure port of LinkedIn
Burrow's ``core/internal/evaluator``) the ``consumer_lag`` rule over Kafka lag samples (:mod:`.rule`), the ``consumer_lag_seconds``
threshold (:mod:`.seconds`) and the ``rebalance_churn`` rule (:mod:`.churn`)."""

from rules.consumer_lag.burrow import (
    CommitObservation,
    LagStatus,
    PartitionLagEvaluation,
    compute_lag,
    evaluate_partition,
)
from rules.consumer_lag.churn import RULE as CHURN_RULE
from rules.consumer_lag.churn import ChurnParams, evaluate_churn
from rules.consumer_lag.rule import RULE, SEVERITY, LagParams, evaluate_lag, sample_instant
from rules.consumer_lag.seconds import RULE as SECONDS_RULE
from rules.consumer_lag.seconds import LagSecondsParams, evaluate_lag_seconds

__all__ = [
    "CHURN_RULE",
    "RULE",
    "SECONDS_RULE",
    "SEVERITY",
    "ChurnParams",
    "CommitObservation",
    "LagParams",
    "LagSecondsParams",
    "LagStatus",
    "PartitionLagEvaluation",
    "compute_lag",
    "evaluate_churn",
    "evaluate_lag",
    "evaluate_lag_seconds",
    "evaluate_partition",
    "sample_instant",
]
