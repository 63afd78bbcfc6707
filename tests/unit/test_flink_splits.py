"""Issue 17 §3: split-level watermarks (Flink 2.1+, FLIP-513) read from a real Flink 2.3.0 job reading four
Kafka partitions on two source subtasks (tests/fixtures/flink/real-2.3.0/splits_{lag,align}, see their
PROVENANCE.md), replayed request by request through ``check flink``; and the same answers with every split
metric taken out (what a Flink before 2.1 serves). Expected values are read off the recorded answers by hand
(split ``-3``'s ``currentWatermark`` 1796188872642 ms = 2026-12-02T05:21:12.642Z in ``splits_lag``,
1796188965712 = 05:22:45.712Z in ``splits_align``, where splits ``-0``, ``-1``, ``-2`` are paused at
1796189507683 = 05:31:47.683Z)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.flink.responses import (
    MAX_SPLITS_PER_SUBTASK,
    MAX_SPLITS_PER_VERTEX,
    VertexInfo,
    select_metric_ids,
    subtask_metrics,
)
from monitor.commands._check_flink import run_check_flink
from rules.config import RulesConfig
from tests.flink_record import load_exchanges, replay_clock, replay_transport

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "real-2.3.0"
LAG_TOPIC = "splits-lag-36144807"
ALIGN_TOPIC = "splits-align-bd7bd4d3"
SOURCE = "Source: kafka-in"


def _without_splits(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded exchanges as a Flink before 2.1 would have answered them: no split metric listed or
    served (and so none asked for)."""
    out = []
    for ex in exchanges:
        ex = dict(ex)
        if isinstance(ex["body"], list):
            ex["body"] = [e for e in ex["body"] if ".split." not in str(e.get("id"))]
        if ex["query"].startswith("get="):
            ids = [i for i in ex["query"][len("get=") :].split(",") if ".split." not in i]
            ex["query"] = "get=" + ",".join(ids)
        out.append(ex)
    return out


def _run(
    folder: str, fmt: str, capsys: pytest.CaptureFixture[str], *, idle_for: str | None = None, splits: bool = True,
    config: bool = True, interval_s: int = 11,
) -> str:
    polls, exchanges = load_exchanges(REAL / folder)
    if not config:  # as behind a proxy that does not serve /config
        exchanges = [ex for ex in exchanges if not str(ex.get("path", "")).endswith("/config")]
    rules = RulesConfig.model_validate({"idle_source": {"for": idle_for}} if idle_for else {})
    code = run_check_flink(
        "http://jm:8081",
        fmt=fmt,
        interval=timedelta(seconds=interval_s),
        rules=rules,
        clock=replay_clock(polls),
        transport=replay_transport(exchanges if splits else _without_splits(exchanges)),
        sleep=lambda _s: None,
    )
    assert code == 0
    return capsys.readouterr().out


def _json(folder: str, capsys: pytest.CaptureFixture[str], **kw: Any) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_run(folder, "json", capsys, **kw))
    return report


