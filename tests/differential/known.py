"""Disagreements already written up in FINDINGS.md and still open in the engine.

A difference is "known" only if it matches the finding's exact signature; anything else fails the
differential test. When the engine fixes a finding, its entry here stops matching anything (the
differences disappear) and should be deleted together with the FINDINGS.md entry's "open" mark.
"""

from __future__ import annotations

from tests.differential.compare import BatchView, Difference
from tests.differential.scenarios import Scenario, WindowSpec


def known_finding(
    difference: Difference, spark: list[BatchView], engine: list[BatchView], scenario: Scenario
) -> str | None:
    """The FINDINGS.md id explaining ``difference``, or None if it is not a known open finding."""
    operation = scenario.operation
    if (
        difference.field == "rows_dropped_by_watermark"
        and isinstance(operation, WindowSpec)
        and operation.kind != "session"
    ):
        # D1: the engine reproduces numRowsDroppedByWatermark per input partition; Spark counts the
        # distinct late groups of the batch. Known only when the engine's raw late rows give
        # Spark's number (late_groups agree), i.e. the metric reproduction alone is off.
        theirs = next(v for v in engine if v.batch_id == difference.batch_id)
        if theirs.late_groups == difference.spark:
            return "D1"
    return None


def split_known(
    differences: list[Difference], spark: list[BatchView], engine: list[BatchView], scenario: Scenario
) -> tuple[list[Difference], set[str]]:
    """``(unexplained differences, ids of the known findings that explain the others)``."""
    unexplained: list[Difference] = []
    findings: set[str] = set()
    for difference in differences:
        finding = known_finding(difference, spark, engine, scenario)
        if finding is None:
            unexplained.append(difference)
        else:
            findings.add(finding)
    return unexplained, findings
