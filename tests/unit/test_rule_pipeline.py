"""``pipeline_freshness`` and the pipeline graph (rules/pipeline.py, monitor/facts/pipeline.py).

The real chain is ``tests/fixtures/spark/pipeline-chain-4.3.0`` (two Spark queries through Kafka, the
first stalled for 30 s; its README says how it was recorded). Expected values are read off the recording
by hand and written out here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.spark.progress import parse_listener_event
from monitor.config import Config
from monitor.errors import ConfigError
from monitor.facts.pipeline import pipeline_facts
from monitor.model import Engine, FindingEpisode, JobRef, Sample, Scope, Severity
from rules.config import RulesConfig
from rules.episodes import link
from rules.pipeline import (
    RULE,
    build_pipelines,
    flink_datasets,
    parse_pipelines,
    spark_datasets,
)
from rules.registry import Evaluator, validate

CHAIN = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "pipeline-chain-4.3.0" / "listener_events.jsonl"
A_ID = "1b9eaaeb-5778-417b-afff-5fa9b52e21a3"  # chain_a: in -> mid
B_ID = "7af35c0d-fcd4-4bec-8fce-cf8d0b089e21"  # chain_b: mid -> out
CONFIG = [{"name": "chain", "jobs": [{"job": "chain_a", "writes": ["mid"]}, {"job": "chain_b", "writes": ["out"]}]}]
RULES = RulesConfig.model_validate({"pipeline_freshness": {"target": "15s"}})
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _recorded(lines: int | None = None) -> dict[str, list[Sample]]:
    """The recording's samples by query id, from its first ``lines`` lines (what had arrived by then)."""
    names: dict[str, str] = {}
    by_job: dict[str, list[Sample]] = {}
    for i, line in enumerate(CHAIN.read_text().splitlines()[:lines]):
        event = json.loads(line)
        progress = event.get("progress")
        if progress:
            names[progress["id"]] = progress["name"]
        query = progress["id"] if progress else event["id"]
        for s in parse_listener_event(event, collector="test", where=f"line {i + 1}", fallback_name=names.get(query)):
            by_job.setdefault(s.job.job_id, []).append(s)
    return {k: sorted(v, key=lambda s: s.observed_at) for k, v in by_job.items()}


# --------------------------------------------------------------------------------------- recorded strings

@pytest.mark.parametrize(
    ("description", "datasets"),
    [
        # 1. the recorded Kafka sources of the chain: one topic each
        ("KafkaV2[Subscribe[in]]", ("in",)),
        ("KafkaV2[Subscribe[mid]]", ("mid",)),
        # 2. recorded elsewhere (tests/fixtures/kafka): the same shape, another topic
        ("KafkaV2[Subscribe[test5]]", ("test5",)),
        # 3. Spark's toString of several topics / assigned partitions (KafkaMicroBatchStream): the topics
        ("KafkaV2[Subscribe[a,b]]", ("a", "b")),
        ("KafkaV2[Assign[in-0, in-1, other-2]]", ("in", "other")),
        # 4. a pattern names no topic
        ("KafkaV2[SubscribePattern[in.*]]", ()),
        # 5. recorded file sources: the path without the file: scheme
        ("FileStreamSource[file:/data/spark-demo/gt/input]", ("/data/spark-demo/gt/input",)),
        ("FileStreamSource[file:/tmp/tg-never_seen_input-_l6zv2qb/a]", ("/tmp/tg-never_seen_input-_l6zv2qb/a",)),
        # 6. Spark's FileSink toString: the path
        ("FileSink[/data/out/]", ("/data/out",)),
        # 7. recorded sinks that name nothing: Spark's Kafka sink (no topic!), foreachBatch, memory, noop, console
        ("org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@5eab8926", ()),
        ("ForeachBatchSink", ()),
        ("MemorySink", ()),
        ("NoopTable", ()),
        ("org.apache.spark.sql.execution.streaming.ConsoleTable$@514ba885", ()),
    ],
)
def test_spark_descriptions_name_datasets(description: str, datasets: tuple[str, ...]) -> None:
    assert spark_datasets(description) == datasets


