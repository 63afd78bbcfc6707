"""A real Spark 4.3.0 query in real-time mode (``trigger(realTime="15 seconds")``) as the listener pushed it:
``tests/fixtures/spark/real-time-4.3.0/listener_envelopes.jsonl`` (every event ``TidegaugeListener`` sent, see
PROVENANCE.md there). Ingested as the daemon's endpoint ingests them, the batches carry the real-time trigger
the listener read from the JVM, and ``no_progress``, ``watermark_stall``, ``freshness`` and ``freshness_slo``
stay quiet on the real-time rhythm but fire on the recording's real stall (from batch 9 the producer's event
times are frozen while ~300 rows a batch keep coming) and on a driver that goes silent.

As in ``test_real_time_mode.py``, the batches last 15 s where a production query's last minutes, so the rules'
durations are scaled down alike. Expected values are read off the recording by hand (the envelopes'
``progress`` objects) and written out here.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.spark.listener import TRIGGER_FIELD
from monitor.daemon.ingest import parse_event_document
from monitor.errors import ProgressFormatError
from monitor.model import Sample, SampleKind, TriggerKind
from rules.cadence import report_at, report_cadence
from rules.config import RulesConfig
from rules.history import job_history
from rules.registry import Evaluator
from rules.replay import replay
from tests.rule_samples import only_rules

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "real-time-4.3.0"
REAL_TIME = "org.apache.spark.sql.execution.streaming.RealTimeTrigger"


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _envelopes() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURE / "listener_envelopes.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    """Each envelope ingested as the endpoint ingests it, at the receiver's clock."""
    received = [json.loads(line) for line in (FIXTURE / "listener_received_at.jsonl").read_text().splitlines()]
    out: list[Sample] = []
    for envelope, at in zip(_envelopes(), received, strict=True):
        out.extend(parse_event_document(envelope, received_at=_t(at["received_at"]), app_id="local-rtl").samples)
    return sorted(out, key=lambda s: (s.observed_at, s.kind is SampleKind.TERMINATED))


def _batches(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.kind is SampleKind.PROGRESS and s.scope.is_job()]


def _running(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.kind is not SampleKind.TERMINATED]


def _until(samples: list[Sample], batch: int) -> list[Sample]:
    last = _batches(samples)[batch].observed_at
    return [s for s in _running(samples) if s.observed_at <= last]


def _unmarked(samples: list[Sample]) -> list[Sample]:
    """The same samples as the listener sent them before it named the trigger."""
    return [dataclasses.replace(s, extra={k: v for k, v in s.extra.items() if k != "trigger"}) for s in samples]


def _replayed(samples: list[Sample], rules: dict[str, object]) -> dict[int, list[str]]:
    evaluator = Evaluator(RulesConfig.model_validate(only_rules(**rules)))
    return {i.batch_id: [f.rule for f in i.findings] for i in replay(evaluator, samples) if i.batch_id is not None and i.findings}


def test_the_recorded_envelopes_name_the_trigger() -> None:
    envelopes = _envelopes()
    kinds = [e["Event"].rsplit("$", 1)[-1] for e in envelopes]
    assert kinds == ["QueryStartedEvent", *["QueryProgressEvent"] * 13, "QueryTerminatedEvent"]
    assert [e.get(TRIGGER_FIELD) for e in envelopes[1:-1]] == [{"triggerClass": REAL_TIME, "batchDurationMs": 15000}] * 13
    assert TRIGGER_FIELD not in envelopes[0] and TRIGGER_FIELD not in envelopes[-1]


def test_ingesting_them_gives_real_time_batches(samples: list[Sample]) -> None:
    batches = _batches(samples)
    assert [b.batch_id for b in batches] == list(range(13))
    assert {b.extra.get("trigger") for b in batches} == {"real_time"}
    assert all("trigger" not in s.extra for s in samples if not s.scope.is_job())  # only the query's sample
    history = job_history(_running(samples))
    assert history is not None
    cadence = report_cadence(history)
    assert cadence.kind is TriggerKind.REAL_TIME
    # the median batchDuration of the 13 (18236, 15385, 15349, 15674, 15434, 15259, 16140, 16727, 16191,
    # 16833, 16230, 15404, 15576 ms)
    assert cadence.batch_duration == timedelta(milliseconds=15674)
    # batch 1 ends (12:06:32.187Z + 15385 ms) when batch 2 starts; the receiver got it 0.7 s later
    assert report_at(batches[1]) == _t("2026-12-02T12:06:47.572+00:00")
    assert batches[2].observed_at == _t("2026-12-02T12:06:47.644+00:00")


