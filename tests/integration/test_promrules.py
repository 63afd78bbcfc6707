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


def test_freshness_slo_burn_rate_alerts_follow_the_workbook_table(tmp_path: Path, promtool: str) -> None:
    """The history of tests/unit/test_rule_slo.py (one minute per value, watermark 1 min behind except 10 min
    behind at minutes 360..389; SLO 5m, 99%: budget 1%), evaluated by Prometheus. Prometheus 2.x windows
    include both ends: ``[1h]`` holds 61 minutes, ``[6h]`` 361 (tidegauge's: 60 and 360)."""
    rules_file = tmp_path / "slo.rules.yml"
    rules_file.write_text(render_rules(PromRulesParams(slo_freshness_ms=300_000, slo_objective=0.99)))
    check = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False)
    assert check.returncode == 0 and "SUCCESS: 13 rules found" in check.stdout, check.stdout + check.stderr
    page, ticket = "TidegaugeFreshnessSloPage", "TidegaugeFreshnessSloTicket"

    def alert(name: str, severity: str, burn: str) -> dict[str, Any]:
        windows = "1h and 5m above 14.4x or 6h and 30m above 6x" if name == page else "3d and 6h above 1x"
        meaning = (
            "at this rate the error budget is gone within days"
            if name == page
            else "a slow leak that spends the whole budget before the window ends; fix it in working hours"
        )
        return {
            "exp_labels": {**JOB_LABELS, "severity": severity, "alert_source": "tidegauge"},
            "exp_annotations": {
                "summary": f"Freshness SLO of clicks (q) burns its error budget {burn}x too fast",
                "description": "Minutes with the watermark (a Kafka group: its lag) more than 5m behind spend the "
                f"error budget of the 99% objective over 28d {burn}x as fast as it lasts ({windows}): {meaning}. "
                "tidegauge's freshness_slo finding gives the budget left; its freshness, watermark_stall and "
                "consumer_lag findings say why the job is behind.",
            },
        }

    def at(minute: int, name: str, *expected: dict[str, Any]) -> dict[str, Any]:
        return {"eval_time": f"{minute}m", "alertname": name, "exp_alerts": list(expected)}

    _run(
        promtool,
        rules_file,
        [
            {
                "interval": "1m",
                "input_series": [
                    # minutes 0..359 at 60 s, 360..389 at 600 s (> 300 s: 30 bad minutes), 390..760 at 60 s
                    {"series": f"tidegauge_watermark_lag_seconds{{{JOB}}}", "values": "60x359 600x29 60x370"},
                ],
                "alert_rule_test": [
                    # page, 1h & 5m > 14.4x (14.4%): at 367 the 1h window 307..367 has 8 bad of 61 = 13.1%;
                    # at 368, 9 of 61 = 14.75% -> 14.754x ("14.8"); the 5m window 363..368 is all bad
                    at(367, page),
                    at(368, page, alert(page, "critical", "14.8")),
                    # 394: the 5m window 389..394 still holds minute 389 (1 of 6 = 16.7%); 1h: 30 of 61 -> 49.2x
                    at(394, page, alert(page, "critical", "49.2")),
                    # 395: 5m clean; the 6h/30m row holds: 6h 30 of 361 = 8.31x, 30m 365..395 has 25 of 31
                    at(395, page, alert(page, "critical", "8.3")),
                    # 418: the 30m window 388..418 has 2 bad of 31 = 6.45% > 6%; 419: 1 of 31 = 3.2% -> no page
                    at(418, page, alert(page, "critical", "8.3")),
                    at(419, page),
                    # ticket, 3d & 6h > 1x (1%): 362: the 6h window 2..362 has 3 of 361 = 0.83%; 363: 4 of 361
                    # = 1.11% and the 3d window 0..363 4 of 364 = 1.0989x ("1.1")
                    at(362, ticket),
                    at(363, ticket, alert(ticket, "warning", "1.1")),
                    # 746: the 6h window 386..746 has 4 bad (386..389) of 361 = 1.11%; 3d: 30 of 747 = 4.016x;
                    # 747: 3 of 361 = 0.83% -> no ticket (tidegauge's 360-minute window stops a minute earlier)
                    at(746, ticket, alert(ticket, "warning", "4.0")),
                    at(747, ticket),
                ],
            },
        ],
    )
