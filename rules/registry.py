"""The rule registry: the one entry point the daemon calls each tick, and the config validator.

:func:`evaluate` takes the ``rules:`` section of the config, every job's recent sample history and the
tick's ``now``, and returns the findings whose condition holds *now*; the alert lifecycle
(:mod:`monitor.alerts.lifecycle`) turns their presence and absence into pending/firing/resolved. Rules are
pure functions of (parameters, history, now) in the style of Prometheus's rule manager and Burrow's
evaluator: no clock, no I/O.

Configuration (every key optional; each rule's keys are documented on its parameter class)::

    rules:
      watermark_stall: {for: 10m, min_rows: 1, min_data_batches: 3, delay: 10m}
      future_timestamp: {skew: 1h, jump_factor: 50, min_jump: 1h, jump_window: 15m}
      event_time_units: {}
      idle_source: {for: 5m}
      split_watermark: {skew: 5m}
      state_growth: {window: 30m, metric: rows, limit_rows: 10000000, critical_within: 1h}
      join_state_unbounded: {window: 30m}
      late_drop_surge: {window: 10m, max_share: 0.01, min_dropped: 1}
      late_rows_dropped: {min_dropped: 1}
      consumer_lag: {window_samples: 10, allowed_lag: 0, never_committed_after: 5m}
      consumer_lag_seconds: {threshold: 5m, critical: 30m}
      rebalance_churn: {max_rebalances: 3, window: 15m}
      falling_behind: {trigger_interval: 30s, batches: 3, backpressure_ratio: 0.5, for: 1m}
      freshness: {target: 15m}
      freshness_slo: {freshness: 5m, objective: 99.5%, window: 28d}
      target_health: {restart_window: 15m, error_window: 2m, min_errors: 2}
      checkpoint_failures: {window: 15m, min_failures: 1}
      no_progress: {for: 5m, intervals: 10}
      batch_running: {for: 5m, durations: 10}
      pipeline_freshness: {target: 5m}
      pipeline_slo: {}          # on for each pipelines: entry with an slo: (rules.pipeline_slo)
      overrides:
        - {match: {job_name: clicks}, rule: watermark_stall, params: {for: 30m}}

Every rule also takes ``enabled``, ``severity``, ``for`` and ``keep_firing_for`` (see
:mod:`rules.params`). Overrides apply in order to jobs whose ``job_id``/``job_name``/``engine`` equal every
``match`` value; their params are merged over the rule's base params and validated the same way.

``pipeline_freshness`` and ``pipeline_slo`` are judged over every job at once (the pipeline graph,
:mod:`rules.pipeline`, with the configuration's ``pipelines:`` section given to :class:`Evaluator`), once per
tick, never per job; they take no overrides. ``pipeline_slo`` is set per pipeline by ``pipelines[].slo``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from monitor.errors import ConfigError
from monitor.model import CollectorError, Finding, JobRef, RuleTiming, Sample, SampleKind, Severity
from rules import (
    behind,
    checkpoints,
    consumer_lag,
    freshness,
    future,
    health,
    idle,
    join_state,
    late,
    pipeline,
    pipeline_slo,
    progress,
    running,
    slo,
    splits,
    stall,
    state_growth,
)
from rules.config import RulesConfig
from rules.history import JobHistory, RollingHistory, job_history
from rules.params import RuleParams, parse_params
from rules.pipeline import PipelineConfig, PipelineParams

__all__ = [
    "RULES",
    "Evaluator",
    "RuleSpec",
    "evaluate",
    "finding_order",
    "history_window",
    "is_terminated",
    "rule_timing",
    "validate",
    "whole_window",
]

_MATCH_KEYS = frozenset({"job_id", "job_name", "engine"})


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One rule: its name, parameter schema, evaluation function and whether it consumes ``for`` itself.

    ``evaluate(params, history, now)`` returns the findings holding at ``now`` for one job.
    """

    name: str
    params: type[RuleParams]
    evaluate: Callable[[Any, JobHistory, datetime], list[Finding]]
    consumes_for: bool = False
    whole_window: bool = False
    """``True`` for a rule whose answer changes when it sees less than its whole window
    (``freshness_slo``: a 3-day burn judged on 1 hour is another alert): the daemon keeps that much of each
    job's history even beyond its memory cap (:func:`whole_window`), so that it alerts as ``scan`` does."""
    clock: bool = False
    """``True`` for a rule judged at the evaluation tick's ``now`` (processing time: ``no_progress``) rather
    than at each batch's own time; the daemon runs it once per tick, ``scan`` never (a recorded log has no
    "now")."""
    jobs: bool = False
    """``True`` for a rule judged over every job's history at once (``pipeline_freshness``): never run per
    job, only by :meth:`Evaluator.evaluate_pipelines` (its ``evaluate`` is unused)."""