def _job(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [j for j in report["jobs"] if j["name"] == name]
    (job,) = found
    return job


def test_recorded_split_metric_names_are_the_ones_read() -> None:
    ids = json.loads((REAL / "splits_lag" / "source_metric_ids.json").read_text())["ids"]
    split_ids = [i for i in ids if ".split." in i]
    # 4 splits x 7 gauges, as Flink 2.3.0 registered them (FLINK-37410)
    assert len(split_ids) == 28
    assert f"1.Source__kafka-in.split.{LAG_TOPIC}-3.watermark.pausedTimeMsPerSecond" in split_ids
    vertex = VertexInfo(id="v", name=SOURCE, parallelism=2, status="RUNNING")
    chosen = [i for i in select_metric_ids(ids, vertex) if ".split." in i]
    assert len(chosen) == 16 and not any("accumulated" in i for i in chosen)
    values = json.loads((REAL / "splits_lag" / "split_metrics.json").read_text())["values"]
    subs = subtask_metrics(values, vertex)
    assert sorted(subs[0].splits) == [f"{LAG_TOPIC}-0", f"{LAG_TOPIC}-2"]
    assert sorted(subs[1].splits) == [f"{LAG_TOPIC}-1", f"{LAG_TOPIC}-3"]


def test_split_reads_are_bounded_per_subtask_and_vertex() -> None:
    names = ("currentWatermark", "activeTimeMsPerSecond", "pausedTimeMsPerSecond", "idleTimeMsPerSecond")
    ids = [f"{sub}.Source__in.split.t-{p}.watermark.{n}" for sub in range(8) for p in range(40) for n in names]
    vertex = VertexInfo(id="v", name="Source: in", parallelism=8, status="RUNNING")
    chosen = select_metric_ids(ids, vertex)
    per_split = {i.rsplit(".watermark.", 1)[0] for i in chosen}
    assert len(per_split) == MAX_SPLITS_PER_VERTEX == 64
    assert len(chosen) == 4 * 64
    # the first subtasks first, at most MAX_SPLITS_PER_SUBTASK each, Kafka partitions in numeric order
    assert {s.split(".")[0] for s in per_split} == {"0", "1", "2", "3"}
    assert sorted(int(s.rsplit("-", 1)[1]) for s in per_split if s.startswith("0.")) == list(
        range(MAX_SPLITS_PER_SUBTASK)
    )


def test_lagging_partition_is_named_in_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    report = _json("splits_lag", capsys)
    assert report["errors"] == []
    job = _job(report, "tg-kafka-splits-lag")
    assert job["holding_min"] == (
        f"job `tg-kafka-splits-lag` vertex `{SOURCE}` subtask 1, Kafka partition 3 of topic `{LAG_TOPIC}` "
        f"(split `{LAG_TOPIC}-3`)"
    )
    source = job["vertices"][0]
    assert [s["split"] for s in source["subtasks"][1]["splits"]] == [f"{LAG_TOPIC}-1", f"{LAG_TOPIC}-3"]
    assert source["subtasks"][1]["splits"][1]["watermark_ms"] == 1796188872642
    (finding,) = report["findings"]
    assert (finding["rule"], finding["severity"], finding["vertex"], finding["labels"]) == (
        "split_watermark", "warning", SOURCE, {"check": "split_behind"}
    )  # fmt: skip
    assert (finding["split"]["topic"], finding["split"]["partition"], finding["split"]["subtask"]) == (LAG_TOPIC, 3, 1)
    message = finding["message"]
    assert message.startswith(f"Kafka partition 3 of topic `{LAG_TOPIC}` (split `{LAG_TOPIC}-3`) holds the watermark")
    assert "at 2026-12-02T05:21:12.642Z, 10 min behind the other partitions" in message
    assert "partition 1 at 2026-12-02T05:31:12.642Z" in message
    assert "(activeTimeMsPerSecond 1000, not idle)" in message and "withIdleness does not help" in message
    text = _run("splits_lag", "text", capsys)
    assert f"holds the minimum watermark: job `tg-kafka-splits-lag` vertex `{SOURCE}` subtask 1, Kafka partition 3" in text
    assert f"split {LAG_TOPIC}-3: watermark 2026-12-02T05:21:12.642Z, ms/s reading 1000, paused by alignment 0" in text
    assert f"[warning] split_watermark/split_behind (tg-kafka-splits-lag / {SOURCE}): Kafka partition 3 of topic `{LAG_TOPIC}`" in text


def test_split_paused_by_alignment_is_alignment_not_idleness(capsys: pytest.CaptureFixture[str]) -> None:
    # subtask 0 has read nothing for 58 s (sourceIdleTime 58118): with --idle-for 30s it would be "idle"
    report = _json("splits_align", capsys, idle_for="30s")
    assert report["errors"] == []
    rules = sorted(f["rule"] for f in report["findings"])
    assert rules == ["split_watermark"]  # no idle_source finding
    (finding,) = report["findings"]
    assert finding["labels"] == {"check": "alignment_paused"} and finding["severity"] == "warning"
    assert (finding["split"]["topic"], finding["split"]["partition"], finding["split"]["subtask"]) == (
        ALIGN_TOPIC, 3, 1
    )  # fmt: skip
    message = finding["message"]
    assert message.startswith(
        f"watermark alignment has paused 3 of 4 splits of job `tg-kafka-splits-align` vertex `{SOURCE}`: Kafka "
        f"partitions 0, 1 and 2 of topic `{ALIGN_TOPIC}` (pausedTimeMsPerSecond 1000); subtask 0 reads nothing "
        "(every split paused), which is alignment, not idleness."
    )
    assert f"ahead of Kafka partition 3 of topic `{ALIGN_TOPIC}` (split `{ALIGN_TOPIC}-3`), subtask 1" in message
    assert "watermark 2026-12-02T05:22:45.712Z trails them by 9 min" in message
    assert "maxAllowedWatermarkDrift" in message and "withIdleness" not in message
    text = _run("splits_align", "text", capsys, idle_for="30s")
    assert f"split {ALIGN_TOPIC}-0: watermark 2026-12-02T05:31:47.683Z, ms/s reading 0, paused by alignment 1000" in text
    assert "[warning] split_watermark/alignment_paused (tg-kafka-splits-align / Source: kafka-in): watermark alignment has paused" in text
    assert "idle_source" not in text


def test_without_split_metrics_the_same_answers_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    # what a Flink before 2.1 serves: no split metric is listed, none is asked for, nothing fails
    lag = _json("splits_lag", capsys, splits=False)
    assert lag["errors"] == [] and lag["findings"] == []
    job = _job(lag, "tg-kafka-splits-lag")
    assert job["holding_min"] == f"job `tg-kafka-splits-lag` vertex `{SOURCE}` subtask 1"
    assert all("splits" not in s for v in job["vertices"] for s in v["subtasks"])
    # and without them the paused subtask reads as idle: what the split metrics correct
    align = _json("splits_align", capsys, idle_for="30s", splits=False)
    (idle,) = align["findings"]
    assert (idle["rule"], idle["subtask"]) == ("idle_source", 0)


def test_hostile_split_ids_are_not_read() -> None:
    vertex = VertexInfo(id="v", name="Source: in", parallelism=1, status="RUNNING")
    long_id = "t" * 400 + "-1"
    ids = [
        f"0.Source__in.split.{long_id}.watermark.currentWatermark",
        "0.Source__in.split.t\n-2.watermark.currentWatermark",
        "0.Source__in.split.ok-3.watermark.currentWatermark",
        "7.Source__in.split.ok-4.watermark.currentWatermark",  # a subtask the vertex has not
    ]
    assert [i for i in select_metric_ids(ids, vertex) if ".split." in i] == [ids[2]]
    subs = subtask_metrics({i: "5" for i in ids}, vertex)
    assert list(subs[0].splits) == ["ok-3"] and subs[0].splits["ok-3"].watermark.epoch_ms == 5


def test_check_flink_text_names_the_sub_check_and_json_keeps_the_split() -> None:
    from monitor.reports.flink import render_text

    finding = {
        "rule": "split_watermark", "severity": "warning", "job": "j", "jid": "a1", "vertex": "Source: k",
        "vertex_id": "v1", "subtask": None, "message": "m", "labels": {"check": "alignment_paused"},
        "split": "t-3",
    }
    plain = dict(finding, rule="future_timestamp", labels={})
    text = render_text({"jobs": [], "findings": [finding, plain], "errors": []})
    assert "[warning] split_watermark/alignment_paused (j / Source: k): m" in text
    assert "[warning] future_timestamp (j / Source: k): m" in text


def test_check_flink_names_the_cluster_s_flink_version(capsys: pytest.CaptureFixture[str]) -> None:
    # splits_align/flink_config.json: the JobManager's /config of the recorded run, "flink-version": "2.3.0"
    report = _json("splits_align", capsys)
    assert _job(report, "tg-kafka-splits-align")["flink_version"] == "2.3.0"
    assert ", Flink 2.3.0" in _run("splits_align", "text", capsys).splitlines()[0]


def test_check_flink_says_when_the_version_is_unknown_and_which_release_it_follows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = _json("splits_align", capsys, config=False)
    job = _job(report, "tg-kafka-splits-align")
    assert (job["flink_version"], job["flink_version_followed"]) == (None, "2.3")
    header = _run("splits_align", "text", capsys, config=False).splitlines()[0]
    assert header.endswith(", Flink version unknown (/config not read): rules follow 2.3"), header
    assert _job(_json("splits_align", capsys), "tg-kafka-splits-align")["flink_version_followed"] == "2.3"


def test_a_one_poll_check_flink_knows_the_version_it_read(capsys: pytest.CaptureFixture[str]) -> None:
    header = _run("splits_align", "text", capsys, interval_s=0).splitlines()[0]
    assert ", Flink 2.3.0" in header and "unknown" not in header and "rules follow" not in header


@pytest.mark.parametrize(
    ("version", "note"),
    [("2.3.0", ""), ("2.3-SNAPSHOT", ""), ("2.4-SNAPSHOT", " (rules follow 2.3)"), ("1.20.1", " (rules follow 2.3)")],
)
def test_check_flink_header_says_when_the_rules_follow_another_release(version: str, note: str) -> None:
    from monitor.reports.flink import render_text

    job = {"jid": "a1", "name": "j", "state": "RUNNING", "restarts": 0, "flink_version": version,
           "flink_version_followed": "2.3", "watermark_ms": None, "holding_min": None, "vertices": []}
    header = render_text({"jobs": [job], "findings": [], "errors": []}).splitlines()[0]
    assert header.endswith(f", Flink {version}{note}"), header