def test_flink_vertex_names_name_sources_and_sinks() -> None:
    # recorded vertex names (tests/fixtures/flink): a source chain and a window chained into a sink
    assert flink_datasets(
        "Source: gen-source<br/>+- py-drop-on-subtask1<br/>   +- Timestamps/Watermarks<br/>"
        "      +- _stream_key_by_map_operator<br/>"
    ) == (("gen-source",), ())
    assert flink_datasets(
        "Window(TumblingEventTimeWindows(10000, 0), EventTimeTrigger, PyCount)<br/>+- Sink: py-print<br/>"
    ) == ((), ("py-print",))


def test_the_collector_keeps_the_sink_description() -> None:
    samples = _recorded(1)[B_ID]
    assert samples[0].scope.is_job()
    assert samples[0].extra["sink"] == "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@627abad2"
    assert samples[1].scope == Scope(source="KafkaV2[Subscribe[mid]]")


# ------------------------------------------------------------------------------------------------ graph


def test_the_kafka_sink_hides_the_chain_until_configured() -> None:
    from rules.history import job_history
    from rules.pipeline import job_endpoints

    hists = [h for v in _recorded().values() if (h := job_history(v)) is not None]
    jobs = [(h.job, *job_endpoints(h)) for h in hists]
    # Spark's Kafka sink names no topic: nothing links the queries
    assert build_pipelines(jobs) == []
    (chain,) = build_pipelines(jobs, parse_pipelines(CONFIG))
    assert chain.name == "chain" and chain.configured
    assert [n.job.job_id for n in chain.nodes] == [A_ID, B_ID]
    assert [(e.upstream, e.downstream, e.dataset) for e in chain.edges] == [(f"spark:{A_ID}", f"spark:{B_ID}", "mid")]
    assert chain.node(f"spark:{A_ID}").reads == ("in",)
    assert chain.ends == (f"spark:{B_ID}",)


def _job(engine: Engine, job_id: str, name: str) -> JobRef:
    return JobRef(engine, job_id, name=name)


def test_inferred_graph_is_named_by_its_inputs_and_outputs() -> None:
    a = _job(Engine.SPARK, "a", "ingest")
    b = _job(Engine.FLINK, "b", "enrich")
    c = _job(Engine.KAFKA, "sessions-app", "sessions-app")
    lone = _job(Engine.SPARK, "z", "lonely")
    (p,) = build_pipelines([
        (a, frozenset({"/landing"}), frozenset({"raw"})),
        (b, frozenset({"raw"}), frozenset({"enriched"})),
        (c, frozenset({"enriched"}), frozenset()),
        (lone, frozenset({"x"}), frozenset({"y"})),  # linked to nobody: no pipeline
    ])
    # the end (a consumer group) writes nothing: named by the jobs
    assert p.name == "ingest → enrich → sessions-app"
    assert [n.name for n in p.nodes] == ["ingest", "enrich", "sessions-app"]
    assert p.ends == ("kafka:sessions-app",)


# ------------------------------------------------------------------------------------------- the rule


