"""Prometheus alerting rules over tidegauge's exported metrics (``tidegauge promrules``).

Large fleets can alert from Prometheus itself: these rules express, in PromQL over the metrics of
:mod:`monitor.metrics.exporter`, the detectors that PromQL can express. What PromQL cannot express stays in
tidegauge's own rules: the *cause* of a stall (which input holds the min watermark), Burrow's full
consumer-lag status over commit windows, late-row attribution to a future-dated batch.

Rule file format: Prometheus ``rule_files`` (``groups: [{name, rules: [{alert, expr, for, labels,
annotations}]}]``), checked by ``promtool check rules``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from monitor.durations import format_duration_ms
from rules.slo import BURN_WINDOWS, format_objective

__all__ = ["SLO_BAD_MINUTE", "PromRulesParams", "render_rules", "rule_groups", "slo_rules"]

_BY = "engine, job_id, job_name, source, partition, subtask, operator"
_UNIX_1971 = 31_536_000  # 1971-01-01T00:00:00Z: event times before it while data flows = unit mismatch
_UNIX_2200 = 7_258_118_400  # 2200-01-01T00:00:00Z


@dataclass(frozen=True, slots=True)
class PromRulesParams:
    """Thresholds of the generated rules (durations in ms, as everywhere in config).

    Attributes:
        stall_for_ms: watermark flat for this long while rows arrive -> stall.
        future_skew_ms: event time or watermark ahead of now by more than this -> future timestamp.
        late_drop_share: dropped / input rows over ``late_window_ms`` above this -> late-drop surge.
        late_window_ms: window of the late-drop ratio.
        state_growth_window_ms: window over which state must have grown and never shrunk.
        state_growth_ratio: state rows now / state rows a window ago above this (and never below the
            starting level within the window) -> state growth. Saw-tooth (evicting) state dips below its
            starting level and does not fire.
        freshness_target_ms: processing time minus watermark above this -> freshness SLO breach.
        idle_for_ms: a source/subtask idle for this long -> idle source.
        lag_window_ms: consumer lag rising over this window (and above 1) -> lag growth.
        lag_seconds_threshold_ms: a consumer group's lag in seconds (its furthest-behind partition, the
            job-scope ``tidegauge_consumer_lag_seconds`` series) above this -> lag threshold, as the
            ``consumer_lag_seconds`` rule.
        target_down_for_ms: a target failing polls this long -> target down.
        for_ms: the ``for`` clause of the level-based rules.
    """

    stall_for_ms: int = 10 * 60_000
    future_skew_ms: int = 3_600_000
    late_drop_share: float = 0.01
    late_window_ms: int = 10 * 60_000
    state_growth_window_ms: int = 3_600_000
    state_growth_ratio: float = 1.5
    freshness_target_ms: int = 15 * 60_000
    idle_for_ms: int = 5 * 60_000
    lag_window_ms: int = 15 * 60_000
    lag_seconds_threshold_ms: int = 5 * 60_000
    target_down_for_ms: int = 5 * 60_000
    for_ms: int = 60_000
    slo_freshness_ms: int | None = None
    """The freshness SLO's target (``None``: no SLO rules); see :func:`slo_rules`."""
    slo_objective: float = 0.995
    slo_window_ms: int = 28 * 86_400_000


def _rule(
    alert: str, expr: str, for_ms: int, severity: str, summary: str, description: str
) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": " ".join(expr.split()),
        "for": format_duration_ms(for_ms),
        "labels": {"severity": severity, "alert_source": "tidegauge"},
        "annotations": {"summary": summary, "description": description},
    }


