"""Job facts: what every surface shows about a job over a period, computed in one place.

:func:`job_facts` turns one job's samples (and its alerts and runs) into a :class:`JobFacts` of plain
frozen dataclasses: the watermark / event-time max / processing-time series, input rows per input, rows
dropped and the batch or row whose watermark dropped them, state rows and bytes with a projection that is
never negative, lag per partition with Burrow's status, which input / partition / subtask holds the
minimum, restarts, the inferred delay, freshness on the data's own clock, and health.
:mod:`monitor.facts.source` reads them from the store (``load_job_facts``, ``load_period_facts``, and
``settings_from_rules`` for the targets); it is imported on its own so that reading facts never imports
the store. The dashboard, the reports and
the ``check`` outputs read these; none computes a fact of its own.

Layer: a core service (it may import the store, the rules and the shared core; nothing imports it but
the reports, the commands, the daemon and the dashboard's data-access module).
"""

from monitor.facts.compute import (
    LAG_STATUS_ORDER,
    cause_indices,
    drop_facts,
    freshness_facts,
    group_status,
    job_facts,
    job_health,
    partition_status,
    slo_facts,
    slo_text,
    state_facts,
    waiting_text,
)
from monitor.facts.model import (
    BatchPoint,
    DropCause,
    DropFacts,
    FactsSettings,
    FreshnessFacts,
    HealthFacts,
    HoldingMin,
    JobFacts,
    LagStatus,
    PartitionLagFacts,
    ScopePoint,
    ScopeSeries,
    SloFacts,
    StateFacts,
)

__all__ = [
    "LAG_STATUS_ORDER",
    "BatchPoint",
    "DropCause",
    "DropFacts",
    "FactsSettings",
    "FreshnessFacts",
    "HealthFacts",
    "HoldingMin",
    "JobFacts",
    "LagStatus",
    "PartitionLagFacts",
    "ScopePoint",
    "ScopeSeries",
    "SloFacts",
    "StateFacts",
    "cause_indices",
    "drop_facts",
    "freshness_facts",
    "group_status",
    "job_facts",
    "job_health",
    "partition_status",
    "slo_facts",
    "slo_text",
    "state_facts",
    "waiting_text",
]