NO_PROGRESS = Evaluator(RulesConfig.model_validate(only_rules(no_progress={"for": "10s"})))


def test_no_progress_is_quiet_between_batches(samples: list[Sample]) -> None:
    for k in range(13):
        now = report_at(_batches(samples)[k]) + timedelta(seconds=14)
        assert NO_PROGRESS.evaluate_job(_until(samples, k), now, clock=True) == [], k
    # before the listener named the trigger, the first long batch read as a silence
    now = report_at(_batches(samples)[0]) + timedelta(seconds=14)
    (false,) = NO_PROGRESS.evaluate_job(_unmarked(_until(samples, 0)), now, clock=True)
    assert false.rule == "no_progress"


def test_no_progress_fires_when_the_recording_is_cut(samples: list[Sample]) -> None:
    # as if the driver hung after batch 12's report (12:09:27.764Z + 15576 ms = 12:09:43.340Z): due one usual
    # batch (15.674 s) plus `for` (10 s) after it
    upto = _until(samples, 12)
    ended = report_at(_batches(samples)[12])
    assert ended == _t("2026-12-02T12:09:43.340+00:00")
    assert NO_PROGRESS.evaluate_job(upto, ended + timedelta(seconds=25), clock=True) == []
    (found,) = NO_PROGRESS.evaluate_job(upto, ended + timedelta(seconds=26), clock=True)
    assert found.rule == "no_progress" and found.batch_id == 12
    assert "in real-time mode it reports once per 16 s batch, at the batch's end" in found.message


def test_watermark_stall_only_on_the_real_stall(samples: list[Sample]) -> None:
    # batches 1-8: the watermark moves every batch (batch n's is batch n-1's eventTime.max - 5 s); from batch 9
    # (12:08:39.137Z) it stays at 12:08:18.027Z while 286-303 rows a batch arrive with event times frozen at
    # 12:07:23.045Z. `for: 30s`: at batch 12 (12:09:27.764Z) it has been flat 48.6 s over 3 data batches
    assert _replayed(samples, {"watermark_stall": {"for": "30s"}}) == {12: ["watermark_stall"]}


def test_freshness_only_on_the_real_stall(samples: list[Sample]) -> None:
    # at each batch's start its watermark is 5.1-5.6 s old while event times flow; batch 8 read rows only
    # until 12:08:23.027Z (the producer froze then), so batch 9 starts 21.1 s behind, later ones more
    assert _replayed(samples, {"freshness": {"target": "20s"}}) == {k: ["freshness"] for k in (9, 10, 11, 12)}


def test_freshness_slo_only_on_the_real_stall(samples: list[Sample]) -> None:
    # Whole minutes: 12:07 (batch 2, watermark 12:06:42.443Z: 17.6 s behind then, of which 12.4 s is the batch
    # running), 12:08 (batch 6, 12:07:44.400Z: 15.6 s, 10.5 s running), 12:09 (batch 10, the frozen
    # 12:08:18.027Z: 42 s, 3.9 s running). Only 12:09 is late beyond the rhythm (judged from batch 11).
    assert _replayed(samples, {"freshness_slo": {"freshness": "10s"}}) == {11: ["freshness_slo"], 12: ["freshness_slo"]}
    # read as micro-batch, 12:07 and 12:08 count the batch's running time too and page from batch 3 on
    assert _replayed(_unmarked(samples), {"freshness_slo": {"freshness": "10s"}}) == {
        k: ["freshness_slo"] for k in range(3, 13)
    }


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("RealTimeTrigger", "event: field tidegauge: expected an object"),
        ({"batchDurationMs": 15000}, "event: field tidegauge.triggerClass: expected the trigger's JVM class name"),
        ({"triggerClass": "x" * 301}, "event: field tidegauge.triggerClass: expected the trigger's JVM class name"),
    ],
)
def test_a_malformed_trigger_field_is_refused_by_name(field: object, message: str) -> None:
    envelope = {**_envelopes()[1], TRIGGER_FIELD: field}
    with pytest.raises(ProgressFormatError, match=message):
        parse_event_document(envelope, received_at=_t("2026-12-02T12:06:33+00:00"))


def test_an_unknown_trigger_class_marks_nothing() -> None:
    envelope = {**_envelopes()[1], TRIGGER_FIELD: {"triggerClass": "com.example.MyTrigger"}}
    result = parse_event_document(envelope, received_at=_t("2026-12-02T12:06:33+00:00"))
    assert result.samples and all("trigger" not in s.extra for s in result.samples)