def rule_groups(p: PromRulesParams) -> dict[str, Any]:
    """The rule file as a Python structure (``{"groups": [...]}``)."""
    d = format_duration_ms
    stall = d(p.stall_for_ms)
    late_w = d(p.late_window_ms)
    grow_w = d(p.state_growth_window_ms)
    lag_w = d(p.lag_window_ms)
    rules = [
        _rule(
            "TidegaugeWatermarkStall",
            f"""changes(tidegauge_watermark_timestamp_seconds[{stall}]) == 0
                and on({_BY}) increase(tidegauge_input_rows_total[{stall}]) > 0""",
            p.for_ms,
            "warning",
            "Watermark of {{ $labels.job_name }} ({{ $labels.job_id }}) flat while rows arrive",
            f"The watermark has not moved for {stall} while input rows kept arriving: windows are not closing. "
            "Check for an input or partition without data holding the min watermark (tidegauge names it).",
        ),
        _rule(
            "TidegaugeFutureTimestamp",
            f"""(tidegauge_event_time_max_timestamp_seconds - time()) > {p.future_skew_ms / 1000:g}
                or (tidegauge_watermark_timestamp_seconds - time()) > {p.future_skew_ms / 1000:g}""",
            0,
            "critical",
            "Event time of {{ $labels.job_name }} ({{ $labels.job_id }}) is in the future",
            f"Event time or watermark is more than {d(p.future_skew_ms)} ahead of now: one mis-dated row moves the "
            "watermark and every honest row after it is dropped as late. Filter rows with event_time > now + skew "
            "before the watermark.",
        ),
        _rule(
            "TidegaugeEventTimeUnitMismatch",
            f"""(tidegauge_event_time_max_timestamp_seconds < {_UNIX_1971}
                 or tidegauge_event_time_max_timestamp_seconds > {_UNIX_2200})
                and on({_BY}) increase(tidegauge_input_rows_total[{late_w}]) > 0""",
            p.for_ms,
            "warning",
            "Event times of {{ $labels.job_name }} look like the wrong unit",
            "Event time before 1971 or after 2200 while data flows: seconds read as milliseconds or the reverse.",
        ),
        _rule(
            "TidegaugeLateDropSurge",
            f"""increase(tidegauge_dropped_by_watermark_rows_total[{late_w}])
                / on({_BY}) (increase(tidegauge_input_rows_total[{late_w}]) > 0) > {p.late_drop_share:g}""",
            0,
            "warning",
            "{{ $labels.job_name }} drops late rows",
            f"More than {p.late_drop_share:.2%} of input rows over {late_w} were dropped as later than the watermark. "
            "Raise the delay threshold or look for a future-dated row that moved the watermark.",
        ),
        _rule(
            "TidegaugeStateGrowth",
            f"""tidegauge_state_rows > {p.state_growth_ratio:g} * (tidegauge_state_rows offset {grow_w})
                and on({_BY}) min_over_time(tidegauge_state_rows[{grow_w}]) >= (tidegauge_state_rows offset {grow_w})""",
            p.for_ms,
            "warning",
            "State of {{ $labels.job_name }} keeps growing",
            f"State rows grew more than {p.state_growth_ratio:g}x in {grow_w} and never shrank: nothing is evicted. "
            "Typical cause: dropDuplicates without the event-time column in the key, or no watermark.",
        ),
        _rule(
            "TidegaugeFreshness",
            f"tidegauge_watermark_lag_seconds > {p.freshness_target_ms / 1000:g}",
            p.for_ms,
            "warning",
            "Watermark of {{ $labels.job_name }} is behind processing time",
            f"Processing time minus watermark exceeds {d(p.freshness_target_ms)}.",
        ),
        _rule(
            "TidegaugeSourceIdle",
            f"tidegauge_source_idle_seconds > {p.idle_for_ms / 1000:g}",
            0,
            "warning",
            "Source {{ $labels.source }} subtask {{ $labels.subtask }} of {{ $labels.job_name }} is idle",
            f"No data for more than {d(p.idle_for_ms)}. If it holds the min watermark, set an idleness timeout "
            "(Flink WatermarkStrategy.withIdleness) or the max watermark policy (Spark).",
        ),
        _rule(
            "TidegaugeConsumerLagGrowing",
            f"""deriv(tidegauge_consumer_lag_offsets[{lag_w}]) > 0
                and on({_BY}) min_over_time(tidegauge_consumer_lag_offsets[{lag_w}]) > 1""",
            p.for_ms,
            "warning",
            "Consumer lag of {{ $labels.job_id }} is growing",
            f"Lag rose over {lag_w} and never reached 0 or 1 (a residual lag of 1 after transactional writes is "
            "normal). The consumer is slower than the producers.",
        ),
        _rule(
            "TidegaugeConsumerLagSeconds",
            f"""tidegauge_consumer_lag_seconds{{engine="kafka", source="", partition=""}}
                > {p.lag_seconds_threshold_ms / 1000:g}""",
            p.for_ms,
            "warning",
            "Consumer group {{ $labels.job_name }} is more than "
            f"{d(p.lag_seconds_threshold_ms)} behind",
            f"The group's furthest-behind partition is more than {d(p.lag_seconds_threshold_ms)} behind the "
            "producers (lag in seconds). Add consumer instances or make processing faster; tidegauge's "
            "consumer_lag status tells a stalled or stopped consumer from a slow one.",
        ),
        _rule(
            "TidegaugeTargetDown",
            "tidegauge_target_up == 0",
            p.target_down_for_ms,
            "critical",
            "tidegauge cannot reach {{ $labels.target }}",
            "Polls of this target fail; its jobs are not being watched.",
        ),
    ]
    groups: list[dict[str, Any]] = [{"name": "tidegauge", "rules": rules}]
    if p.slo_freshness_ms is not None:
        groups.append({"name": "tidegauge_freshness_slo", "interval": "1m", "rules": slo_rules(p)})
    return {"groups": groups}