#: Every rule the daemon evaluates, by name.
RULES: dict[str, RuleSpec] = {
    spec.name: spec
    for spec in (
        RuleSpec(stall.RULE, stall.StallParams, stall.evaluate_stall, consumes_for=True),
        RuleSpec(future.RULE, future.FutureParams, future.evaluate_future),
        RuleSpec(future.UNITS_RULE, future.UnitsParams, future.evaluate_units),
        RuleSpec(idle.RULE, idle.IdleParams, idle.evaluate_idle, consumes_for=True),
        RuleSpec(splits.RULE, splits.SplitParams, splits.evaluate_splits),
        RuleSpec(state_growth.RULE, state_growth.StateGrowthParams, state_growth.evaluate_state_growth),
        RuleSpec(join_state.RULE, join_state.JoinStateParams, join_state.evaluate_join_state),
        RuleSpec(late.SURGE_RULE, late.LateSurgeParams, late.evaluate_late_surge),
        RuleSpec(late.RULE, late.LateTotalParams, late.evaluate_late_total),
        RuleSpec(consumer_lag.RULE, consumer_lag.LagParams, consumer_lag.evaluate_lag),
        RuleSpec(consumer_lag.SECONDS_RULE, consumer_lag.LagSecondsParams, consumer_lag.evaluate_lag_seconds),
        RuleSpec(consumer_lag.CHURN_RULE, consumer_lag.ChurnParams, consumer_lag.evaluate_churn),
        RuleSpec(behind.RULE, behind.BehindParams, behind.evaluate_behind, consumes_for=True),
        RuleSpec(freshness.RULE, freshness.FreshnessParams, freshness.evaluate_freshness),
        RuleSpec(slo.RULE, slo.SloParams, slo.evaluate_slo, whole_window=True),
        RuleSpec(health.RULE, health.HealthParams, health.evaluate_health),
        RuleSpec(checkpoints.RULE, checkpoints.CheckpointParams, checkpoints.evaluate_checkpoints),
        RuleSpec(progress.RULE, progress.NoProgressParams, progress.evaluate_no_progress, clock=True),
        RuleSpec(running.RULE, running.BatchRunningParams, running.evaluate_batch_running, clock=True),
        RuleSpec(pipeline.RULE, pipeline.PipelineParams, lambda *_: [], clock=True, jobs=True),
        RuleSpec(pipeline_slo.RULE, RuleParams, lambda *_: [], clock=True, jobs=True),
    )
}


@dataclass(frozen=True, slots=True)
class _Compiled:
    base: dict[str, dict[str, Any]]
    defaults: dict[str, RuleParams]
    overrides: tuple[tuple[int, dict[str, str], str, dict[str, Any]], ...]


def _compile(rules_config: RulesConfig) -> _Compiled:
    """Validate every rule's parameters and every override; all problems are reported together."""
    extra = dict(rules_config.model_extra or {})
    problems: list[str] = []
    unknown = sorted(set(extra) - set(RULES))
    names = ", ".join(sorted(RULES))
    problems.extend(f"rules.{name}: unknown rule (rules are: {names})" for name in unknown)
    base: dict[str, dict[str, Any]] = {}
    defaults: dict[str, RuleParams] = {}
    for name, spec in RULES.items():
        data = extra.get(name)
        try:
            defaults[name] = parse_params(spec.params, data, f"rules.{name}")
        except ConfigError as exc:
            problems.append(str(exc))
        base[name] = dict(data) if isinstance(data, Mapping) else {}
    overrides: list[tuple[int, dict[str, str], str, dict[str, Any]]] = []
    for i, override in enumerate(rules_config.overrides):
        where = f"rules.overrides[{i}]"
        if override.rule not in RULES:
            problems.append(f"{where}.rule: unknown rule {override.rule!r} (rules are: {names})")
            continue
        bad = sorted(set(override.match) - _MATCH_KEYS)
        if bad:
            problems.append(f"{where}.match.{bad[0]}: unknown key (match on job_id, job_name, engine)")
            continue
        if RULES[override.rule].jobs:
            problems.append(f"{where}.rule: {override.rule} is judged over whole pipelines, not per job: "
                            f"set rules.{override.rule} instead of an override")
            continue
        merged = {**base[override.rule], **override.params}
        try:
            parse_params(RULES[override.rule].params, merged, f"rules.{override.rule}")
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        overrides.append((i, dict(override.match), override.rule, dict(override.params)))
    if problems:
        raise ConfigError("\n".join(dict.fromkeys(problems)))
    return _Compiled(base, defaults, tuple(overrides))


