"""The detectors ``tidegauge scan`` runs over each query's batch history, with one shared config."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from monitor.model import Finding, Sample
from rules.future import FutureConfig, detect_future_timestamps
from rules.late import LateConfig, detect_late_rows
from rules.stall import StallConfig, detect_watermark_stalls
from rules.state_growth import StateGrowthConfig, detect_state_growth

__all__ = ["ScanRulesConfig", "run_scan_rules"]


@dataclass(frozen=True, slots=True)
class ScanRulesConfig:
    """Configuration of the scan detectors; ``future_skew`` feeds both the future and the late rule."""

    future_skew: timedelta = timedelta(hours=1)
    stall: StallConfig = field(default_factory=StallConfig)
    state_growth: StateGrowthConfig = field(default_factory=StateGrowthConfig)


def run_scan_rules(config: ScanRulesConfig, samples: Sequence[Sample]) -> list[Finding]:
    """All findings for ONE query's samples, ordered by batch time then rule name."""
    findings = [
        *detect_watermark_stalls(config.stall, samples),
        *detect_future_timestamps(FutureConfig(skew=config.future_skew), samples),
        *detect_late_rows(LateConfig(skew=config.future_skew), samples),
        *detect_state_growth(config.state_growth, samples),
    ]
    findings.sort(key=lambda f: (f.observed_at, f.batch_id is None, f.rule))
    return findings