def test_recorded_stall_is_attributed_to_the_stalled_query() -> None:
    # lines 1-36: what had arrived when chain_a had been stuck for 30 s (its batch 4 arrives at line 37).
    # The data's clock is chain_b's last idle event, 23:24:32.003; chain_a's newest batch (3, 23:24:00.960)
    # ran with watermark 23:23:58.562 -> 33.441 s behind, all of it its own (it reads only `in`);
    # chain_b's newest batch (3) ran with 23:23:55.914 -> 36.089 s behind, 2.648 s of it its own.
    evaluator = Evaluator(RULES, parse_pipelines(CONFIG))
    findings = evaluator.evaluate_pipelines(_recorded(36).values())
    by_job = {f.job.job_id: f for f in findings}
    assert set(by_job) == {A_ID, B_ID}
    entry, down = by_job[A_ID], by_job[B_ID]
    assert (entry.rule, entry.severity, entry.labels) == (RULE, Severity.WARNING, {"pipeline": "chain"})
    assert entry.observed_at == datetime(2026, 12, 1, 23, 24, 32, 3000, tzinfo=UTC)
    assert entry.details["entry"] == f"spark:{A_ID}" and entry.details["end"] == f"spark:{B_ID}"
    assert entry.details["end_lag_s"] == pytest.approx(36.089)
    nodes = {n["job"]: n for n in entry.details["nodes"]}
    assert nodes["chain_a"]["global_lag_s"] == pytest.approx(33.441)
    assert nodes["chain_a"]["local_lag_s"] == pytest.approx(33.441)
    assert nodes["chain_b"]["global_lag_s"] == pytest.approx(36.089)
    assert nodes["chain_b"]["local_lag_s"] == pytest.approx(2.648)
    assert "enters at this job: it adds 33 s" in entry.message
    assert "reported nothing since 2026-12-01T23:24:00.960Z" in entry.message
    assert (down.severity, down.details["caused_by"]) == (
        Severity.INFO, {"rule": RULE, "engine": "spark", "job_id": A_ID},
    )
    assert "enters upstream at `chain_a`" in down.message and "adds only 3 s" in down.message


def test_before_the_stall_and_after_it_nothing_is_stale() -> None:
    evaluator = Evaluator(RULES, parse_pipelines(CONFIG))
    # line 20: 23:24:07, chain_a 6.4 s behind (batch 3), chain_b 11.1 s: within 15 s
    assert evaluator.evaluate_pipelines(_recorded(20).values()) == []
    # the whole recording: both caught up (chain_a batch 8 at 23:24:40.010 runs 1.96 s behind)
    assert evaluator.evaluate_pipelines(_recorded().values()) == []


def test_off_without_a_target() -> None:
    evaluator = Evaluator(RulesConfig(), parse_pipelines(CONFIG))
    assert evaluator.evaluate_pipelines(_recorded(36).values()) == []


def _batch(job: JobRef, at: datetime, watermark: datetime | None = None, lag_seconds: float | None = None,
           source: str | None = None) -> list[Sample]:
    out = [Sample(job, at, watermark=watermark, lag_seconds=lag_seconds, num_input_rows=1, batch_id=0)]
    if source is not None:
        out.append(Sample(job, at, scope=Scope(source=source), num_input_rows=1, batch_id=0))
    return out


def test_entry_is_the_job_that_adds_the_most_not_the_one_that_tips_it_over() -> None:
    # 1. A reads `in` 4 min behind (under the 5 min target), B adds 2 min: the end is 6 min behind. B tips
    #    it over the target, but A adds the most: the staleness enters at A (B would otherwise be blamed
    #    until A crossed the target itself, and the blame would move).
    # 2. A 1 min behind, B adds 5 min: B.
    a, b = _job(Engine.SPARK, "a", "a"), _job(Engine.SPARK, "b", "b")
    config = parse_pipelines([{"name": "p", "jobs": [{"job": "a", "writes": ["mid"]}]}])
    evaluator = Evaluator(RulesConfig.model_validate({"pipeline_freshness": {"target": "5m"}}), config)
    for a_behind, b_behind, entry, downstream in ((4, 6, a, [b]), (1, 6, b, [])):
        histories = {
            "a": _batch(a, T0, T0 - timedelta(minutes=a_behind), source="KafkaV2[Subscribe[in]]"),
            "b": _batch(b, T0, T0 - timedelta(minutes=b_behind), source="KafkaV2[Subscribe[mid]]"),
        }
        found = evaluator.evaluate_pipelines(histories.values())
        assert [(f.job, f.severity) for f in found] == [
            (entry, Severity.WARNING), *((d, Severity.INFO) for d in downstream)
        ]
        assert found[0].details["entry"] == f"spark:{entry.job_id}"