def validate(rules_config: RulesConfig) -> None:
    """Check every rule's parameters and every override (``tidegauge config check``).

    Raises:
        ConfigError: an unknown rule name (``rules.<name>``), an unknown or invalid parameter
            (``rules.<name>.<param>: ...``), or an override naming an unknown rule or match key.
    """
    _compile(rules_config)


def history_window(rules_config: RulesConfig) -> timedelta:
    """How much of a job's history (before its newest sample) any enabled rule reads, over the defaults
    and every override: the daemon keeps only this much in memory.

    Raises:
        ConfigError: as :func:`validate`.
    """
    return _window(_compile(rules_config))


def whole_window(rules_config: RulesConfig) -> timedelta:
    """The longest history an enabled ``whole_window`` rule reads (over the defaults and every override),
    ``0`` when none is enabled: the daemon keeps at least this much of each job's samples in memory.

    Raises:
        ConfigError: as :func:`validate`.
    """
    compiled = _compile(rules_config)
    ids = tuple(o[0] for o in compiled.overrides)
    combos = [(), ids, *((i,) for i in ids)]
    needs = [
        max(params.history_needed())
        for combo in combos
        for spec, params in _resolve(compiled, combo).rules
        if spec.whole_window
    ]
    return max(needs, default=timedelta(0))


def _window(compiled: _Compiled) -> timedelta:
    ids = tuple(o[0] for o in compiled.overrides)
    combos = [(), ids, *((i,) for i in ids)]
    return max(_resolve(compiled, combo).lookback for combo in combos)


def rule_timing(rules_config: RulesConfig) -> Callable[[str], RuleTiming]:
    """``rule name -> lifecycle timing``: ``keep_firing_for`` as configured; ``for`` as configured, except
    for rules that measure ``for`` on the sample history themselves (``watermark_stall``, ``idle_source``,
    ``falling_behind``), whose findings already held that long: their lifecycle ``for`` is 0. Timing is
    per rule: an override's ``for``/``keep_firing_for`` changes the rule's condition where the rule
    consumes ``for``, never the lifecycle timing.

    Raises:
        ConfigError: as :func:`validate`.
    """
    return _timing(_compile(rules_config))


def _timing(compiled: _Compiled) -> Callable[[str], RuleTiming]:
    timings: dict[str, RuleTiming] = {}
    for name, params in compiled.defaults.items():
        pending = timedelta(0) if RULES[name].consumes_for or params.for_ is None else params.for_
        timings[name] = RuleTiming(pending, params.keep_firing_for)
    return lambda rule: timings.get(rule, RuleTiming())


_K = TypeVar("_K", bound=Hashable)
_MIN_LOOKBACK = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class _Resolved:
    """The enabled rules with their parameters for one combination of matching overrides."""

    rules: tuple[tuple[RuleSpec, RuleParams], ...]
    lookback: timedelta
    series_lookback: timedelta
    batch_rules: tuple[tuple[RuleSpec, RuleParams], ...] = ()
    """The ``rules`` judged at batch time (not ``clock``), in the same order."""
    clock_rules: tuple[tuple[RuleSpec, RuleParams], ...] = ()
    """The ``clock`` rules of ``rules``, in the same order."""


def _resolve(compiled: _Compiled, matched: tuple[int, ...]) -> _Resolved:
    rules: list[tuple[RuleSpec, RuleParams]] = []
    for name, spec in RULES.items():
        mine = [o for o in compiled.overrides if o[0] in matched and o[2] == name]
        params = compiled.defaults[name]
        if mine:
            merged = dict(compiled.base[name])
            for o in mine:
                merged.update(o[3])
            params = parse_params(spec.params, merged, f"rules.{name}")
        if params.enabled and not spec.jobs:
            rules.append((spec, params))
    needs = [params.history_needed() for _, params in rules]
    series = max((n[1] for n in needs), default=_MIN_LOOKBACK)
    batches = max((n[0] for n in needs), default=_MIN_LOOKBACK)
    # a floor: rules that count batches (``min_data_batches``) need more than the newest instant even
    # when configured with ``for: 0s``
    series, batches = max(series, _MIN_LOOKBACK), max(batches, _MIN_LOOKBACK)
    return _Resolved(
        tuple(rules),
        max(batches, series),
        series,
        tuple(r for r in rules if not r[0].clock),
        tuple(r for r in rules if r[0].clock),
    )


