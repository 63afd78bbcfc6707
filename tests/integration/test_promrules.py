"""The generated Prometheus rules pass ``promtool check rules`` and behave right in ``promtool test rules``.

promtool comes from Debian's ``prometheus`` package (installed by .ci/system-deps.sh). Each scenario's
input series and expected alerts are written out here; the comment on each says why the answer is right.
Each expected alert carries its labels and its expanded annotations, written out in ``ANNOTATIONS``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.metrics.promrules import PromRulesParams, render_rules
from tests.dependencies import missing

pytestmark = pytest.mark.integration

JOB = 'engine="spark",job_id="q",job_name="clicks"'
JOB_LABELS = {"engine": "spark", "job_id": "q", "job_name": "clicks"}


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing("promtool", "apt-get install prometheus (bash .ci/system-deps.sh; make test does it)")
    return path


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "tidegauge.rules.yml"
    path.write_text(render_rules(PromRulesParams()))
    return path


#: What promtool must see in each alert's annotations, written out for the labels of these tests (promtool
#: compares them exactly, after expanding the rule file's {{ $labels.x }}). The texts are monitor/metrics/promrules.py's
#: defaults (PromRulesParams()): 10m stall window, 1h skew, 1.00% over 10m, 1.5x in 1h, 5m consumer lag.
ANNOTATIONS: dict[str, dict[str, str]] = {
    "TidegaugeWatermarkStall": {
        "summary": "Watermark of clicks (q) flat while rows arrive",
        "description": "The watermark has not moved for 10m while input rows kept arriving: windows are not "
        "closing. Check for an input or partition without data holding the min watermark (tidegauge names it).",
    },
    "TidegaugeFutureTimestamp": {
        "summary": "Event time of clicks (q) is in the future",
        "description": "Event time or watermark is more than 1h ahead of now: one mis-dated row moves the "
        "watermark and every honest row after it is dropped as late. Filter rows with event_time > now + skew "
        "before the watermark.",
    },
    "TidegaugeLateDropSurge": {
        "summary": "clicks drops late rows",
        "description": "More than 1.00% of input rows over 10m were dropped as later than the watermark. Raise "
        "the delay threshold or look for a future-dated row that moved the watermark.",
    },
    "TidegaugeStateGrowth": {
        "summary": "State of clicks keeps growing",
        "description": "State rows grew more than 1.5x in 1h and never shrank: nothing is evicted. Typical "
        "cause: dropDuplicates without the event-time column in the key, or no watermark.",
    },
    "TidegaugeConsumerLagSeconds": {
        "summary": "Consumer group orders is more than 5m behind",
        "description": "The group's furthest-behind partition is more than 5m behind the producers (lag in "
        "seconds). Add consumer instances or make processing faster; tidegauge's consumer_lag status tells a "
        "stalled or stopped consumer from a slow one.",
    },
}


def _expected(alert: str, severity: str, labels: dict[str, str]) -> dict[str, Any]:
    full = {**labels, "severity": severity, "alert_source": "tidegauge"}
    return {"exp_labels": full, "exp_annotations": ANNOTATIONS[alert]}


def _run(promtool: str, rules_file: Path, tests: list[dict[str, Any]]) -> None:
    doc = {"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": tests}
    test_file = rules_file.parent / "test.yml"
    test_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = subprocess.run(
        [promtool, "test", "rules", test_file.name],
        cwd=rules_file.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_check_rules(promtool: str, rules_file: Path) -> None:
    proc = subprocess.run(
        [promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in proc.stdout


def test_stall_fires_only_while_rows_arrive(promtool: str, rules_file: Path) -> None:
    stall = "TidegaugeWatermarkStall"
    _run(
        promtool,
        rules_file,
        [
            {
                # 1. Flat watermark, 10 rows a minute: flat for the 10m window from t=10m, then `for: 1m`
                #    -> firing at 15m; at 5m the window still holds less than 10m of flatness -> nothing.
                "interval": "1m",
                "input_series": [
                    {"series": f"tidegauge_watermark_timestamp_seconds{{{JOB}}}", "values": "1000x30"},
                    {"series": f"tidegauge_input_rows_total{{{JOB}}}", "values": "0+10x30"},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "15m",
                        "alertname": stall,
                        "exp_alerts": [_expected(stall, "warning", JOB_LABELS)],
                    },
                ],
            },
            {
                # 2. Flat watermark but no input (a quiet source / no-data batches): NOT a stall.
                "interval": "1m",
                "input_series": [
                    {"series": f"tidegauge_watermark_timestamp_seconds{{{JOB}}}", "values": "1000x30"},
                    {"series": f"tidegauge_input_rows_total{{{JOB}}}", "values": "50x30"},
                ],
                "alert_rule_test": [{"eval_time": "20m", "alertname": stall, "exp_alerts": []}],
            },
            {
                # 3. Advancing watermark with input: healthy.
                "interval": "1m",
                "input_series": [
                    {"series": f"tidegauge_watermark_timestamp_seconds{{{JOB}}}", "values": "1000+60x30"},
                    {"series": f"tidegauge_input_rows_total{{{JOB}}}", "values": "0+10x30"},
                ],
                "alert_rule_test": [{"eval_time": "20m", "alertname": stall, "exp_alerts": []}],
            },
        ],
    )


def test_future_timestamp_late_drops_and_state_growth(promtool: str, rules_file: Path) -> None:
    fut, late, state = "TidegaugeFutureTimestamp", "TidegaugeLateDropSurge", "TidegaugeStateGrowth"
    _run(
        promtool,
        rules_file,
        [
            {
                # 4. promtool's clock starts at Unix 0: at 5m time() = 300; event time 7200+300 is 2h ahead
                #    (> 1h skew) -> critical at once. A second job 30 min ahead stays quiet.
                "interval": "1m",
                "input_series": [
                    {
                        "series": f"tidegauge_event_time_max_timestamp_seconds{{{JOB}}}",
                        "values": "7200+60x10",
                    },
                    {
                        "series": 'tidegauge_event_time_max_timestamp_seconds{engine="spark",job_id="ok",job_name="fine"}',
                        "values": "1800+60x10",
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "5m",
                        "alertname": fut,
                        "exp_alerts": [_expected(fut, "critical", JOB_LABELS)],
                    }
                ],
            },
            {
                # 5. 100 rows/min in, 5 rows/min dropped: 5% > 1% over 10m -> fires; a job dropping 0.5%
                #    (1 row per 200) does not.
                "interval": "1m",
                "input_series": [
                    {"series": f"tidegauge_input_rows_total{{{JOB}}}", "values": "0+100x20"},
                    {"series": f"tidegauge_dropped_by_watermark_rows_total{{{JOB}}}", "values": "0+5x20"},
                    {
                        "series": 'tidegauge_input_rows_total{engine="spark",job_id="ok",job_name="fine"}',
                        "values": "0+200x20",
                    },
                    {
                        "series": 'tidegauge_dropped_by_watermark_rows_total{engine="spark",job_id="ok",job_name="fine"}',
                        "values": "0+1x20",
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "15m",
                        "alertname": late,
                        "exp_alerts": [_expected(late, "warning", JOB_LABELS)],
                    }
                ],
            },
            {
                # 6. State rows climb 100/min from 1000 and never shrink: at 90m they are 10000, an hour
                #    earlier 4000 (2.5x > 1.5x) and the min of the last hour (4000) >= the starting level.
                #    An evicting job: 3000 until 44m, evicted to 500 at 45m, then +100/min -> 5000 at 90m,
                #    1.67x its level an hour ago (3000), so a naive ratio rule fires; but within the hour it
                #    dipped to 500 < 3000 (state *was* removed), so it is not unbounded growth.
                "interval": "1m",
                "input_series": [
                    {"series": f"tidegauge_state_rows{{{JOB}}}", "values": "1000+100x120"},
                    {
                        "series": 'tidegauge_state_rows{engine="spark",job_id="saw",job_name="saw"}',
                        "values": "3000x44 500+100x75",
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "90m",
                        "alertname": state,
                        "exp_alerts": [_expected(state, "warning", JOB_LABELS)],
                    },
                ],
            },
        ],
    )


def test_consumer_lag_seconds_threshold_on_the_group_series(promtool: str, rules_file: Path) -> None:
    alert = "TidegaugeConsumerLagSeconds"
    group = 'engine="kafka",job_id="prod/orders",job_name="orders"'
    labels = {"engine": "kafka", "job_id": "prod/orders", "job_name": "orders"}
    _run(
        promtool,
        rules_file,
        [
            {
                # 1. the group 400 s behind (threshold 5m = 300 s) for longer than `for: 1m` -> firing; the
                #    series of its partitions do not fire on their own (one alert per group, not per partition)
                "interval": "1m",
                "input_series": [
                    {"series": f'tidegauge_consumer_lag_seconds{{{group},source="",partition=""}}', "values": "400x10"},
                    {"series": f'tidegauge_consumer_lag_seconds{{{group},source="orders",partition="3"}}',
                     "values": "400x10"},
                ],
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": alert,
                     "exp_alerts": [_expected(alert, "warning", labels)]},
                ],
            },
            {
                # 2. 200 s behind: under the threshold -> nothing
                "interval": "1m",
                "input_series": [
                    {"series": f'tidegauge_consumer_lag_seconds{{{group},source="",partition=""}}', "values": "200x10"},
                ],
                "alert_rule_test": [{"eval_time": "5m", "alertname": alert, "exp_alerts": []}],
            },
        ],
    )