def test_a_consumer_group_without_watermark_adds_its_lag_in_seconds() -> None:
    # Spark `a` (watermark 100 s behind) writes `out`; Kafka group `g` reads it 7 s behind: g's local lag is
    # its consumer lag, its global lag a's plus it (107 s).
    a, g = _job(Engine.SPARK, "a", "a"), _job(Engine.KAFKA, "g", "g")
    histories = {
        "a": _batch(a, T0, T0 - timedelta(seconds=100), source="KafkaV2[Subscribe[in]]"),
        "g": [*_batch(g, T0, lag_seconds=7.0), Sample(g, T0, scope=Scope(source="out", partition=0), lag_seconds=7.0)],
    }
    config = parse_pipelines([{"name": "p", "jobs": [{"job": "a", "writes": ["out"]}]}])
    evaluator = Evaluator(RulesConfig.model_validate({"pipeline_freshness": {"target": "1m"}}), config)
    findings = evaluator.evaluate_pipelines(histories.values())
    nodes = {n["job"]: n for n in findings[0].details["nodes"]}
    assert nodes["g"] == {"key": "kafka:g", "job": "g", "global_lag_s": 107.0, "local_lag_s": 7.0,
                          "basis": "consumer_lag"}
    assert [(f.job.job_id, f.severity) for f in findings] == [("a", Severity.WARNING), ("g", Severity.INFO)]


def test_downstream_episode_links_to_the_entry_job_episode() -> None:
    a, b = _job(Engine.SPARK, "a", "a"), _job(Engine.SPARK, "b", "b")
    cause = FindingEpisode("e-a", "fa", RULE, a, Scope(), Severity.WARNING, T0, T0, "entry", labels={"pipeline": "p"})
    effect = FindingEpisode(
        "e-b", "fb", RULE, b, Scope(), Severity.INFO, T0, T0, "downstream", labels={"pipeline": "p"},
        details={"caused_by": {"rule": RULE, "engine": "spark", "job_id": "a"}},
    )
    linked = {r.id: r for r in link([cause, effect])}
    assert linked["e-b"].caused_by == ("e-a",)
    assert linked["e-a"].causes == ("e-b",)


# ------------------------------------------------------------------------------------------------ config


def test_config_section_is_validated() -> None:
    cfg = Config.model_validate({"pipelines": CONFIG})
    assert cfg.pipelines[0].jobs[0].writes == ("mid",)
    with pytest.raises(ConfigError) as err:
        parse_pipelines([{"name": "p", "jobs": [{"writes": ["x"]}]}, {"name": "q", "jobs": [], "extra": 1}])
    assert str(err.value).splitlines() == [
        "pipelines[0].jobs[0].job: Field required",
        "pipelines[1].jobs: Tuple should have at least 1 item after validation, not 0",
        "pipelines[1].extra: unknown key",
    ]
    with pytest.raises(ConfigError, match=r"pipelines\[1\]\.name: pipeline 'p' is configured twice"):
        parse_pipelines([{"name": "p", "jobs": [{"job": "a"}]}, {"name": "p", "jobs": [{"job": "b"}]}])
    with pytest.raises(ValueError, match="configured twice"):
        Config.model_validate({"pipelines": [{"name": "p", "jobs": [{"job": "a"}]}] * 2})


def test_the_rule_takes_no_per_job_override() -> None:
    validate(RulesConfig.model_validate({"pipeline_freshness": {"target": "5m"}}))
    with pytest.raises(ConfigError, match="judged over whole pipelines, not per job"):
        validate(RulesConfig.model_validate({
            "overrides": [{"match": {"job_name": "a"}, "rule": "pipeline_freshness", "params": {"target": "1m"}}]
        }))


# ------------------------------------------------------------------------------------------------- facts


