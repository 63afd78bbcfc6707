"""``tidegauge promrules`` option checks and output errors: one line naming the option or file, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_unwritable_output_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "nonexist" / "r.yml"
    code, out, err = run(capsys, "promrules", "-o", str(target))
    assert (code, out) == (2, "")
    assert err == f"tidegauge: error: --output {target}: cannot write: No such file or directory\n"


def test_output_file_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "r.yml"
    assert run(capsys, "promrules", "-o", str(target))[0] == 0
    assert target.read_text(encoding="utf-8").startswith("groups:")


@pytest.mark.parametrize("share", ["0", "-0.1", "1.5", "nan"])
def test_late_drop_share_must_be_in_0_1(share: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "promrules", "--late-drop-share", share)
    assert (code, out) == (2, "")
    assert err.startswith("tidegauge: error: --late-drop-share: ") and "(0, 1]" in err


def test_late_drop_share_of_1_is_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "promrules", "--late-drop-share", "1")[0] == 0


@pytest.mark.parametrize("ratio", ["1", "0.5", "-2"])
def test_state_growth_ratio_must_exceed_1(ratio: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "promrules", "--state-growth-ratio", ratio)
    assert (code, out) == (2, "")
    assert err.startswith("tidegauge: error: --state-growth-ratio: ") and "greater than 1" in err


@pytest.mark.parametrize(
    "option", ["--stall-for", "--future-skew", "--freshness-target", "--idle-for", "--state-growth-window"]
)
def test_durations_must_be_positive(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    # `--stall-for 0s` wrote `changes(...[0s])`, which promtool rejects ("duration must be greater than 0")
    code, out, err = run(capsys, "promrules", option, "0s")
    assert (code, out) == (2, "")
    assert err.startswith(f"tidegauge: error: {option}: must be above 0")


@pytest.mark.parametrize(
    ("objective", "why"),
    [("100%", "the objective must be above 0% and below 100%"), ("99.5", "expected a percentage like 99.5%")],
)
def test_slo_objective_is_a_percentage(objective: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "promrules", "--slo-freshness", "5m", "--slo-objective", objective)
    assert (code, out) == (2, "")
    assert err.startswith("tidegauge: error: --slo-objective: ") and why in err


def test_slo_rules_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert "FreshnessSlo" not in run(capsys, "promrules")[1]
    code, out, _ = run(capsys, "promrules", "--slo-freshness", "2m", "--slo-objective", "99.9%")
    assert code == 0
    assert "max by (engine, job_id, job_name) (tidegauge_watermark_lag_seconds) > bool 120" in out
    assert "avg_over_time(tidegauge:freshness_slo_bad_minute[1h]) / 0.001 > 14.4" in out