#: The recorded per-minute SLI: 1 when the job was stale at the evaluation, 0 when fresh.
SLO_BAD_MINUTE = "tidegauge:freshness_slo_bad_minute"


def slo_rules(p: PromRulesParams) -> list[dict[str, Any]]:
    """The freshness SLO as PromQL, the ``freshness_slo`` rule's (:mod:`rules.slo`) semantics: a recording
    rule evaluated each minute (the group's ``interval: 1m``) gives 1 for a stale minute (the job's largest
    ``tidegauge_watermark_lag_seconds`` — the smallest watermark of its scopes — or a Kafka group's
    ``tidegauge_consumer_lag_seconds`` above the target), 0 for a fresh one; ``avg_over_time`` of it is the
    error ratio of a window, over ``1 - objective`` its burn rate. The alerts are the SRE workbook's table
    (:data:`rules.slo.BURN_WINDOWS`): ``TidegaugeFreshnessSloPage`` (critical) when 1h and 5m burn above
    14.4x or 6h and 30m above 6x, ``TidegaugeFreshnessSloTicket`` (warning) when 3d and 6h burn above 1x.

    Prometheus 2.x range selectors include both ends, so a window of ``w`` holds ``w/1m + 1`` minutes
    (tidegauge's holds ``w/1m``); alert times can differ by a minute at the edges.
    """
    assert p.slo_freshness_ms is not None
    target_s = p.slo_freshness_ms / 1000
    budget = 1 - p.slo_objective
    d = format_duration_ms
    by = "engine, job_id, job_name"
    bad = (
        f"max by ({by}) (tidegauge_watermark_lag_seconds) > bool {target_s:g} "
        f'or max by ({by}) (tidegauge_consumer_lag_seconds{{engine="kafka", source="", partition=""}}) '
        f"> bool {target_s:g}"
    )
    target, slo, window = d(p.slo_freshness_ms), format_objective(p.slo_objective), d(p.slo_window_ms)

    def burn(long: str, short: str, factor: float) -> str:
        return (
            f"avg_over_time({SLO_BAD_MINUTE}[{long}]) / {budget:g} > {factor:g} "
            f"and avg_over_time({SLO_BAD_MINUTE}[{short}]) / {budget:g} > {factor:g}"
        )

    def span(ms: float) -> str:
        return d(int(ms))

    rows = {alert: [r for r in BURN_WINDOWS if r.alert == alert] for alert in ("page", "ticket")}
    out: list[dict[str, Any]] = [{"record": SLO_BAD_MINUTE, "expr": bad}]
    for alert, name, severity, meaning in (
        ("page", "TidegaugeFreshnessSloPage", "critical", "at this rate the error budget is gone within days"),
        ("ticket", "TidegaugeFreshnessSloTicket", "warning",
         "a slow leak that spends the whole budget before the window ends; fix it in working hours"),
    ):  # fmt: skip
        chosen = rows[alert]
        windows = " or ".join(
            f"{span(r.long.total_seconds() * 1000)} and {span(r.short.total_seconds() * 1000)} above {r.factor:g}x"
            for r in chosen
        )
        expr = " or ".join(
            f"({burn(span(r.long.total_seconds() * 1000), span(r.short.total_seconds() * 1000), r.factor)})"
            for r in chosen
        )
        out.append(
            _rule(
                name,
                expr,
                0,
                severity,
                "Freshness SLO of {{ $labels.job_name }} ({{ $labels.job_id }}) burns its error budget "
                '{{ $value | printf "%.1f" }}x too fast',
                f"Minutes with the watermark (a Kafka group: its lag) more than {target} behind spend the error "
                f"budget of the {slo} objective over {window} "
                '{{ $value | printf "%.1f" }}x as fast as it lasts '
                f"({windows}): {meaning}. tidegauge's freshness_slo finding gives the budget left; its "
                "freshness, watermark_stall and consumer_lag findings say why the job is behind.",
            )
        )
    return out


def render_rules(p: PromRulesParams) -> str:
    """The rule file as YAML text."""
    return yaml.safe_dump(rule_groups(p), sort_keys=False, width=1000)
