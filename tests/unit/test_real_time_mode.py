"""A real Spark 4.3.0 query in real-time mode (``trigger(realTime="15 seconds")``), recorded with its event log
(tests/fixtures/spark/real-time-4.3.0, see its PROVENANCE.md): the trigger is read from the log, and
``no_progress``, ``watermark_stall`` and ``freshness`` do not fire on the real-time rhythm but do on the real
stall the recording holds (from batch 4 the producer's event times stop advancing while ~300 rows a batch
keep coming).

The recording's batches last 15 s where a production query's last minutes (``RealTimeTrigger``'s default is
5 minutes), so the rules' durations are scaled down alike (``for: 10s`` where the default is 5 minutes).
Expected values are read off the recording by hand (progress.jsonl) and written out here.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.spark.eventlog import EventLogCollector
from monitor.model import Sample, SampleKind, Severity, TriggerKind
from rules.cadence import report_at, report_cadence
from rules.config import RulesConfig
from rules.history import job_history
from rules.registry import Evaluator
from rules.replay import replay
from rules.slo import minute_statuses
from tests.rule_samples import only_rules

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "real-time-4.3.0"
LOG = FIXTURE / "eventlog_v2_local-1796181637433"


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    result = EventLogCollector([LOG]).poll(_t("2026-12-02T03:30:00"))
    assert not result.errors
    return sorted(result.samples, key=lambda s: (s.observed_at, s.kind is SampleKind.TERMINATED))


def _batches(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.kind is SampleKind.PROGRESS and s.scope.is_job()]


def _unmarked(samples: list[Sample]) -> list[Sample]:
    """The same samples as a collector that cannot see the plan (listener push) reads them."""
    return [dataclasses.replace(s, extra={k: v for k, v in s.extra.items() if k != "trigger"}) for s in samples]


def test_the_event_log_shows_real_time_mode(samples: list[Sample]) -> None:
    batches = _batches(samples)
    assert [b.batch_id for b in batches] == list(range(10))  # batch 10 was cut by query.stop()
    assert {b.extra.get("trigger") for b in batches} == {"real_time"}
    history = job_history(samples)
    assert history is not None
    cadence = report_cadence(history)
    assert cadence.kind is TriggerKind.REAL_TIME
    # the median batchDuration of the ten (21141, 15869, 15316, 15147, 15386, 15287, 15321, 15382, 15300,
    # 16335 ms)
    assert cadence.batch_duration == timedelta(milliseconds=15382)
    # each report arrives at its batch's end, which is the next batch's start (progress_seen_at.jsonl: batch
    # 1 seen by the driver at 03:21:33.365)
    assert report_at(batches[1]) == _t("2026-12-02T03:21:33.126")
    assert batches[2].observed_at == _t("2026-12-02T03:21:33.158")


def _until(samples: list[Sample], batch: int) -> list[Sample]:
    """The samples up to batch ``batch``'s progress (the query still running)."""
    last = _batches(samples)[batch].observed_at
    return [s for s in samples if s.observed_at <= last and s.kind is not SampleKind.TERMINATED]


NO_PROGRESS = Evaluator(RulesConfig.model_validate(only_rules(no_progress={"for": "10s"})))


def test_no_progress_waits_for_the_next_batch_s_end(samples: list[Sample]) -> None:
    # 14 s after each report (the next one is due ~15 s after it): the real-time rhythm, not a silence
    for k in range(10):
        upto = _until(samples, k)
        now = report_at(_batches(samples)[k]) + timedelta(seconds=14)
        assert NO_PROGRESS.evaluate_job(upto, now, clock=True) == [], k
    # read as a micro-batch query (no plan seen): after the first batch nothing says how often it reports,
    # so 14 s > `for` is a (false) silence; later the usual gap (~15 s) x 10 covers it
    first = _unmarked(_until(samples, 0))
    assert [f.rule for f in NO_PROGRESS.evaluate_job(first, report_at(_batches(samples)[0]) + timedelta(seconds=14), clock=True)] == ["no_progress"]


def test_no_progress_still_fires_on_a_hung_driver(samples: list[Sample]) -> None:
    upto = _until(samples, 9)  # as if the driver hung after batch 9's report (03:23:36.972)
    ended = report_at(_batches(samples)[9])
    assert ended == _t("2026-12-02T03:23:36.972")
    # due one batch (15.4 s) after it, plus `for` (10 s): 25.4 s
    assert NO_PROGRESS.evaluate_job(upto, ended + timedelta(seconds=25), clock=True) == []
    (found,) = NO_PROGRESS.evaluate_job(upto, ended + timedelta(seconds=26), clock=True)
    assert found.rule == "no_progress" and found.batch_id == 9
    assert found.message.startswith(
        "no progress for 26 s; last batch 9 at 2026-12-02T03:23:20.637Z (in real-time mode it reports once per "
        "15 s batch, at the batch's end), and the query has not terminated."
    )


def _replayed(samples: list[Sample], rules: dict[str, object]) -> dict[int, list[str]]:
    evaluator = Evaluator(RulesConfig.model_validate(only_rules(**rules)))
    return {i.batch_id: [f.rule for f in i.findings] for i in replay(evaluator, samples) if i.batch_id is not None and i.findings}


