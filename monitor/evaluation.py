"""Rule evaluation for the daemon: which findings hold *now*, and each rule's alert timing.

:func:`evaluate` is the one adapter between the daemon and the rules. Until ``rules/registry.py`` exists
it calls the batch-history detectors directly (:func:`rules.stall.detect_watermark_stalls`,
:func:`rules.future.detect_future_timestamps`) and keeps only the findings that still hold at the job's
newest batch, because the alert lifecycle needs the *current* condition on every tick (a finding present
on one tick and absent on the next resolves the alert):

* ``watermark_stall``: the flat stretch reaches the job's newest batch (a later batch with another
  watermark ended it).
* ``future_timestamp``: the job's newest batch is still ahead of its own batch time by more than ``skew``
  (event-time max or watermark); Spark's watermark never goes back, so this clears only when the query
  restarts from a checkpoint taken before the jump, as the finding advises.

Both rules compare sample times with each other (the batch's own trigger time stands in for "now"), so
they judge a recorded event log the same way as a live one; ``now`` is passed for rules that compare
with the evaluation time and stamps nothing here.

Configuration (``rules:`` in the YAML file; every key optional)::

    rules:
      watermark_stall: {for: 0s, keep_firing_for: 0s, severity: warning, min_data_batches: 3, min_rows: 1}
      future_timestamp: {for: 0s, skew: 1h, severity: critical}
      overrides: [{match: {job_name: clicks}, rule: watermark_stall, params: {min_data_batches: 5}}]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.alerts.lifecycle import RuleTiming
from monitor.config import RulesConfig
from monitor.durations import DurationError, parse_duration_ms
from monitor.errors import ConfigError
from monitor.model import Engine, Finding, JobRef, Sample, Severity
from rules.batches import progress_batches
from rules.future import RULE as FUTURE_RULE
from rules.future import FutureConfig, detect_future_timestamps
from rules.stall import RULE as STALL_RULE
from rules.stall import StallConfig, detect_watermark_stalls

__all__ = ["RULES", "JobKey", "check_rules", "evaluate", "rule_timing"]

#: Key of a job's history: engine and job id (runs of one job share its history and its alerts).
JobKey = tuple[Engine, str]

#: The rules the daemon evaluates.
RULES = (STALL_RULE, FUTURE_RULE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_STALL_DEFAULTS = StallConfig()
_FUTURE_DEFAULTS = FutureConfig()
_LIFECYCLE_KEYS = frozenset({"for", "keep_firing_for", "severity", "enabled"})
_RULE_KEYS = {
    STALL_RULE: frozenset({"min_data_batches", "min_rows"}),
    FUTURE_RULE: frozenset({"skew"}),
}


def _params(rules_config: RulesConfig, rule: str, job: JobRef | None = None) -> dict[str, Any]:
    extra = rules_config.model_extra or {}
    base = extra.get(rule) or {}
    if not isinstance(base, Mapping):
        raise ConfigError(f"rules.{rule}: expected a mapping of parameters")
    params = dict(base)
    if job is not None:
        labels = {"job_id": job.job_id, "job_name": job.name or "", "engine": job.engine.value}
        for override in rules_config.overrides:
            if override.rule == rule and all(labels.get(k) == v for k, v in override.match.items()):
                params.update(override.params)
    unknown = sorted(set(params) - _LIFECYCLE_KEYS - _RULE_KEYS.get(rule, frozenset()))
    if unknown:
        raise ConfigError(f"rules.{rule}: unknown parameter(s) {', '.join(unknown)}")
    return params


def _duration(params: Mapping[str, Any], key: str, rule: str, default: timedelta) -> timedelta:
    value = params.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConfigError(f"rules.{rule}.{key}: expected a duration like 30s, 10m, 1h")
    try:
        return timedelta(milliseconds=parse_duration_ms(value, what=f"rules.{rule}.{key}"))
    except DurationError as exc:
        raise ConfigError(str(exc)) from None


def _int(params: Mapping[str, Any], key: str, rule: str, default: int) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"rules.{rule}.{key}: expected a non-negative integer")
    return value


def rule_timing(rules_config: RulesConfig) -> Callable[[str], RuleTiming]:
    """``rule name -> RuleTiming`` from ``rules.<rule>.for`` / ``keep_firing_for`` (default 0s: fire on the
    first tick a finding holds, resolve on the first tick it does not).

    Raises:
        ConfigError: a duration is malformed (checked for every rule up front).
    """
    timings = {
        rule: RuleTiming(
            _duration(_params(rules_config, rule), "for", rule, timedelta(0)),
            _duration(_params(rules_config, rule), "keep_firing_for", rule, timedelta(0)),
        )
        for rule in RULES
    }
    return lambda rule: timings.get(rule, RuleTiming())


def _severity(params: Mapping[str, Any], rule: str, finding: Finding) -> Finding:
    text = params.get("severity")
    if text is None:
        return finding
    try:
        severity = Severity.parse(str(text))
    except ValueError as exc:
        raise ConfigError(f"rules.{rule}.severity: {exc}") from None
    return dataclasses.replace(finding, severity=severity)


def _current_stall(findings: list[Finding], newest: Sample) -> list[Finding]:
    return [f for f in findings if f.batch_id == newest.batch_id and f.observed_at == newest.observed_at][-1:]


def _current_future(findings: list[Finding], newest: Sample, skew: timedelta) -> list[Finding]:
    limit = newest.observed_at + skew
    ahead = (newest.event_time_max is not None and newest.event_time_max > limit) or (
        newest.watermark is not None and newest.watermark > limit
    )
    return findings[-1:] if ahead else []


def check_rules(rules_config: RulesConfig) -> None:
    """Validate the ``rules:`` parameters of the rules evaluated here.

    Raises:
        ConfigError: an unknown parameter, a malformed duration, count or severity (names the field).
    """
    rule_timing(rules_config)
    stall = _params(rules_config, STALL_RULE)
    _int(stall, "min_data_batches", STALL_RULE, 0)
    _int(stall, "min_rows", STALL_RULE, 0)
    _duration(_params(rules_config, FUTURE_RULE), "skew", FUTURE_RULE, timedelta(0))
    for rule in RULES:
        params = _params(rules_config, rule)
        if "severity" in params:
            _severity(params, rule, Finding(rule, Severity.INFO, JobRef(Engine.SPARK, "-"), "", _EPOCH))


def evaluate(
    rules_config: RulesConfig, samples_by_job: Mapping[JobKey, Sequence[Sample]], now: datetime
) -> list[Finding]:
    """The findings that hold at each job's newest batch (see the module docstring).

    Args:
        rules_config: the ``rules:`` section.
        samples_by_job: each job's recent samples (any order), e.g. from
            :func:`monitor.store.load_recent_samples`.
        now: the tick's time (aware UTC); these rules do not need it (see the module docstring).

    Returns:
        At most one finding per rule and job, ordered by job then rule.

    Raises:
        ConfigError: a rule parameter is malformed.
    """
    del now  # both rules judge batches against their own trigger times
    check_rules(rules_config)  # a malformed configuration fails even before any job has data
    out: list[Finding] = []
    for key in sorted(samples_by_job, key=lambda k: (k[0].value, k[1])):
        batches = progress_batches(samples_by_job[key])
        if not batches:
            continue
        newest = batches[-1]
        job = newest.job
        stall = _params(rules_config, STALL_RULE, job)
        if stall.get("enabled", True):
            config = StallConfig(
                min_data_batches=_int(stall, "min_data_batches", STALL_RULE, _STALL_DEFAULTS.min_data_batches),
                min_rows=_int(stall, "min_rows", STALL_RULE, _STALL_DEFAULTS.min_rows),
            )
            found = _current_stall(detect_watermark_stalls(config, batches), newest)
            out.extend(_severity(stall, STALL_RULE, f) for f in found)
        future = _params(rules_config, FUTURE_RULE, job)
        if future.get("enabled", True):
            skew = _duration(future, "skew", FUTURE_RULE, _FUTURE_DEFAULTS.skew)
            found = _current_future(detect_future_timestamps(FutureConfig(skew=skew), batches), newest, skew)
            out.extend(_severity(future, FUTURE_RULE, f) for f in found)
    return out
