"""The Flink side of the culprit record, on recorded real REST polls
(tests/fixtures/flink/real-2.3.0/kafka_culprit: a Flink 2.3.0 job reading Kafka with a record dated 2099 at
offset 30): the collector reads the source subtask's ``KafkaSourceReader`` ``currentOffset``, the
``future_timestamp`` finding of that subtask carries the offsets read around the watermark's jump, and
``locate_flink`` / the daemon's locator / ``check flink --locate-event-time`` search them."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

import httpx
import pytest

from collectors.flink.responses import (
    MAX_KAFKA_PARTITIONS,
    VertexInfo,
    kafka_partition_of,
    parse_metric_ids,
    select_metric_ids,
)
from collectors.kafka import KafkaOptions
from collectors.kafka.culprit import Located, LocatedRecord, OffsetRange
from monitor.commands._check_flink import run_check_flink
from monitor.daemon.culprits import CulpritLocator, CulpritTarget, locate_flink
from monitor.model import Engine, Finding, Sample
from rules.config import RulesConfig
from rules.future import KAFKA_RANGES, KAFKA_RANGES_FROM_START, RULE
from rules.registry import evaluate
from rules.replay import Instant
from tests.cli import run_cli
from tests.flink_replay import KAFKA_CULPRIT, mock_transport, replay_polls

FIXTURES = KAFKA_CULPRIT
TOPIC = "orders-flink-e3cf7aa8"
JID = "89c53a895d92a309bbc898a62d9b0713"
SOURCE = "cbc357ccb763df2852fee8c4fc7d55f2"
OFFSET_ID = f"0.Source__kafka-in.KafkaSourceReader.topic.{TOPIC}.partition.0.currentOffset"


def _poll(n: int) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / f"poll-{n:02d}.json").read_text())
    return doc


def _replay(polls: range) -> list[Sample]:
    return [s for result in replay_polls(polls) for s in result.samples]


def _jump(samples: list[Sample]) -> Finding:
    history = {(Engine.FLINK, samples[0].job.job_id): samples}
    now = max(s.observed_at for s in samples)
    (found,) = [f for f in evaluate(RulesConfig(), history, now) if f.rule == RULE and KAFKA_RANGES in f.details]
    return found


def _source_list(n: int) -> list[str]:
    return parse_metric_ids(_poll(n)["routes"][f"/jobs/{JID}/vertices/{SOURCE}/metrics"], "metrics")


SOURCE_VERTEX = VertexInfo(SOURCE, "Source: kafka-in -> parse", 1, "RUNNING")


def test_the_offset_gauge_is_selected_and_read_from_the_recorded_list() -> None:
    ids = _source_list(3)
    assert OFFSET_ID in ids and OFFSET_ID.replace("currentOffset", "committedOffset") in ids
    chosen = select_metric_ids(ids, SOURCE_VERTEX)
    assert [i for i in chosen if "KafkaSourceReader" in i] == [OFFSET_ID]  # not committedOffset, not KafkaConsumer.*
    assert not [i for i in _source_list(2) if "currentOffset" in i]  # registered once the split is assigned


@pytest.mark.parametrize(
    ("operator", "expected"),
    [
        (f"Source__kafka-in.KafkaSourceReader.topic.{TOPIC}.partition.0", (TOPIC, 0)),
        ("Source__in.KafkaSourceReader.topic.orders.v1.partition.12", ("orders.v1", 12)),
        ("Source__in.KafkaSourceReader.topic.a.partition.b.partition.3", ("a.partition.b", 3)),
        ("Source__kafka-in.KafkaSourceReader.KafkaConsumer", None),
        ("Source__in.KafkaSourceReader.topic.t.partition.x", None),
        ("Source__in.KafkaSourceReader.topic..partition.1", None),
        ("parse", None),
    ],
)
def test_kafka_partition_of(operator: str, expected: tuple[str, int] | None) -> None:
    assert kafka_partition_of(operator) == expected


def test_offset_ids_are_bounded_per_subtask() -> None:
    # the recorded id, for 100 partitions of the topic on each of two subtasks
    ids = [OFFSET_ID.replace(".partition.0.", f".partition.{p}.").replace("0.", f"{s}.", 1) for s in (0, 1) for p in range(100)]
    chosen = select_metric_ids(ids, VertexInfo(SOURCE, "Source: kafka-in -> parse", 2, "RUNNING"))
    assert len(chosen) == 2 * MAX_KAFKA_PARTITIONS
    parts = sorted(int(i.split(".partition.")[1].split(".")[0]) for i in chosen if i.startswith("0."))
    assert parts == list(range(MAX_KAFKA_PARTITIONS))  # the first by partition number, not by text


def test_samples_carry_the_readers_offsets() -> None:
    samples = _replay(range(3, 8))
    offsets = [s.extra.get("kafka_offsets") for s in samples if s.scope.source is not None]
    assert offsets == [
        [{"topic": TOPIC, "partition": 0, "offset": o}] for o in (-1, 29, 29, 59, 59)
    ], offsets


def test_the_jump_finding_names_the_offsets_read_around_it() -> None:
    found = _jump(_replay(range(9)))
    assert found.scope.subtask == 0 and found.scope.source == "Source: kafka-in -> parse"
    # poll 06 had read offset 59 with the watermark not yet moved: the range starts from poll 05 (29)
    assert found.details[KAFKA_RANGES] == [{"topic": TOPIC, "partition": 0, "start": 30, "end": 60}]
    assert KAFKA_RANGES_FROM_START not in found.details


def test_a_one_shot_check_after_the_jump_searches_the_partition_from_its_start() -> None:
    found = _jump(_replay(range(7, 9)))
    assert found.details[KAFKA_RANGES] == [{"topic": TOPIC, "partition": 0, "start": 0, "end": 60}]
    assert found.details[KAFKA_RANGES_FROM_START] == [f"{TOPIC}[0]"]


class _Locate:
    """A recorder of ``locate_culprit`` calls that answers offset 30."""

    def __init__(self) -> None:
        self.calls: list[tuple[OffsetRange, ...]] = []

    def __call__(self, options: KafkaOptions, ranges: tuple[OffsetRange, ...], **kw: Any) -> Located:
        self.calls.append(ranges)
        rec = LocatedRecord(TOPIC, 0, 30, "order-30", datetime.fromisoformat("2099-01-01T00:00:00+00:00"), "CreateTime",
                            datetime.fromisoformat("2099-01-01T00:00:00+00:00"))  # fmt: skip
        return Located(rec, "max_timestamp", None, ranges)


TARGET = CulpritTarget(KafkaOptions("test", "127.0.0.1:9", request_timeout_s=1.0))


def test_locate_flink_searches_the_findings_ranges() -> None:
    found = _jump(_replay(range(9)))
    locate = _Locate()
    culprit = locate_flink(TARGET, found, locate)
    assert locate.calls == [(OffsetRange(TOPIC, 0, 30, 60),)]
    assert culprit is not None and culprit["record"]["offset"] == 30
    other = replace(found, details={"ahead_seconds": 1.0})
    assert locate_flink(TARGET, other, locate) is None  # no Kafka offsets: nothing to search
    empty = replace(found, details={KAFKA_RANGES: []})
    failed = locate_flink(TARGET, empty, locate)
    assert failed is not None and failed["record"] is None and len(locate.calls) == 1
    assert failed["errors"] == [
        "flink job tg-kafka-culprit subtask 0: its Kafka reader's offsets did not move between the polls around the "
        "watermark's jump (nothing read to search)"
    ]


def test_the_daemon_locator_attaches_once_per_jump() -> None:
    found = _jump(_replay(range(9)))
    locate = _Locate()
    locator = CulpritLocator([TARGET], locate)
    key = (Engine.FLINK, found.job.job_id)
    first = locator.attach(None, key, [], Instant(found.observed_at, None, [found]))  # type: ignore[arg-type]
    again = locator.attach(None, key, [], Instant(found.observed_at, None, [found]))  # type: ignore[arg-type]
    assert len(locate.calls) == 1
    (attached,) = first.findings
    assert attached.details["culprit"]["record"]["offset"] == 30 and again.findings == first.findings
    assert f"The record: topic {TOPIC} partition 0 offset 30, key 'order-30'" in attached.message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--locate-event-time"], "--locate-event-time needs --kafka BOOTSTRAP"),
        (["--kafka", "127.0.0.1:9"], "--kafka and --event-time-field go with --locate-event-time"),
        (["--locate-event-time", "--kafka", "k:9092", "--max-bytes", "0"], "--max-bytes: expected a positive"),
        (["--locate-event-time", "--kafka", "k:9092", "--event-time-field", "a..b"], "--event-time-field: "),
    ],
)
def test_check_flink_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["check", "flink", "http://127.0.0.1:9", *args], capsys)
    assert code == 2 and message in err, err


def test_check_flink_says_when_the_record_cannot_be_located(capsys: pytest.CaptureFixture[str]) -> None:
    polls = iter([_poll(7), _poll(8)])
    current: dict[str, Any] = {}
    clock = iter([datetime.fromisoformat(_poll(7)["now"]), datetime.fromisoformat(_poll(8)["now"])])

    def next_poll(request: httpx.Request) -> httpx.Response | None:
        if request.url.path == "/jobs/overview":
            current.clear()
            current.update(next(polls)["routes"])
        return None

    code = run_check_flink(
        "http://jm:8081", fmt="json", transport=mock_transport(current, next_poll), clock=lambda: next(clock),
        sleep=lambda _s: None, culprits=TARGET,
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 2, out
    (finding,) = [f for f in json.loads(out)["findings"] if "culprit" in f]
    assert finding["culprit"]["record"] is None and finding["culprit"]["ranges"][0]["start"] == 0
    assert "The record could not be located: " in finding["message"]