def test_watermark_stall_only_on_the_real_stall(samples: list[Sample]) -> None:
    # batches 0-3: the watermark advances once per batch (batch n's is batch n-1's eventTime.max - 5 s);
    # from batch 4 it stays at 03:21:54.125 while ~300 rows a batch arrive with event times frozen at
    # 03:20:59.166 (303 + 302 + 302 rows in batches 4-6). `for: 30s`: batch 6 is 30.8 s into the flat stretch but only batches 4-5 could have
    # moved it (2 < min_data_batches 3); from batch 7 on, 4-6 could: a stall
    found = _replayed(samples, {"watermark_stall": {"for": "30s"}})
    assert found == {7: ["watermark_stall"], 8: ["watermark_stall"], 9: ["watermark_stall"]}
    evaluator = Evaluator(RulesConfig.model_validate(only_rules(watermark_stall={"for": "30s"})))
    (stall,) = evaluator.evaluate_job(_until(samples, 7), _batches(samples)[7].observed_at)
    assert stall.message.startswith(
        "the watermark stayed at 2026-12-02T03:21:54.125Z for 46 s (since 2026-12-02T03:22:03.666Z) while 907 rows "
        "arrived in 3 batches; the newest event time was 2026-12-02T03:20:59.166Z. The rows' event times do not "
        "reach past watermark + delay: the event times arriving stopped advancing (a producer writing a frozen or "
        "old timestamp, a replay of old times), or the delay is larger than their span."
    )  # the recording's producer froze its event times (PROVENANCE.md): said first, as its own sentence


def test_freshness_only_on_the_real_stall(samples: list[Sample]) -> None:
    # at each batch's start its watermark is ~5-6 s old in phase A (5 s delay); from batch 4 the flat
    # watermark falls behind: 25 s at batch 5 (03:22:19.082), more after -> over a 20 s target
    found = _replayed(samples, {"freshness": {"target": "20s"}})
    assert found == {k: ["freshness"] for k in range(5, 10)}


def test_a_restart_in_micro_batch_mode_is_read_as_such(samples: list[Sample]) -> None:
    # the recorded real-time run, then the query restarted (new run id) with a micro-batch trigger: the
    # newest run's unmarked batches decide, not the older run's marks
    batches = _batches(samples)
    restarted = [
        dataclasses.replace(b, job=dataclasses.replace(b.job, run_id="r2"), batch_id=10 + i, extra={},
                            observed_at=b.observed_at + timedelta(minutes=10))
        for i, b in enumerate(batches[:3])
    ]  # fmt: skip
    history = job_history([*batches, *restarted])
    assert history is not None
    assert report_cadence(history).kind is TriggerKind.MICRO_BATCH


def test_scan_says_the_query_runs_in_real_time_mode(samples: list[Sample]) -> None:
    # the trial's miss: the batches carried the trigger, yet scan's text and JSON never said it
    import json

    from monitor.commands._scan_render import build_report, render_json, render_text

    report = build_report(NO_PROGRESS, samples)
    [query] = json.loads(render_json(report))["queries"]
    assert query["trigger"] == "real_time"
    text = render_text(report).splitlines()
    assert text[1].startswith("  real-time mode (trigger(realTime=...)): each batch runs for its whole duration")
    # a listener push carries no plan: the same batches read as micro-batch, and the text adds no line
    unmarked = build_report(NO_PROGRESS, _unmarked(samples))
    assert json.loads(render_json(unmarked))["queries"][0]["trigger"] == "micro_batch"
    assert not render_text(unmarked).splitlines()[1].startswith("  real-time mode")


SLO = {"freshness_slo": {"freshness": "10s"}}


def test_freshness_slo_judges_each_minute_by_its_batch_s_start(samples: list[Sample]) -> None:
    # Whole minutes of the recording: 03:21 (batch 0, watermark not computed yet: not counted), 03:22 (batch 3,
    # started 03:21:48.5 with watermark 03:21:43.428: 5.1 s behind at its start, 16.6 s at 03:22:00 of
    # which 11.5 s is the batch running) and 03:23 (batch 7, the frozen watermark 03:21:54.125 a minute old).
    # Only 03:23 is late beyond the batch rhythm; it is judged once batch 8 starts (03:23:05.3).
    found = _replayed(samples, SLO)
    assert found == {8: ["freshness_slo"], 9: ["freshness_slo"]}
    history = job_history([s for s in samples if s.kind is not SampleKind.TERMINATED])
    assert history is not None
    assert minute_statuses(history, _t("2026-12-02T03:23:40"), timedelta(seconds=10)) == [None, False, True]
    evaluator = Evaluator(RulesConfig.model_validate(only_rules(**SLO)))
    (page,) = evaluator.evaluate_job(_until(samples, 8), _batches(samples)[8].observed_at)
    # the median batchDuration of batches 0-8 (15.321 s), the page's critical severity
    assert page.severity is Severity.CRITICAL and page.details["batch_span_seconds"] == 15.321
    assert "The query runs in real-time mode: each 15 s batch holds its watermark until it ends" in page.message


def test_freshness_slo_read_as_micro_batch_burns_on_the_rhythm(samples: list[Sample]) -> None:
    # The same samples without the trigger (what a collector that cannot tell gives): minute 03:22 counts the
    # 11.5 s batch 3 had run (16.6 s > 10 s) and the SLO pages from batch 4, before the stall shows.
    assert _replayed(_unmarked(samples), SLO) == {k: ["freshness_slo"] for k in range(4, 10)}
