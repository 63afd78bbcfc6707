"""``tidegauge promrules``: write Prometheus alerting rules over tidegauge's exported metrics."""

from __future__ import annotations

from pathlib import Path

import typer

from monitor.durations import parse_duration_ms
from monitor.errors import InputError
from monitor.metrics.promrules import PromRulesParams, render_rules
from rules.slo import parse_objective


def _ms(value: str, option: str) -> int:
    ms = parse_duration_ms(value, what=option)
    if ms <= 0:
        raise InputError(f"{option}: must be above 0 (PromQL range selectors need a positive duration)")
    return ms


def _check_share(value: float) -> float:
    """``--late-drop-share``: a share of input rows in (0, 1]; raises :class:`InputError` otherwise."""
    if not 0 < value <= 1:
        raise InputError(f"--late-drop-share: {value} is not a share in (0, 1] (e.g. 0.01 for 1%)")
    return value


def _check_ratio(value: float) -> float:
    """``--state-growth-ratio``: a growth factor above 1; raises :class:`InputError` otherwise."""
    if not value > 1:
        raise InputError(f"--state-growth-ratio: {value} must be greater than 1 (e.g. 1.5 for +50%)")
    return value


def _check_objective(value: str) -> float:
    """``--slo-objective``: a percentage such as ``99.5%``; raises :class:`InputError` otherwise."""
    try:
        return parse_objective(value)
    except ValueError as exc:
        raise InputError(f"--slo-objective: {exc}") from None


def _write(output: Path, text: str) -> None:
    """Write the rule file; an unwritable path is an :class:`InputError` naming the file."""
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--output {output}: cannot write: {exc.strerror or exc}") from None


def register(app: typer.Typer) -> None:
    """Add the ``promrules`` command to ``app``."""

    @app.command("promrules")
    def promrules(
        output: Path | None = typer.Option(
            None, "--output", "-o", help="Write to this file instead of stdout."
        ),
        stall_for: str = typer.Option("10m", help="Watermark flat this long while rows arrive."),
        future_skew: str = typer.Option("1h", help="Event time ahead of now by more than this."),
        late_drop_share: float = typer.Option(0.01, help="Dropped/input rows share that fires."),
        freshness_target: str = typer.Option("15m", help="Processing time minus watermark target."),
        idle_for: str = typer.Option("5m", help="Source idle this long."),
        state_growth_ratio: float = typer.Option(1.5, help="State growth factor over the window."),
        state_growth_window: str = typer.Option("1h", help="Window of the state-growth rule."),
        lag_seconds_threshold: str = typer.Option("5m", help="Consumer group lag in seconds that fires."),
        slo_freshness: str | None = typer.Option(
            None, help="Freshness SLO target (e.g. 5m): adds the SLO's multiwindow burn-rate alerts."
        ),
        slo_objective: str = typer.Option("99.5%", help="Share of minutes the SLO promises fresh."),
        slo_window: str = typer.Option("28d", help="The SLO's period (its error budget's)."),
    ) -> None:
        """Print (or write) a Prometheus rule file for the detectors PromQL can express.

        Load it with Prometheus's ``rule_files``; validate with ``promtool check rules``.
        """
        params = PromRulesParams(
            stall_for_ms=_ms(stall_for, "--stall-for"),
            future_skew_ms=_ms(future_skew, "--future-skew"),
            late_drop_share=_check_share(late_drop_share),
            freshness_target_ms=_ms(freshness_target, "--freshness-target"),
            idle_for_ms=_ms(idle_for, "--idle-for"),
            state_growth_ratio=_check_ratio(state_growth_ratio),
            state_growth_window_ms=_ms(state_growth_window, "--state-growth-window"),
            lag_seconds_threshold_ms=_ms(lag_seconds_threshold, "--lag-seconds-threshold"),
            slo_freshness_ms=None if slo_freshness is None else _ms(slo_freshness, "--slo-freshness"),
            slo_objective=_check_objective(slo_objective),
            slo_window_ms=_ms(slo_window, "--slo-window"),
        )
        text = render_rules(params)
        if output is None:
            typer.echo(text, nl=False)
        else:
            _write(output, text)