def _matches(match: Mapping[str, str], job: JobRef) -> bool:
    labels = {"job_id": job.job_id, "job_name": job.name, "engine": job.engine.value}
    return all(labels.get(key) == value for key, value in match.items())


def _with_severity(findings: list[Finding], params: RuleParams) -> list[Finding]:
    override = params.severity_override()
    if override is None:
        return findings
    return [dataclasses.replace(f, severity=override) for f in findings]


def is_terminated(history: JobHistory) -> bool:
    """Whether the job terminated (Spark ``QueryTerminatedEvent``) after its newest batch: no batch came
    since (a restart's ``QueryStartedEvent`` alone is not progress; a batch start, Spark 4.2+'s
    ``QueryExecutionStartEvent``, is). A terminated job's conditions no
    longer hold (its alerts resolve, reason "terminated"), except its failure (``target_health``
    ``check=failed``)."""
    newest_batch = history.batches[-1].observed_at if history.batches else None
    for sample in reversed(history.lifecycle):
        if newest_batch is not None and sample.observed_at < newest_batch:
            return False
        if sample.kind is SampleKind.TERMINATED:
            return True
        if sample.kind is SampleKind.BATCH_STARTED:
            return False  # (Spark 4.2+ QueryExecutionStartEvent) a batch started since: the query runs
    return False


class Evaluator:
    """The rules of one ``rules:`` section, validated once, evaluated any number of times.

    :func:`evaluate` (the daemon's and tests' one-call form) and :func:`rules.replay.replay` (``scan``
    and the daemon's batch-by-batch catch-up) both go through it: it is the only place findings are made.

    Raises:
        ConfigError: invalid rule configuration (see :func:`validate`), from the constructor.
    """

    def __init__(self, rules_config: RulesConfig, pipelines: Sequence[PipelineConfig] = ()) -> None:
        self._compiled = _compile(rules_config)
        self._pipelines = tuple(pipelines)
        self._slo_state: dict[str, pipeline_slo.SloState] = {}
        self._resolved: dict[tuple[int, ...], _Resolved] = {}
        self._timings = _timing(self._compiled)

    def resolved(self, job: JobRef) -> _Resolved:
        """The enabled rules and history windows for ``job`` (its matching overrides applied)."""
        overrides = self._compiled.overrides
        matched = tuple(o[0] for o in overrides if _matches(o[1], job)) if overrides else ()
        found = self._resolved.get(matched)
        if found is None:
            found = self._resolved[matched] = _resolve(self._compiled, matched)
        return found

    def timing(self, rule: str) -> RuleTiming:
        """The rule's lifecycle timing (as :func:`rule_timing`)."""
        return self._timings(rule)

    def history_window(self) -> timedelta:
        """As :func:`history_window`: the longest history any enabled rule reads (the daemon's default
        history horizon)."""
        return _window(self._compiled)

    def lookback(self, job: JobRef) -> timedelta:
        """How far back from a job's newest sample its rules read."""
        return self.resolved(job).lookback

    def evaluate_job(
        self, samples: Sequence[Sample], now: datetime, *, clock: bool | None = False
    ) -> list[Finding]:
        """The findings of ONE job's samples at ``now``.

        Args:
            samples: the job's samples up to ``now``, oldest first.
            now: the evaluation time: a batch's own time (replay) or the tick's (``clock`` rules).
            clock: ``False``: the rules judged at batch time; ``True``: only the ``clock`` rules
                (``no_progress``); ``None``: every rule.
        """
        if not samples:
            return []
        resolved = self.resolved(samples[-1].job)
        hist = job_history(samples, resolved.lookback, resolved.series_lookback)
        if hist is None:
            return []
        return self.evaluate_history(hist, now, clock=clock)

    def rolling(self, job: JobRef) -> RollingHistory:
        """An empty :class:`RollingHistory` with ``job``'s windows (for :func:`rules.replay.replay`)."""
        resolved = self.resolved(job)
        return RollingHistory(resolved.lookback, resolved.series_lookback)

    def evaluate_history(
        self, hist: JobHistory, now: datetime, *, clock: bool | None = False
    ) -> list[Finding]:
        """As :meth:`evaluate_job`, on a job's history already split (and windowed)."""
        resolved = self.resolved(hist.job)
        rules = resolved.rules if clock is None else resolved.clock_rules if clock else resolved.batch_rules
        if is_terminated(hist):
            rules = tuple(rule for rule in rules if rule[0].name == health.RULE)
        out: list[Finding] = []
        for spec, params in rules:
            found = spec.evaluate(params, hist, now)
            if found:  # (most rules find nothing at most instants)
                out.extend(_with_severity(found, params))
        return out

    def pipeline_window(self) -> timedelta:
        """The history the pipeline SLOs read (:func:`rules.pipeline_slo.history_window`; ``0`` when none is
        configured or ``rules.pipeline_slo`` is disabled): the daemon keeps at least this much in memory."""
        if not self._compiled.defaults[pipeline_slo.RULE].enabled:
            return timedelta(0)
        return pipeline_slo.history_window(self._pipelines)

    def evaluate_pipelines(self, histories: Iterable[Sequence[Sample]]) -> list[Finding]:
        """``pipeline_freshness``'s and ``pipeline_slo``'s findings over every job's samples (each sequence
        one job's, oldest first), each pipeline judged on its own data's clock (:mod:`rules.pipeline`,
        :mod:`rules.pipeline_slo`); ``[]`` when ``pipeline_freshness`` has no ``target`` and no configured
        pipeline has an ``slo``. Calls are expected in time order (the daemon's ticks): each pipeline SLO's
        settled minutes are kept between them (:class:`rules.pipeline_slo.SloState`); an earlier time starts
        them over."""
        params = self._compiled.defaults[pipeline.RULE]
        slo_params = self._compiled.defaults[pipeline_slo.RULE]
        assert isinstance(params, PipelineParams)
        fresh = params.enabled and params.target is not None
        slos = pipeline_slo.slo_configs(self._pipelines) if slo_params.enabled else {}
        if not fresh and not slos:
            return []
        window = self.pipeline_window()
        hists = [
            h for samples in histories if samples
            and (h := job_history(samples, max(self.lookback(samples[-1].job), window),
                                  max(self.resolved(samples[-1].job).series_lookback, window))) is not None
        ]  # fmt: skip
        graph, by_key = pipeline.pipeline_graph(self._pipelines, hists)
        out: list[Finding] = []
        for p in graph:
            if fresh:
                found = pipeline.pipeline_findings(params, p, by_key)
                # ``severity`` is the entry's: the jobs downstream stay INFO (they only pass the delay on)
                out += _with_severity([f for f in found if f.severity is not Severity.INFO], params)
                out += [f for f in found if f.severity is Severity.INFO]
            slo = slos.get(p.name) if p.configured else None
            if slo is not None:
                found = pipeline_slo.evaluate_pipeline_slo(slo, p, by_key, self._slo_state)
                out += _with_severity(found, slo_params)
        return out

    def evaluate_targets(self, errors: Sequence[CollectorError], now: datetime) -> list[Finding]:
        """``target_health``'s unreachable-target findings from recent collector errors at ``now``."""
        params = self._compiled.defaults[health.RULE]
        if not errors or not params.enabled:
            return []
        assert isinstance(params, health.HealthParams)
        return _with_severity(health.evaluate_targets(params, errors, now), params)