def test_facts_over_the_recorded_period() -> None:
    since, until = datetime(2026, 12, 1, 23, 0, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)
    (p,) = pipeline_facts(_recorded(), since, until, config=parse_pipelines(CONFIG), target_s=15.0)
    assert p.name == "chain" and p.stale == ()
    assert p.at == datetime(2026, 12, 1, 23, 24, 40, 10000, tzinfo=UTC)  # chain_a batch 8, the newest
    a, b = p.node(f"spark:{A_ID}"), p.node(f"spark:{B_ID}")
    assert a.now is not None and a.now.global_lag_s == pytest.approx(1.963)  # 23:24:40.010 - 23:24:38.047
    assert b.now is not None and b.now.global_lag_s == pytest.approx(7.043)  # 23:24:40.010 - 23:24:32.967
    # over the period chain_a added the most (the 30 s stall). Its worst: 31.140 s at 23:24:32.003 (its batch 4,
    # watermark 23:24:00.863, observed 23:24:02.510); chain_b's: 37.059 s at 23:24:32.973 (its batch 3,
    # watermark 23:23:55.914, until its batch 4 at 23:24:33.004)
    assert p.most_period == f"spark:{A_ID}"
    assert a.max_global_s == pytest.approx(31.140)
    assert b.max_global_s == pytest.approx(37.059)
    assert len(a.points) == len(b.points) == len({s.observed_at for v in _recorded().values() for s in v})


def test_a_sink_description_too_long_to_hold_is_left_out_not_an_error() -> None:
    from collectors.spark.progress import parse_progress
    from monitor.model import MAX_DESCRIPTION_CHARS

    progress = json.loads(CHAIN.read_text().splitlines()[0])["progress"]
    progress["sink"]["description"] = "FileSink[/" + "x" * MAX_DESCRIPTION_CHARS + "]"
    (query, source) = parse_progress(progress, collector="test", where="line 1")
    assert "sink" not in query.extra
    assert query.batch_id == 0 and source.scope.source == "KafkaV2[Subscribe[mid]]"


def test_a_configured_severity_is_the_entry_s_the_downstream_jobs_stay_info() -> None:
    rules = RulesConfig.model_validate({"pipeline_freshness": {"target": "15s", "severity": "critical"}})
    found = Evaluator(rules, parse_pipelines(CONFIG)).evaluate_pipelines(_recorded(36).values())
    assert sorted((f.job.name or "", f.severity) for f in found) == [
        ("chain_a", Severity.CRITICAL), ("chain_b", Severity.INFO),
    ]


@pytest.mark.parametrize(("trigger", "stale"), [("real_time", False), (None, True)])
def test_a_real_time_mode_job_is_not_stale_by_its_reporting(trigger: str | None, stale: bool) -> None:
    # Spark `a` in real-time mode, 10-min batches: batch 1 started 12:00 with watermark 11:59:50 and reported at
    # 12:10; at 12:15 (group `g`'s newest poll: the pipeline's clock) `a` has run batch 2 since 12:10 with a
    # watermark about 10 min newer, reported only at its end. 15 min 10 s - 10 min = 5 min 10 s: under the
    # 6-min target. The same batches without the real-time mark read 15 min 10 s behind: stale.
    a, g = _job(Engine.SPARK, "a", "a"), _job(Engine.KAFKA, "g", "g")
    extra = {} if trigger is None else {"trigger": trigger}
    a_batches = [
        Sample(a, T0 + timedelta(minutes=m), watermark=T0 + timedelta(minutes=m, seconds=-10), num_input_rows=1,
               batch_id=i, batch_duration_ms=600_000, extra=extra)
        for i, m in enumerate((-10, 0))
    ] + [Sample(a, T0, scope=Scope(source="KafkaV2[Subscribe[in]]"), num_input_rows=1, batch_id=1)]
    poll = T0 + timedelta(minutes=15)
    histories = {
        "a": a_batches,
        "g": [Sample(g, poll, lag_seconds=1.0), Sample(g, poll, scope=Scope(source="out", partition=0), lag_seconds=1.0)],
    }
    config = parse_pipelines([{"name": "p", "jobs": [{"job": "a", "writes": ["out"]}]}])
    evaluator = Evaluator(RulesConfig.model_validate({"pipeline_freshness": {"target": "6m"}}), config)
    found = evaluator.evaluate_pipelines(histories.values())
    assert [f.job.job_id for f in found if f.severity is Severity.WARNING] == (["a"] if stale else [])
