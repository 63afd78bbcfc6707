"""``consumer_lag_seconds``: a threshold on consumer lag measured as time.

Burrow deliberately gives no thresholds (its statuses judge the *trend* of a commit window); users still
ask "page me when a group is more than 5 minutes behind", which is what kafka-lag-exporter's
``kafka_consumergroup_group_max_lag_seconds`` alerts do. This rule reads the group's newest job-scope
Kafka sample (``lag_seconds``: the largest partition lag in seconds of that poll,
:mod:`collectors.kafka`) and, where no partition has an estimate, the partitions' lower bounds
(``extra["lag_seconds_min"]``: the record is older than the oldest sample of the log-end offset, so the
lag is *at least* that — known to be above the threshold without extrapolating a number). Unknown lag
is never a finding. Off without a ``threshold`` (no default suits every group).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from monitor.model import Engine, Finding, Sample, Severity
from monitor.timefmt import format_duration
from rules.common import scope_name
from rules.history import JobHistory
from rules.params import Duration, RuleParams

__all__ = ["RULE", "LagSecondsParams", "evaluate_lag_seconds"]

RULE = "consumer_lag_seconds"


class LagSecondsParams(RuleParams):
    """``consumer_lag_seconds`` parameters.

    Attributes:
        threshold: lag in seconds above which the group is reported (``WARNING``); ``None``: off.
        critical: lag above which the finding is ``CRITICAL`` (optional, above ``threshold``).
    """

    threshold: Duration | None = None
    critical: Duration | None = None

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """Only the newest poll is read."""
        return timedelta(0), timedelta(0)


def _newest_partitions(history: JobHistory, at: datetime) -> list[Sample]:
    return [
        samples[-1]
        for scope, samples in history.series.items()
        if scope.partition is not None and samples and samples[-1].observed_at == at
    ]


def evaluate_lag_seconds(params: LagSecondsParams, history: JobHistory, now: datetime) -> list[Finding]:
    """The group's ``consumer_lag_seconds`` finding, if its newest lag in seconds (or a known lower bound)
    is above ``threshold``: one finding per group naming the partitions furthest behind."""
    if params.threshold is None or history.engine is not Engine.KAFKA or not history.batches:
        return []
    newest = history.batches[-1]
    parts = _newest_partitions(history, newest.observed_at)
    exact = [(p.lag_seconds, p) for p in parts if p.lag_seconds is not None]
    bounds = [(float(p.extra["lag_seconds_min"]), p) for p in parts if p.lag_seconds is None
              and isinstance(p.extra.get("lag_seconds_min"), int | float)]
    lag = newest.lag_seconds
    at_least = False
    if lag is None and exact:
        lag = max(v for v, _ in exact)
    if bounds and (lag is None or max(v for v, _ in bounds) > lag):
        lag = max(v for v, _ in bounds)
        at_least = True
    limit = params.threshold.total_seconds()
    if lag is None or lag <= limit:
        return []
    worst = sorted(exact + bounds, key=lambda x: -x[0])[:3]
    names = ", ".join(
        f"{scope_name(p.scope)} {format_duration(timedelta(seconds=v))}"
        + (" or more" if p.lag_seconds is None else "")
        + (f" ({p.lag_offsets} records)" if p.lag_offsets is not None else "")
        for v, p in worst
    )
    severity = Severity.WARNING
    if params.critical is not None and lag > params.critical.total_seconds():
        severity = Severity.CRITICAL
    qualifier = "at least " if at_least else ""
    return [
        Finding(
            rule=RULE,
            severity=severity,
            job=history.job,
            message=(
                f"consumer group {history.job.name or history.job.job_id} is {qualifier}"
                f"{format_duration(timedelta(seconds=lag))} behind (threshold {format_duration(params.threshold)})"
                + (f"; furthest behind: {names}" if names else "")
                + ". Add consumer instances (up to the partition count) or make processing faster; "
                "check its consumer_lag status for a stalled or stopped consumer."
            ),
            observed_at=now,
            details={"lag_seconds": lag, "at_least": at_least, "threshold_seconds": limit},
        )
    ]