def finding_order(finding: Finding) -> tuple[str, str, str, tuple[tuple[str, str], ...]]:
    """Sort key of findings: job (engine, job id), then rule, then scope."""
    return (
        finding.job.engine.value,
        finding.job.job_id,
        finding.rule,
        tuple(sorted(finding.scope.labels().items())),
    )


def evaluate(
    rules_config: RulesConfig | Evaluator,
    history: Mapping[_K, Sequence[Sample]],
    now: datetime,
    errors: Sequence[CollectorError] | None = None,
) -> list[Finding]:
    """The findings that hold at ``now`` for every job and rule (every rule, ``clock`` ones included).

    Args:
        rules_config: the ``rules:`` section (validated here; see :func:`validate`), or an
            :class:`Evaluator` built from it.
        history: each job's recent samples, keyed by anything (a :class:`JobRef`, or the daemon's
            ``(engine, job_id)``); each sequence is one job's samples, oldest first preferred (unsorted
            input is sorted). The job named in findings is the one of its newest sample.
        now: the evaluation time (aware UTC); rules compare with it, never with a clock.
        errors: recent collector errors, for ``target_health``'s unreachable-target check.

    Returns:
        Findings ordered by job (engine, job id), then rule, then scope; a finding's identity is its rule
        plus labels (:meth:`Finding.fingerprint`), stable from tick to tick.

    Raises:
        ConfigError: invalid rule configuration (see :func:`validate`).
    """
    evaluator = rules_config if isinstance(rules_config, Evaluator) else Evaluator(rules_config)
    out: list[Finding] = []
    for samples in history.values():
        out.extend(evaluator.evaluate_job(samples, now, clock=None))
    out.extend(evaluator.evaluate_targets(errors or (), now))
    out.extend(evaluator.evaluate_pipelines(history.values()))
    out.sort(key=finding_order)
    return out
